"""Best-epoch selection as the stepwise reference does it: validation generation accuracy after every epoch, the best
epoch kept (the "best" forgotten while any CoT remains), test evaluated at each new best, the best model restored
at the end of training so that it is the run's model.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from transformers import TrainerCallback

from hf_icot.runs.runtime import log_from_callback


def new_best_epochs(records: Sequence[tuple[float, bool]]) -> list[bool]:
    """For each epoch ``(validation accuracy, whether CoT tokens remained during it)``, whether it became the best.

    The reference's rule (train.py): the best accuracy is reset to -inf by every batch that still had CoT, so an epoch
    with CoT left is always the new best; once all CoT is gone an epoch must beat the best strictly. The selected
    epoch is the last one marked.
    """
    best, marks = -math.inf, []
    for accuracy, cot_remained in records:
        if cot_remained:
            best = -math.inf
        marks.append(accuracy > best)
        if accuracy > best:
            best = accuracy
    return marks


class BestEpochCallback(TrainerCallback):
    """Per-epoch validation generation accuracy and best-epoch selection for an :class:`ICoTTrainer`.

    Args:
        trainer: the trainer (its ``evaluate_generation`` evaluates; its model is saved and restored).
        validation: the examples selection is measured on.
        test: examples evaluated whenever an epoch becomes the best (as the reference logs them), or None.
        mode: the evaluation mode measured (:func:`hf_icot.evaluation.prompts.parse_mode`).

    The best weights are kept in CPU memory (one copy of the model) and loaded back at the end of training.

    Raises:
        ValueError: an FSDP or DeepSpeed run, whose sharded weights one process cannot copy.
    """

    def __init__(self, trainer: Any, validation: Any, test: Any = None, mode: str = "explicit") -> None:
        from hf_icot.evaluation.prompts import parse_mode

        parse_mode(mode)
        if trainer.is_fsdp_enabled or trainer.is_deepspeed_enabled:
            raise ValueError("select_best_epoch keeps the best weights in memory; run it without FSDP or DeepSpeed.")
        self.trainer, self.validation, self.test, self.mode = trainer, validation, test, mode
        self.epochs: list[dict[str, Any]] = []
        self._best_state: dict[str, Any] | None = None
        self._epoch_start = 0

    @property
    def best_epoch(self) -> int | None:
        """The selected epoch (0-based), None before the first epoch ends."""
        marks = new_best_epochs([(row["validation"], row["cot_remained"]) for row in self.epochs])
        return max((i for i, marked in enumerate(marks) if marked), default=None)

    def _accuracy(self, split: Any) -> float:
        return self.trainer.evaluate_generation(split, [self.mode], metric_key_prefix="")[f"{self.mode}/answer_em"]

    def on_epoch_end(self, args, state, control, **kwargs):
        schedule = self.trainer.schedule
        # CoT remained if the epoch's first step did not remove everything (removal only grows).
        cot_remained = not math.isinf(schedule.removed_count(self._epoch_start))
        self._epoch_start = state.global_step
        row = {"epoch": len(self.epochs), "cot_remained": cot_remained, "validation": self._accuracy(self.validation)}
        row["test"] = None
        self.epochs.append(row)
        if self.best_epoch == row["epoch"]:
            if self.test is not None:
                row["test"] = self._accuracy(self.test)
            model = self.trainer.accelerator.unwrap_model(self.trainer.model)
            self._best_state = {
                name: value.detach().to("cpu", copy=True) for name, value in model.state_dict().items()
            }
        log_from_callback(
            self.trainer,
            {f"selection/validation/{self.mode}/answer_em": row["validation"], "selection/epoch": row["epoch"]},
        )
        return control

    def on_train_end(self, args, state, control, **kwargs):
        if self._best_state is not None:
            model = self.trainer.accelerator.unwrap_model(self.trainer.model)
            model.load_state_dict(self._best_state)
        return control

    def summary(self) -> dict[str, Any]:
        """``mode``, ``best_epoch`` and ``epochs`` (``epoch``, ``cot_remained``, ``validation``, ``test``) for the card."""
        return {"mode": self.mode, "best_epoch": self.best_epoch, "epochs": [dict(row) for row in self.epochs]}

    def flat_metrics(self) -> dict[str, float]:
        """The table as flat ``selection/...`` keys for ``eval_results.json``."""
        out: dict[str, float] = {"selection/best_epoch": float(self.best_epoch if self.best_epoch is not None else -1)}
        for row in self.epochs:
            prefix = f"selection/epoch_{row['epoch']}"
            out[f"{prefix}/validation_answer_em"] = row["validation"]
            out[f"{prefix}/cot_remained"] = float(row["cot_remained"])
            if row["test"] is not None:
                out[f"{prefix}/test_answer_em"] = row["test"]
        return out


def selection_of(metrics: Mapping[str, float]) -> int | None:
    """The selected epoch recorded in flat metrics (:meth:`BestEpochCallback.flat_metrics`), or None."""
    value = metrics.get("selection/best_epoch")
    return None if value is None or value < 0 else int(value)
