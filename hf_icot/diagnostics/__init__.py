"""Learning-dynamics measurements as ``TrainerCallback``s, usable on any ICoT run.

* :mod:`~hf_icot.diagnostics.answer_accuracy` — teacher-forced answer accuracy of an ICoT run
  (``AnswerAccuracyCallback``).
* ``GenerationEvalCallback`` (re-exported from :mod:`hf_icot.training.generation_eval`, where the trainer builds it)
  — generation exact match against training examples seen, with an optional stop at a bar
  (``generation_eval_steps`` in an ICoT config turns it on).
* The "marginals before conditionals" measurements, on tokenized examples (:mod:`~hf_icot.diagnostics.token_batches`):
  :func:`z_shuffle_gap` (Δz), :func:`candidate_loss` and :func:`group_accuracy`, :func:`crossing` (τ, :mod:`~hf_icot.diagnostics.tau`;
  :class:`StopAfterTransition` and :class:`StopBelowLoss` end a run after it), :func:`selector_attention`,
  :func:`head_ablation`, :func:`hessian_extremes` and :func:`hessian_curvature_along`;
  all of them during training through :class:`LearningDynamicsCallback`; :class:`HeadAblationCallback` trains with
  chosen heads removed (:mod:`~hf_icot.diagnostics.training_ablation`).
* :mod:`~hf_icot.diagnostics.probes` — linear probes of a labelled quantity in each layer's hidden states
  (:func:`linear_probe_accuracy`, :func:`probe_accuracy_map`; :func:`state_probe_map` for a semiautomaton's state).

Each name is imported from its module on first use, so ``hf_icot.diagnostics.tau`` loads no torch.
"""

from hf_icot._lazy import lazy_exports

_EXPORTS = {
    "ablate_head": "hf_icot.diagnostics.ablation",
    "attention_output_projections": "hf_icot.diagnostics.ablation",
    "head_ablation": "hf_icot.diagnostics.ablation",
    "selector_attention": "hf_icot.diagnostics.attention",
    "CandidateLoss": "hf_icot.diagnostics.candidates",
    "GroupAccuracy": "hf_icot.diagnostics.candidates",
    "candidate_loss": "hf_icot.diagnostics.candidates",
    "group_accuracy": "hf_icot.diagnostics.candidates",
    "HessianExtremes": "hf_icot.diagnostics.hessian",
    "curvature_along": "hf_icot.diagnostics.hessian",
    "extreme_eigenvalues": "hf_icot.diagnostics.hessian",
    "hessian_curvature_along": "hf_icot.diagnostics.hessian",
    "hessian_extremes": "hf_icot.diagnostics.hessian",
    "MEASUREMENTS": "hf_icot.diagnostics.learning_dynamics",
    "LearningDynamicsCallback": "hf_icot.diagnostics.learning_dynamics",
    "hidden_states_at": "hf_icot.diagnostics.probes",
    "linear_probe_accuracy": "hf_icot.diagnostics.probes",
    "probe_accuracy_map": "hf_icot.diagnostics.probes",
    "state_probe_map": "hf_icot.diagnostics.probes",
    "HeadAblationCallback": "hf_icot.diagnostics.training_ablation",
    "parse_heads": "hf_icot.diagnostics.training_ablation",
    "StopAfterTransition": "hf_icot.diagnostics.transition",
    "StopBelowLoss": "hf_icot.diagnostics.transition",
    "transition_step": "hf_icot.diagnostics.tau",
    "ZShuffleGap": "hf_icot.diagnostics.z_shuffle",
    "derangement": "hf_icot.diagnostics.z_shuffle",
    "z_shuffle_gap": "hf_icot.diagnostics.z_shuffle",
    "GenerationEvalCallback": "hf_icot.training.generation_eval",
    "crossing": "hf_icot.diagnostics.tau",
}
__getattr__ = lazy_exports(__name__, _EXPORTS)
__all__ = sorted(_EXPORTS)
