"""How examples become token ids: the model sequence ``question <eos> [hint] cot <eos> #### answer <eos>``.

The encoding functions (:func:`encode_text`, :func:`encode_example`, :func:`encode_prompt`, :func:`split_generation`)
are the contract shared by training and evaluation (laid out by :class:`hf_icot.curriculum.layout.SequenceLayout`);
everything that turns text into ids or generated ids back into text goes through them. No torch here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hf_icot.cot import ANSWER_PREFIX, TruncatedCoT, hint_token, tokenize_steps
from hf_icot.curriculum.layout import SequenceLayout
from hf_icot.data.tokenization import first_unrepresentable_word

PROMPT_MODES = ("explicit", "implicit", "hint")
IGNORE_INDEX = -100


def encode_text(text: str, tokenizer: Any) -> list[int]:
    """Token ids of ``text`` as it stands inside the model sequence (after a space, so GPT-2 BPE gives its
    ``Ġ``-pieces; word-level tokenizers ignore the space). No special tokens are added.

    Raises:
        ValueError: a word of ``text`` maps to the tokenizer's unknown token or to nothing; the message names it.
    """
    return checked_ids(text, tokenizer(" " + text, add_special_tokens=False)["input_ids"], tokenizer)


_LOOK_UP = object()  # checked_ids: the caller did not pass the unknown-token id


def whitespace_vocabulary(tokenizer: Any) -> dict[str, int] | None:
    """The vocabulary (added tokens included) of a fast WordLevel tokenizer behind a bare ``WhitespaceSplit`` with
    no normalizer — what :func:`hf_icot.data.tokenization.build_word_level_tokenizer` makes — whose ids are one dict
    lookup per space-separated word; None for any other tokenizer."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or type(backend.model).__name__ != "WordLevel" or backend.normalizer is not None:
        return None
    return tokenizer.get_vocab() if type(backend.pre_tokenizer).__name__ == "WhitespaceSplit" else None


def encode_texts(texts: Sequence[str], tokenizer: Any) -> list[list[int]]:
    """The ids :func:`encode_text` gives each of ``texts``, unchecked (check each with :func:`checked_ids`): one
    batched tokenizer call, or, for a word-level tokenizer (:func:`whitespace_vocabulary`), a dict lookup per word
    wherever the text is printable ASCII with single spaces and every word is known — the same ids, several times
    faster over millions of rows — and the tokenizer for the other texts."""
    vocabulary = whitespace_vocabulary(tokenizer)
    ids: list[list[int] | None] = [None] * len(texts)
    if vocabulary is not None:
        for row, text in enumerate(texts):
            if text.isascii() and text.isprintable():
                try:
                    ids[row] = [vocabulary[word] for word in text.split(" ")]
                except KeyError:  # an unknown word, or "" from a double space: the tokenizer decides
                    pass
    rest = [row for row, found in enumerate(ids) if found is None]
    if rest:
        encoded = tokenizer([" " + texts[row] for row in rest], add_special_tokens=False)["input_ids"]
        for row, row_ids in zip(rest, encoded):
            ids[row] = row_ids
    return ids


def checked_ids(text: str, ids: list[int], tokenizer: Any, unk_id: int | None | object = _LOOK_UP) -> list[int]:
    """``ids``, the tokenization of ``text`` (:func:`encode_text`'s, e.g. from a batched call), if every word of it is
    represented. ``unk_id``: the tokenizer's unknown-token id when the caller has it (a loop over many rows; the
    tokenizer's property is slow), else looked up.

    Raises:
        ValueError: as :func:`encode_text`.
    """
    unk = tokenizer.unk_token_id if unk_id is _LOOK_UP else unk_id
    if (unk is not None and unk in ids) or (text.strip() and not ids):
        word = first_unrepresentable_word(text, tokenizer)
        if word is None:  # no missing word: the text spells the unknown token itself
            raise ValueError(
                f"the tokenizer cannot represent {text!r}: it holds the unknown token {tokenizer.unk_token!r} itself, "
                "which cannot be told from a word the tokenizer lacks; remove it from the data."
            )
        raise ValueError(
            f"the tokenizer cannot represent {word!r} (in {text!r}): it maps to the unknown token or to nothing; "
            "build the tokenizer from this data (hf_icot.data.tokenization.build_word_level_tokenizer) or add the token."
        )
    return ids


def eos_id(tokenizer: Any) -> int:
    if tokenizer.eos_token_id is None:
        raise ValueError("the tokenizer has no eos token; hf_icot separates question, CoT and answer with <eos>.")
    return tokenizer.eos_token_id


