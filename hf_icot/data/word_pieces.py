"""Token ids of whole Arrow columns for a tokenizer that splits text at every space before a word — a byte-level BPE
with GPT-2's pre-tokenizer — by encoding each distinct word once.

Such a tokenizer encodes ``" w1 w2 ... wn"`` as the concatenation of ``" w1"``, ..., ``" wn"`` encoded alone: GPT-2's
split pattern starts a new piece at every space followed by a non-space, no piece crosses one, and the BPE merges
within a piece only. A data set repeats the same few hundred words over millions of lines, so
:meth:`ICoTCollator.prepare_dataset <hf_icot.data.collator.ICoTCollator.prepare_dataset>` looks them up instead of
calling the tokenizer on every question and CoT step (~1,000 lines/s for GPT-2 in the reference format).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hf_icot.cot import ANSWER_PREFIX
from hf_icot.data.encoding import reference_answer, space_tokens, special_prefix


def splits_at_spaces(tokenizer: Any) -> bool:
    """Whether ``tokenizer`` encodes space-separated words independently: a fast tokenizer with no normalizer, a
    ``ByteLevel`` pre-tokenizer with GPT-2's split pattern, a deterministic model (no BPE dropout), and no added token
    holding whitespace (one that could match across a space)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or backend.normalizer is not None:
        return False
    pre_tokenizer = backend.pre_tokenizer
    if type(pre_tokenizer).__name__ != "ByteLevel" or not pre_tokenizer.use_regex:
        return False
    if getattr(backend.model, "dropout", None):
        return False
    return not any(any(char.isspace() for char in token) for token in tokenizer.get_added_vocab())


class WordPieces:
    """Each distinct word's ids and tokens, encoded once as ``" " + word`` and kept for every later batch.

    A word is refused (:meth:`encode` gives None, and the caller takes the tokenizer's own path, which names the
    problem) when it is empty (a double or outer space), holds an added token's text (added tokens are split out
    before the pre-tokenizer, possibly eating the space before them), encodes to nothing or to the unknown token, or
    gives a token with whitespace in it.
    """

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self._added = [token for token in tokenizer.get_added_vocab() if token]
        self._unk = tokenizer.unk_token_id
        self._code: dict[str, int] = {}  # word -> its row in the arrays below
        self._ids: list[list[int]] = []
        self._tokens: list[str] = []  # the word's tokens, space-joined
        self._refused: set[str] = set()
        self._arrays: tuple[np.ndarray, np.ndarray, np.ndarray, pa.Array] | None = None

    def _learn(self, words: list[str]) -> bool:
        new = [word for word in words if word not in self._code]
        if not new:
            return True
        if any(word in self._refused for word in new):
            return False
        refused = {word for word in new if not word or any(token in word for token in self._added)}
        if refused:
            self._refused |= refused
            return False
        encoded = self.tokenizer([" " + word for word in new], add_special_tokens=False).encodings
        for word, encoding in zip(new, encoded):
            ids, tokens = list(encoding.ids), list(encoding.tokens)
            if (
                not ids
                or (self._unk is not None and self._unk in ids)
                or any(len(token.split()) != 1 for token in tokens)
                or self.tokenizer.convert_tokens_to_ids(tokens) != ids
            ):
                self._refused.add(word)
                return False
            self._code[word] = len(self._ids)
            self._ids.append(ids)
            self._tokens.append(" ".join(tokens))
        self._arrays = None
        return True

    def _tables(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, pa.Array]:
        """The known words' ids laid end to end, where each word's start, how many, and their tokens."""
        if self._arrays is None:
            counts = np.array([len(ids) for ids in self._ids], dtype=np.int64)
            flat = np.fromiter((token for ids in self._ids for token in ids), dtype=np.int32, count=int(counts.sum()))
            starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
            self._arrays = flat, starts, counts, pa.array(self._tokens, pa.string())
        return self._arrays

    def encode(
        self, texts: pa.Array, with_tokens: bool = False
    ) -> tuple[np.ndarray, np.ndarray, pa.Array | None] | None:
        """The ids of every text of ``texts`` (a string array, no nulls) as :func:`hf_icot.data.encoding.encode_text`
        gives them: ``(ids, offsets, tokens)`` — all texts' ids end to end (int32), where each text's start and end
        (``len(texts) + 1`` offsets), and with ``with_tokens`` each text's tokens space-joined; None where a word is
        refused (see the class)."""
        words = pc.split_pattern(texts, " ")
        flat_words = pc.list_flatten(words)
        distinct = pc.unique(flat_words)
        if not self._learn(distinct.to_pylist()):
            return None
        flat, starts, counts, tokens = self._tables()
        global_code = np.array([self._code[word] for word in distinct.to_pylist()], dtype=np.int64)
        codes = global_code[pc.index_in(flat_words, value_set=distinct).to_numpy(zero_copy_only=False)]
        per_word = counts[codes]
        ends = np.cumsum(per_word)
        total = int(ends[-1]) if len(ends) else 0
        # Each word's ids copied from its start: token t of the batch comes from flat[start of its word + t - where
        # the word begins in the batch].
        ids = flat[np.repeat(starts[codes] - (ends - per_word), per_word) + np.arange(total)]
        word_offsets = words.offsets.to_numpy()
        offsets = np.concatenate([[0], ends])[word_offsets]
        joined = None
        if with_tokens:
            joined = pc.binary_join(pa.ListArray.from_arrays(words.offsets, tokens.take(pa.array(codes))), " ")
        return ids, offsets, joined


