"""The arguments of a recipe besides training: what data (:class:`ScriptArguments`) and which model
(:class:`ModelArguments`, as TRL's ``ModelConfig``). Training itself is :class:`hf_icot.training.config.ICoTConfig`;
:func:`parse_recipe_args` parses all three (``--config file.yaml`` plus flags)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hf_icot.command_line.flag_cache import answer_early
from hf_icot.command_line.parsing import parse_config, parse_mapping


@dataclass
class ScriptArguments:
    """What to train and evaluate on, and what the model card says beyond the run."""

    dataset_name_or_path: str | None = field(
        default=None,
        metadata={"help": "Hub dataset repo id, or folder written by `python -m datasets_builder build`."},
    )
    dataset_config: str | None = field(
        default=None, metadata={"help": "Config of that dataset (e.g. mult_4x4); optional when it has only one."}
    )
    task: str | None = field(
        default=None,
        metadata={"help": "Without a dataset: build this datasets_builder task on the fly (e.g. multiplication)."},
    )
    task_args: dict | str | None = field(
        default=None,
        metadata={
            "help": "Parameters of --task, as JSON on the command line (e.g. '{\"a_digits\": 5}'), a mapping in YAML; "
            "a command-line mapping updates the config file's key by key."
        },
    )
    max_train_examples: int | None = field(default=None, metadata={"help": "Train on the first N examples only."})
    max_eval_examples: int | None = field(
        default=None, metadata={"help": "Evaluate on the first N examples of each split only."}
    )
    eval_splits: list[str] | None = field(
        default=None, metadata={"help": "Splits for the final evaluation; default: every split but train."}
    )
    card_license: str | None = field(default=None, metadata={"help": "License id for the model card (e.g. mit)."})
    eval_files: dict | str | None = field(
        default=None,
        metadata={
            "help": "Evaluation splits from reference-format text files ('question||cot #### answer' lines) or from "
            "a published dataset ('DATASET:SPLIT' or 'DATASET:CONFIG:SPLIT', a Hub repo or a folder), as split name "
            "-> source (JSON on the command line), e.g. the reference's own valid/test files; they replace the "
            "data's splits of the same name."
        },
    )

    def __post_init__(self) -> None:
        self.task_args = parse_mapping("task_args", self.task_args)
        self.eval_files = parse_mapping("eval_files", self.eval_files)
        if (self.dataset_name_or_path is None) == (self.task is None):
            raise ValueError("give exactly one of --dataset_name_or_path (a Hub repo or folder) and --task.")
        for name in ("max_train_examples", "max_eval_examples"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"--{name} {value} is not allowed; it must be >= 1.")


#: The dtypes ``--dtype`` takes.
MODEL_DTYPES = ("float32", "bfloat16", "float16")


@dataclass
class ModelArguments:
    """Which model: a pretrained causal LM (Hub id or folder) or one built from scratch, and its LoRA adapter."""

    model_name_or_path: str | None = field(
        default=None,
        metadata={"help": "Hub id or local folder of a causal LM (e.g. gpt2, a Llama or Qwen2); or --scratch_model."},
    )
    scratch_model: dict | str | None = field(
        default=None,
        metadata={
            "help": "Train a model from scratch with a word-level tokenizer built from the data: its config fields as "
            'JSON (e.g. \'{"n_layer": 2, "n_embd": 128, "n_head": 4}\') or a YAML mapping; "model_type" picks the '
            "family (default gpt2; e.g. llama, qwen2, mistral with their own field names)."
        },
    )
    base_model_hub_id: str | None = field(
        default=None,
        metadata={
            "help": "Hub id of the base model when --model_name_or_path is a local folder (for card and adapter)."
        },
    )
    trust_remote_code: bool = field(
        default=False, metadata={"help": "Run model code shipped with a Hub repo (off: only transformers' own)."}
    )
    use_peft: bool = field(default=False, metadata={"help": "Train a LoRA adapter instead of all weights."})
    lora_r: int = field(default=16, metadata={"help": "LoRA rank."})
    lora_alpha: int = field(default=32, metadata={"help": "LoRA alpha (scaling = alpha / r)."})
    lora_dropout: float = field(default=0.05, metadata={"help": "LoRA dropout."})
    lora_target_modules: list[str] | None = field(
        default=None,
        metadata={
            "help": "Module names LoRA adapts; default: peft's choice for the family (GPT-2: c_attn; Llama, Qwen2, "
            "Mistral: q_proj v_proj)."
        },
    )
    merge_adapter: bool = field(
        default=False, metadata={"help": "Merge the LoRA adapter into the weights and save a plain model."}
    )
    reinitialize_weights: bool = field(
        default=False,
        metadata={"help": "Re-draw every weight with the model's own initialisation (the reference's flag)."},
    )
    n_positions: int | None = field(
        default=None,
        metadata={
            "help": "Widen a GPT-2's position embeddings to this many positions, new rows copying the last one, as "
            "the reference does for --truncation beyond 1,024; unset: keep the model's."
        },
    )
    dtype: str | None = field(
        default=None,
        metadata={
            "help": "Hold the model's weights (and so the optimizer's state) in this dtype: float32, bfloat16 or "
            "float16 (CODI's scripts train bfloat16 weights); unset: as loaded (float32 from scratch). Not --bf16, "
            "which autocasts over the weights' own dtype.",
            "choices": list(MODEL_DTYPES),
        },
    )

    def __post_init__(self) -> None:
        self.scratch_model = parse_mapping("scratch_model", self.scratch_model)
        if (self.model_name_or_path is None) == (self.scratch_model is None):
            raise ValueError("give exactly one of --model_name_or_path (a Hub id or folder) and --scratch_model.")
        if self.merge_adapter and not self.use_peft:
            raise ValueError("--merge_adapter needs --use_peft (there is no adapter to merge).")
        if self.n_positions is not None and self.n_positions < 1:
            raise ValueError(f"--n_positions {self.n_positions} is not allowed; it must be >= 1.")
        if self.lora_r < 1:
            raise ValueError(f"--lora_r {self.lora_r} is not allowed; it must be >= 1.")
        if self.dtype is not None and self.dtype not in MODEL_DTYPES:
            raise ValueError(f"--dtype {self.dtype!r} is not allowed; choose one of {', '.join(MODEL_DTYPES)}.")
        if not 0 <= self.lora_dropout < 1:
            raise ValueError(f"--lora_dropout {self.lora_dropout} is not allowed; it must be in [0, 1).")

    @property
    def name(self) -> str:
        """How messages name the model."""
        return self.model_name_or_path or "the scratch model"


def parse_recipe_args(argv: Sequence[str] | None = None) -> tuple[ScriptArguments, Any, ModelArguments]:
    """A recipe's ``(ScriptArguments, ICoTConfig, ModelArguments)`` from ``--config file.yaml`` (defaults) and flags
    (overrides; a mapping flag such as ``--task_args`` or ``--scratch_model`` updates the file's key by key)."""
    # --help, a bad flag and these dataclasses' own checks answer from the flags kept by the last full parse, before
    # ICoTConfig's module imports transformers' TrainingArguments (torch, accelerate, PEFT: seconds).
    argv = list(sys.argv[1:] if argv is None else argv)
    answer_early((ScriptArguments, ModelArguments, "hf_icot.training.config.ICoTConfig"), argv)
    from hf_icot.training.config import ICoTConfig

    script_args, model_args, training_args = parse_config((ScriptArguments, ModelArguments, ICoTConfig), argv)
    return script_args, training_args, model_args
