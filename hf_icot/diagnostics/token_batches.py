"""Tokenized examples for the learning-dynamics diagnostics: the columns they read, checks, batching, log-probs.

Every diagnostic takes a ``datasets.Dataset`` or a list of dicts with

* ``input_ids`` (list of int) and ``labels`` (list of int, ``-100`` outside the loss, aligned with ``input_ids``:
  ``labels[i]`` is predicted at position ``i - 1``, as HF causal LMs shift inside the model);
* where a measurement needs them: ``group`` (str, the base B), ``selector`` (str, z) and ``selector_positions``
  (list of int, the indices in ``input_ids`` of the selector's tokens).

The labelled tokens of a row form one contiguous span (the answer and its final ``<eos>`` in the study layout
``<bos> B <sep> z <sep> A <eos>``); the position before it is the last prompt position, which predicts the first
target token. Batches are padded on the right with ``attention_mask``, so positions keep their indices.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch

IGNORE_INDEX = -100


def as_rows(examples: Iterable[dict]) -> list[dict]:
    """The examples as a list of dicts (a ``datasets.Dataset`` iterates as dicts)."""
    return list(examples)


def require_columns(rows: Sequence[dict], columns: Sequence[str], measurement: str) -> None:
    """Raise if a row lacks one of ``columns`` or its ``input_ids`` / ``labels`` are malformed.

    Raises:
        ValueError: no rows, a missing column, labels of another length than input_ids, no labelled token, labels
            that are not one contiguous span or a span starting at position 0 (nothing would predict it), or a
            selector position outside the row.
    """
    if not rows:
        raise ValueError(f"{measurement} needs at least one example; got none.")
    for column in ("input_ids", "labels", *columns):
        if column not in rows[0]:
            raise ValueError(f"{measurement} needs the column {column!r}, which the examples lack.")
    for index, row in enumerate(rows):
        if len(row["labels"]) != len(row["input_ids"]):
            raise ValueError(
                f"example {index} has {len(row['labels'])} labels for {len(row['input_ids'])} input_ids; "
                "they must be aligned one to one."
            )
        start, end = answer_span(row["labels"], index)
        if start == 0:
            raise ValueError(f"example {index} is labelled from position 0; its first target needs a prompt.")
        if "selector_positions" in columns:
            positions = row["selector_positions"]
            if not positions or min(positions) < 0 or max(positions) >= start:
                raise ValueError(
                    f"example {index} has selector_positions {list(positions)}; they must be a non-empty set of "
                    f"prompt positions in [0, {start})."
                )


def answer_span(labels: Sequence[int], index: int = 0) -> tuple[int, int]:
    """``(start, end)`` of the labelled span of one row (``labels[start:end]`` are the targets).

    Raises:
        ValueError: no labelled token, or labelled tokens that are not contiguous.
    """
    labelled = [i for i, label in enumerate(labels) if label != IGNORE_INDEX]
    if not labelled:
        raise ValueError(f"example {index} has no labelled token (every label is {IGNORE_INDEX}).")
    start, end = labelled[0], labelled[-1] + 1
    if end - start != len(labelled):
        raise ValueError(f"example {index} has labels with gaps in [{start}, {end}); the targets must be contiguous.")
    return start, end


def pad_right(
    sequences: Sequence[Sequence[int]], pad_token_id: int, length: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(input_ids, attention_mask)`` of the sequences padded on the right to ``length`` (default: the longest)."""
    length = max(len(s) for s in sequences) if length is None else length
    ids = torch.full((len(sequences), length), pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), length), dtype=torch.long)
    for row, sequence in enumerate(sequences):
        ids[row, : len(sequence)] = torch.as_tensor(sequence, dtype=torch.long)
        mask[row, : len(sequence)] = 1
    return ids, mask


def model_device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


def batched_logits(
    model: torch.nn.Module,
    sequences: Sequence[Sequence[int]],
    pad_token_id: int,
    batch_size: int,
    length: int | None = None,
    **forward_kwargs: Any,
) -> Iterator[tuple[range, Any]]:
    """Run ``model`` on the sequences ``batch_size`` at a time; yield ``(indices, outputs)`` per batch."""
    device = model_device(model)
    for first in range(0, len(sequences), batch_size):
        indices = range(first, min(first + batch_size, len(sequences)))
        ids, mask = pad_right([sequences[i] for i in indices], pad_token_id, length)
        yield indices, model(input_ids=ids.to(device), attention_mask=mask.to(device), **forward_kwargs)


def span_log_probs(logits: torch.Tensor, starts: Sequence[int], targets: Sequence[Sequence[int]]) -> torch.Tensor:
    """Per row, the log-probabilities of its ``targets`` placed from position ``start`` on, each read from the logits
    at the position before (``logits[row, start - 1 + t]`` predicts ``targets[row][t]``).

    Returns a float64 tensor ``(rows, T)``; every row has the same number ``T`` of targets.
    """
    rows = []
    for row, (start, target) in enumerate(zip(starts, targets, strict=True)):
        log_probs = torch.log_softmax(logits[row, start - 1 : start - 1 + len(target)].double(), dim=-1)  # (T, V)
        rows.append(log_probs.gather(1, torch.as_tensor(target, device=logits.device)[:, None])[:, 0])
    return torch.stack(rows)


@contextmanager
def evaluation_mode(model: torch.nn.Module) -> Iterator[None]:
    """Dropout off inside, and the model's train/eval mode restored afterwards."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


@contextmanager
def eager_attention(model: torch.nn.Module) -> Iterator[None]:
    """The eager attention implementation inside (it returns attention weights and supports double backward);
    the model's own implementation restored afterwards."""
    config = getattr(model, "config", None)
    previous = getattr(config, "_attn_implementation", None)
    switch = previous is not None and previous != "eager" and hasattr(model, "set_attn_implementation")
    if switch:
        model.set_attn_implementation("eager")
    try:
        yield
    finally:
        if switch:
            model.set_attn_implementation(previous)
