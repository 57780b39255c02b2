"""Adaptive pace: remove the next CoT unit once the model has absorbed the last removal.

:class:`AdaptiveStepwise` (schedule name ``adaptive``) is the stepwise curriculum with its clock replaced by a rule:
after every optimizer step it takes a training accuracy of all processes together, from the logits the step computed
anyway (no extra forward), and removes one more token (or step, per ``unit``) from the next step on when

* at least ``min_steps_per_removal`` steps were trained at the current count, and the mean accuracy of the last
  ``window`` of them is >= ``threshold``; or
* ``max_steps_per_removal`` steps were trained at the current count (None: no limit).

The accuracy (``metric``) is either

* ``answer`` — the teacher-forced argmax accuracy of the answer tokens (after ``####``). Blind to the kept CoT: when the
  last kept CoT token spells the answer (a running parity's last partial parity is the parity), it stays at 1.0
  however wrong the model's own CoT would be; or
* ``sequence`` — the fraction of examples whose every labelled token (kept CoT, separators, answer, final ``<eos>``)
  is the teacher-forced argmax, so a kept CoT token the model cannot produce holds the next removal back.

Removal smoothing, ``remove_all_when_remove_beyond`` and optimizer resets work as in
:class:`hf_icot.schedules.Stepwise`. The decisions so far (:meth:`AdaptiveStepwise.state_dict`) ride in the checkpoint,
and the accuracy is summed over processes before the rule reads it, so a resumed run and every rank advance at the same
steps. :class:`AnswerAccuracyMixin` is the trainer's half: it measures the accuracy and feeds the schedule.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import torch

from hf_icot.cot import ANSWER_PREFIX
from hf_icot.schedules import (
    CountedRemoval,
    _spec,
    check_at_least,
    check_positive,
    smoothed_removal_specs,
    smoothing_offset_probabilities,
)

#: The batch key of the answer-token mask (popped before the model sees the batch).
ANSWER_MASK_KEY = "icot_answer_mask"


@dataclass
class AdaptiveStepwise(CountedRemoval):
    """Stepwise removal paced by the model: one more unit once the training answer accuracy holds (see the module).

    Attributes:
        threshold: in (0, 1]; the mean accuracy over ``window`` steps that allows the next removal.
        metric: ``"answer"`` or ``"sequence"`` (see the module): what the accuracy counts.
        window: >= 1 steps, all at the current count (the window restarts at every removal).
        min_steps_per_removal: >= 1; the fewest steps at one count.
        max_steps_per_removal: >= ``min_steps_per_removal``, or None; the most steps at one count.
        remove_start_from, removal_smoothing_lambda, remove_all_when_remove_beyond, reset_optimizer: as in
            :class:`hf_icot.schedules.Stepwise`.
        max_cot_tokens / max_cot_steps: the longest CoT of the training data (bound by the trainer), where the
            curriculum ends.

    Step ``s``'s count is ``remove_start_from`` plus the number of removals decided before it; :meth:`observe` must be
    called once per step, in order.
    """

    name: ClassVar[str] = "adaptive"
    units: ClassVar[tuple[str, ...]] = ("token", "step")
    needs_answer_accuracy: ClassVar[bool] = True
    metric_names: ClassVar[tuple[str, ...]] = ("answer", "sequence")
    threshold: float = 0.9
    window: int = 20
    metric: str = "answer"
    min_steps_per_removal: int = 1
    max_steps_per_removal: int | None = None
    remove_start_from: int = 0
    removal_smoothing_lambda: float = math.inf
    remove_all_when_remove_beyond: float = math.inf
    reset_optimizer: bool = False
    max_cot_tokens: int | None = None
    max_cot_steps: int | None = None
    # The pace state: decided by training, not part of the curriculum's identity (to_dict leaves it out).
    removal_steps: list[int] = field(default_factory=list, init=False, compare=False)
    observed_steps: int = field(default=0, init=False, compare=False)
    recent_accuracies: list[float] = field(default_factory=list, init=False, compare=False)
    _cdf: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.threshold = float(self.threshold)
        self.removal_smoothing_lambda = float(self.removal_smoothing_lambda)
        self.remove_all_when_remove_beyond = float(self.remove_all_when_remove_beyond)
        if not 0 < self.threshold <= 1:
            raise ValueError(f"adaptive threshold {self.threshold} is not allowed; it must be in (0, 1].")
        check_at_least("adaptive window", self.window, 1, " (steps)")
        if self.metric not in self.metric_names:
            raise ValueError(f"adaptive metric {self.metric!r} is unknown; allowed: {', '.join(self.metric_names)}.")
        check_at_least("min_steps_per_removal", self.min_steps_per_removal, 1)
        check_at_least("max_steps_per_removal", self.max_steps_per_removal, 1, " (or None: no limit)")
        if self.max_steps_per_removal is not None and self.min_steps_per_removal > self.max_steps_per_removal:
            raise ValueError(
                f"min_steps_per_removal {self.min_steps_per_removal} is above max_steps_per_removal "
                f"{self.max_steps_per_removal}; the minimum must be <= the maximum."
            )
        check_at_least("remove_start_from", self.remove_start_from, 0)
        check_positive("removal_smoothing_lambda", self.removal_smoothing_lambda, " (inf: off)")
        check_at_least("remove_all_when_remove_beyond", self.remove_all_when_remove_beyond, 0)
        check_at_least("max_cot_tokens", self.max_cot_tokens, 0)
        check_at_least("max_cot_steps", self.max_cot_steps, 0)
        self._cdf = np.cumsum(smoothing_offset_probabilities(self.removal_smoothing_lambda))

    # -- the pace ----------------------------------------------------------------------------------------------------

    def observe(self, step: int, accuracy: float | None) -> bool:
        """Record step ``step``'s answer-token accuracy (all processes together; None: the step had no answer token,
        which counts as a step but adds nothing to the window) and decide whether step ``step + 1`` removes one more.

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

    # -- what each step removes ----------------------------------------------------------------------------------------

    @property
    def _all_removed_from(self) -> float:
        longest = self.max_cot_tokens if self.unit == "token" else self.max_cot_steps
        longest = math.inf if longest is None else max(longest, self.remove_start_from)
        return min(self.remove_all_when_remove_beyond, longest)

    def scheduled(self, step: int) -> int:
        """The count at ``step``: the removals decided so far that apply from ``step`` or earlier."""
        return self.remove_start_from + bisect.bisect_right(self.removal_steps, step)

    def specs(self, step, example_ids, n_tokens=None, n_steps=None, training=True):
        if self.removes_all(step):
            return [_spec(self.unit, "all", 0, self.fill)] * len(example_ids)
        scheduled = self.scheduled(step)
        if not training or math.isinf(self.removal_smoothing_lambda):
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
        limit = "" if self.max_steps_per_removal is None else f", at most {self.max_steps_per_removal}"
        return (
            f"first {self.scheduled(step)} CoT {self.unit}s from the {self.side}{smoothing}; the next one once the "
            f"{'answer-token' if self.metric == 'answer' else 'whole-sequence'} accuracy averages >= "
            f"{self.threshold:g} over {self.window} steps (at least "
            f"{self.min_steps_per_removal} steps per removal{limit})"
        )


