"""Teacher-forced answer accuracy during training: in the current stage's layout, and with every CoT token removed.

:class:`AnswerAccuracyCallback` logs, every ``every`` steps, the fraction of evaluation examples whose answer token
is the model's argmax at the position before it (teacher forcing: one forward pass, no generation):

* ``eval_answer_acc_stage`` — the sequence laid out as the curriculum has it at this step;
* ``eval_answer_acc_no_cot`` — every CoT unit removed with the run's fill (placeholders under ``pad``, dropped
  otherwise): the end point of internalization, at any step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from transformers import TrainerCallback

from hf_icot.cot import TruncationSpec
from hf_icot.runtime import log_from_callback


@torch.no_grad()
def answer_accuracy(model: Any, collator: Any, examples: Sequence[dict], specs: Sequence[TruncationSpec]) -> float:
    """Teacher-forced answer accuracy of ``model`` on prepared ``examples`` rendered with ``specs``.

    The answer token is the last labelled token but one (``... #### answer <eos>``), predicted at the position before.
    """
    was_training = model.training
    model.eval()
    batch = collator.render(examples, specs)
    device = next(model.parameters()).device
    inputs = {name: value.to(device) for name, value in batch.items() if name != "labels"}
    logits = model(**inputs).logits  # (B, S, V)
    labels = batch["labels"].to(device)
    labelled = (labels != -100).long()
    last = labelled.shape[1] - 1 - labelled.flip(1).argmax(1)  # (B,) the final <eos>
    rows = torch.arange(len(examples), device=device)
    answer = labels[rows, last - 1]
    predicted = logits[rows, last - 2].argmax(-1)
    model.train(was_training)
    return (predicted == answer).float().mean().item()


class AnswerAccuracyCallback(TrainerCallback):
    """Log teacher-forced answer accuracy every ``every`` steps (see the module docstring).

    Args:
        trainer: the :class:`hf_icot.trainer.ICoTTrainer` (its schedule, collator and prepared evaluation set).
        every: steps between measurements (>= 1).
        examples: how many evaluation examples (the first ones) to use.

    Raises:
        ValueError: ``every`` < 1 or a trainer without an evaluation set.
    """

    def __init__(self, trainer: Any, every: int, examples: int = 256) -> None:
        if every < 1:
            raise ValueError(f"every={every} is not allowed; measure at least every step (>= 1).")
        if trainer.eval_dataset is None:
            raise ValueError("the answer-accuracy callback needs the trainer's eval_dataset; give one.")
        split = trainer.eval_dataset
        self.trainer, self.every = trainer, every
        self.examples = [split[i] for i in range(min(examples, len(split)))]

    def measure(self, step: int) -> dict[str, float]:
        trainer, examples = self.trainer, self.examples
        layout = trainer.schedule.layout
        specs = trainer.schedule.specs(
            max(step - 1, 0),
            [e["example_id"] for e in examples],
            n_tokens=[e["n_cot_tokens"] for e in examples],
            n_steps=[e["n_cot_steps"] for e in examples],
            training=False,
        )
        removed = TruncationSpec(unit=layout.unit, which="all", fill="pad" if layout.uses_placeholder else "drop")
        model = trainer.accelerator.unwrap_model(trainer.model)
        return {
            "eval_answer_acc_stage": answer_accuracy(model, trainer.data_collator, examples, specs),
            "eval_answer_acc_no_cot": answer_accuracy(
                model, trainer.data_collator, examples, [removed] * len(examples)
            ),
        }

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step % self.every == 0 or state.global_step == state.max_steps:
            log_from_callback(self.trainer, self.measure(state.global_step))
