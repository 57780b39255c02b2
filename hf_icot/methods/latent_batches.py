"""Batches for continuous-thought methods (:mod:`hf_icot.methods.latent`), from a prepared dataset's ids.

A latent sequence is ``question <eos> <|start-latent|> <|latent|>×n <|end-latent|> [kept CoT] <eos> #### answer <eos>``
(:attr:`hf_icot.curriculum.layout.SequenceLayout.latent`): the first ``skip_steps`` CoT steps are gone and ``n`` latent
slots stand in their place. The labels are the kept CoT, the ``<eos>`` after it and ``#### answer <eos>`` — never the
question, the markers or the slots (Coconut's labels).

Rows are **left-padded so that their ``<|start-latent|>`` markers share a column** (Coconut's collator aligns the
first latent slot the same way): the latent forward then feeds the hidden states back one column at a time, every row
at once, reusing the KV cache. Position ids count each row's real tokens from 0; padding is masked. Every row also
carries the position of the token before its answer (the last token of ``####``), where CODI distils.

:func:`padded_rows` lays out any rows (the latent ones, a CoT teacher's) into padded tensors; :func:`teacher_batch` is
the CoT teacher half of CODI's and PCCoT's batches.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from hf_icot.cot import ANSWER_PREFIX
from hf_icot.curriculum.latent import LatentPlan
from hf_icot.curriculum.layout import END_LATENT_TOKEN, LATENT_TOKEN, START_LATENT_TOKEN
from hf_icot.data.encoding import IGNORE_INDEX, encode_text, eos_id, token_id


@dataclass(frozen=True)
class LatentTokens:
    """The ids of the latent markers in a tokenizer."""

    start: int
    latent: int
    end: int

    @classmethod
    def of(cls, tokenizer: Any) -> LatentTokens:
        """Raises: ValueError naming the first marker the tokenizer lacks."""
        try:
            return cls(*(token_id(tokenizer, token) for token in (START_LATENT_TOKEN, LATENT_TOKEN, END_LATENT_TOKEN)))
        except ValueError as error:
            raise ValueError(
                f"{error.args[0].split(';')[0]}; a latent method needs its markers: build the tokenizer with "
                "hf_icot.modeling.loading.load_model_and_tokenizer, or add them with "
                "hf_icot.data.tokenization.prepare_tokenizer_for_icot(tokenizer, model, latent=True)."
            ) from None


def step_token_counts(example: Mapping[str, Any]) -> list[int]:
    """Tokens per CoT step of a prepared example (its ``cot_tokens`` are each step's tokens, space-joined)."""
    return [len(step.split(" ")) if step else 0 for step in example["cot_tokens"]]


class LatentRenderer:
    """Renders latent batches for one tokenizer.

    Raises:
        ValueError: a tokenizer without the latent markers or an eos token.
    """

    def __init__(self, tokenizer: Any) -> None:
        self.tokens = LatentTokens.of(tokenizer)
        self.eos = eos_id(tokenizer)
        self.pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos
        self.answer_prefix = len(encode_text(ANSWER_PREFIX, tokenizer))

    def sequence(self, example: Mapping[str, Any], plan: LatentPlan, prompt_only: bool = False) -> tuple[list, int]:
        """One latent sequence's ids and the index of its first labelled token (the prompt alone: up to and with
        ``<|end-latent|>``, for generation)."""
        counts = step_token_counts(example)
        cot = list(example["cot_ids"])[sum(counts[: plan.skip_steps]) :]
        prompt = [*example["question_ids"], self.eos, self.tokens.start]
        prompt += [self.tokens.latent] * plan.n_latent + [self.tokens.end]
        if prompt_only:
            return prompt, len(prompt)
        return prompt + cot + [self.eos, *example["answer_ids"], self.eos], len(prompt)

    def render(
        self, examples: Sequence[Mapping[str, Any]], plans: Sequence[LatentPlan]
    ) -> tuple[dict[str, torch.Tensor], list[int]]:
        """The batch (``input_ids``, ``attention_mask``, ``position_ids``, ``labels``, ``answer_positions``) and the CoT
        tokens each row kept."""
        rows = [self.sequence(example, plan) for example, plan in zip(examples, plans)]
        starts = np.array([len(example["question_ids"]) + 1 for example in examples])  # column of <|start-latent|>
        offsets = starts.max() - starts  # left padding that puts every <|start-latent|> in one column
        batch = padded_rows(self, [ids for ids, _ in rows], [first for _, first in rows], offsets)
        kept = [len(ids) - first - len(example["answer_ids"]) - 2 for (ids, first), example in zip(rows, examples)]
        return batch, kept

    def prompts(self, examples: Sequence[Mapping[str, Any]], plans: Sequence[LatentPlan]) -> list[list[int]]:
        """The generation prompts: each question with its latent slots, up to and with ``<|end-latent|>``."""
        return [self.sequence(example, plan, prompt_only=True)[0] for example, plan in zip(examples, plans)]

    def answer_length(self, ids: list[int]) -> int:
        """Tokens of ``#### answer`` at the end of ``ids`` (between the last two ``<eos>``)."""
        last = len(ids) - 1
        before = max(i for i in range(last) if ids[i] == self.eos)
        return last - before - 1


def padded_rows(
    renderer: LatentRenderer,
    rows: Sequence[list[int]],
    first_labels: Sequence[int],
    offsets: Sequence[int] | None = None,
) -> dict[str, torch.Tensor]:
    """``rows`` of token ids as one padded batch: each row starts at its ``offset`` (left padding; default 0, right
    padding), is labelled from its ``first_labels`` index on, and counts its positions from 0.

    Returns:
        ``input_ids``, ``attention_mask``, ``position_ids``, ``labels`` ``(B, T)`` and ``answer_positions`` ``(B,)``:
        the index of the token before each row's answer.
    """
    offsets = np.zeros(len(rows), dtype=np.int64) if offsets is None else np.asarray(offsets)
    width = int(max(offset + len(ids) for offset, ids in zip(offsets, rows)))
    input_ids = np.full((len(rows), width), renderer.pad, dtype=np.int64)
    labels = np.full((len(rows), width), IGNORE_INDEX, dtype=np.int64)
    attention = np.zeros((len(rows), width), dtype=np.int64)
    positions = np.zeros((len(rows), width), dtype=np.int64)
    answer_positions = np.zeros(len(rows), dtype=np.int64)
    for row, (offset, ids, first) in enumerate(zip(offsets, rows, first_labels)):
        end = offset + len(ids)
        input_ids[row, offset:end] = ids
        attention[row, offset:end] = 1
        positions[row, offset:end] = np.arange(len(ids))
        labels[row, offset + first : end] = ids[first:]
        answer_positions[row] = end - 2 - (renderer.answer_length(ids) - renderer.answer_prefix)
    return {
        "input_ids": torch.from_numpy(input_ids),
        "attention_mask": torch.from_numpy(attention),
        "position_ids": torch.from_numpy(positions),
        "labels": torch.from_numpy(labels),
        "answer_positions": torch.from_numpy(answer_positions),
    }


def teacher_batch(
    renderer: LatentRenderer, examples: Sequence[Mapping[str, Any]], include_last_cot: bool = False
) -> dict[str, torch.Tensor]:
    """The CoT teacher of CODI and PCCoT, ``question <eos> cot <eos> #### answer <eos>`` right-padded, labelled after
    the first ``<eos>``, without the CoT's last step unless ``include_last_cot`` (both codes drop it).

    Returns:
        :func:`padded_rows`' tensors but ``position_ids``, each key prefixed ``teacher_``.
    """
    rows, firsts = [], []
    eos = renderer.eos
    for example in examples:
        n_steps = example["n_cot_steps"]
        keep = n_steps if include_last_cot else max(n_steps - 1, 0)
        cot = list(example["cot_ids"])[: sum(step_token_counts(example)[:keep])]
        rows.append([*example["question_ids"], eos, *cot, eos, *example["answer_ids"], eos])
        firsts.append(len(example["question_ids"]) + 1)
    batch = padded_rows(renderer, rows, firsts)
    return {f"teacher_{key}": batch[key] for key in ("input_ids", "attention_mask", "labels", "answer_positions")}
