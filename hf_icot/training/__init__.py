"""Training: the configuration, the trainer and its loss, the curriculum's state, and what a run leaves.

* :mod:`~hf_icot.training.config` — :class:`ICoTConfig` (``TrainingArguments`` + the run folder's flags + the
  curriculum's options, derived from the schedules), :func:`schedule_from_config` and :func:`method_from_config`;
* :mod:`~hf_icot.training.schedule_arguments` — those options as typed fields, generated from the schedules' and the
  methods' declarations by :mod:`~hf_icot.training.declared_options` (``python -m
  hf_icot.training.declared_options --write``);
* :mod:`~hf_icot.training.trainer` — :class:`ICoTTrainer`, the ``Trainer`` with a curriculum; its ``compute_loss``
  is the one place a step's loss is computed, calling the speed levers of :mod:`hf_icot.levers` as helpers;
* :mod:`~hf_icot.training.adaptive_pace` — the trainer's half of the adaptive pace (the answer hits of each step);
* :mod:`~hf_icot.training.curriculum_state` — the curriculum's state carried through checkpoints;
* :mod:`~hf_icot.training.generation_eval` — generation accuracy during training, with an optional stop at a bar;
* :mod:`~hf_icot.training.outputs` — per-stage and final evaluation, saving, card, push;
* :mod:`~hf_icot.training.selection` — the reference's best-epoch selection.

Below it sit the speed levers (:mod:`hf_icot.levers`) and what keeps any run safe (:mod:`hf_icot.runs`); above it,
a recipe's command line and run (:mod:`hf_icot.command_line`).

The main classes are importable from here (loaded on first use: importing this package loads no torch).
"""

from hf_icot._lazy import lazy_exports

_EXPORTS = {
    "ICoTConfig": "hf_icot.training.config",
    "RunArguments": "hf_icot.training.config",
    "schedule_from_config": "hf_icot.training.config",
    "method_from_config": "hf_icot.training.config",
    "ICoTTrainer": "hf_icot.training.trainer",
}
__getattr__ = lazy_exports(__name__, _EXPORTS)
__all__ = list(_EXPORTS)
