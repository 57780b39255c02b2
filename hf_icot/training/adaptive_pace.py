"""The trainer's half of a pace that reads the model (:class:`hf_icot.curriculum.adaptive.AdaptiveStepwise`): mark the
tokens each rendered training batch scores, count the teacher-forced hits from the step's own logits (no extra
forward; those at labelled positions only under ``labelled_logits_only``), and after every optimizer step sum the
counts over processes and hand the accuracy to the schedule."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from hf_icot.cot import ANSWER_PREFIX
from hf_icot.data.encoding import IGNORE_INDEX, encode_text
from hf_icot.evaluation.teacher_forced import answer_token_hits, answer_token_mask
from hf_icot.levers.labelled_loss import LOGITS_POSITIONS_KEY

#: The batch key of the scored-token mask (popped before the model sees the batch).
ANSWER_MASK_KEY = "icot_answer_mask"


class AnswerPace:
    """The step-by-step accuracy a schedule with ``needs_answer_accuracy`` reads, for
    :class:`hf_icot.training.trainer.ICoTTrainer`: under ``metric="answer"`` the answer tokens are scored, under
    ``"sequence"`` every labelled token (an example counts when all of them are right).

    Args:
        schedule: the run's schedule (its ``metric``, ``observe`` and ``resets_optimizer_at``).
        tokenizer: the run's tokenizer (the ``####`` marker's ids).

    ``last_accuracy`` is the accuracy of the last step observed (None before the first, or for a step that scored
    nothing)."""

    def __init__(self, schedule: Any, tokenizer: Any) -> None:
        self.schedule = schedule
        self.tokenizer = tokenizer
        self.last_accuracy: float | None = None
        self._counts: torch.Tensor | None = None
        self._marker_ids: list[int] | None = None

    def mark(self, batch: dict[str, Any], examples: Sequence[Mapping[str, Any]]) -> None:
        """Put the mask of the tokens this rendered training batch scores under :data:`ANSWER_MASK_KEY`."""
        if self.schedule.metric == "sequence":  # every labelled token: kept CoT, separators, answer, final <eos>
            batch[ANSWER_MASK_KEY] = batch["labels"] != IGNORE_INDEX
            return
        if self._marker_ids is None:
            self._marker_ids = encode_text(ANSWER_PREFIX, self.tokenizer)
        batch[ANSWER_MASK_KEY] = answer_token_mask(examples, batch["attention_mask"], self._marker_ids)

    def count(self, outputs: Mapping[str, Any], input_ids: torch.Tensor, mask: torch.Tensor) -> None:
        """Add the hits of a micro-batch's ``outputs`` (its logits, at every position or, with
        :data:`~hf_icot.levers.labelled_loss.LOGITS_POSITIONS_KEY`, at those positions only) on the ``mask`` tokens."""
        logits = outputs["logits"]
        positions = outputs.get(LOGITS_POSITIONS_KEY)  # set when the logits are those at labelled positions only
        with torch.no_grad():
            hits = answer_token_hits(
                logits.detach(),
                input_ids,
                mask.to(logits.device),
                per_example=self.schedule.metric == "sequence",
                positions=None if positions is None else positions.to(logits.device),
            )
        # Kept on the device and summed over micro-batches: no host sync until the step ends.
        self._counts = hits if self._counts is None else self._counts + hits.to(self._counts)

    def observe(self, step: int, step_without_cot: bool, accelerator: Any, device: Any) -> bool | None:
        """Feed step ``step``'s accuracy (every process's counts summed by ``accelerator``) to the schedule. Returns,
        when the schedule then removes more and resets the optimizer after ``step``, whether no process's step had
        CoT left (the reset after it is then skipped); else None."""
        counts = self._counts if self._counts is not None else torch.zeros(2, dtype=torch.long)
        with_cot = torch.tensor([int(not step_without_cot)], dtype=torch.long)
        local = torch.cat([counts.to(device), with_cot.to(device)])
        correct, total, ranks_with_cot = accelerator.reduce(local, reduction="sum").tolist()
        self._counts = None
        self.last_accuracy = correct / total if total else None
        if self.schedule.observe(step, self.last_accuracy) and self.schedule.resets_optimizer_at(step + 1):
            return ranks_with_cot == 0
        return None
