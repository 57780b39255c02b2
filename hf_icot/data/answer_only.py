"""Sequences without a chain of thought, in the layout of the marginals study: ``<bos> question <sep> answer <eos>``
(``results/marginals/``; the ambiguity task of :mod:`datasets_builder`).

The ICoT layout (``question <eos> cot <eos> #### answer <eos>``, :mod:`hf_icot.data.collator`) puts loss on what
follows the first ``<eos>``, including two tokens that never vary (the second ``<eos>`` and ``####``). A study of how a
model fits ``p(answer | question)`` wants the loss on the answer alone, so this layout labels exactly the answer's
tokens and the final ``<eos>``. Where examples carry a ``selector`` column whose tokens end the question (the ambiguity
task's ``B z`` and ``A z``), a ``<sep>`` also goes before them: the study's ``<bos> B <sep> z <sep> A <eos>``; a
selector the question does not show (``b_to_a``, ``a_to_b``) leaves the study's ``<bos> B <sep> A <eos>`` and
``<bos> A <sep> B <eos>``. Whether the questions show their selectors is decided once per dataset (all of them end with
it, or it is hidden): a hidden selector that a question happens to end with (1 row in 1,296) is not taken for one.

:func:`encode_answer_only` adds ``input_ids``, ``labels`` (``-100`` outside the loss; the causal-LM shift happens in
the model) and ``selector_positions`` (indices of the selector's tokens), the columns :mod:`hf_icot.diagnostics`
reads. Batches pad with ``transformers.DataCollatorForSeq2Seq`` (labels padded with ``-100``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import datasets
from transformers import PreTrainedTokenizerFast

from hf_icot.data.tokenization import build_word_level_tokenizer

BOS_TOKEN = "<bos>"
SEP_TOKEN = "<sep>"


def answer_only_tokenizer(data: Any) -> PreTrainedTokenizerFast:
    """A word-level tokenizer of ``data`` (a Dataset, DatasetDict or examples) with ``<bos>`` and ``<sep>``."""
    tokenizer = build_word_level_tokenizer(data, extra_tokens=[BOS_TOKEN, SEP_TOKEN])
    tokenizer.bos_token = BOS_TOKEN
    tokenizer.sep_token = SEP_TOKEN
    return tokenizer


def _ends_with_selector(example: Mapping[str, Any]) -> bool:
    selector = list(example.get("selector") or "")
    return bool(selector) and example["question"].split()[-len(selector) :] == selector


def _selector_split(example: Mapping[str, Any], shown: bool | None) -> tuple[list[str], list[str]]:
    """The question's words before the selector and the selector's words (empty when it is not shown)."""
    words = example["question"].split()
    if not (_ends_with_selector(example) if shown is None else shown):
        return words, []
    selector = list(example["selector"])
    return words[: -len(selector)], selector


def selectors_shown(dataset: Any) -> bool:
    """Whether every question of ``dataset`` ends with its ``selector`` (False without that column)."""
    return "selector" in dataset.column_names and all(_ends_with_selector(row) for row in dataset)


def encode_answer_only_example(
    example: Mapping[str, Any], tokenizer: Any, selector_shown: bool | None = None
) -> dict[str, list[int]]:
    """One example's ``input_ids``, ``labels`` and ``selector_positions`` (see the module docstring);
    ``selector_shown`` says whether the question ends with the selector (None: read from this example alone).

    Raises:
        ValueError: an example with a chain of thought, or words the tokenizer does not know.
    """
    if example.get("cot"):
        raise ValueError(
            f"example {example['question']!r} has a chain of thought ({len(example['cot'])} steps); the answer-only "
            "layout is for tasks without one. Use hf_icot.data.collator.ICoTCollator."
        )
    before, selector = _selector_split(example, selector_shown)
    words = [BOS_TOKEN, *before, SEP_TOKEN]
    selector_positions = []
    if selector:
        selector_positions = list(range(len(words), len(words) + len(selector)))
        words += [*selector, SEP_TOKEN]
    prompt = tokenizer.convert_tokens_to_ids(words)
    answer = tokenizer.convert_tokens_to_ids(example["answer"].split()) + [tokenizer.eos_token_id]
    if tokenizer.unk_token_id in prompt + answer:
        raise ValueError(
            f"example {example['question']!r} -> {example['answer']!r} has words the tokenizer does not know; build "
            "it with answer_only_tokenizer from every split."
        )
    return {
        "input_ids": prompt + answer,
        "labels": [-100] * len(prompt) + answer,
        "selector_positions": selector_positions,
    }


def encode_answer_only(dataset: datasets.Dataset, tokenizer: Any) -> datasets.Dataset:
    """``dataset`` with the columns ``input_ids``, ``labels`` and ``selector_positions`` added (others kept)."""
    shown = selectors_shown(dataset)
    return dataset.map(
        lambda example: encode_answer_only_example(example, tokenizer, shown), desc="answer-only encoding"
    )
