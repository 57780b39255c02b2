"""Training: configuration and command line, the trainer and what it leaves, run folders, a recipe's set-up.

* :mod:`~hf_icot.training.config` — :class:`ICoTConfig` (``TrainingArguments`` + the run folder's flags + the
  curriculum's options, derived from the schedules) and :func:`schedule_from_config`;
* :mod:`~hf_icot.training.schedule_arguments` — those options as typed fields, generated from the schedules' and the
  methods' declarations by :mod:`~hf_icot.training.declared_options` (``python -m
  hf_icot.training.declared_options --write``);
* :mod:`~hf_icot.training.command_line` — ``--config file.yaml`` plus flag overrides (:func:`parse_config`);
* :mod:`~hf_icot.training.arguments` — a recipe's data and model arguments;
* :mod:`~hf_icot.training.trainer` — :class:`ICoTTrainer`, the ``Trainer`` with a curriculum;
* :mod:`~hf_icot.training.adaptive_pace` — the trainer's half of the adaptive pace;
* :mod:`~hf_icot.training.labelled_loss` — the loss with logits only where a label is (``labelled_logits_only``);
* :mod:`~hf_icot.training.causal_mask`, :mod:`~hf_icot.training.fused_gelu`, :mod:`~hf_icot.training.dropout_ahead`
  — the step's other levers: no needless attention mask, GPT-2's GELU in one kernel (``fused_gelu``), a CPU
  forward's dropout masks drawn on a helper thread (``draw_dropout_ahead``, off unless asked for);
* :mod:`~hf_icot.training.checkpoints` — kill-safe checkpoints, resume and teardown for any ``Trainer``;
* :mod:`~hf_icot.training.run_folder` — which checkpoints are complete, whether a run would write over another;
* :mod:`~hf_icot.training.outputs` — per-stage and final evaluation, saving, card, push;
* :mod:`~hf_icot.training.selection` — the reference's best-epoch selection;
* :mod:`~hf_icot.training.runtime` — CPU threads under ``accelerate launch``, logging from callbacks;
* :mod:`~hf_icot.training.recipe` — :class:`RecipeRun`, the steps every recipe repeats.

The main classes are importable from here (loaded on first use: importing this package loads no torch).
"""

from hf_icot._lazy import lazy_exports

_EXPORTS = {
    "ICoTConfig": "hf_icot.training.config",
    "RunArguments": "hf_icot.training.config",
    "schedule_from_config": "hf_icot.training.config",
    "parse_config": "hf_icot.training.command_line",
    "ScriptArguments": "hf_icot.training.arguments",
    "ModelArguments": "hf_icot.training.arguments",
    "parse_recipe_args": "hf_icot.training.arguments",
    "ICoTTrainer": "hf_icot.training.trainer",
    "CheckpointedTrainer": "hf_icot.training.checkpoints",
    "RecipeRun": "hf_icot.training.recipe",
}
__getattr__ = lazy_exports(__name__, _EXPORTS)
__all__ = list(_EXPORTS)
