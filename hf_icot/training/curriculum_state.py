"""The curriculum's state in a checkpoint: :class:`ICoTStateCallback` writes the schedule, the method's options, the
optimizer-reset bookkeeping, the pace's decisions and the run's identity into ``trainer_state.json`` (an
``ExportableState`` callback), and :func:`restore_curriculum_state` reads them back on resume, refusing a checkpoint
written with another schedule, method option, seed or batch size — so a resumed run continues the same curriculum.
"""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback
from transformers.trainer_callback import ExportableState

from hf_icot.curriculum import schedule_from_dict
from hf_icot.runs.run_folder import resume_mismatch, run_identity


class ICoTStateCallback(TrainerCallback, ExportableState):
    """Carries the curriculum state of an :class:`~hf_icot.training.trainer.ICoTTrainer` through checkpoints."""

    def __init__(self, trainer: Any) -> None:
        self.trainer = trainer

    def state(self) -> dict[str, Any]:
        trainer = self.trainer
        return {
            "args": {},
            "attributes": {
                "schedule": trainer.schedule.to_dict(),
                "method": trainer.method.to_dict(),
                "previous_step_without_cot": trainer._previous_step_without_cot,
                "optimizer_resets": trainer._optimizer_resets,
                "pace": trainer.schedule.state_dict(),
                "run": run_identity(trainer.args),
            },
        }

    def on_train_begin(self, args, state, control, **kwargs):
        saved = (state.stateful_callbacks or {}).get(type(self).__name__)
        if saved:
            restore_curriculum_state(self.trainer, saved["attributes"], state.train_batch_size)

    def on_step_end(self, args, state, control, **kwargs):
        trainer = self.trainer
        if trainer.schedule.needs_answer_accuracy:  # before the Trainer saves: the checkpoint holds the decision
            step = state.global_step - 1
            device = trainer.args.device
            without_cot = trainer.answer_pace.observe(step, trainer._step_without_cot, trainer.accelerator, device)
            if without_cot is not None:  # whether the optimizer reset after this step is skipped, on every rank
                trainer._previous_step_without_cot = without_cot


def _difference(what: str, stored: dict[str, Any], current: dict[str, Any]) -> str | None:
    changed = [key for key in {**stored, **current} if stored.get(key) != current.get(key)]
    if not changed:
        return None
    was = ", ".join(f"{key} {stored.get(key)!r}" for key in changed)
    now = ", ".join(f"{key} {current.get(key)!r}" for key in changed)
    return f"the checkpoint was trained with the {what} with {was}, but this run has {now}"


def restore_curriculum_state(trainer: Any, saved: dict[str, Any], train_batch_size: int | None = None) -> None:
    """Continue ``trainer``'s curriculum from the state :class:`ICoTStateCallback` saved.

    Raises:
        ValueError: a checkpoint of another schedule, method option, seed or batch size (one sentence naming them).
    """
    mismatch = resume_mismatch(saved, train_batch_size, trainer.args)
    if mismatch is not None:
        raise ValueError(mismatch)
    stored = schedule_from_dict(saved["schedule"]).to_dict()
    difference = _difference(f"schedule {stored['name']!r}", stored, trainer.schedule.to_dict())
    if difference is None and "method" in saved:  # checkpoints before 2026-12-07 carry no method options
        # An option added after the checkpoint was written is at its default there (what the run trained with).
        stored_method = {**trainer.method.config_class().to_dict(), **saved["method"]}
        difference = _difference(f"method {trainer.method.name!r}", stored_method, trainer.method.to_dict())
    if difference is not None:
        raise ValueError(f"{difference}; resume with the same curriculum, batch size and seed, or start a new run.")
    trainer._previous_step_without_cot = bool(saved["previous_step_without_cot"])
    trainer._optimizer_resets = int(saved["optimizer_resets"])
    trainer.schedule.load_state_dict(saved.get("pace", {}))
