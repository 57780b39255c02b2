"""Refusing a dataset's bad rows before any training, each in one sentence naming the split, the row and the column.

:func:`check_rows` checks the shared schema (:mod:`hf_icot.cot`): a ``question``, a ``cot`` that is a list of strings
and a non-empty ``answer`` in every row of every split. :func:`check_words` checks that a word-level tokenizer (one
with a fixed vocabulary, e.g. a model trained from scratch on other data) knows every word, since it would turn an
unknown one into ``<unk>`` and the model would train on, and be scored against, the wrong sequence. Both read the
Arrow columns (nulls, empties, the distinct words) and walk rows only to name the first bad one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

REQUIRED = ("question", "cot", "answer")


def _first(mask: pa.ChunkedArray | pa.Array) -> int | None:
    """The index of the first true (nulls as false) of ``mask``, or None."""
    mask = pc.fill_null(mask, False)
    if not pc.any(mask).as_py():
        return None
    return int(pc.index(mask, True).as_py())


def arrow_table(split: Any) -> pa.Table:
    """The rows of ``split`` (a ``datasets.Dataset``) in order, as Arrow (a select or shuffle applied; no copy
    without one): reading a column from here costs one Arrow pass, not a Python dict per row."""
    return split.with_format("arrow")[:]


def column_words(table: pa.Table, column: str) -> list[str]:
    """The distinct space-separated words of a text column, or of a list-of-text column (``cot``)."""
    values = table.column(column)
    if pa.types.is_list(values.type) or pa.types.is_large_list(values.type):
        values = pc.list_flatten(values)
    words = pc.unique(pc.list_flatten(pc.utf8_split_whitespace(values))).to_pylist()
    return [word for word in words if word]  # Arrow keeps an empty word at a leading or trailing space; str.split not


def _where(split: str, row: int, column: str) -> str:
    return f"split {split!r} row {row}, column {column!r}"


def check_rows(dataset: Mapping[str, Any]) -> None:
    """Check every split of ``dataset`` (name -> ``datasets.Dataset``) against the shared schema.

    Raises:
        ValueError: a missing column, a ``question``/``answer`` that is not text or is empty, a ``cot`` that is not a
            list of strings or holds a missing step; naming the split, the first bad row and the column.
    """
    for name, split in dataset.items():
        missing = [column for column in REQUIRED if column not in split.column_names]
        if missing:
            raise ValueError(
                f"split {name!r} has no column {missing[0]!r} (its columns: {', '.join(split.column_names)}); every "
                "split needs question (text), cot (a list of strings) and answer (text)."
            )
        if not len(split):
            continue
        table = arrow_table(split)
        for column in REQUIRED:  # load_dataset fills a column one split's files lack with nulls
            if table.column(column).null_count == len(table):
                missing.append(column)
        if missing:
            raise ValueError(
                f"split {name!r} has no column {missing[0]!r} (it is missing or empty in every row); every split needs "
                "question (text), cot (a list of strings) and answer (text)."
            )
        for column in ("question", "answer"):
            values = table.column(column)
            if not pa.types.is_string(values.type) and not pa.types.is_large_string(values.type):
                raise ValueError(f"{_where(name, 0, column)} holds {values.type}, not text; give it as a string.")
            row = _first(pc.or_kleene(pc.is_null(values), pc.equal(pc.utf8_trim_whitespace(values), "")))
            if row is not None:
                article = "an" if column == "answer" else "a"
                raise ValueError(f"{_where(name, row, column)} is empty; every example needs {article} {column}.")
        cot = table.column("cot")
        if not (pa.types.is_list(cot.type) or pa.types.is_large_list(cot.type)) or not (
            pa.types.is_string(cot.type.value_type) or pa.types.is_large_string(cot.type.value_type)
        ):
            raise ValueError(
                f"{_where(name, 0, 'cot')} holds {cot.type}, not a list of strings; give each example's CoT as a "
                "list of steps (an empty list for none)."
            )
        rows = [_first(pc.is_null(cot))]
        step = _first(pc.is_null(pc.list_flatten(cot)))
        if step is not None:  # a null step: the row it belongs to
            rows.append(int(pc.list_parent_indices(cot)[step].as_py()))
        row = min((row for row in rows if row is not None), default=None)
        if row is not None:
            raise ValueError(f"{_where(name, row, 'cot')} is missing or has a missing step; give a list of strings.")


def is_word_level(tokenizer: Any) -> bool:
    """Whether ``tokenizer`` is a fast tokenizer with a ``WordLevel`` model (a fixed vocabulary of whole words)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    return backend is not None and type(backend.model).__name__ == "WordLevel"


def check_words(dataset: Mapping[str, Any], tokenizer: Any) -> None:
    """Check that a word-level ``tokenizer`` knows every word of ``dataset``'s question, cot and answer columns (other
    tokenizers represent any text), and that no word is the tokenizer's unknown token itself (``<unk>`` in the data
    could not be told from a word the tokenizer lacks).

    Raises:
        ValueError: the first unknown word, or the unknown token as a word, naming the split, the row and the column.
    """
    word_level, unk = is_word_level(tokenizer), getattr(tokenizer, "unk_token", None)
    if not word_level and unk is None:
        return
    vocabulary = tokenizer.get_vocab() if word_level else {}
    for name, split in dataset.items():
        table = arrow_table(split)
        for column in REQUIRED:
            unknown = {
                word for word in column_words(table, column) if word == unk or (word_level and word not in vocabulary)
            }
            if not unknown:
                continue
            for row, value in enumerate(table.column(column).to_pylist()):
                text = " ".join(value) if column == "cot" else value
                word = next((word for word in text.split() if word in unknown), None)
                if word is not None and word == unk:
                    raise ValueError(
                        f"{_where(name, row, column)} has the word {word!r}, the tokenizer's unknown token, which "
                        "could not be told from a word the tokenizer lacks; write it otherwise in the data."
                    )
                if word is not None:
                    raise ValueError(
                        f"{_where(name, row, column)} has the word {word!r}, which the word-level tokenizer does not "
                        f"know (it would become {tokenizer.unk_token or 'nothing'}); give a model whose tokenizer "
                        "was built from this data, or train one from scratch (--scratch_model)."
                    )