def framed(ids: np.ndarray, offsets: np.ndarray, before: list[int], after: list[int]) -> pa.ListArray:
    """The lists ``ids[offsets[i]:offsets[i + 1]]``, each with ``before`` put in front and ``after`` behind."""
    n, extra = len(offsets) - 1, len(before) + len(after)
    lengths = np.diff(offsets) + extra
    new_offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    out = np.empty(int(new_offsets[-1]), dtype=np.int32)
    row = np.repeat(np.arange(n), np.diff(offsets))
    out[np.arange(len(ids)) + (new_offsets[:-1] - offsets[:-1] + len(before))[row]] = ids
    for k, token in enumerate(before):
        out[new_offsets[:-1] + k] = token
    for k, token in enumerate(after):
        out[new_offsets[1:] - len(after) + k] = token
    return pa.ListArray.from_arrays(pa.array(new_offsets, pa.int32()), pa.array(out, pa.int32()))


def columns_by_words(
    pieces: WordPieces, tokenizer: Any, reference_format: bool, table: pa.Table, indices: list[int]
) -> dict[str, pa.Array] | None:
    """The prepared columns of ``table`` (what :meth:`hf_icot.data.collator.ICoTCollator.prepare_dataset` adds) for
    a byte-level BPE, each distinct word encoded once by ``pieces``, in either sequence format; None where a row needs
    the tokenizer (a text that is not printable ASCII, a refused word, a reference-format row without CoT)."""
    question, cot, answer = (table.column(name).combine_chunks() for name in ("question", "cot", "answer"))
    steps = pc.list_flatten(cot)
    if question.null_count or answer.null_count or cot.null_count or steps.null_count:
        return None
    for texts in (question, steps, answer):
        if len(texts) and not pc.all(pc.and_(pc.string_is_ascii(texts), pc.ascii_is_printable(texts))).as_py():
            return None
    n_steps = pc.list_value_length(cot).to_numpy(zero_copy_only=False)
    reference = reference_format
    if reference and (n_steps == 0).any():
        return None  # the reference's CoT is then the two spaces between its separators: the row path has it
    answers = pc.unique(answer)
    answer_texts = [f"{ANSWER_PREFIX} {text}" for text in answers.to_pylist()]
    if reference:
        answer_texts = [reference_answer(text) for text in answer_texts]
    encoded_question = pieces.encode(question)
    encoded_steps = pieces.encode(steps, with_tokens=True)
    encoded_answers = pieces.encode(pa.array(answer_texts, pa.string()))
    if encoded_question is None or encoded_steps is None or encoded_answers is None:
        return None
    step_ids, step_offsets, step_tokens = encoded_steps
    steps_of_row = cot.offsets.to_numpy() - cot.offsets[0].as_py()  # 0-based where the batch is a slice
    # In the reference format the space before the second <eos> is the CoT's last token, and the question starts
    # with the tokenizer's BOS where it adds one and ends with the space before the first <eos> (encode_parts).
    space_token = space_tokens(tokenizer)[0] if reference else None
    space = [tokenizer.convert_tokens_to_ids(space_token)] if reference else []
    question_ids = framed(*encoded_question[:2], special_prefix(tokenizer) if reference else [], space)
    row_offsets = step_offsets[steps_of_row]
    cot_ids = framed(step_ids, row_offsets, [], space)
    cot_tokens = step_tokens
    if reference:
        joined = step_tokens.to_pylist()
        for last in steps_of_row[1:][n_steps > 0] - 1:
            joined[last] = f"{joined[last]} {space_token}"
        cot_tokens = pa.array(joined, pa.string())
    answer_ids = framed(*encoded_answers[:2], [], space).take(pc.index_in(answer, value_set=answers))
    n_tokens = pc.list_value_length(cot_ids).to_numpy()
    lengths = (
        pc.list_value_length(question_ids).to_numpy() + n_tokens + pc.list_value_length(answer_ids).to_numpy() + 3
    )
    example_id = table.column("example_id") if "example_id" in table.column_names else pa.array(indices)
    return {
        "example_id": example_id.cast(pa.int64()),
        "question_ids": question_ids,
        "answer_ids": answer_ids,
        "cot_tokens": pa.ListArray.from_arrays(pa.array(steps_of_row, pa.int32()), cot_tokens),
        "cot_ids": cot_ids,
        "n_cot_tokens": pa.array(n_tokens, pa.int32()),
        "n_cot_steps": pa.array(n_steps, pa.int32()),
        "length": pa.array(lengths, pa.int32()),
    }
