"""Generation accuracy during training: how many examples a run needs before it answers without its CoT.

:class:`GenerationEvalCallback` generates, every ``every`` optimizer steps, greedy answers for the first ``examples``
evaluation examples in each of ``modes`` (``implicit``: the question alone, as the run will be used once the CoT is
internalized; ``explicit``: the model writes its CoT first; ``hint=k``) and logs

* ``eval_<mode>/answer_em`` (and ``eval_<mode>/cot_em`` where a CoT is generated);
* ``train_examples`` — the training examples seen so far (steps × the total batch), the x axis of a sample-efficiency
  curve.

With ``stop_at`` set, training stops at the first measurement whose ``stop_mode`` answer exact match is >= it. Every
process must run the callback (generation splits the examples across processes and gathers the answers, so all of them
see the same metrics and stop at the same step). It measures through the trainer's ``evaluate_generation``, so
training and the end of a run score generation the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from transformers import TrainerCallback

from hf_icot.evaluation.prompts import parse_mode
from hf_icot.runs.runtime import log_from_callback


class GenerationEvalCallback(TrainerCallback):
    """Log generation exact match every ``every`` steps and optionally stop once it reaches a bar (see the module).

    Args:
        trainer: the :class:`hf_icot.training.trainer.ICoTTrainer` (its model, tokenizer, layout and evaluation set).
        every: optimizer steps between measurements (>= 1); the last step is always measured.
        modes: generation modes (:func:`hf_icot.evaluation.prompts.parse_mode` names).
        examples: how many evaluation examples (the first ones) to generate for; None: all.
        stop_at: stop training once ``stop_mode``'s answer exact match is >= this, in (0, 1]; None: never.
        stop_mode: the mode ``stop_at`` reads; must be one of ``modes``.
        split: with several evaluation sets (``eval_dataset`` a mapping of splits), the name of the one measured;
            None when there is a single set.

    Raises:
        ValueError: ``every`` < 1, no modes or an unknown one, ``examples`` < 1, ``stop_at`` outside (0, 1],
            ``stop_mode`` not among ``modes``, a trainer without an evaluation set, or several sets and ``split``
            not naming one of them.
    """

    def __init__(
        self,
        trainer: Any,
        every: int,
        modes: Sequence[str] = ("implicit",),
        examples: int | None = None,
        stop_at: float | None = None,
        stop_mode: str = "implicit",
        split: str | None = None,
    ) -> None:
        if not isinstance(every, int) or every < 1:
            raise ValueError(f"generation evaluation every={every!r} steps is not allowed; use an integer >= 1.")
        if not modes:
            raise ValueError("generation evaluation needs at least one mode, e.g. ['implicit'].")
        for mode in modes:
            parse_mode(mode)
        if examples is not None and examples < 1:
            raise ValueError(f"generation evaluation examples={examples} is not allowed; use >= 1 (None: all).")
        if stop_at is not None and not 0 < stop_at <= 1:
            raise ValueError(f"stop_at={stop_at} is not allowed; an exact-match bar is in (0, 1] (None: never stop).")
        if stop_at is not None and stop_mode not in modes:
            raise ValueError(
                f"stop_mode {stop_mode!r} is not among the evaluated modes {list(modes)}; add it or pick one of them."
            )
        sets = trainer.eval_dataset
        if sets is None:
            raise ValueError("generation evaluation during training needs the trainer's eval_dataset; give one.")
        if isinstance(sets, dict) and split not in sets:
            named = f"generation_eval_split {split!r} is not" if split is not None else "no generation_eval_split is"
            raise ValueError(
                f"{named} one of the evaluation splits; name the one to measure during training: {', '.join(sets)}."
            )
        split = sets[split] if isinstance(sets, dict) else sets
        self.trainer, self.every, self.modes = trainer, every, list(modes)
        self.split = split.select(range(min(len(split), examples))) if examples is not None else split
        self.stop_at, self.stop_mode = stop_at, stop_mode
        self.history: list[dict[str, float]] = []

    def measure(self, step: int) -> dict[str, float]:
        """Generation exact match now, with ``train_examples`` for ``step`` optimizer steps (every process)."""
        args = self.trainer.args
        batch = args.per_device_train_batch_size * args.gradient_accumulation_steps * args.world_size
        results = self.trainer.evaluate_generation(self.split, self.modes)  # keys eval_<mode>/<metric>
        record = {key: value for key, value in results.items() if key.endswith("_em")}
        record["train_examples"] = float(step * batch)
        return record

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step % self.every and state.global_step != state.max_steps:
            return
        record = self.measure(state.global_step)
        self.history.append({"step": float(state.global_step), **record})
        log_from_callback(self.trainer, record)
        if self.stop_at is not None and record[f"eval_{self.stop_mode}/answer_em"] >= self.stop_at:
            control.should_training_stop = True
