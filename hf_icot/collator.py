"""How examples become token ids: the model sequence ``question <eos> [hint] cot <eos> #### answer <eos>``.

The encoding functions (:func:`encode_text`, :func:`encode_example`, :func:`encode_prompt`, :func:`split_generation`)
are the contract shared by training and evaluation (``notes/ENCODING.md``); everything that turns text into ids or
generated ids back into text goes through them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hf_icot.cot import ANSWER_PREFIX, TruncatedCoT, hint_token
from hf_icot.tokenization import first_unrepresentable_word

PROMPT_MODES = ("explicit", "implicit", "hint")
IGNORE_INDEX = -100


def encode_text(text: str, tokenizer: Any) -> list[int]:
    """Token ids of ``text`` as it stands inside the model sequence (after a space, so GPT-2 BPE gives its
    ``Ġ``-pieces; word-level tokenizers ignore the space). No special tokens are added.

    Raises:
        ValueError: a word of ``text`` maps to the tokenizer's unknown token or to nothing; the message names it.
    """
    ids = tokenizer(" " + text, add_special_tokens=False)["input_ids"]
    unk = tokenizer.unk_token_id
    if (unk is not None and unk in ids) or (text.strip() and not ids):
        word = first_unrepresentable_word(text, tokenizer)
        raise ValueError(
            f"the tokenizer cannot represent {word!r} (in {text!r}): it maps to the unknown token or to nothing; "
            "build the tokenizer from this data (hf_icot.tokenization.build_word_level_tokenizer) or add the token."
        )
    return ids


def _eos_id(tokenizer: Any) -> int:
    if tokenizer.eos_token_id is None:
        raise ValueError("the tokenizer has no eos token; hf_icot separates question, CoT and answer with <eos>.")
    return tokenizer.eos_token_id


def _token_id(tokenizer: Any, token: str) -> int:
    token_id = tokenizer.convert_tokens_to_ids(token)
    if token_id is None or (token_id == tokenizer.unk_token_id and token != tokenizer.unk_token):
        raise ValueError(
            f"the tokenizer has no token {token!r}; add it with hf_icot.tokenization.prepare_tokenizer_for_icot "
            "(placeholder and length-hint tokens) or build the tokenizer from this data."
        )
    return token_id


def encode_example(example: Mapping[str, Any], truncated: TruncatedCoT, tokenizer: Any) -> dict[str, Any]:
    """Encode one example with its (already truncated) CoT.

    Args:
        example: a schema example (``question``, ``answer``). If it carries precomputed ``question_ids`` and
            ``answer_ids`` (see :meth:`ICoTCollator.prepare_dataset`), those are used instead of re-tokenizing.
        truncated: :func:`hf_icot.cot.truncate`'s output for this example, made with the same tokenizer.
        tokenizer: the model's tokenizer.

    Returns:
        ``input_ids``, ``labels`` (-100 on the question, the first <eos> and the hint), ``position_ids`` (0..L-1, or
        under ``keep_position`` the positions of the untruncated sequence from the CoT on) and ``prompt_length``
        (question ids + 1).

    Raises:
        ValueError: a word or CoT token the tokenizer cannot represent, or a tokenizer without an eos token.
    """
    eos = _eos_id(tokenizer)
    question_ids = example.get("question_ids")
    if question_ids is None:
        question_ids = encode_text(example["question"], tokenizer)
    answer_ids = example.get("answer_ids")
    if answer_ids is None:
        answer_ids = encode_text(f"{ANSWER_PREFIX} {example['answer']}", tokenizer)
    prefix = list(question_ids) + [eos]
    prompt_length = len(prefix)
    if truncated.hint is not None:
        prefix.append(_token_id(tokenizer, truncated.hint))
    cot_ids = tokenizer.convert_tokens_to_ids(list(truncated.tokens))
    unk = tokenizer.unk_token_id
    if unk is not None and unk in cot_ids:
        bad = truncated.tokens[cot_ids.index(unk)]
        if bad != tokenizer.unk_token:
            raise ValueError(
                f"the tokenizer cannot represent the CoT token {bad!r}; truncate with the model's tokenizer and build "
                "the tokenizer from this data (hf_icot.tokenization.build_word_level_tokenizer) or add the token."
            )
    suffix = [eos] + list(answer_ids) + [eos]
    input_ids = prefix + cot_ids + suffix
    labels = [IGNORE_INDEX] * len(prefix) + input_ids[len(prefix) :]
    if truncated.keep_position:
        start = len(prefix)
        cot_positions = [start + p for p in truncated.positions]
        after = start + truncated.total
        position_ids = list(range(start)) + cot_positions + list(range(after, after + len(suffix)))
    else:
        position_ids = list(range(len(input_ids)))
    return {"input_ids": input_ids, "labels": labels, "position_ids": position_ids, "prompt_length": prompt_length}


def encode_prompt(question: str, tokenizer: Any, mode: str = "explicit", hint: int | None = None) -> list[int]:
    """The generation prompt for ``question``.

    * ``explicit``: ``question <eos>``; the model generates ``cot <eos> #### answer <eos>``.
    * ``implicit``: ``question <eos> <eos>`` (an empty CoT); the model generates ``#### answer <eos>``.
    * ``hint``: ``question <eos> <len_hint>``; the model generates ``hint`` CoT units, then ``<eos> #### answer``.

    Raises:
        ValueError: an unknown mode, ``hint`` mode without a non-negative ``hint``, a hint token missing from the
            tokenizer, or a word of the question the tokenizer cannot represent.
    """
    if mode not in PROMPT_MODES:
        raise ValueError(f"prompt mode {mode!r} is unknown; allowed: {', '.join(PROMPT_MODES)}.")
    eos = _eos_id(tokenizer)
    ids = encode_text(question, tokenizer) + [eos]
    if mode == "implicit":
        return ids + [eos]
    if mode == "hint":
        if hint is None or hint < 0:
            raise ValueError(f"hint mode needs a CoT length hint >= 0, got {hint!r}.")
        return ids + [_token_id(tokenizer, hint_token(hint))]
    return ids


def _decode_words(token_ids: Sequence[int], tokenizer: Any) -> str:
    text = tokenizer.decode(list(token_ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)
    return " ".join(text.split())


def split_generation(token_ids: Sequence[int], tokenizer: Any, prompt_mode: str) -> tuple[str, str]:
    """Split a generated continuation (the ids after the prompt) into ``(cot_text, answer_text)``.

    After an ``explicit`` or ``hint`` prompt the continuation is ``cot <eos> #### answer <eos>``; after an
    ``implicit`` prompt it is ``#### answer <eos>`` and ``cot_text`` is ``""``. Everything from the final <eos> on
    (padding included) is ignored. ``answer_text`` is what follows ``####``, with tokens separated by single spaces
    as in the schema's ``answer``; it is ``""`` when the model never wrote ``####``.

    Raises:
        ValueError: an unknown prompt mode.
    """
    if prompt_mode not in PROMPT_MODES:
        raise ValueError(f"prompt mode {prompt_mode!r} is unknown; allowed: {', '.join(PROMPT_MODES)}.")
    eos = _eos_id(tokenizer)
    ids = list(token_ids)
    cot_ids: list[int] = []
    if prompt_mode != "implicit":
        cut = ids.index(eos) if eos in ids else len(ids)
        cot_ids, ids = ids[:cut], ids[cut + 1 :]
    answer_ids = ids[: ids.index(eos)] if eos in ids else ids
    answer_text = _decode_words(answer_ids, tokenizer)
    if ANSWER_PREFIX in answer_text:
        answer_text = answer_text.split(ANSWER_PREFIX, 1)[1].strip()
    else:
        answer_text = ""
    return _decode_words(cot_ids, tokenizer), answer_text
