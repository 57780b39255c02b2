"""Evaluation: greedy generation, exact match per split and mode, teacher-forced accuracy.

* :mod:`~hf_icot.evaluation.prompts` — the modes (``implicit``, ``explicit``, ``reference``, ``hint=k``) and how each
  asks a question (no torch);
* :mod:`~hf_icot.evaluation.generation` — batched greedy generation through ``model.generate`` for any causal LM;
* :mod:`~hf_icot.evaluation.exact_match` — :func:`evaluate_generation` and the per-split report;
* :mod:`~hf_icot.evaluation.teacher_forced` — accuracy of the argmax at the answer positions (one forward pass);
* :mod:`~hf_icot.evaluation.metrics` — the exact-match metric shipped as a local ``evaluate`` module.

The main functions are importable from here (loaded on first use).
"""

from hf_icot._lazy import lazy_exports

_EXPORTS = {
    "parse_mode": "hf_icot.evaluation.prompts",
    "plan_generation": "hf_icot.evaluation.prompts",
    "evaluate_generation": "hf_icot.evaluation.exact_match",
    "evaluate_generation_splits": "hf_icot.evaluation.exact_match",
    "reportable_metrics": "hf_icot.evaluation.exact_match",
    "flatten_split_metrics": "hf_icot.evaluation.exact_match",
    "generate_batched": "hf_icot.evaluation.generation",
    "answer_accuracy": "hf_icot.evaluation.teacher_forced",
    "make_compute_metrics": "hf_icot.evaluation.teacher_forced",
}
__getattr__ = lazy_exports(__name__, _EXPORTS)
__all__ = list(_EXPORTS)