def token_id(tokenizer: Any, token: str) -> int:
    token_id = tokenizer.convert_tokens_to_ids(token)
    if token_id is None or (token_id == tokenizer.unk_token_id and token != tokenizer.unk_token):
        raise ValueError(
            f"the tokenizer has no token {token!r}; add it with hf_icot.data.tokenization.prepare_tokenizer_for_icot "
            "(placeholder and length-hint tokens) or build the tokenizer from this data."
        )
    return token_id


def reference_answer(text: str) -> str:
    """The answer as the stepwise reference scores it (its ``extract_answer``): ``####`` and what follows the first
    ``####`` of ``text``, stripped, commas removed (``"x #### 1,234 "`` -> ``"#### 1234"``); ``text`` stripped and
    without commas when it holds no ``####``."""
    if ANSWER_PREFIX not in text:
        return text.strip().replace(",", "")
    return (ANSWER_PREFIX + text.split(ANSWER_PREFIX, 1)[1]).strip().replace(",", "")


def space_tokens(tokenizer: Any) -> list[str]:
    tokens = tokenizer.tokenize(" ")
    if len(tokens) != 1:
        raise ValueError(
            f"sequence_format 'reference' needs a tokenizer that writes a lone space as one token (byte-level BPE "
            f"such as GPT-2's); {type(tokenizer).__name__} gives {tokens!r}; use sequence_format 'hf_icot'."
        )
    return tokens


def special_prefix(tokenizer: Any) -> list[int]:
    """The ids the tokenizer puts before a text when it adds special tokens (a BOS for Mistral or Phi-3, none for
    GPT-2), which the reference format starts with as the reference's ``tokenizer(..., add_special_tokens=True)``."""
    plain = tokenizer("a", add_special_tokens=False)["input_ids"]
    full = tokenizer("a", add_special_tokens=True)["input_ids"]
    for start in range(len(full) - len(plain) + 1):
        if full[start : start + len(plain)] == plain:
            return list(full[:start])
    return []


def encode_parts(
    example: Mapping[str, Any], tokenizer: Any, layout: SequenceLayout | None = None
) -> tuple[list[int], list[list[str]], list[int]]:
    """The three parts of ``example``'s sequence that ``<eos>`` separates: question ids, CoT tokens per step, answer ids
    (``#### answer``). Under ``layout.sequence_format == "reference"`` they are the reference's: ``' {q} '``,
    ``' ' + cot + ' '`` and ``' ' + answer + ' '`` (answer commas removed) tokenized as it tokenizes its whole line,
    the trailing space's token counted as the CoT's last token, and the question starting with the tokenizer's
    BOS where it adds one.

    Raises:
        ValueError: a word the tokenizer cannot represent, or the reference format with a tokenizer that has no
            lone-space token.
    """
    steps = list(example["cot"])
    answer = f"{ANSWER_PREFIX} {example['answer']}"
    if layout is None or not layout.is_reference:
        return (
            encode_text(example["question"], tokenizer),
            tokenize_steps(steps, tokenizer),
            encode_text(answer, tokenizer),
        )
    space = space_tokens(tokenizer)
    step_tokens = tokenize_steps(steps, tokenizer)
    if step_tokens:
        step_tokens[-1] = step_tokens[-1] + space
    else:  # ' <eos> ' + '' + ' <eos>': the two spaces between the separators are the CoT
        step_tokens = [tokenizer.tokenize("  ")]
    question_ids = special_prefix(tokenizer) + encode_text(example["question"] + " ", tokenizer)
    return question_ids, step_tokens, encode_text(reference_answer(answer) + " ", tokenizer)


def encode_example(
    example: Mapping[str, Any], truncated: TruncatedCoT, tokenizer: Any, layout: SequenceLayout | None = None
) -> dict[str, Any]:
    """Encode one example with its (already truncated) CoT.

    Args:
        example: a schema example (``question``, ``answer``). If it carries precomputed ``question_ids`` and
            ``answer_ids`` (see :meth:`ICoTCollator.prepare_dataset`), those are used instead of re-tokenizing.
        truncated: :func:`hf_icot.cot.truncate`'s output for this example, made with the same tokenizer.
        tokenizer: the model's tokenizer.
        layout: the run's layout; its ``sequence_format`` decides the parts (:func:`encode_parts`) and, under
            ``keep_position``, the positions (default: the ``hf_icot`` format).

    Returns:
        ``input_ids``, ``labels`` (-100 on the question, the first <eos> and the hint), ``position_ids`` (0..L-1, or
        under ``keep_position`` the positions of the untruncated sequence from the CoT on; in the reference format
        from the token before the removed ones on) and ``prompt_length`` (question ids + 1).

    Raises:
        ValueError: a word or CoT token the tokenizer cannot represent, or a tokenizer without an eos token.
    """
    reference = layout is not None and layout.is_reference
    return encode_example_with(example, truncated, tokenizer, eos_id(tokenizer), tokenizer.unk_token_id, reference)


