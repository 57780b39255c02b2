"""Δz, the z-shuffle gap: how much the first target token's loss rises when each example sees another's selector.

The examples' selectors are permuted by a seeded derangement (no example keeps its own row's selector tokens),
written into each example's ``selector_positions``, and the cross-entropy of the first target token (predicted at
the last prompt position) is compared with the clean one::

    Δz = mean_i CE(first target | prompt with z of row π(i))  −  mean_i CE(first target | prompt)

Δz is 0 for a model whose prediction ignores z and grows as the model uses z; a model that has learnt only the
marginal p(A | B) has Δz ≈ 0. As in the study, the donor row may carry the same selector string as the example
(selectors are shared by all bases), which only dilutes the gap by the share of such pairs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

import numpy as np
import torch

from hf_icot.diagnostics.token_batches import (
    answer_span,
    as_rows,
    batched_logits,
    evaluation_mode,
    require_columns,
    span_log_probs,
)

MEASUREMENT = "z_shuffle_gap"


class ZShuffleGap(NamedTuple):
    """Δz and the two first-target-token losses (nats, mean over examples) it is the difference of."""

    gap: float
    clean_loss: float
    shuffled_loss: float


def check_examples(rows: Sequence[dict]) -> None:
    """Raise if the examples cannot be z-shuffled.

    Raises:
        ValueError: a missing ``selector_positions`` column (or malformed labels, see
            :func:`~hf_icot.diagnostics.token_batches.require_columns`), selectors of different token lengths, or fewer
            than 2 distinct selectors (then no shuffle can change any z).
    """
    require_columns(rows, ["selector_positions"], MEASUREMENT)
    lengths = {len(row["selector_positions"]) for row in rows}
    if len(lengths) > 1:
        raise ValueError(
            f"{MEASUREMENT} swaps selectors between examples, but they have {sorted(lengths)} tokens; "
            "all selectors must have the same number of tokens."
        )
    distinct = {tuple(row["input_ids"][p] for p in row["selector_positions"]) for row in rows}
    if len(distinct) < 2:
        raise ValueError(f"{MEASUREMENT} needs at least 2 distinct selectors among the examples; got {len(distinct)}.")


def derangement(n: int, seed: int) -> list[int]:
    """A uniformly random permutation of ``range(n)`` without fixed points, the same for the same ``seed``.

    Raises:
        ValueError: ``n`` < 2 (no derangement exists).
    """
    if n < 2:
        raise ValueError(f"a derangement needs at least 2 items; got n={n}.")
    rng = np.random.default_rng(seed)
    identity = np.arange(n)
    while True:  # rejection: a random permutation is a derangement with probability about 1/e
        permutation = rng.permutation(n)
        if not np.any(permutation == identity):
            return permutation.tolist()


def shuffle_selectors(rows: Sequence[dict], permutation: Sequence[int]) -> list[list[int]]:
    """The rows' ``input_ids`` with row ``i``'s selector tokens replaced by those of row ``permutation[i]``."""
    shuffled = []
    for row, donor in zip(rows, (rows[j] for j in permutation), strict=True):
        ids = list(row["input_ids"])
        for position, donor_position in zip(row["selector_positions"], donor["selector_positions"], strict=True):
            ids[position] = donor["input_ids"][donor_position]
        shuffled.append(ids)
    return shuffled


@torch.no_grad()
def first_token_losses(
    model: torch.nn.Module,
    sequences: Sequence[Sequence[int]],
    rows: Sequence[dict],
    pad_token_id: int,
    batch_size: int = 64,
) -> torch.Tensor:
    """Per row, the cross-entropy (nats, float64) of its first target token given ``sequences[row]``."""
    starts = [answer_span(row["labels"], i)[0] for i, row in enumerate(rows)]
    losses = []
    for indices, outputs in batched_logits(model, sequences, pad_token_id, batch_size):
        targets = [[rows[i]["labels"][starts[i]]] for i in indices]
        losses.append(-span_log_probs(outputs.logits, [starts[i] for i in indices], targets)[:, 0].cpu())
    return torch.cat(losses)


def z_shuffle_gap(
    model: torch.nn.Module, examples: Iterable[dict], *, pad_token_id: int, seed: int = 0, batch_size: int = 64
) -> ZShuffleGap:
    """Δz of ``model`` on tokenized ``examples`` (columns ``input_ids``, ``labels``, ``selector_positions``).

    Args:
        pad_token_id: the id to pad batches with (masked out by ``attention_mask``).
        seed: seeds the derangement, so a run measures every checkpoint with the same shuffle.
        batch_size: examples per forward pass.

    Returns:
        :class:`ZShuffleGap` ``(gap, clean_loss, shuffled_loss)``.

    Raises:
        ValueError: see :func:`check_examples`.
    """
    rows = as_rows(examples)
    check_examples(rows)
    shuffled = shuffle_selectors(rows, derangement(len(rows), seed))
    with evaluation_mode(model):
        clean = first_token_losses(model, [row["input_ids"] for row in rows], rows, pad_token_id, batch_size)
        corrupted = first_token_losses(model, shuffled, rows, pad_token_id, batch_size)
    clean_loss, shuffled_loss = clean.mean().item(), corrupted.mean().item()
    return ZShuffleGap(gap=shuffled_loss - clean_loss, clean_loss=clean_loss, shuffled_loss=shuffled_loss)
