"""Evaluation: greedy generation, exact match per split and mode, teacher-forced accuracy.

* :mod:`~hf_icot.evaluation.prompts` — the modes (``implicit``, ``explicit``, ``reference``, ``hint=k``; names read
  by :func:`parse_mode` alone) and how each asks a question (no torch);
* :mod:`~hf_icot.evaluation.generation` — batched greedy generation through ``model.generate`` for any causal LM;
* :mod:`~hf_icot.evaluation.generation_accuracy` — :func:`evaluate_generation`, the one generation-accuracy function
  (one split or every split of a ``DatasetDict``; the trainer's ``evaluate_generation`` and its callback call it);
* :mod:`~hf_icot.evaluation.teacher_forced` — accuracy of the argmax at the answer positions (one forward pass);
* :mod:`~hf_icot.evaluation.metrics` — the exact-match metric shipped as a local ``evaluate`` module.

The main functions are importable from here (loaded on first use).
"""

from hf_icot._lazy import lazy_exports

_EXPORTS = {
    "parse_mode": "hf_icot.evaluation.prompts",
    "plan_generation": "hf_icot.evaluation.prompts",
    "evaluate_generation": "hf_icot.evaluation.generation_accuracy",
    "generate_in_mode": "hf_icot.evaluation.generation_accuracy",
    "reportable_metrics": "hf_icot.evaluation.generation_accuracy",
    "generate_batched": "hf_icot.evaluation.generation",
    "answer_accuracy": "hf_icot.evaluation.teacher_forced",
    "make_compute_metrics": "hf_icot.evaluation.teacher_forced",
}
__getattr__ = lazy_exports(__name__, _EXPORTS)
__all__ = list(_EXPORTS)
