"""The trainer's half of a pace that reads the model (:class:`hf_icot.curriculum.adaptive.AdaptiveStepwise`): mark the
tokens each rendered training batch scores, count the teacher-forced hits from the step's own logits (no extra
forward; those at labelled positions only under ``labelled_logits_only``), and after every optimizer step sum the counts over processes and hand the accuracy to the schedule."""

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


class AnswerAccuracyMixin:
    """Mixed into :class:`hf_icot.training.trainer.ICoTTrainer` for schedules with ``needs_answer_accuracy``: under
    ``metric="answer"`` the answer tokens are scored, under ``"sequence"`` every labelled token (an example counts
    when all of them are right)."""

    _answer_counts: torch.Tensor | None = None
    _marker_ids: list[int] | None = None

    def _mark_answer_tokens(self, batch: dict[str, Any], examples: Sequence[Mapping[str, Any]]) -> None:
        if self.schedule.metric == "sequence":  # every labelled token: kept CoT, separators, answer, final <eos>
            batch[ANSWER_MASK_KEY] = batch["labels"] != IGNORE_INDEX
            return
        if self._marker_ids is None:
            self._marker_ids = encode_text(ANSWER_PREFIX, self.processing_class)
        batch[ANSWER_MASK_KEY] = answer_token_mask(examples, batch["attention_mask"], self._marker_ids)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        mask = inputs.pop(ANSWER_MASK_KEY, None)
        if mask is None:
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        loss, outputs = super().compute_loss(model, inputs, True, num_items_in_batch)
        positions = outputs.get(LOGITS_POSITIONS_KEY)  # set when the logits are those at labelled positions only
        with torch.no_grad():
            hits = answer_token_hits(
                outputs["logits"].detach(),
                inputs["input_ids"],
                mask.to(outputs["logits"].device),
                per_example=self.schedule.metric == "sequence",
                positions=None if positions is None else positions.to(outputs["logits"].device),
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
