"""Counted removal: a growing number of CoT units goes from one side — paced by the clock (:class:`Stepwise`, the
stepwise-ICoT reference) or by the model (:class:`hf_icot.curriculum.adaptive.AdaptiveStepwise`).

:class:`CountedRemoval` holds what both paces share, declared once: the fields (start count, removal smoothing, the
remove-all threshold, optimizer resets, the longest CoT), their validation, the per-example truncations, the stages,
the optimizer resets and the words for the model card. A pace only says how many units are scheduled at a step
(:meth:`CountedRemoval.scheduled`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from hf_icot.cot import TruncationSpec
from hf_icot.curriculum.base import (
    Schedule,
    _spec,
    check_at_least,
    check_positive,
    example_uniforms,
    option,
)


def smoothing_offset_probabilities(removal_smoothing_lambda: float, size: int = 100) -> np.ndarray:
    """P(offset = o) of removal smoothing: ``(1 - e^-λ) e^(-λ o)`` for ``o < size - 1``, the rest on ``size - 1``."""
    if math.isinf(removal_smoothing_lambda):
        probabilities = np.zeros(size)
        probabilities[0] = 1.0
        return probabilities
    offsets = np.arange(size, dtype=np.float64)
    probabilities = (1.0 - math.exp(-removal_smoothing_lambda)) * np.exp(-removal_smoothing_lambda * offsets)
    probabilities[-1] = 1.0 - probabilities[:-1].sum()
    return probabilities


def smoothed_removal_specs(
    unit: str, side: str, fill: str, scheduled: int, cdf: np.ndarray, seed: int, step: int, example_ids: Sequence[int]
) -> list[TruncationSpec]:
    """Each example removes ``scheduled`` units plus its removal-smoothing offset, drawn from ``cdf`` (the cumulative
    :func:`smoothing_offset_probabilities`) with the uniforms of ``(seed, step, example id)``."""
    offsets = np.searchsorted(cdf, example_uniforms(seed, step, example_ids), side="right")
    offsets = np.minimum(offsets, len(cdf) - 1)
    return [_spec(unit, side, scheduled + int(o), fill) for o in offsets]


@dataclass
class CountedRemoval(Schedule):
    """Removes ``scheduled(step)`` CoT units from one side, each example ``scheduled`` plus its removal-smoothing
    offset in training; the whole CoT goes once the scheduled count reaches ``remove_all_when_remove_beyond`` or the
    longest CoT of the training data (``max_cot_tokens``, bound by the trainer; None: unknown), which ends the
    curriculum: from there the schedule reports "all" (``removed_count`` inf), stays in its last stage and asks for no
    more optimizer resets. What each example sees is the same as without the bound."""

    remove_start_from: int = option(0, "Units removed from the first step on.")
    removal_smoothing_lambda: float = option(
        math.inf, "λ of the per-example extra removal offset, P(o) ∝ e^(-λo); inf turns it off."
    )
    remove_all_when_remove_beyond: float = option(
        math.inf,
        "Once this many units are scheduled, remove the whole CoT (inf: only once the count reaches the longest CoT "
        "of the training data, where the curriculum ends in any case).",
    )
    reset_optimizer: bool = option(False, "Reset the Adam state each time one more unit is removed.")
    max_cot_tokens: int | None = None
    _cdf: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.removal_smoothing_lambda = float(self.removal_smoothing_lambda)
        self.remove_all_when_remove_beyond = float(self.remove_all_when_remove_beyond)
        check_at_least("remove_start_from", self.remove_start_from, 0)
        check_positive("removal_smoothing_lambda", self.removal_smoothing_lambda, " (inf: off)")
        check_at_least("remove_all_when_remove_beyond", self.remove_all_when_remove_beyond, 0)
        check_at_least("max_cot_tokens", self.max_cot_tokens, 0)
        self._cdf = np.cumsum(smoothing_offset_probabilities(self.removal_smoothing_lambda))

    # -- what a pace says -----------------------------------------------------------------------------------------

    def scheduled(self, step: int) -> int:
        """The count scheduled at ``step``, before the remove-all threshold is applied."""
        raise NotImplementedError

    def smooths_at(self, step: int) -> bool:
        """Whether training examples draw removal-smoothing offsets at ``step``."""
        return True

    def pace_description(self, step: int) -> str:
        """What decides the next removal, in words appended to the stage's (empty: the clock)."""
        return ""

    @property
    def longest_cot(self) -> int | None:
        """The longest CoT of the training data in this schedule's unit (None: unknown)."""
        return self.max_cot_tokens

    # -- what follows from it ------------------------------------------------------------------------------------

    @property
    def _all_removed_from(self) -> float:
        """The scheduled count from which the whole CoT goes: the threshold, or the longest CoT if that is lower."""
        longest = math.inf if self.longest_cot is None else max(self.longest_cot, self.remove_start_from)
        return min(self.remove_all_when_remove_beyond, longest)

    def removes_all(self, step: int) -> bool:
        return self.scheduled(step) >= self._all_removed_from

    def removed_count(self, step: int) -> float:
        return math.inf if self.removes_all(step) else float(self.scheduled(step))

    def stage(self, step: int) -> int:
        if self.removes_all(step):
            return max(math.ceil(self._all_removed_from), self.remove_start_from) - self.remove_start_from
        return self.scheduled(step) - self.remove_start_from

    def resets_optimizer_at(self, step: int) -> bool:
        if not self.reset_optimizer:
            return False
        previous = self.scheduled(step - 1) if step > 0 else self.remove_start_from
        return self.scheduled(step) > previous and previous < self._all_removed_from

    def specs(self, step, example_ids, n_tokens=None, n_steps=None, training=True):
        if self.removes_all(step):
            return [_spec(self.unit, "all", 0, self.fill)] * len(example_ids)
        scheduled = self.scheduled(step)
        if not training or math.isinf(self.removal_smoothing_lambda) or not self.smooths_at(step):
            return [_spec(self.unit, self.side, scheduled, self.fill)] * len(example_ids)
        return smoothed_removal_specs(
            self.unit, self.side, self.fill, scheduled, self._cdf, self.seed, step, example_ids
        )

    def describe_stage(self, step: int) -> str:
        if self.removes_all(step):
            return f"all CoT {self.unit}s"
        smoothing = (
            "" if math.isinf(self.removal_smoothing_lambda) else f" (+ smoothing λ={self.removal_smoothing_lambda})"
        )
        return (
            f"first {self.scheduled(step)} CoT {self.unit}s from the {self.side}{smoothing}"
            + self.pace_description(step)
        )


