"""Teacher-forced accuracy: is the model's argmax right at the answer positions of a rendered batch (one forward pass,
no generation)?

The one implementation behind both uses of it: the adaptive pace reads it from each training step's own logits
(:class:`hf_icot.training.adaptive_pace.AnswerPace`), and :func:`answer_accuracy` measures it on evaluation
examples in any layout (:mod:`hf_icot.diagnostics.answer_accuracy`). :func:`make_compute_metrics` gives
``Trainer(compute_metrics=...)`` the same kind of measure from an evaluation loop's predictions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from hf_icot.cot import ANSWER_PREFIX, TruncationSpec
from hf_icot.data.encoding import encode_text
from hf_icot.evaluation.metrics import load_exact_match


def answer_token_mask(
    examples: Sequence[Mapping[str, Any]], attention_mask: torch.Tensor, marker_ids: Sequence[int]
) -> torch.Tensor:
    """Boolean ``(B, T)`` mask of each rendered example's answer tokens: its ``answer_ids`` after the ``####`` marker
    (``marker_ids``; kept when an answer does not start with it), without the final ``<eos>``.

    Rows are right-padded sequences ending ``<eos> answer_ids <eos>`` (:func:`hf_icot.data.encoding.encode_example`).
    """
    mask = torch.zeros(attention_mask.shape, dtype=torch.bool)
    lengths = attention_mask.sum(dim=1).tolist()
    marker = list(marker_ids)
    for row, (example, length) in enumerate(zip(examples, lengths)):
        answer = list(example["answer_ids"])
        skip = len(marker) if answer[: len(marker)] == marker and len(answer) > len(marker) else 0
        mask[row, length - 1 - len(answer) + skip : length - 1] = True
    return mask


def answer_token_hits(
    logits: torch.Tensor,
    input_ids: torch.Tensor,
    mask: torch.Tensor,
    per_example: bool = False,
    positions: torch.Tensor | None = None,
) -> torch.Tensor:
    """``[correct, total]`` (int64) of the teacher-forced argmax at the ``mask`` positions: position ``t`` is predicted
    by the logits at ``t - 1``. Only the masked rows of ``logits`` are reduced, so the cost is tiny.

    ``per_example``: count examples instead of tokens — an example (a row with a masked position) is correct when every
    one of its masked tokens is.

    ``positions``: when ``logits`` holds ``(N, V)`` logits at these ``(B, T)`` positions only, row-major (the loss at
    labelled positions, :mod:`hf_icot.modeling.labelled_logits`), instead of ``(B, T, V)`` at every position; a
    masked token whose predicting position has no logits is not scored (the masks scored in training are labelled)."""
    target_mask = mask[:, 1:]
    if positions is None:
        scored = logits[:, :-1][target_mask]  # (M, V) over the M masked tokens
    else:
        target_mask = target_mask & positions[:, :-1]
        scored = logits[target_mask[positions[:, :-1]]]  # the kept rows that predict a masked token, in mask order
    if not per_example:
        predicted = scored.argmax(dim=-1)
        correct = (predicted == input_ids[:, 1:][target_mask]).sum()
        return torch.stack([correct, target_mask.sum()]).to(torch.long)
    predicted = torch.full_like(input_ids[:, 1:], -1)
    predicted[target_mask] = scored.argmax(dim=-1)
    wrong = (predicted != input_ids[:, 1:]) & target_mask
    scored_rows = target_mask.any(dim=1)
    return torch.stack([(scored_rows & ~wrong.any(dim=1)).sum(), scored_rows.sum()]).to(torch.long)


@torch.no_grad()
def answer_accuracy(model: Any, collator: Any, examples: Sequence[dict], specs: Sequence[TruncationSpec]) -> float:
    """The share of prepared ``examples``, rendered with ``specs`` by ``collator`` (an
    :class:`~hf_icot.data.collator.ICoTCollator`), whose every answer token (after ``####``) is the model's
    teacher-forced argmax."""
    was_training = model.training
    model.eval()
    batch = collator.render(examples, specs)
    device = next(model.parameters()).device
    inputs = {name: value.to(device) for name, value in batch.items() if name != "labels"}
    logits = model(**inputs).logits  # (B, S, V)
    mask = answer_token_mask(examples, batch["attention_mask"], encode_text(ANSWER_PREFIX, collator.tokenizer))
    correct, total = answer_token_hits(logits, inputs["input_ids"], mask.to(device), per_example=True).tolist()
    model.train(was_training)
    return correct / total if total else 0.0


def preprocess_logits_for_metrics(logits: torch.Tensor | tuple, labels: torch.Tensor) -> torch.Tensor:
    """Keep only the argmax ids of the logits, so evaluation stores (B, L) ids instead of (B, L, vocab) floats."""
    if isinstance(logits, tuple):
        logits = logits[0]
    return logits.argmax(dim=-1)


def make_compute_metrics(tokenizer: Any) -> Callable[[Any], dict[str, float]]:
    """A ``compute_metrics`` for ``Trainer`` on teacher-forced hf_icot sequences.

    The returned function takes an ``EvalPrediction`` whose ``predictions`` are argmax ids (use
    :func:`preprocess_logits_for_metrics`) or logits, and whose ``label_ids`` are the collator's labels (-100 where
    no loss). The prediction at position t is for the token at t + 1. It returns:

    * ``answer_em``: fraction of examples whose answer tokens — those after the last ``####`` up to and including the
      closing ``<eos>`` — are all predicted right;
    * ``token_accuracy``: fraction of labelled tokens predicted right.

    The function raises ValueError when a labelled row holds no ``####`` (not an hf_icot sequence).
    """
    marker = encode_text(ANSWER_PREFIX, tokenizer)
    metric_holder: list[Any] = []

    def compute_metrics(eval_prediction: Any) -> dict[str, float]:
        predictions = eval_prediction.predictions
        if isinstance(predictions, tuple):
            predictions = predictions[0]
        predictions, labels = np.asarray(predictions), np.asarray(eval_prediction.label_ids)
        if predictions.ndim == 3:
            predictions = predictions.argmax(-1)
        predicted, target = predictions[:, :-1], labels[:, 1:]  # (B, L-1): prediction t is for token t + 1
        labelled = target != -100
        token_accuracy = float((predicted == target)[labelled].mean()) if labelled.any() else 0.0

        answer_predictions, answer_references = [], []
        for row in range(target.shape[0]):
            where = np.flatnonzero(labelled[row])
            if len(where) == 0:
                continue
            row_target = target[row, : where[-1] + 1].tolist()
            start = _answer_start(row_target, marker)
            if start is None:
                raise ValueError(
                    f"evaluation row {row} has no '{ANSWER_PREFIX}' among its labels; compute_metrics expects "
                    "sequences encoded by hf_icot.data.encoding."
                )
            answer_references.append(" ".join(map(str, row_target[start:])))
            answer_predictions.append(" ".join(map(str, predicted[row, start : len(row_target)].tolist())))
        if not metric_holder:
            metric_holder.append(load_exact_match())
        answer_em = (
            metric_holder[0].compute(predictions=answer_predictions, references=answer_references)["exact_match"]
            if answer_references
            else 0.0
        )
        return {"answer_em": answer_em, "token_accuracy": token_accuracy}

    return compute_metrics


def _answer_start(tokens: list[int], marker: list[int]) -> int | None:
    """Index just after the last occurrence of ``marker`` in ``tokens``, or None."""
    for start in range(len(tokens) - len(marker), -1, -1):
        if tokens[start : start + len(marker)] == marker:
            return start + len(marker)
    return None
