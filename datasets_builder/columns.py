"""Token-id matrices to the Arrow columns of the shared schema, and chunks of those to a ``datasets.Dataset``.

A task renders a chunk of examples as matrices of token ids (one row per example) over a vocabulary of token strings;
these functions turn them into the ``question``/``answer`` strings (tokens joined by single spaces) and the ``cot``
lists (one string per step) of :func:`hf_icot.cot.example_features`, without a Python object per example: when every
token has the same number of bytes the strings are laid out as one byte matrix and handed to Arrow as buffers,
otherwise Arrow's own ``take`` and ``binary_join`` assemble them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from datasets.table import InMemoryTable
from tqdm.auto import tqdm

SPACE = ord(" ")
#: Examples rendered at once: large enough for numpy to dominate, small enough to keep memory modest.
CHUNK_ROWS = 1 << 16


def _token_bytes(vocab: Sequence[str]) -> np.ndarray | None:
    """``(len(vocab), width)`` UTF-8 bytes of the tokens when they all have the same width, else None."""
    encoded = [token.encode() for token in vocab]
    width = len(encoded[0])
    if width == 0 or any(len(token) != width for token in encoded):
        return None
    return np.frombuffer(b"".join(encoded), dtype=np.uint8).reshape(len(vocab), width)


def _spaced_bytes(ids: np.ndarray, token_bytes: np.ndarray) -> np.ndarray:
    """``(n, L * (width + 1))`` bytes: every token followed by one space."""
    n, length = ids.shape
    width = token_bytes.shape[1]
    chars = np.full((n, length, width + 1), SPACE, dtype=np.uint8)
    chars[:, :, :width] = token_bytes[ids]
    return chars.reshape(n, length * (width + 1))


def _string_array(data: np.ndarray, offsets: np.ndarray) -> pa.StringArray:
    """A string array over the bytes ``data`` cut at ``offsets`` (one more offset than strings)."""
    return pa.StringArray.from_buffers(
        len(offsets) - 1,
        pa.py_buffer(np.ascontiguousarray(offsets, dtype=np.int32)),
        pa.py_buffer(np.ascontiguousarray(data, dtype=np.uint8)),
    )


def _token_lists(ids: np.ndarray, vocab: Sequence[str], lengths: Sequence[int]) -> pa.ListArray:
    """Each row of ``ids`` cut into consecutive groups of ``lengths`` tokens, as lists of token strings."""
    n = len(ids)
    tokens = pa.array(list(vocab), type=pa.string()).take(pa.array(ids.ravel()))
    starts = np.concatenate([[0], np.cumsum(lengths)])
    offsets = (np.arange(n)[:, None] * ids.shape[1] + starts[None, :-1]).ravel()
    offsets = np.append(offsets, n * ids.shape[1]).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), tokens)


def text_column(ids: np.ndarray, vocab: Sequence[str]) -> pa.StringArray:
    """One string per row of ``ids`` (an ``(n, L)`` int matrix, L >= 1): its tokens ``vocab[id]`` joined by spaces."""
    n, length = ids.shape
    token_bytes = _token_bytes(vocab)
    if token_bytes is None:
        return pc.binary_join(_token_lists(ids, vocab, [length]), " ")
    width = length * (token_bytes.shape[1] + 1) - 1
    return _string_array(_spaced_bytes(ids, token_bytes)[:, :width], np.arange(n + 1) * width)


def steps_column(ids: np.ndarray, vocab: Sequence[str], step_lengths: Sequence[int]) -> pa.ListArray:
    """One list of step strings per row of ``ids``: the row's tokens cut into consecutive steps of ``step_lengths``
    tokens (each >= 1, summing to the row length), each step's tokens joined by spaces. No steps gives empty lists."""
    n, length = ids.shape
    n_steps = len(step_lengths)
    if sum(step_lengths) != length or any(s < 1 for s in step_lengths):
        raise ValueError(f"step lengths {list(step_lengths)} must be >= 1 and sum to the row length {length}.")
    if n_steps == 0:
        return pa.ListArray.from_arrays(pa.array(np.zeros(n + 1, dtype=np.int32)), pa.array([], type=pa.string()))
    outer = pa.array((np.arange(n + 1) * n_steps).astype(np.int32))
    token_bytes = _token_bytes(vocab)
    if token_bytes is None:
        steps = pc.binary_join(_token_lists(ids, vocab, step_lengths), " ")
        return pa.ListArray.from_arrays(outer, steps)
    slot = token_bytes.shape[1] + 1
    starts = np.concatenate([[0], np.cumsum(step_lengths)[:-1]])
    # Keep every byte except the space that follows the last token of each step.
    keep = np.concatenate([np.arange(s * slot, (s + k) * slot - 1) for s, k in zip(starts, step_lengths)])
    data = _spaced_bytes(ids, token_bytes)[:, keep]
    step_widths = np.asarray(step_lengths) * slot - 1
    offsets = np.empty(n * n_steps + 1, dtype=np.int32)
    offsets[:-1].reshape(n, n_steps)[:] = (
        np.arange(n, dtype=np.int32)[:, None] * len(keep) + np.concatenate([[0], np.cumsum(step_widths)[:-1]])[None, :]
    )
    offsets[-1] = n * len(keep)
    return pa.ListArray.from_arrays(outer, _string_array(data, offsets))