# -- the trainer's half ------------------------------------------------------------------------------------------------


def answer_token_mask(
    examples: Sequence[Mapping[str, Any]], attention_mask: torch.Tensor, marker_ids: Sequence[int]
) -> torch.Tensor:
    """Boolean ``(B, T)`` mask of each rendered example's answer tokens: its ``answer_ids`` after the ``####`` marker
    (``marker_ids``; kept when an answer does not start with it), without the final ``<eos>``.

    Rows are right-padded sequences ending ``<eos> answer_ids <eos>`` (:func:`hf_icot.collator.encode_example`).
    """
    mask = torch.zeros(attention_mask.shape, dtype=torch.bool)
    lengths = attention_mask.sum(dim=1).tolist()
    marker = list(marker_ids)
    for row, (example, length) in enumerate(zip(examples, lengths)):
        answer = list(example["answer_ids"])
        skip = len(marker) if answer[: len(marker)] == marker and len(answer) > len(marker) else 0
        mask[row, length - 1 - len(answer) + skip : length - 1] = True
    return mask


def answer_token_hits(
    logits: torch.Tensor, input_ids: torch.Tensor, mask: torch.Tensor, per_example: bool = False
) -> torch.Tensor:
    """``[correct, total]`` (int64) of the teacher-forced argmax at the ``mask`` positions: position ``t`` is predicted
    by the logits at ``t - 1``. Only the masked rows of ``logits`` are reduced, so the cost is tiny.

    ``per_example``: count examples instead of tokens — an example (a row with a masked position) is correct when every
    one of its masked tokens is."""
    target_mask = mask[:, 1:]
    if not per_example:
        predicted = logits[:, :-1][target_mask].argmax(dim=-1)  # (N,) over the N answer tokens
        correct = (predicted == input_ids[:, 1:][target_mask]).sum()
        return torch.stack([correct, target_mask.sum()]).to(torch.long)
    predicted = torch.full_like(input_ids[:, 1:], -1)
    predicted[target_mask] = logits[:, :-1][target_mask].argmax(dim=-1)
    wrong = (predicted != input_ids[:, 1:]) & target_mask
    scored = target_mask.any(dim=1)
    return torch.stack([(scored & ~wrong.any(dim=1)).sum(), scored.sum()]).to(torch.long)


