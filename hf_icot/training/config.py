"""The training arguments: :class:`RunArguments` (``TrainingArguments`` plus the run folder's flags, for any recipe)
and :class:`ICoTConfig` (plus the curriculum and the per-stage evaluation, for :class:`hf_icot.training.trainer.
ICoTTrainer`).

The curriculum's and the methods' options are not declared here: every schedule field and every method-config field
declares its flat option once, where it is defined (:func:`hf_icot.curriculum.base.option`), and
:class:`~hf_icot.training.schedule_arguments.ScheduleArguments` writes each out as a typed field generated from those
declarations (:mod:`hf_icot.training.declared_options`), so a recipe YAML, the command line and ``--help`` set and
describe them as the schedule or method does, and an IDE or a type checker sees each of them on :class:`ICoTConfig`.
:func:`schedule_from_config` builds the schedule a config asks for, :func:`method_from_config` its method.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from transformers import TrainingArguments

from hf_icot.curriculum import Schedule, build_schedule, schedule_class, schedule_options
from hf_icot.evaluation.prompts import parse_mode
from hf_icot.methods import Method, build_method, method_options
from hf_icot.training.declared_options import declared_options
from hf_icot.training.schedule_arguments import ScheduleArguments

TOO_LONG_ACTIONS = ("error", "skip")


@dataclass
class RunArguments(TrainingArguments):
    """``TrainingArguments`` with the run folder's flags (:mod:`hf_icot.runs.run_folder`): continue a run, or start
    over in a folder that holds one."""

    # TrainingArguments documents this field as unused by Trainer; the recipes pass it on
    # (hf_icot.runs.run_folder).
    resume_from_checkpoint: str | None = field(
        default=None,
        metadata={
            "help": "Continue a run: a checkpoint-<step> folder, or true for the last complete one in output_dir "
            "(same schedule, seed and batch size as the run that wrote it)."
        },
    )
    overwrite_output_dir: bool = field(
        default=False,
        metadata={
            "help": "Start a new run in an output_dir that holds another run: its checkpoint-* and stage-* folders are "
            "deleted first, its model files replaced when this run saves. Without it such a run is refused; "
            "--resume_from_checkpoint true continues the earlier run instead."
        },
    )

    preemption_signals: list[str] = field(
        default_factory=lambda: ["SIGTERM"],
        metadata={
            "help": "Signals a scheduler sends before it kills a job (e.g. SIGTERM SIGUSR1; none: none): on one, the "
            "run saves a checkpoint at the end of the step, says how to continue, and exits with status 75."
        },
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        from hf_icot.runs.preemption import parse_signals

        parse_signals(self.preemption_signals)  # a wrong name fails here, before any data are built
        for name in ("per_device_train_batch_size", "per_device_eval_batch_size", "gradient_accumulation_steps"):
            if getattr(self, name) < 1:  # torch would say it only once the data are built, naming no flag
                raise ValueError(f"{name} {getattr(self, name)} is not allowed; it must be >= 1.")
        if os.path.exists(self.output_dir) and not os.path.isdir(self.output_dir):  # Trainer would fail after the data
            raise ValueError(f"output_dir {self.output_dir!r} is a file; give a folder (new, or one to write into).")


#: The curriculum and method options read as floats (a YAML ``inf`` arrives as a string).
FLOAT_OPTIONS = tuple(
    option.name for option in declared_options().values() if option.type is float and option.name != "seed"
)


@dataclass
class ICoTConfig(ScheduleArguments, RunArguments):
    """Training arguments for implicit chain-of-thought training with :class:`hf_icot.training.trainer.ICoTTrainer`:
    ``TrainingArguments``, the run folder's flags, the curriculum's options (:class:`ScheduleArguments`) and the
    fields below."""

    eval_modes: list[str] = field(
        default_factory=list,
        metadata={
            "help": "Generation evaluation at each stage end: implicit, explicit, reference, hint=k; empty: off."
        },
    )
    max_new_tokens: int | None = field(
        default=None,
        metadata={
            "help": "Generation evaluation: most tokens generated (unset: the longest gold continuation + slack)."
        },
    )
    generation_eval_examples: int | None = field(
        default=None, metadata={"help": "Generation evaluation: use only the first N evaluation examples."}
    )
    generation_eval_steps: int | None = field(
        default=None,
        metadata={
            "help": "Also generate the eval_modes answers every N optimizer steps during training (the first "
            "generation_eval_examples evaluation examples), logged with train_examples; unset: off."
        },
    )
    generation_eval_split: str | None = field(
        default=None,
        metadata={
            "help": "Generation evaluation during training: with several evaluation splits (e.g. semiautomata.py's "
            "test and test_ood_*), the one measured; unset: the only one (icot_gpt2.py: validation)."
        },
    )
    stop_at_implicit_em: float | None = field(
        default=None,
        metadata={
            "help": "With generation_eval_steps: stop training at the first measurement whose implicit answer exact "
            "match is >= this (in (0, 1]; eval_modes must include implicit); unset: never."
        },
    )
    evaluate_each_stage: bool = field(
        default=True, metadata={"help": "Evaluate (loss, and generation if eval_modes) when each stage ends."}
    )
    keep_stage_checkpoints: bool = field(
        default=True,
        metadata={"help": "Save the model at the end of every stage to output_dir/stage-<i> (stepwise: many)."},
    )
    too_long: str = field(
        default="error",
        metadata={
            "help": "A sequence longer than the model's context: error, or skip (counted in the logs).",
            "choices": list(TOO_LONG_ACTIONS),
        },
    )
    max_len_train: int | None = field(
        default=None,
        metadata={
            "help": "Skip a training batch whose length after CoT removal exceeds this (the reference's "
            "--max_len_train; counted in the logs as cot/skipped_long_batches). Unset: train on every batch."
        },
    )
    labelled_logits_only: bool = field(
        default=True,
        metadata={
            "help": "Compute the output layer and the loss only at the positions whose next token is labelled (CoT "
            "and answer, not question or padding): the same loss and gradients, less compute and memory with a large "
            "vocabulary. Used where it is exact (checked on the first batch); otherwise, or when off, every position."
        },
    )
    chunked_loss: bool = field(
        default=True,
        metadata={
            "help": "With labelled_logits_only, when a batch's logits could exceed 24 MiB, run the output layer and "
            "the cross entropy together over chunks of rows (at most 24 MiB of logits each), their gradients in the "
            "same pass, instead of building the (N, V) logits: the same loss to float rounding, less time and "
            "memory with a large vocabulary. Used for a plain Linear output layer that gives the model's logits "
            "(checked on the first batch), without fp16/bf16, FSDP or DeepSpeed, in steps that need no logits (not "
            "under the adaptive pace)."
        },
    )
    fused_gelu: bool = field(
        default=True,
        metadata={
            "help": "Run GPT-2's tanh GELU (gelu_new, gelu_fast: seven tensor operations in Python) as torch's "
            "one-kernel gelu(approximate='tanh'): the same function to float rounding, one pass over the MLP's "
            "activations instead of seven. The saved model is unchanged."
        },
    )
    draw_dropout_ahead: bool = field(
        default=False,
        metadata={
            "help": "Off by default. CPU training only (does nothing on a GPU): draw each training forward's dropout "
            "masks with a small C kernel that computes torch's own generator's numbers, in torch's order: the same "
            "numbers, so the same loss and gradients bit for bit, in less time at a small vocabulary "
            "(docs/benchmarks.md gives the figures). The kernel is built on first use by the machine's C compiler "
            "into a private cache folder, checked by owner, mode and SHA-256 before loading (HF_ICOT_DROPOUT_KERNEL=0, "
            "or no compiler: torch draws, and the lever does nothing). It sets nothing for the process; where the "
            "environment sets OMP_WAIT_POLICY=PASSIVE and torch has 2 or more threads, the masks are drawn ahead on "
            "a helper thread while the forward runs (by torch where there is no kernel). Not with gradient "
            "checkpointing or the latent methods, and only while each forward draws nothing but its recorded dropout "
            "calls (checked; SDPA attention with dropout runs as eager attention meanwhile, the same function). The "
            "run logs one line saying it is on."
        },
    )
    decay_all_parameters: bool = field(
        default=False,
        metadata={
            "help": "Apply weight_decay to every parameter, as the reference's plain torch.optim.AdamW does; "
            "default: the Trainer's rule (no decay on biases and LayerNorm weights)."
        },
    )
    select_best_epoch: bool = field(
        default=False,
        metadata={
            "help": "After every epoch measure validation generation accuracy (selection_mode), keep the best epoch "
            "by the reference's rule (the best resets while CoT remains) and end with its weights."
        },
    )
    selection_mode: str = field(
        default="explicit", metadata={"help": "select_best_epoch: the evaluation mode measured (free generation)."}
    )
    # The collator needs the raw columns (question, cot, answer), which the model's forward does not take.
    remove_unused_columns: bool = field(
        default=False, metadata={"help": "Keep False: the ICoT collator reads question, cot and answer."}
    )
    # Generation accuracy is measured by evaluate_generation; gathering full-vocabulary logits would only cost memory.
    prediction_loss_only: bool = field(
        default=True, metadata={"help": "Evaluation returns only the loss (generation metrics are separate)."}
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in FLOAT_OPTIONS:  # YAML and dict inputs do not go through argparse's type conversion ("inf")
            if getattr(self, name) is not None:
                setattr(self, name, float(getattr(self, name)))
        schedule_class(self.schedule)
        if self.too_long not in TOO_LONG_ACTIONS:
            raise ValueError(
                f"too_long {self.too_long!r} is not allowed; choose one of {', '.join(TOO_LONG_ACTIONS)}."
            )
        for mode in self.eval_modes:
            parse_mode(mode)
        if self.max_len_train is not None and self.max_len_train < 1:
            raise ValueError(f"max_len_train {self.max_len_train} is not allowed; it must be >= 1 (unset: off).")
        parse_mode(self.selection_mode)
        if self.max_new_tokens is not None and self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens {self.max_new_tokens} is not allowed; it must be >= 1.")
        if self.generation_eval_examples is not None and self.generation_eval_examples < 1:
            raise ValueError(
                f"generation_eval_examples {self.generation_eval_examples} is not allowed; it must be >= 1."
            )
        if self.generation_eval_steps is not None:
            if self.generation_eval_steps < 1:
                raise ValueError(
                    f"generation_eval_steps {self.generation_eval_steps} is not allowed; it must be >= 1 (unset: off)."
                )
            if not self.eval_modes:
                raise ValueError("generation_eval_steps needs eval_modes to say what to generate, e.g. [implicit].")
        if self.stop_at_implicit_em is not None:
            if not 0 < self.stop_at_implicit_em <= 1:
                raise ValueError(
                    f"stop_at_implicit_em {self.stop_at_implicit_em} is not allowed; it must be in (0, 1] "
                    "(unset: off)."
                )
            if self.generation_eval_steps is None or "implicit" not in self.eval_modes:
                raise ValueError(
                    "stop_at_implicit_em needs generation_eval_steps and 'implicit' among eval_modes to measure it."
                )
        if self.remove_unused_columns:
            raise ValueError(
                "remove_unused_columns=True would drop question/cot/answer before the ICoT collator; keep it False."
            )
        method_from_config(self, schedule_from_config(self))  # every option is validated where it is used


def schedule_from_config(config: Any) -> Schedule:
    """Build the schedule an :class:`ICoTConfig` asks for: ``config.schedule`` with its fields from the config's
    options and ``config.seed`` (an option left None keeps the schedule's default, e.g. ``fill="pad"`` for
    log_icot).

    Raises:
        ValueError: an unknown schedule name or an invalid parameter.
    """
    options = {name: getattr(config, name, None) for name in schedule_options()}
    return build_schedule(config.schedule, {**options, "seed": config.seed})


def method_from_config(config: Any, schedule: Schedule) -> Method:
    """The method that runs ``schedule``, with its options from the config (:func:`hf_icot.methods.build_method`).

    Raises:
        ValueError: an invalid method option.
    """
    return build_method(schedule, {name: getattr(config, name, None) for name in method_options()})