def levels_column(levels: Sequence[int], n: int) -> pa.ListArray:
    """The same ``cot_level`` list for ``n`` examples."""
    values = pa.array(np.tile(np.asarray(levels, dtype=np.int32), n), type=pa.int32())
    return pa.ListArray.from_arrays(pa.array((np.arange(n + 1) * len(levels)).astype(np.int32)), values)


def split_fingerprint(task_name: str, generator_version: str, params: Mapping[str, Any], split: str) -> str:
    """A stable ``datasets`` fingerprint for one split (the default one would hash the whole table)."""
    text = json.dumps([task_name, generator_version, dict(params), split], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def build_split(
    rows: np.ndarray,
    render: Callable[[np.ndarray], Mapping[str, pa.Array]],
    features: datasets.Features,
    split: str,
    fingerprint: str,
    progress: bool = False,
) -> datasets.Dataset:
    """A ``datasets.Dataset`` of ``len(rows)`` examples: ``render`` turns a chunk of rows into one Arrow array per
    column of ``features``; chunks are concatenated in order. ``progress`` shows a bar over chunks."""
    schema = features.arrow_schema
    tables = []
    starts = range(0, len(rows), CHUNK_ROWS)
    for start in tqdm(starts, desc=f"building {split}", unit="chunk", disable=not progress):
        columns = render(rows[start : start + CHUNK_ROWS])
        tables.append(pa.Table.from_arrays([columns[name] for name in schema.names], schema=schema))
    table = pa.concat_tables(tables) if tables else schema.empty_table()
    info = datasets.DatasetInfo(features=features)
    return datasets.Dataset(InMemoryTable(table), info=info, split=datasets.NamedSplit(split), fingerprint=fingerprint)


def build_splits(
    blocks: Mapping[str, np.ndarray],
    render: Callable[[np.ndarray], Mapping[str, pa.Array]],
    features: datasets.Features,
    task_name: str,
    generator_version: str,
    identity: Mapping[str, Any],
    progress: bool = False,
) -> datasets.DatasetDict:
    """One :func:`build_split` per entry of ``blocks`` (split name -> rows, in the order the splits should have),
    each fingerprinted from the task, its generator version, ``identity`` (what decides the rows) and the split."""
    return datasets.DatasetDict(
        {
            split: build_split(
                rows,
                render,
                features,
                split,
                split_fingerprint(task_name, generator_version, identity, split),
                progress,
            )
            for split, rows in blocks.items()
        }
    )
