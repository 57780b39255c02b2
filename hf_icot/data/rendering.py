"""A training batch cut on a prepared dataset's ids (``question_ids``, ``cot_ids``, ``answer_ids``) with array
operations over the whole batch: what :meth:`hf_icot.data.collator.ICoTCollator.render_counted` uses for the specs it
accepts, and what :func:`hf_icot.data.encoding.encode_example` gives example by example (padded into a batch by
:func:`right_padded`)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from hf_icot.cot import TruncationSpec
from hf_icot.data.encoding import IGNORE_INDEX

#: The cuts :func:`render_on_ids` makes (``levels`` only where every step is one token).
ID_CUTS = ("none", "all", "left", "right", "levels")


def padded(rows: Sequence[Sequence[int]], lengths: np.ndarray, fill: int) -> np.ndarray:
    """``rows`` right-padded with ``fill`` into one ``(len(rows), max(lengths, 1))`` array, in one scatter."""
    out = np.full((len(rows), max(int(lengths.max(initial=0)), 1)), fill, dtype=np.int64)
    flat = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int64, count=int(lengths.sum()))
    row = np.repeat(np.arange(len(rows)), lengths)
    out[row, np.arange(len(flat)) - np.repeat(np.cumsum(lengths) - lengths, lengths)] = flat
    return out


def render_on_ids(
    examples: Sequence[Mapping[str, Any]],
    specs: Sequence[TruncationSpec],
    eos: int,
    pad: int,
    reference: bool = False,
    placeholder: int | None = None,
) -> tuple[dict[str, Any], list[int]]:
    """Render a batch from the prepared ids: every part padded side by side, ``[question | <eos> | cot | <eos> |
    answer | <eos>]``, a mask of the tokens each row keeps, and one scatter that packs them to the left; the
    untruncated sequence's positions come with them for ``keep_position``, and under fill ``pad`` the removed CoT
    tokens stay as ``placeholder``. What :func:`encode_example` builds, for the specs :meth:`ICoTCollator._on_ids`
    accepts (``reference``: the reference format's positions, where the token before the first gap moves up to it,
    as :func:`hf_icot.data.encoding._move_gap_earlier` does)."""
    n = len(examples)
    q_len, c_len, a_len = (
        np.array([len(example[key]) for example in examples], dtype=np.int64)
        for key in ("question_ids", "cot_ids", "answer_ids")
    )
    question, cot, answer = (
        padded([example[key] for example in examples], lengths, pad)
        for key, lengths in (("question_ids", q_len), ("cot_ids", c_len), ("answer_ids", a_len))
    )
    which = np.array([spec.which for spec in specs])[:, None]
    count = np.array([spec.count for spec in specs], dtype=np.int64)[:, None]
    c_at = np.arange(cot.shape[1])[None, :]
    in_cot = c_at < c_len[:, None]
    removed = in_cot & (
        (which == "all")
        | ((which == "left") & (c_at < count))
        | ((which == "right") & (c_at >= c_len[:, None] - count))
    )
    if (which == "levels").any():  # stage t removes the tokens (one per step) of the t - 1 lowest levels
        levels = np.zeros(cot.shape, dtype=np.int64)
        for row in np.flatnonzero(which[:, 0] == "levels"):
            levels[row, : c_len[row]] = examples[row]["cot_level"]
        removed |= in_cot & (which == "levels") & (levels <= count - 1)
    pad_fill = np.array([spec.fill == "pad" for spec in specs])[:, None]
    if pad_fill.any():
        cot = np.where(removed & pad_fill, placeholder, cot)
    kept_cot = in_cot & ~(removed & ~pad_fill)
    eos_column, always = np.full((n, 1), eos, dtype=np.int64), np.ones((n, 1), dtype=bool)
    q_at, a_at = (np.arange(part.shape[1])[None, :] for part in (question, answer))
    # The untruncated sequence in six segments: ids, which are kept, their positions in it, whether they are labelled.
    segments = [
        (question, q_at < q_len[:, None], q_at, False),
        (eos_column, always, q_len[:, None], False),
        (cot, kept_cot, q_len[:, None] + 1 + c_at, True),
        (eos_column, always, (q_len + 1 + c_len)[:, None], True),
        (answer, a_at < a_len[:, None], (q_len + 2 + c_len)[:, None] + a_at, True),
        (eos_column, always, (q_len + 2 + c_len + a_len)[:, None], True),
    ]
    source = np.concatenate([ids for ids, *_ in segments], axis=1)
    valid = np.concatenate([np.broadcast_to(kept, ids.shape) for ids, kept, *_ in segments], axis=1)
    position = np.concatenate([np.broadcast_to(at, ids.shape) for ids, _, at, _ in segments], axis=1)
    labelled = np.concatenate([np.full(ids.shape[1], flag) for ids, *_, flag in segments])
    target = np.cumsum(valid, axis=1) - 1
    width = int(valid.sum(axis=1).max())
    rows, cols = np.nonzero(valid)
    at = (rows, target[rows, cols])  # each kept token's place once the row is packed to the left
    input_ids = np.full((n, width), pad, dtype=np.int64)
    labels = np.full((n, width), IGNORE_INDEX, dtype=np.int64)
    attention_mask = np.zeros((n, width), dtype=np.int64)
    input_ids[at] = source[rows, cols]
    labels[at] = np.where(labelled[cols], source[rows, cols], IGNORE_INDEX)
    attention_mask[at] = 1
    batch = {
        "input_ids": torch.from_numpy(input_ids),
        "attention_mask": torch.from_numpy(attention_mask),
        "labels": torch.from_numpy(labels),
    }
    keep_position = np.array([spec.fill == "keep_position" for spec in specs])
    if keep_position.any():
        position_ids = np.zeros((n, width), dtype=np.int64)
        position_ids[at] = np.where(keep_position[rows], position[rows, cols], target[rows, cols])
        if reference:
            jumps = np.diff(position_ids, axis=1) > 1  # padding holds 0s, so no jump is found there
            moved = np.nonzero(jumps.any(axis=1) & keep_position)[0]
            first = jumps[moved].argmax(axis=1)
            position_ids[moved, first] = position_ids[moved, first + 1] - 1
        batch["position_ids"] = torch.from_numpy(position_ids)
    return batch, (c_len - removed.sum(axis=1)).tolist()


def right_padded(encoded: Sequence[Mapping[str, Any]], pad: int, with_positions: bool) -> dict[str, Any]:
    """Examples encoded one by one (:func:`hf_icot.data.encoding.encode_example`) as one right-padded batch:
    ``input_ids`` (``pad`` after each row), ``attention_mask``, ``labels`` (-100 on padding) and, ``with_positions``,
    each row's ``position_ids`` (0 on padding)."""
    width = max(len(item["input_ids"]) for item in encoded)
    input_ids = np.full((len(encoded), width), pad, dtype=np.int64)
    labels = np.full((len(encoded), width), IGNORE_INDEX, dtype=np.int64)
    attention_mask = np.zeros((len(encoded), width), dtype=np.int64)
    position_ids = np.zeros((len(encoded), width), dtype=np.int64) if with_positions else None
    for row, item in enumerate(encoded):
        n = len(item["input_ids"])
        input_ids[row, :n] = item["input_ids"]
        labels[row, :n] = item["labels"]
        attention_mask[row, :n] = 1
        if position_ids is not None:
            position_ids[row, :n] = item["position_ids"]
    batch = {
        "input_ids": torch.from_numpy(input_ids),
        "attention_mask": torch.from_numpy(attention_mask),
        "labels": torch.from_numpy(labels),
    }
    if position_ids is not None:
        batch["position_ids"] = torch.from_numpy(position_ids)
    return batch
