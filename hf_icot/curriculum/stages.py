"""Curricula in whole-step stages of a fixed length: :class:`Staged` (left / right / inductive, the semiautomata study)
and :class:`LogICoT` (tree levels padded stage by stage, the Log-ICoT study), on one stage clock
(:class:`StageClock`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from hf_icot.cot import TruncationSpec
from hf_icot.curriculum.base import Schedule, _spec, check_at_least, check_positive, layout_option, option
from hf_icot.curriculum.layout import check_choice

STAGE_UNITS = ("epochs", "steps")


@dataclass
class StageClock(Schedule):
    """Stages of ``stage_length`` ``stage_unit`` each, optionally ending with a stage that drops the whole CoT."""

    units: ClassVar[tuple[str, ...]] = ("step",)
    unit: str = layout_option("unit", "step")
    stage_length: float = option(1.0, "Length of a stage in stage_unit.")
    stage_unit: str = option("epochs", "epochs or steps.", choices=STAGE_UNITS)
    final_remove_all: bool = option(False, "Add a final stage that drops the whole CoT (staged needs num_stages).")
    first_stage_length: float | None = option(
        None, "Length of stage 0 (nothing removed yet) in stage_unit, for a CoT that takes longer to learn than a "
        "stage lasts; unset: stage_length."
    )  # fmt: skip

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice("stage_unit", self.stage_unit, STAGE_UNITS)
        check_positive("stage_length", self.stage_length)
        if self.first_stage_length is not None:
            check_positive("first_stage_length", self.first_stage_length)

    def _steps(self, length: float) -> int:
        if self.stage_unit == "steps":
            return int(length)
        if self.steps_per_epoch is None:
            raise ValueError("this schedule counts stages in epochs, so it needs steps_per_epoch; call bind() first.")
        return max(1, round(length * self.steps_per_epoch))

    def clock_stage(self, step: int) -> int:
        """The stage ``step`` falls in by the clock alone (unbounded)."""
        stage = self._steps(self.stage_length)
        if self.first_stage_length is None:
            return step // stage
        first = self._steps(self.first_stage_length)
        return 0 if step < first else 1 + (step - first) // stage


@dataclass
class Staged(StageClock):
    """Whole-step stages, each ``stage_length`` ``stage_unit`` long.

    ``side`` ``left``/``right``: stage i removes the first/last ``i * steps_per_stage`` steps; ``inductive``: stage i
    keeps every ``(1 + i * steps_per_stage)``-th step (stride curriculum). With ``num_stages``, the last stage lasts to
    the end of training, or, with ``final_remove_all``, is followed by one stage removing the whole CoT. Without it
    stages go on, saturating at "all". ``max_cot_steps`` (bound from the training data; None: unknown) ends the stages
    where the data ends: the first stage that leaves no step of the longest CoT removes "all" and lasts to the end of
    training.
    """

    name: ClassVar[str] = "staged"
    sides: ClassVar[tuple[str, ...]] = ("left", "right", "inductive")
    steps_per_stage: int = option(1, "CoT steps removed per stage.")
    num_stages: int | None = option(None, "Number of stages (the last one lasts); unset: unbounded.")
    max_cot_steps: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        check_at_least("max_cot_steps", self.max_cot_steps, 0)
        check_at_least("steps_per_stage", self.steps_per_stage, 1)
        check_at_least("num_stages", self.num_stages, 1, " (or None: unbounded)")
        if self.final_remove_all and self.num_stages is None:
            raise ValueError("final_remove_all needs num_stages, the number of stages before the final one.")

    def _empties_longest_cot(self, index: int) -> bool:
        # left/right k >= n and a stride s > n (1 + index * steps_per_stage) both leave no step of an n-step CoT
        return self.max_cot_steps is not None and index * self.steps_per_stage >= self.max_cot_steps

    def stage(self, step: int) -> int:
        index = self.clock_stage(step)
        if self.num_stages is not None:
            index = min(index, self.num_stages if self.final_remove_all else self.num_stages - 1)
        if self.max_cot_steps is not None:
            index = min(index, -(-self.max_cot_steps // self.steps_per_stage))
        return index

    def _stage_spec(self, index: int) -> TruncationSpec:
        if (self.final_remove_all and index == self.num_stages) or self._empties_longest_cot(index):
            return _spec("step", "all", 0, self.fill)
        if self.side == "inductive":
            return _spec("step", "stride", 1 + index * self.steps_per_stage, self.fill)
        return _spec("step", self.side, index * self.steps_per_stage, self.fill)

    def removed_count(self, step: int) -> float:
        spec = self._stage_spec(self.stage(step))
        return math.inf if spec.which == "all" else float(spec.count if spec.which != "stride" else spec.count - 1)

    def specs(self, step, example_ids, n_tokens=None, n_steps=None, training=True):
        return [self._stage_spec(self.stage(step))] * len(example_ids)


@dataclass
class LogICoT(StageClock):
    """Log-ICoT: stage t = 1, 2, … pads the steps of the t - 1 lowest tree levels (``which="levels"``).

    With ``L = num_levels`` (the deepest ``cot_level``; bound from the data when None), t runs 1..L + 1 — the last
    stage pads every step — optionally followed by a stage that drops the whole CoT (``final_remove_all``).
    """

    name: ClassVar[str] = "log_icot"
    sides: ClassVar[tuple[str, ...]] = ("left",)  # levels go from the input up
    fill: str = layout_option("fill", "pad")
    num_levels: int | None = option(None, "Tree depth; unset: the deepest cot_level of the training data.")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_at_least("num_levels", self.num_levels, 1)

    def stage(self, step: int) -> int:
        if self.num_levels is None:
            raise ValueError("LogICoT needs num_levels (the deepest cot_level of the data); set it or call bind().")
        return min(self.clock_stage(step), self.num_levels + (1 if self.final_remove_all else 0))

    def removed_count(self, step: int) -> float:
        index = self.stage(step)
        return math.inf if index > self.num_levels else float(index)

    def specs(self, step, example_ids, n_tokens=None, n_steps=None, training=True):
        index = self.stage(step)
        if index > self.num_levels:
            spec = _spec("step", "all", 0, "drop")
        else:
            spec = _spec("step", "levels", index + 1, self.fill)
        return [spec] * len(example_ids)