@dataclass
class Stepwise(CountedRemoval):
    """The stepwise-ICoT reference curriculum: remove CoT tokens one at a time, linearly in optimizer steps.

    With ``P = round(steps_per_epoch / remove_per_epoch)`` and ``s0 = pretrain_epochs * steps_per_epoch``, the
    scheduled count is ``remove_start_from`` before ``s0`` and ``remove_start_from + (s - s0) // P`` from then on
    (``P = 0``: ``remove_start_from + s - s0 + 1``, one more token every step); see :class:`CountedRemoval` for the
    rest. No smoothing offsets during the pretraining epochs, as in the reference.

    One difference from the reference script: it kept incrementing during pretraining when ``P = 0``; here
    pretraining always keeps ``remove_start_from``.
    """

    name: ClassVar[str] = "stepwise"
    remove_per_epoch: float = option(8.0, "CoT tokens removed per epoch (paced one token at a time).")
    pretrain_epochs: int = option(0, "Epochs with the full CoT before removal.")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive("remove_per_epoch", self.remove_per_epoch)
        check_at_least("pretrain_epochs", self.pretrain_epochs, 0)

    @property
    def steps_per_removed_token(self) -> int:
        """``P``: optimizer steps between two increments (0: every step)."""
        if self.steps_per_epoch is None:
            raise ValueError("Stepwise needs steps_per_epoch to pace removal; call bind() first.")
        return int(round(self.steps_per_epoch / self.remove_per_epoch))

    def scheduled(self, step: int) -> int:
        period = self.steps_per_removed_token
        first = self.pretrain_epochs * self.steps_per_epoch
        if step < first:
            return self.remove_start_from
        return self.remove_start_from + ((step - first) // period if period > 0 else step - first + 1)

    def smooths_at(self, step: int) -> bool:
        # During pretraining the reference removes exactly remove_start_from tokens (`to_remove.fill_`): no offsets.
        return step >= self.pretrain_epochs * self.steps_per_epoch