def encode_example_with(
    example: Mapping[str, Any],
    truncated: TruncatedCoT,
    tokenizer: Any,
    eos: int,
    unk: int | None,
    reference: bool = False,
) -> dict[str, Any]:
    # encode_example with the special ids looked up once per batch (tokenizer properties are slow in the hot loop).
    question_ids, answer_ids = example.get("question_ids"), example.get("answer_ids")
    if question_ids is None or answer_ids is None:
        layout = SequenceLayout(sequence_format="reference") if reference else None
        question_ids, _, answer_ids = encode_parts(example, tokenizer, layout)
    prefix = list(question_ids) + [eos]
    prompt_length = len(prefix)
    if truncated.hint is not None:
        prefix.append(token_id(tokenizer, truncated.hint))
    cot_ids = tokenizer.convert_tokens_to_ids(list(truncated.tokens))
    if unk is not None and unk in cot_ids:
        bad = truncated.tokens[cot_ids.index(unk)]
        if bad != tokenizer.unk_token:
            raise ValueError(
                f"the tokenizer cannot represent the CoT token {bad!r}; truncate with the model's tokenizer and build "
                "the tokenizer from this data (hf_icot.data.tokenization.build_word_level_tokenizer) or add the token."
            )
    suffix = [eos] + list(answer_ids) + [eos]
    input_ids = prefix + cot_ids + suffix
    labels = [IGNORE_INDEX] * len(prefix) + input_ids[len(prefix) :]
    if truncated.keep_position:
        start = len(prefix)
        cot_positions = [start + p for p in truncated.positions]
        after = start + truncated.total
        position_ids = list(range(start)) + cot_positions + list(range(after, after + len(suffix)))
        if reference:
            _move_gap_earlier(position_ids)
    else:
        position_ids = list(range(len(input_ids)))
    return {"input_ids": input_ids, "labels": labels, "position_ids": position_ids, "prompt_length": prompt_length}


def _move_gap_earlier(position_ids: list[int]) -> None:
    """Give the token before the first jump in ``position_ids`` the position just before the jump (in place): the
    reference shifts positions from the token *before* the removed ones (``position_ids[removal_from - 1:]``), so
    the first ``<eos>`` (left removal) or the last kept CoT token (right removal) sits next to what follows."""
    for index in range(1, len(position_ids)):
        if position_ids[index] - position_ids[index - 1] > 1:
            position_ids[index - 1] = position_ids[index] - 1
            return


def encode_prompt(
    question: str,
    tokenizer: Any,
    mode: str = "explicit",
    hint: int | None = None,
    layout: SequenceLayout | None = None,
) -> list[int]:
    """The generation prompt for ``question``.

    * ``explicit``: ``question <eos>``; the model generates ``cot <eos> #### answer <eos>``.
    * ``implicit``: ``question <eos> <eos>`` (an empty CoT); the model generates ``#### answer <eos>``.
    * ``hint``: ``question <eos> <len_hint>``; the model generates ``hint`` CoT units, then ``<eos> #### answer``.

    The question is encoded as :func:`encode_parts` encodes it for ``layout`` (in the reference format: BOS where the
    tokenizer adds one, and the space token before ``<eos>``).

    Raises:
        ValueError: an unknown mode, ``hint`` mode without a non-negative ``hint``, a hint token missing from the
            tokenizer, or a word of the question the tokenizer cannot represent.
    """
    if mode not in PROMPT_MODES:
        raise ValueError(f"prompt mode {mode!r} is unknown; allowed: {', '.join(PROMPT_MODES)}.")
    eos = eos_id(tokenizer)
    if layout is not None and layout.is_reference:
        ids = encode_parts({"question": question, "cot": [], "answer": ""}, tokenizer, layout)[0] + [eos]
    else:
        ids = encode_text(question, tokenizer) + [eos]
    if mode == "implicit":
        return ids + [eos]
    if mode == "hint":
        if hint is None or hint < 0:
            raise ValueError(f"hint mode needs a CoT length hint >= 0, got {hint!r}.")
        return ids + [token_id(tokenizer, hint_token(hint))]
    return ids


def decode_words(token_ids: Sequence[int], tokenizer: Any) -> str:
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
    eos = eos_id(tokenizer)
    ids = list(token_ids)
    cot_ids: list[int] = []
    if prompt_mode != "implicit":
        cut = ids.index(eos) if eos in ids else len(ids)
        cot_ids, ids = ids[:cut], ids[cut + 1 :]
    answer_ids = ids[: ids.index(eos)] if eos in ids else ids
    answer_text = decode_words(answer_ids, tokenizer)
    if ANSWER_PREFIX in answer_text:
        answer_text = answer_text.split(ANSWER_PREFIX, 1)[1].strip()
    else:
        answer_text = ""
    return decode_words(cot_ids, tokenizer), answer_text
