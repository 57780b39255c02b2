"""ICoTConfig: ``TrainingArguments`` plus the fields of the ICoT method (curriculum, per-stage evaluation).

Schedule parameters are flat fields so that a recipe YAML and the command line set them the same way; which ones a
schedule reads is listed in each field's help (and mapped in :data:`CONFIG_FIELDS`; :func:`schedule_from_config`
builds the schedule). :func:`parse_config` reads ``--config recipe.yaml`` as defaults and lets command-line flags
override them.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

import yaml
from transformers import HfArgumentParser, TrainingArguments

from hf_icot.schedules import SCHEDULES, Schedule

TOO_LONG_ACTIONS = ("error", "skip")


@dataclass
class ICoTConfig(TrainingArguments):
    """Training arguments for implicit chain-of-thought training with :class:`hf_icot.trainer.ICoTTrainer`."""

    schedule: str = field(
        default="stepwise",
        metadata={"help": f"Curriculum: one of {', '.join(SCHEDULES)}.", "choices": list(SCHEDULES)},
    )
    remove_per_epoch: float = field(
        default=8.0, metadata={"help": "stepwise: CoT tokens removed per epoch (paced one token at a time)."}
    )
    remove_start_from: int = field(
        default=0, metadata={"help": "stepwise/adaptive: units removed from the first step on."}
    )
    removal_smoothing_lambda: float = field(
        default=math.inf,
        metadata={
            "help": "stepwise/adaptive: λ of the per-example extra removal offset, P(o) ∝ e^(-λo); inf turns it off."
        },
    )
    remove_all_when_remove_beyond: float = field(
        default=math.inf,
        metadata={
            "help": "stepwise/adaptive: once this many units are scheduled, remove the whole CoT (inf: only once the count "
            "reaches the longest CoT of the training data, where the curriculum ends in any case)."
        },
    )
    pretrain_epochs: int = field(default=0, metadata={"help": "stepwise: epochs with the full CoT before removal."})
    removal_side: str = field(
        default="left",
        metadata={"help": "stepwise/mixture: left or right; staged: left, right or inductive (stride curriculum)."},
    )
    removal_fill: str | None = field(
        default=None,
        metadata={"help": "drop, pad (placeholder tokens) or keep_position; default: pad for log_icot, else drop."},
    )
    removal_unit: str | None = field(
        default=None,
        metadata={
            "help": "What is removed and what a length hint counts: token or step (mixture and adaptive take both; default: "
            "step for staged/log_icot, else token).",
            "choices": ["token", "step"],
        },
    )
    reset_optimizer: bool = field(
        default=False,
        metadata={"help": "stepwise/adaptive: reset the Adam state each time one more unit is removed."},
    )
    adaptive_threshold: float = field(
        default=0.9,
        metadata={
            "help": "adaptive: remove the next unit once the training accuracy on the answer tokens (teacher-forced, "
            "all processes) averages at least this over adaptive_window steps; in (0, 1]."
        },
    )
    adaptive_window: int = field(
        default=20,
        metadata={"help": "adaptive: steps averaged, all at the current count (the window restarts at each removal)."},
    )
    adaptive_metric: str = field(
        default="answer",
        metadata={
            "help": "adaptive: what the threshold reads: answer (teacher-forced accuracy of the answer tokens) or "
            "sequence (the fraction of examples whose every labelled token, kept CoT included, is right).",
            "choices": ["answer", "sequence"],
        },
    )
    min_steps_per_removal: int = field(
        default=1, metadata={"help": "adaptive: fewest optimizer steps at one count before the next removal."}
    )
    max_steps_per_removal: int | None = field(
        default=None,
        metadata={"help": "adaptive: remove the next unit after this many steps at one count whatever the accuracy."},
    )
    stage_length: float = field(default=1.0, metadata={"help": "staged/log_icot: length of a stage in stage_unit."})
    stage_unit: str = field(
        default="epochs", metadata={"help": "staged/log_icot: epochs or steps.", "choices": ["epochs", "steps"]}
    )
    steps_per_stage: int = field(default=1, metadata={"help": "staged: CoT steps removed per stage."})
    num_stages: int | None = field(
        default=None, metadata={"help": "staged: number of stages (the last one lasts); unset: unbounded."}
    )
    final_remove_all: bool = field(
        default=False,
        metadata={"help": "staged/log_icot: add a final stage that drops the whole CoT (staged needs num_stages)."},
    )
    num_levels: int | None = field(
        default=None, metadata={"help": "log_icot: tree depth; unset: the deepest cot_level of the training data."}
    )
    mixture_max_length: int | None = field(
        default=None, metadata={"help": "mixture: kept lengths are uniform over 0..this (unset: the CoT's length)."}
    )
    mixture_weights: list[float] | None = field(
        default=None, metadata={"help": "mixture: P(kept length = i) proportional to the i-th weight."}
    )
    length_hint: bool = field(
        default=False,
        metadata={"help": "mixture: put a length-hint token before the CoT saying how many units follow."},
    )
    sequence_format: str = field(
        default="hf_icot",
        metadata={
            "help": "hf_icot (parts tokenized apart, cleanest for word-level tokenizers) or reference (the stepwise "
            "reference's token ids: a space token before each <eos>, BOS where the tokenizer adds one, answer "
            "commas removed, its keep_position positions).",
            "choices": ["hf_icot", "reference"],
        },
    )
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
    # TrainingArguments documents this field as unused by Trainer; the recipes pass it on (hf_icot.run_folder).
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
    max_len_train: int | None = field(
        default=None,
        metadata={
            "help": "Skip a training batch whose length after CoT removal exceeds this (the reference's "
            "--max_len_train; counted in the logs as cot/skipped_long_batches). Unset: train on every batch."
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
        if os.path.exists(self.output_dir) and not os.path.isdir(self.output_dir):  # Trainer would fail after the data
            raise ValueError(f"output_dir {self.output_dir!r} is a file; give a folder (new, or one to write into).")
        # YAML and dict inputs do not go through argparse's type conversion.
        self.removal_smoothing_lambda = float(self.removal_smoothing_lambda)
        self.remove_all_when_remove_beyond = float(self.remove_all_when_remove_beyond)
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule {self.schedule!r} is unknown; allowed: {', '.join(SCHEDULES)}.")
        if self.too_long not in TOO_LONG_ACTIONS:
            raise ValueError(
                f"too_long {self.too_long!r} is not allowed; choose one of {', '.join(TOO_LONG_ACTIONS)}."
            )
        if self.eval_modes:
            from hf_icot.evaluation import parse_mode  # the evaluation module owns the mode names

            for mode in self.eval_modes:
                parse_mode(mode)
        if self.max_len_train is not None and self.max_len_train < 1:
            raise ValueError(f"max_len_train {self.max_len_train} is not allowed; it must be >= 1 (unset: off).")
        from hf_icot.evaluation import parse_mode  # the evaluation module owns the mode names

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
                    f"stop_at_implicit_em {self.stop_at_implicit_em} is not allowed; it must be in (0, 1] (unset: off)."
                )
            if self.generation_eval_steps is None or "implicit" not in self.eval_modes:
                raise ValueError(
                    "stop_at_implicit_em needs generation_eval_steps and 'implicit' among eval_modes to measure it."
                )
        if self.remove_unused_columns:
            raise ValueError(
                "remove_unused_columns=True would drop question/cot/answer before the ICoT collator; keep it False."
            )
        schedule_from_config(self)  # every schedule parameter is validated where it is used


def parse_config(
    dataclass_types: type | Sequence[type] = ICoTConfig, args: Sequence[str] | None = None
) -> tuple[Any, ...]:
    """Parse ``--config file.yaml`` (defaults) and command-line flags (overrides) into dataclasses.

    A mapping in the file (e.g. ``task_args``) is updated key by key by the same flag on the command line (a JSON
    object), so ``--task_args '{"a_digits": 5}'`` keeps the file's other keys. Flags are written ``--name value`` or
    ``--name=value`` (abbreviations are refused, so every spelling means the same).

    Args:
        dataclass_types: the dataclasses to fill (e.g. ``(ScriptArguments, ICoTConfig)``), as for HfArgumentParser.
        args: the argument strings (default: ``sys.argv[1:]``).

    Returns:
        One instance per dataclass type, in order.

    Raises:
        ValueError: a config file that is missing, not YAML or not a mapping, a key that no dataclass has, or an
            invalid value.
        SystemExit: ``--help``, or a bad flag (status 2; one line on stderr: the reason and a pointer to ``--help``).
    """
    types = [dataclass_types] if isinstance(dataclass_types, type) else list(dataclass_types)
    args = list(sys.argv[1:] if args is None else args)
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--config", default=None)
    _one_line_errors(pre)
    known, remaining = pre.parse_known_args(args)
    parser = HfArgumentParser(types, allow_abbrev=False)
    _one_line_errors(parser)
    parser.add_argument("--config", default=None, help="A YAML file whose keys set the defaults of the flags below.")
    defaults = _read_config_file(known.config) if known.config is not None else {}
    accepted = {action.dest for action in parser._actions}
    unknown = sorted(set(defaults) - accepted)
    if unknown:
        raise ValueError(f"config file {known.config} has unknown key(s) {', '.join(unknown)}; see --help.")
    parser.set_defaults(**defaults)
    mappings = [key for key, value in defaults.items() if isinstance(value, dict)]
    given = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    _one_line_errors(given)
    for key in mappings:
        given.add_argument(f"--{key}", default=None)
    overridden = vars(given.parse_known_args(remaining)[0])
    outputs = parser.parse_args_into_dataclasses(args=remaining, look_for_args_file=False)
    # The extra namespace holds only --config, already consumed.
    outputs = tuple(output for output in outputs if not isinstance(output, argparse.Namespace))
    for key in mappings:
        if overridden[key] is None:
            continue
        for output in outputs:
            value = getattr(output, key, None)
            if isinstance(value, dict):  # the dataclass has read the flag's JSON object
                setattr(output, key, {**defaults[key], **value})
    return outputs


def parse_recipe_args(argv: Sequence[str] | None = None) -> tuple[Any, ICoTConfig, Any]:
    """A recipe's ``(ScriptArguments, ICoTConfig, ModelArguments)`` from ``--config file.yaml`` (defaults) and flags
    (overrides; a mapping flag such as ``--task_args`` or ``--scratch_model`` updates the file's key by key)."""
    from hf_icot.arguments import ModelArguments, ScriptArguments

    script_args, model_args, training_args = parse_config((ScriptArguments, ModelArguments, ICoTConfig), argv)
    return script_args, training_args, model_args


def _one_line_errors(parser: argparse.ArgumentParser) -> None:
    """A bad flag ends with argparse's one-line reason and a pointer to ``--help``, not the whole usage first (about
    150 lines for a recipe, burying the line that matters)."""

    def error(message: str) -> NoReturn:
        parser.exit(2, f"{parser.prog}: error: {message}; see --help.\n")

    parser.error = error


def _read_config_file(path: str) -> dict[str, Any]:
    """The mapping of a recipe YAML file, or one sentence saying why it cannot be used."""
    try:
        with open(path, encoding="utf-8") as stream:
            values = yaml.safe_load(stream) or {}
    except FileNotFoundError:
        raise ValueError(f"config file {path} does not exist; give the path of a recipe YAML file.") from None
    except IsADirectoryError:
        raise ValueError(f"config file {path} is a folder; give the path of a recipe YAML file.") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or "malformed"
        raise ValueError(f"config file {path} is not valid YAML{where} ({problem}); fix it or see --help.") from None
    if not isinstance(values, dict):
        raise ValueError(f"config file {path} holds a {type(values).__name__}; it must be a mapping of flags.")
    return values


#: Which ICoTConfig field sets each layout field of every schedule (see :class:`hf_icot.schedules.SequenceLayout`).
LAYOUT_FIELDS: dict[str, str] = {
    "fill": "removal_fill",
    "unit": "removal_unit",
    "side": "removal_side",
    "hint": "length_hint",
    "sequence_format": "sequence_format",
}

#: For each schedule, which ICoTConfig field sets each of its own fields (``seed`` and the layout are common).
CONFIG_FIELDS: dict[str, dict[str, str]] = {
    "full_cot": {},
    "no_cot": {},
    "stepwise": {
        name: name
        for name in (
            "remove_per_epoch",
            "remove_start_from",
            "removal_smoothing_lambda",
            "remove_all_when_remove_beyond",
            "pretrain_epochs",
            "reset_optimizer",
        )
    },
    "staged": {
        name: name for name in ("steps_per_stage", "stage_length", "stage_unit", "num_stages", "final_remove_all")
    },
    "log_icot": {name: name for name in ("num_levels", "stage_length", "stage_unit", "final_remove_all")},
    "mixture": {"max_length": "mixture_max_length", "weights": "mixture_weights"},
    "adaptive": {
        "threshold": "adaptive_threshold",
        "window": "adaptive_window",
        "metric": "adaptive_metric",
        **{
            name: name
            for name in (
                "min_steps_per_removal",
                "max_steps_per_removal",
                "remove_start_from",
                "removal_smoothing_lambda",
                "remove_all_when_remove_beyond",
                "reset_optimizer",
            )
        },
    },
}


def schedule_from_config(config: Any) -> Schedule:
    """Build the schedule an :class:`hf_icot.config.ICoTConfig` asks for: ``config.schedule`` with the fields listed
    in :data:`CONFIG_FIELDS`, ``config.seed``, and the layout fields of :data:`LAYOUT_FIELDS` that are set (None
    leaves the schedule's default, e.g. ``fill="pad"`` for log_icot).

    Raises:
        ValueError: an unknown schedule name or an invalid parameter.
    """
    name = config.schedule
    if name not in SCHEDULES:
        raise ValueError(f"schedule {name!r} is unknown; allowed: {', '.join(SCHEDULES)}.")
    kwargs = {field_name: getattr(config, source) for field_name, source in CONFIG_FIELDS[name].items()}
    kwargs["seed"] = config.seed
    for field_name, source in LAYOUT_FIELDS.items():
        if getattr(config, source) is not None:
            kwargs[field_name] = getattr(config, source)
    return SCHEDULES[name](**kwargs)
