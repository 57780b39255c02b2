"""Learning-dynamics measurements as ``TrainerCallback``s, usable on any ICoT run.

* :mod:`~hf_icot.diagnostics.answer_accuracy` — teacher-forced answer accuracy of an ICoT run
  (``AnswerAccuracyCallback``).
* ``GenerationEvalCallback`` (re-exported from :mod:`hf_icot.training.generation_eval`, where the trainer builds it)
  — generation exact match against training examples seen, with an optional stop at a bar
  (``generation_eval_steps`` in an ICoT config turns it on).
* The "marginals before conditionals" measurements, on tokenized examples (:mod:`~hf_icot.diagnostics.token_batches`):
  :func:`z_shuffle_gap` (Δz), :func:`candidate_loss` and :func:`group_accuracy`, :func:`detect_transition` (τ;
  :class:`StopAfterTransition` and :class:`StopBelowLoss` end a run after it), :func:`selector_attention`,
  :func:`head_ablation`, :func:`hessian_extremes` and :func:`hessian_curvature_along`;
  all of them during training through :class:`LearningDynamicsCallback`; :class:`HeadAblationCallback` trains with
  chosen heads removed (:mod:`~hf_icot.diagnostics.training_ablation`).
* :mod:`~hf_icot.diagnostics.probes` — linear probes of a labelled quantity in each layer's hidden states
  (:func:`linear_probe_accuracy`, :func:`probe_accuracy_map`; :func:`state_probe_map` for a semiautomaton's state).
"""

from hf_icot.diagnostics.ablation import ablate_head, attention_output_projections, head_ablation
from hf_icot.diagnostics.attention import selector_attention
from hf_icot.diagnostics.candidates import CandidateLoss, GroupAccuracy, candidate_loss, group_accuracy
from hf_icot.diagnostics.hessian import (
    HessianExtremes,
    curvature_along,
    extreme_eigenvalues,
    hessian_curvature_along,
    hessian_extremes,
)
from hf_icot.diagnostics.learning_dynamics import MEASUREMENTS, LearningDynamicsCallback
from hf_icot.diagnostics.probes import hidden_states_at, linear_probe_accuracy, probe_accuracy_map, state_probe_map
from hf_icot.diagnostics.training_ablation import HeadAblationCallback, parse_heads
from hf_icot.diagnostics.transition import StopAfterTransition, StopBelowLoss, detect_transition, transition_step
from hf_icot.diagnostics.z_shuffle import ZShuffleGap, derangement, z_shuffle_gap
from hf_icot.training.generation_eval import GenerationEvalCallback

__all__ = [
    "MEASUREMENTS",
    "CandidateLoss",
    "GenerationEvalCallback",
    "GroupAccuracy",
    "HeadAblationCallback",
    "HessianExtremes",
    "LearningDynamicsCallback",
    "StopAfterTransition",
    "StopBelowLoss",
    "ZShuffleGap",
    "ablate_head",
    "attention_output_projections",
    "candidate_loss",
    "curvature_along",
    "derangement",
    "detect_transition",
    "extreme_eigenvalues",
    "group_accuracy",
    "hidden_states_at",
    "head_ablation",
    "hessian_curvature_along",
    "hessian_extremes",
    "linear_probe_accuracy",
    "parse_heads",
    "probe_accuracy_map",
    "selector_attention",
    "state_probe_map",
    "transition_step",
    "z_shuffle_gap",
]
