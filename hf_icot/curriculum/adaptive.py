"""Adaptive pace: remove the next CoT unit once the model has absorbed the last removal.

:class:`AdaptiveStepwise` (schedule name ``adaptive``) is the stepwise curriculum with its clock replaced by a rule:
after every optimizer step it takes a training accuracy of all processes together, from the logits the step computed
anyway (no extra forward), and removes one more token (or step, per ``unit``) from the next step on when

* at least ``min_steps_per_removal`` steps were trained at the current count, and the mean accuracy of the last
  ``window`` of them is >= ``threshold``; or
* ``max_steps_per_removal`` steps were trained at the current count (None: no limit).

The accuracy (``metric``) is either

* ``answer`` — the teacher-forced argmax accuracy of the answer tokens (after ``####``). Blind to the kept CoT: when
the
  last kept CoT token spells the answer (a running parity's last partial parity is the parity), it stays at 1.0
  however wrong the model's own CoT would be; or
* ``sequence`` — the fraction of examples whose every labelled token (kept CoT, separators, answer, final ``<eos>``)
  is the teacher-forced argmax, so a kept CoT token the model cannot produce holds the next removal back.

Removal smoothing, ``remove_all_when_remove_beyond`` and optimizer resets work as in
:class:`hf_icot.curriculum.removal.Stepwise`. The decisions so far (:meth:`AdaptiveStepwise.state_dict`) ride in the
checkpoint, and the accuracy is summed over processes before the rule reads it, so a resumed run and every rank advance
at the same steps. The schedule is pure; the trainer's half, which measures the accuracy from each step's logits and
feeds :meth:`AdaptiveStepwise.observe`, is :class:`hf_icot.training.adaptive_pace.AnswerPace`.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from hf_icot.curriculum.base import check_at_least, option
from hf_icot.curriculum.removal import CountedRemoval

METRICS = ("answer", "sequence")


@dataclass
class AdaptiveStepwise(CountedRemoval):
    """Stepwise removal paced by the model: one more unit once the training accuracy holds (see the module).

    Attributes:
        threshold: in (0, 1]; the mean accuracy over ``window`` steps that allows the next removal.
        window: >= 1 steps, all at the current count (the window restarts at every removal).
        metric: ``"answer"`` or ``"sequence"`` (see the module): what the accuracy counts.
        min_steps_per_removal: >= 1; the fewest steps at one count.
        max_steps_per_removal: >= ``min_steps_per_removal``, or None; the most steps at one count.
        max_cot_steps: the longest CoT of the training data in steps (bound by the trainer), where a curriculum in
            steps ends; the other fields are :class:`CountedRemoval`'s.

    Step ``s``'s count is ``remove_start_from`` plus the number of removals decided before it; :meth:`observe` must be
    called once per step, in order.
    """

    name: ClassVar[str] = "adaptive"
    units: ClassVar[tuple[str, ...]] = ("token", "step")
    needs_answer_accuracy: ClassVar[bool] = True
    threshold: float = option(
        0.9,
        "Remove the next unit once the training accuracy (adaptive_metric, teacher-forced, all processes) averages "
        "at least this over adaptive_window steps; in (0, 1].",
        name="adaptive_threshold",
    )
    window: int = option(
        20, "Steps averaged, all at the current count (the window restarts at each removal).", name="adaptive_window"
    )
    metric: str = option(
        "answer",
        "What the threshold reads: answer (teacher-forced accuracy of the answer tokens) or sequence (the fraction of "
        "examples whose every labelled token, kept CoT included, is right).",
        name="adaptive_metric",
        choices=METRICS,
    )
    min_steps_per_removal: int = option(1, "Fewest optimizer steps at one count before the next removal.")
    max_steps_per_removal: int | None = option(
        None, "Remove the next unit after this many steps at one count whatever the accuracy."
    )
    max_cot_steps: int | None = None
    # The pace state: decided by training, not part of the curriculum's identity (to_dict leaves it out).
    removal_steps: list[int] = field(default_factory=list, init=False, compare=False)
    observed_steps: int = field(default=0, init=False, compare=False)
    recent_accuracies: list[float] = field(default_factory=list, init=False, compare=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.threshold = float(self.threshold)
        if not 0 < self.threshold <= 1:
            raise ValueError(f"adaptive threshold {self.threshold} is not allowed; it must be in (0, 1].")
        check_at_least("adaptive window", self.window, 1, " (steps)")
        if self.metric not in METRICS:
            raise ValueError(f"adaptive metric {self.metric!r} is unknown; allowed: {', '.join(METRICS)}.")
        check_at_least("min_steps_per_removal", self.min_steps_per_removal, 1)
        check_at_least("max_steps_per_removal", self.max_steps_per_removal, 1, " (or None: no limit)")
        if self.max_steps_per_removal is not None and self.min_steps_per_removal > self.max_steps_per_removal:
            raise ValueError(
                f"min_steps_per_removal {self.min_steps_per_removal} is above max_steps_per_removal "
                f"{self.max_steps_per_removal}; the minimum must be <= the maximum."
            )
        check_at_least("max_cot_steps", self.max_cot_steps, 0)

    # -- the pace ----------------------------------------------------------------------------------------------------

    def observe(self, step: int, accuracy: float | None) -> bool:
        """Record step ``step``'s accuracy (all processes together; None: the step had no token to score, which
        counts as a step but adds nothing to the window) and decide whether step ``step + 1`` removes one more.

        Raises:
            ValueError: ``step`` is not the step after the last one observed.
        """
        if step != self.observed_steps:
            raise ValueError(
                f"adaptive pace: step {step} observed, but step {self.observed_steps} is the next one; observe every "
                "step once, in order (a resumed run restores the pace with load_state_dict)."
            )
        self.observed_steps += 1
        if self.removes_all(step):
            return False
        if accuracy is not None:
            self.recent_accuracies = [*self.recent_accuracies, float(accuracy)][-self.window :]
        at_this_count = self.observed_steps - (self.removal_steps[-1] if self.removal_steps else 0)
        absorbed = len(self.recent_accuracies) == self.window and (
            sum(self.recent_accuracies) / self.window >= self.threshold
        )
        limit = self.max_steps_per_removal
        if at_this_count >= self.min_steps_per_removal and (
            absorbed or (limit is not None and at_this_count >= limit)
        ):
            self.removal_steps.append(step + 1)
            self.recent_accuracies = []
            return True
        return False

    def state_dict(self) -> dict[str, Any]:
        return {
            "removal_steps": list(self.removal_steps),
            "observed_steps": self.observed_steps,
            "recent_accuracies": list(self.recent_accuracies),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.removal_steps = [int(step) for step in state.get("removal_steps", [])]
        self.observed_steps = int(state.get("observed_steps", 0))
        self.recent_accuracies = [float(value) for value in state.get("recent_accuracies", [])]
        if self.removal_steps != sorted(self.removal_steps) or any(
            s > self.observed_steps for s in self.removal_steps
        ):
            raise ValueError(
                f"adaptive pace state {dict(state)} is inconsistent: removal steps must be increasing and at most "
                "the number of observed steps."
            )

    # -- what each step removes
    # ----------------------------------------------------------------------------------------

    @property
    def longest_cot(self) -> int | None:
        return self.max_cot_tokens if self.unit == "token" else self.max_cot_steps

    def scheduled(self, step: int) -> int:
        """The count at ``step``: the removals decided so far that apply from ``step`` or earlier."""
        return self.remove_start_from + bisect.bisect_right(self.removal_steps, step)

    def pace_description(self, step: int) -> str:
        limit = "" if self.max_steps_per_removal is None else f", at most {self.max_steps_per_removal}"
        return (
            f"; the next one once the {'answer-token' if self.metric == 'answer' else 'whole-sequence'} accuracy "
            f"averages >= {self.threshold:g} over {self.window} steps (at least {self.min_steps_per_removal} steps "
            f"per removal{limit})"
        )
