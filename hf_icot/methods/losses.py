"""The losses of the continuous-thought methods, each computed in one call of the model's forward
(:func:`hf_icot.methods.latent_forward.enable_latent_forward`), so DDP sees one forward per backward.

Both are means over the micro-batch (the public codes' ``CrossEntropyLoss()``), which the trainer divides by the
gradient-accumulation steps as those codes do. Logits are computed only at the labelled positions (the output layer
on the gathered hidden states: the same cross entropy as on every position's logits).

* **Coconut** (its ``Coconut.forward``): the cross entropy of the latent sequence's labels — the remaining CoT steps,
  ``<eos>``, ``#### answer <eos>``.
* **CODI** (its ``CODI.forward``): ``student_ce + distill_loss_factor × distill + ref_loss_factor × teacher_ce``. The
  distillation compares, at the token before the answer, the student's hidden states of every layer (embeddings first)
  with the teacher's, detached: smooth L1 or MSE averaged over the batch and hidden size, per layer optionally divided
  by the teacher's std there (twice for l2, as CODI does), then averaged over the layers. CODI runs its teacher twice,
  once without gradient for the targets and once with it for the cross entropy; here one pass serves both (the
  targets detached), which is the same computation whenever dropout is off, and with dropout shares one mask.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from transformers.utils import ModelOutput

from hf_icot.curriculum.latent import CODI, LatentSchedule
from hf_icot.methods.latent_forward import latent_hidden_states, projection_of
from hf_icot.modeling.labelled_logits import causal_lm_loss, predicting_positions


@dataclass
class LatentOutput(ModelOutput):
    """The loss, and CODI's three terms (unweighted, detached) where it has them."""

    loss: torch.Tensor | None = None
    student_ce: torch.Tensor | None = None
    distill: torch.Tensor | None = None
    teacher_ce: torch.Tensor | None = None


def labelled_cross_entropy(lm: Any, hidden: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The mean cross entropy of ``labels`` from the last hidden states ``(B, T, H)``, logits at labelled positions."""
    positions = predicting_positions(labels)  # (B, T)
    logits = lm.get_output_embeddings()(hidden[positions])  # (N, V)
    return causal_lm_loss(logits, labels, positions)


def coconut_loss(
    lm: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    position_ids: torch.Tensor,
    labels: torch.Tensor,
    latent_id: int,
    **unused: Any,
) -> LatentOutput:
    hidden, _, _ = latent_hidden_states(lm, input_ids, attention_mask, position_ids, latent_id)
    return LatentOutput(loss=labelled_cross_entropy(lm, hidden, labels))


def _selected(states: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """``(B, H)``: each row's state at its position."""
    return states[torch.arange(states.shape[0], device=states.device), positions.to(states.device)]


def codi_loss(
    lm: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    position_ids: torch.Tensor,
    labels: torch.Tensor,
    answer_positions: torch.Tensor,
    teacher_input_ids: torch.Tensor,
    teacher_attention_mask: torch.Tensor,
    teacher_labels: torch.Tensor,
    teacher_answer_positions: torch.Tensor,
    latent_id: int,
    schedule: CODI,
    **unused: Any,
) -> LatentOutput:
    teacher = lm.get_decoder()(
        input_ids=teacher_input_ids, attention_mask=teacher_attention_mask, output_hidden_states=True
    )
    teacher_ce = labelled_cross_entropy(lm, teacher.last_hidden_state, teacher_labels)
    hidden, layers, _ = latent_hidden_states(
        lm, input_ids, attention_mask, position_ids, latent_id, projection_of(lm), all_layers=True
    )
    student_ce = labelled_cross_entropy(lm, hidden, labels)
    # The last pass starts at the last latent column (or at 0 without latent slots): its states are indexed from there.
    first = hidden.shape[1] - layers[0].shape[1]
    distill_fn = (
        torch.nn.functional.smooth_l1_loss
        if schedule.distill_loss_type == "smooth_l1"
        else torch.nn.functional.mse_loss
    )
    distill = 0.0
    for student_layer, teacher_layer in zip(layers, teacher.hidden_states):
        target = _selected(teacher_layer, teacher_answer_positions).detach()  # (B, H)
        term = distill_fn(_selected(student_layer, answer_positions - first), target)
        if schedule.distill_loss_div_std:
            term = term / target.std() ** (2 if schedule.distill_loss_type == "l2" else 1)
        distill = distill + term
    distill = distill / len(layers)
    loss = student_ce + schedule.distill_loss_factor * distill + schedule.ref_loss_factor * teacher_ce
    return LatentOutput(
        loss=loss, student_ce=student_ce.detach(), distill=distill.detach(), teacher_ce=teacher_ce.detach()
    )


def latent_loss_for(schedule: LatentSchedule, latent_id: int) -> Callable[..., LatentOutput]:
    """The loss :func:`~hf_icot.methods.latent_forward.enable_latent_forward` computes for ``schedule``."""
    if isinstance(schedule, CODI):
        return lambda lm, **batch: codi_loss(lm, latent_id=latent_id, schedule=schedule, **batch)
    return lambda lm, **batch: coconut_loss(lm, latent_id=latent_id, **batch)
