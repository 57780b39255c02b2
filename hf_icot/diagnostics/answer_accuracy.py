"""Teacher-forced answer accuracy during training: in the current stage's layout, and with every CoT token removed.

:class:`AnswerAccuracyCallback` logs, every ``every`` steps, the fraction of evaluation examples whose answer tokens
are all the model's argmax at the position before each (teacher forcing: one forward pass, no generation;
:func:`hf_icot.evaluation.teacher_forced.answer_accuracy`):

* ``eval_answer_acc_stage`` — the sequence laid out as the curriculum has it at this step;
* ``eval_answer_acc_no_cot`` — every CoT unit removed with the run's fill (placeholders under ``pad``, dropped
  otherwise): the end point of internalization, at any step.
"""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback

from hf_icot.cot import TruncationSpec
from hf_icot.evaluation.teacher_forced import answer_accuracy
from hf_icot.runs.runtime import log_from_callback


class AnswerAccuracyCallback(TrainerCallback):
    """Log teacher-forced answer accuracy every ``every`` steps (see the module docstring).

    Args:
        trainer: the :class:`hf_icot.training.trainer.ICoTTrainer` (its schedule, collator and prepared evaluation
        set). every: steps between measurements (>= 1).
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