class AnswerAccuracyMixin:
    """The trainer side of a schedule with ``needs_answer_accuracy``: mark the answer tokens of each rendered training
    batch, count the teacher-forced hits from the step's own logits, and after every optimizer step sum the counts
    over processes and hand the accuracy to ``schedule.observe``. Mixed into :class:`hf_icot.trainer.ICoTTrainer`."""

    _answer_counts: torch.Tensor | None = None
    _marker_ids: list[int] | None = None

    def _mark_answer_tokens(self, batch: dict[str, Any], examples: Sequence[Mapping[str, Any]]) -> None:
        if self.schedule.metric == "sequence":  # every labelled token: kept CoT, separators, answer, final <eos>
            from hf_icot.collator import IGNORE_INDEX

            batch[ANSWER_MASK_KEY] = batch["labels"] != IGNORE_INDEX
            return
        if self._marker_ids is None:
            from hf_icot.collator import encode_text

            self._marker_ids = encode_text(ANSWER_PREFIX, self.processing_class)
        batch[ANSWER_MASK_KEY] = answer_token_mask(examples, batch["attention_mask"], self._marker_ids)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        mask = inputs.pop(ANSWER_MASK_KEY, None)
        if mask is None:
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        loss, outputs = super().compute_loss(model, inputs, True, num_items_in_batch)
        with torch.no_grad():
            hits = answer_token_hits(
                outputs["logits"].detach(),
                inputs["input_ids"],
                mask.to(outputs["logits"].device),
                per_example=self.schedule.metric == "sequence",
            )
        # Kept on the device and summed over micro-batches: no host sync until the step ends.
        self._answer_counts = (
            hits if self._answer_counts is None else self._answer_counts + hits.to(self._answer_counts)
        )
        return (loss, outputs) if return_outputs else loss

    def _observe_answer_accuracy(self, step: int, step_without_cot: bool) -> None:
        """Feed step ``step``'s accuracy (every process's counts summed) to the schedule; when it decides to remove
        more, also settle on every rank whether the step had no CoT left (an optimizer reset after it is skipped)."""
        counts = self._answer_counts if self._answer_counts is not None else torch.zeros(2, dtype=torch.long)
        with_cot = torch.tensor([int(not step_without_cot)], dtype=torch.long)
        local = torch.cat([counts.to(self.args.device), with_cot.to(self.args.device)])
        correct, total, ranks_with_cot = self.accelerator.reduce(local, reduction="sum").tolist()
        self._answer_counts = None
        self.last_answer_accuracy = correct / total if total else None
        if self.schedule.observe(step, self.last_answer_accuracy) and self.schedule.resets_optimizer_at(step + 1):
            self._previous_step_without_cot = ranks_with_cot == 0
