"""Candidate-normalised loss and per-group accuracy: is the model still choosing among the K answers of a base?

**Candidate loss.** For an example of group B, the candidates are the distinct labelled spans of the rows of B (its
K answers; K = rows per group when answers differ, as in the study). Each candidate is written into the example's
labelled positions and scored by the sum of its tokens' log-probabilities, teacher-forced; the sums are
renormalised over the K candidates (a softmax) and the loss is −log p(the example's own answer), averaged over
examples. A model that ignores z puts equal mass on the K answers and scores log K; one that uses z scores 0. As
in the study (``candidate_eval.py``: the target is "all A tokens plus EOS") the sum runs over every labelled token,
the final ``<eos>`` included; it is the same token for every candidate, so it moves a score only through its
context.

**Group accuracy.** A row is solved when the argmax at every labelled position (teacher-forced, ``<eos>``
included) is its label; a group's accuracy is the fraction of its rows solved, and ``solved_fraction`` the fraction
of groups whose accuracy reaches ``threshold``. The per-group vector (sorted by group name) is what a heat map of
groups over training steps shows.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

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


class CandidateLoss(NamedTuple):
    """Mean −log p(right answer | candidates) (nats), the share of examples whose right answer scores highest,
    and the mean log K over examples (the loss of a model uniform over each group's candidates)."""

    loss: float
    accuracy: float
    mean_log_k: float


class GroupAccuracy(NamedTuple):
    """Per-group accuracy (aligned with ``groups``, sorted by name) and the share of groups at >= ``threshold``."""

    groups: list[str]
    accuracy: np.ndarray
    solved_fraction: float
    threshold: float


def check_candidate_examples(rows: Sequence[dict]) -> None:
    """Raise if the examples cannot be scored against their group's candidates.

    Raises:
        ValueError: a missing ``group`` column (or malformed labels), or a group whose answers (labelled spans)
            have different lengths.
    """
    require_columns(rows, ["group"], "candidate_loss")
    lengths: dict[str, set[int]] = {}
    for index, row in enumerate(rows):
        start, end = answer_span(row["labels"], index)
        lengths.setdefault(row["group"], set()).add(end - start)
    for group, seen in lengths.items():
        if len(seen) > 1:
            raise ValueError(
                f"candidate_loss needs equal-length answers within a group; group {group!r} has answers of "
                f"{sorted(seen)} tokens."
            )


def check_group_examples(rows: Sequence[dict], threshold: float = 0.8) -> None:
    """Raise if per-group accuracy cannot be measured.

    Raises:
        ValueError: a missing ``group`` column (or malformed labels), or ``threshold`` outside [0, 1].
    """
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold={threshold} is not allowed; a group accuracy threshold lies in [0, 1].")
    require_columns(rows, ["group"], "group_accuracy")


def _answers(rows: Sequence[dict]) -> list[tuple[int, ...]]:
    spans = [answer_span(row["labels"], i) for i, row in enumerate(rows)]
    return [tuple(row["labels"][start:end]) for row, (start, end) in zip(rows, spans, strict=True)]


@torch.no_grad()
def candidate_loss(
    model: torch.nn.Module, examples: Iterable[dict], *, pad_token_id: int, batch_size: int = 64
) -> CandidateLoss:
    """Candidate-normalised loss of ``model`` on tokenized ``examples`` (columns ``input_ids``, ``labels``,
    ``group``); see the module docstring.

    Args:
        pad_token_id: the id to pad batches with (masked out by ``attention_mask``).
        batch_size: sequences (example × candidate) per forward pass.

    Raises:
        ValueError: see :func:`check_candidate_examples`.
    """
    rows = as_rows(examples)
    check_candidate_examples(rows)
    answers = _answers(rows)
    candidates: dict[str, list[tuple[int, ...]]] = {}
    for row, answer in zip(rows, answers, strict=True):
        if answer not in candidates.setdefault(row["group"], []):
            candidates[row["group"]].append(answer)

    # One sequence per (example, candidate): the example's prompt with the candidate in its labelled positions.
    sequences, starts, targets, owner = [], [], [], []
    for index, row in enumerate(rows):
        start = answer_span(row["labels"], index)[0]
        for candidate in candidates[row["group"]]:
            ids = list(row["input_ids"])
            ids[start : start + len(candidate)] = candidate
            sequences.append(ids)
            starts.append(start)
            targets.append(candidate)
            owner.append(index)
    scores = []
    with evaluation_mode(model):
        for indices, outputs in batched_logits(model, sequences, pad_token_id, batch_size):
            log_probs = span_log_probs(outputs.logits, [starts[i] for i in indices], [targets[i] for i in indices])
            scores.extend(log_probs.sum(1).cpu().tolist())

    losses, correct, log_ks, cursor = [], [], [], 0
    for row, answer in zip(rows, answers, strict=True):
        group = candidates[row["group"]]
        row_scores = torch.tensor(scores[cursor : cursor + len(group)], dtype=torch.float64)
        cursor += len(group)
        right = group.index(answer)
        losses.append((torch.logsumexp(row_scores, 0) - row_scores[right]).item())
        correct.append(float(row_scores.argmax().item() == right))
        log_ks.append(math.log(len(group)))
    return CandidateLoss(
        loss=float(np.mean(losses)), accuracy=float(np.mean(correct)), mean_log_k=float(np.mean(log_ks))
    )


@torch.no_grad()
def solved_rows(model: torch.nn.Module, rows: Sequence[dict], pad_token_id: int, batch_size: int = 64) -> list[bool]:
    """Per row, whether the teacher-forced argmax is right at every labelled position."""
    spans = [answer_span(row["labels"], i) for i, row in enumerate(rows)]
    solved = []
    with evaluation_mode(model):
        for indices, outputs in batched_logits(model, [row["input_ids"] for row in rows], pad_token_id, batch_size):
            for batch_row, i in enumerate(indices):
                start, end = spans[i]
                predicted = outputs.logits[batch_row, start - 1 : end - 1].argmax(-1).cpu().tolist()
                solved.append(predicted == list(rows[i]["labels"][start:end]))
    return solved


def group_accuracy(
    model: torch.nn.Module,
    examples: Iterable[dict],
    *,
    pad_token_id: int,
    threshold: float = 0.8,
    batch_size: int = 64,
) -> GroupAccuracy:
    """Per-group teacher-forced accuracy of ``model`` on tokenized ``examples`` (columns ``input_ids``,
    ``labels``, ``group``) and the share of groups solved at >= ``threshold``; see the module docstring.

    Raises:
        ValueError: see :func:`check_group_examples`.
    """
    rows = as_rows(examples)
    check_group_examples(rows, threshold)
    by_group: dict[str, list[bool]] = {}
    for row, solved in zip(rows, solved_rows(model, rows, pad_token_id, batch_size), strict=True):
        by_group.setdefault(row["group"], []).append(solved)
    groups = sorted(by_group)
    accuracy = np.array([np.mean(by_group[g]) for g in groups], dtype=np.float64)
    return GroupAccuracy(
        groups=groups,
        accuracy=accuracy,
        solved_fraction=float(np.mean(accuracy >= threshold)),
        threshold=threshold,
    )


def diagnostic_rows(encoded: Any, n_examples: int, k: int) -> Any:
    """The rows of the first ``ceil(n_examples / k)`` bases of ``encoded``: whole bases, so that each row's K
    candidate answers are all present."""
    wanted: set[str] = set()
    for group in encoded["group"]:
        if len(wanted) * k >= n_examples:
            break
        wanted.add(group)
    return encoded.filter(lambda row: row["group"] in wanted, desc="diagnostic bases")
