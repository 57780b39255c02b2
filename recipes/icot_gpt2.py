"""Stepwise implicit chain of thought (ICoT) on GPT-2: train, evaluate, save, card, push.

Examples (from the repository root)::

    # quickstart on one CPU: a tiny GPT-2-architecture model from scratch on small multiplication, a few minutes
    python recipes/icot_gpt2.py --config recipes/configs/quickstart.yaml
    # the reference setting: GPT-2 small, 4x4 multiplication (one GPU), then 8 GPUs with DDP
    python recipes/icot_gpt2.py --config recipes/configs/icot_gpt2_4x4.yaml
    accelerate launch --config_file recipes/accelerate/ddp.yaml recipes/icot_gpt2.py \\
        --config recipes/configs/icot_gpt2_4x4.yaml
    # LoRA on a local model, adapter saved alone and pushed (base named by its Hub id)
    python recipes/icot_gpt2.py --config recipes/configs/icot_gpt2_4x4.yaml --model_name_or_path ./gpt2 \\
        --base_model_hub_id openai-community/gpt2 --use_peft --push_to_hub --hub_model_id USER/gpt2-icot-4x4-lora
    # retry a push that failed, without retraining
    python -m hf_icot.hub push OUTPUT_DIR --repo USER/NAME

``--config`` gives defaults, flags override them; ``--help`` lists every option. The data come from a Hub dataset
repo or a folder written by ``python -m datasets_builder build`` (``--dataset_name_or_path``), or are built on the fly
from ``--task`` and ``--task_args``. The run folder ends up holding the model (safetensors), tokenizer,
``training_curves.png``, ``training_log.json`` and the model card ``README.md``.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hf_icot.hub import PushError  # light: the Hub client is imported only when pushing

logger = logging.getLogger("icot_gpt2")


@dataclass
class ScriptArguments:
    """What to train on, which model, LoRA, and the model card; training itself is configured by ICoTConfig."""

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
            "help": "Parameters of --task, as JSON on the command line (e.g. '{\"a_digits\": 5}'), a mapping in YAML."
        },
    )
    max_train_examples: int | None = field(default=None, metadata={"help": "Train on the first N examples only."})
    max_eval_examples: int | None = field(
        default=None, metadata={"help": "Evaluate on the first N examples of each split only."}
    )
    eval_splits: list[str] | None = field(
        default=None, metadata={"help": "Splits for the final evaluation; default: every split but train."}
    )
    model_name_or_path: str | None = field(
        default=None, metadata={"help": "Hub id or local folder of a causal LM (e.g. gpt2); or use --scratch_model."}
    )
    scratch_model: dict | str | None = field(
        default=None,
        metadata={
            "help": "Train a GPT-2-architecture model from scratch with a word-level tokenizer built from the data; "
            'GPT2Config fields as JSON (e.g. \'{"n_layer": 2, "n_embd": 128, "n_head": 4}\') or a YAML mapping.'
        },
    )
    base_model_hub_id: str | None = field(
        default=None,
        metadata={
            "help": "Hub id of the base model when --model_name_or_path is a local folder (for card and adapter)."
        },
    )
    use_peft: bool = field(default=False, metadata={"help": "Train a LoRA adapter instead of all weights."})
    lora_r: int = field(default=16, metadata={"help": "LoRA rank."})
    lora_alpha: int = field(default=32, metadata={"help": "LoRA alpha (scaling = alpha / r)."})
    lora_dropout: float = field(default=0.05, metadata={"help": "LoRA dropout."})
    lora_target_modules: list[str] = field(
        default_factory=lambda: ["c_attn"],
        metadata={"help": "Module names LoRA adapts (GPT-2: c_attn; Llama-like models: q_proj v_proj ...)."},
    )
    merge_adapter: bool = field(
        default=False, metadata={"help": "Merge the LoRA adapter into the weights and save a plain model."}
    )
    card_license: str | None = field(default=None, metadata={"help": "License id for the model card (e.g. mit)."})

    def __post_init__(self) -> None:
        for name in ("task_args", "scratch_model"):
            value = getattr(self, name)
            if isinstance(value, str):
                try:
                    value = json.loads(value)
                except json.JSONDecodeError:
                    value = None
                if not isinstance(value, dict):
                    raise ValueError(
                        f"--{name} {getattr(self, name)!r} is not a JSON object; write e.g. '{{\"a\": 1}}'."
                    )
                setattr(self, name, value)
        if (self.dataset_name_or_path is None) == (self.task is None):
            raise ValueError("give exactly one of --dataset_name_or_path (a Hub repo or folder) and --task.")
        if (self.model_name_or_path is None) == (self.scratch_model is None):
            raise ValueError("give exactly one of --model_name_or_path (a Hub id or folder) and --scratch_model.")
        if self.merge_adapter and not self.use_peft:
            raise ValueError("--merge_adapter needs --use_peft (there is no adapter to merge).")


# ---------------------------------------------------------------------------------------------------------------
# Steps


def load_task_data(args: ScriptArguments) -> tuple[Any, dict[str, Any]]:
    """The task's ``DatasetDict`` and what the card says about it (source, config, fingerprint, task, splits)."""
    import datasets

    if args.task is not None:
        from datasets_builder import registry

        params = registry.make_params(args.task, **(args.task_args or {}))
        dataset = registry.get_task(args.task).build(params)
        fingerprints = ", ".join(f"{name} {split._fingerprint}" for name, split in dataset.items())
        # Reference text files are named by their folder (e.g. gsm8k), which says more than the task's name.
        label = params.config_name() if args.task == "reference_text" else args.task
        info = {"source": f"datasets_builder:{args.task}", "config": params.config_name(), "task": label}
        info["fingerprint"] = f"built on the fly from {json.dumps(vars(params), sort_keys=True)} ({fingerprints})"
    else:
        from hf_icot.data import load_icot_dataset

        config = args.dataset_config
        if config is None:
            configs = datasets.get_dataset_config_names(args.dataset_name_or_path)
            if len(configs) != 1:
                raise ValueError(
                    f"{args.dataset_name_or_path!r} has configs {', '.join(configs)}; pick one with --dataset_config."
                )
            config = configs[0]
        dataset = load_icot_dataset(args.dataset_name_or_path, config)
        record = _dataset_record(args.dataset_name_or_path, config)
        info = {"source": args.dataset_name_or_path, "config": config, "task": record.get("task", config)}
        info["fingerprint"] = record.get("fingerprint")
    if "train" not in dataset:
        raise ValueError(f"the dataset has no train split (it has {', '.join(dataset)}); give one with a train split.")
    info["splits"] = {name: len(split) for name, split in dataset.items()}
    return dataset, info


def _dataset_record(source: str, config: str) -> dict[str, Any]:
    """The ``icot_config.json`` that datasets_builder writes beside each config, or {} if there is none."""
    path = os.path.join(source, config, "icot_config.json")
    try:
        if not os.path.isdir(source):
            from huggingface_hub import hf_hub_download

            path = hf_hub_download(source, f"{config}/icot_config.json", repo_type="dataset")
        with open(path, encoding="utf-8") as stream:
            return json.load(stream)
    except Exception:  # the card then just lacks the fingerprint: a dataset need not come from datasets_builder
        return {}


def load_model_and_tokenizer(args: ScriptArguments, training_args: Any, dataset: Any) -> tuple[Any, Any]:
    """A pretrained causal LM and its tokenizer made ready for ICoT, or a GPT-2-architecture model from scratch."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, GPT2Config, GPT2LMHeadModel

    from hf_icot.tokenization import build_word_level_tokenizer, prepare_tokenizer_for_icot

    if args.scratch_model is not None:
        tokenizer = build_word_level_tokenizer(dataset, max_hint_length=_hint_length(training_args, dataset))
        ids = {"bos_token_id": tokenizer.eos_token_id, "eos_token_id": tokenizer.eos_token_id}
        try:
            config = GPT2Config(
                vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id, **ids, **args.scratch_model
            )
        except TypeError as error:
            raise ValueError(f"--scratch_model has a field GPT2Config does not take ({error}).") from None
        return GPT2LMHeadModel(config), tokenizer
    name = args.model_name_or_path
    looks_local = name.startswith((".", "/", "~")) or name.count("/") > 1  # a Hub id is name or owner/name
    if looks_local and not os.path.isdir(name):
        raise ValueError(
            f"model folder {name!r} does not exist; give a folder saved with save_pretrained, or a Hub id."
        )
    try:
        model = AutoModelForCausalLM.from_pretrained(name, use_safetensors=True)
        tokenizer = AutoTokenizer.from_pretrained(name)
    except (OSError, ValueError) as error:  # transformers raises ValueError for a tokenizer it cannot build
        if os.path.isdir(name):
            reason = f"the folder holds no safetensors causal LM with its tokenizer ({str(error).splitlines()[0]})"
        elif _offline():
            reason = "it is not in the local cache and HF_HUB_OFFLINE is set; unset it, or give a local folder"
        else:
            reason = f"the Hub has no such model or is unreachable ({str(error).splitlines()[0]}); check the id"
        raise ValueError(f"cannot load the model {name!r}: {reason}.") from None
    from hf_icot.config import schedule_from_config

    uses_placeholder = schedule_from_config(training_args).layout.uses_placeholder
    hint_length = _hint_length(training_args, dataset, tokenizer)
    prepare_tokenizer_for_icot(tokenizer, model, max_hint_length=hint_length, use_placeholder=uses_placeholder)
    return model, tokenizer


def _hint_length(training_args: Any, dataset: Any, tokenizer: Any = None) -> int:
    """The longest length hint a mixture with hints needs a token for (0: no hints)."""
    from hf_icot.config import schedule_from_config
    from hf_icot.cot import cot_token_count

    if not training_args.length_hint:
        return 0
    if training_args.mixture_max_length is not None:
        return training_args.mixture_max_length
    if schedule_from_config(training_args).layout.unit == "step":
        return max(len(example["cot"]) for example in dataset["train"])
    return max(cot_token_count(example, tokenizer) for example in dataset["train"])


def _offline() -> bool:
    from huggingface_hub import constants

    return constants.is_offline_mode()


def wrap_lora(model: Any, args: ScriptArguments, model_name: str) -> Any:
    """``model`` with a LoRA adapter on ``args.lora_target_modules`` (GPT-2's Conv1D layers get fan_in_fan_out)."""
    from peft import LoraConfig, get_peft_model
    from transformers.pytorch_utils import Conv1D

    targets = [module for name, module in model.named_modules() if name.split(".")[-1] in args.lora_target_modules]
    if not targets:
        leaves = sorted({name.split(".")[-1] for name, module in model.named_modules() if not list(module.children())})
        raise ValueError(
            f"--lora_target_modules {' '.join(args.lora_target_modules)} names no module of {model_name!r}; "
            f"its layers are named {', '.join(leaves[:12])}; pass some of those."
        )
    config = LoraConfig(
        r=args.lora_r,
        lora_alpha=args.lora_alpha,
        lora_dropout=args.lora_dropout,
        target_modules=list(args.lora_target_modules),
        fan_in_fan_out=all(isinstance(module, Conv1D) for module in targets),
        task_type="CAUSAL_LM",
    )
    model = get_peft_model(model, config)
    if args.base_model_hub_id:  # what adapter_config.json names, so that others can load the base
        model.peft_config["default"].base_model_name_or_path = args.base_model_hub_id
    return model


def check_push_possible(args: ScriptArguments, training_args: Any) -> None:
    """Fail before training, not after, when the final push cannot work."""
    from huggingface_hub import get_token

    from hf_icot.hub import is_hub_id

    if not training_args.hub_model_id:
        raise ValueError("--push_to_hub needs --hub_model_id USER/NAME, the model repo to push to.")
    if _offline():
        raise ValueError("--push_to_hub is set but HF_HUB_OFFLINE is set, so the Hub is unreachable; unset one.")
    if not (training_args.hub_token or get_token()):
        raise ValueError("--push_to_hub needs a Hugging Face token: run `hf auth login` or set HF_TOKEN.")
    base = args.base_model_hub_id or args.model_name_or_path
    if args.use_peft and not args.merge_adapter and not is_hub_id(base):
        raise ValueError(
            f"the adapter would name the local base model {base!r}, which others cannot load; "
            "pass --base_model_hub_id with its Hub id, or --merge_adapter."
        )


# ---------------------------------------------------------------------------------------------------------------
# Main


def main(script_args: ScriptArguments, training_args: Any) -> dict[str, float]:
    """Run the recipe; returns the final evaluation metrics (``<split>/<mode>/answer_em``, speeds).

    Raises:
        ValueError: bad input (one sentence saying what to change), before any training where possible.
        hf_icot.hub.PushError: the final upload failed; the output folder is complete and the message gives the
            command that retries it.
    """
    from transformers import set_seed

    from hf_icot.cot import cot_token_count
    from hf_icot.evaluation import evaluate_splits, flatten_split_metrics
    from hf_icot.hub import push_output_dir, save_model, write_text_atomic
    from hf_icot.model_card import describe_run, save_training_curves, write_model_card
    from hf_icot.trainer import ICoTTrainer

    # The recipe pushes the finished folder itself (card, curves, adapter handling); Trainer's own push is off.
    push_to_hub, training_args.push_to_hub = training_args.push_to_hub, False
    if push_to_hub:
        check_push_possible(script_args, training_args)
    set_seed(training_args.seed)

    # Step 1: data.
    dataset, dataset_info = load_task_data(script_args)
    train = dataset["train"]
    if script_args.max_train_examples is not None:
        train = train.select(range(min(script_args.max_train_examples, len(train))))
    eval_splits = script_args.eval_splits or [name for name in dataset if name != "train"]
    missing = [name for name in eval_splits if name not in dataset]
    if not eval_splits:
        raise ValueError("the dataset has only a train split; the final evaluation needs a validation or test split.")
    if missing:
        raise ValueError(f"--eval_splits names {missing[0]!r}, which the dataset lacks; it has {', '.join(dataset)}.")
    evaluation_sets = {name: dataset[name] for name in eval_splits}
    if script_args.max_eval_examples is not None:
        evaluation_sets = {
            name: split.select(range(min(script_args.max_eval_examples, len(split))))
            for name, split in evaluation_sets.items()
        }

    # Step 2: model and tokenizer.
    model, tokenizer = load_model_and_tokenizer(script_args, training_args, dataset)
    model_name = script_args.model_name_or_path or "the scratch model"
    if script_args.use_peft:
        model = wrap_lora(model, script_args, model_name)

    # Step 3: train with the curriculum.
    try:
        trainer = ICoTTrainer(
            model=model,
            args=training_args,
            train_dataset=train,
            eval_dataset=evaluation_sets.get("validation"),
            processing_class=tokenizer,
        )
    except ValueError as error:
        raise ValueError(f"{model_name} cannot train on this data: {error}") from None
    if trainer.is_fsdp_enabled and script_args.merge_adapter:
        raise ValueError(
            "--merge_adapter is not supported under FSDP; save the adapter, then merge it in one process."
        )
    trainer.train()

    # Step 4: evaluate implicit and explicit answers (and the hint=k modes asked for in eval_modes) on every
    # evaluation split (all ranks under FSDP, whose forward needs every shard; otherwise the main process alone).
    metrics: dict[str, float] = {}
    if trainer.is_fsdp_enabled or trainer.is_world_process_zero():
        hints = [mode for mode in training_args.eval_modes or [] if mode.startswith("hint=")]
        results = evaluate_splits(
            trainer.accelerator.unwrap_model(trainer.model),
            tokenizer,
            evaluation_sets,
            modes=["implicit", "explicit", *hints],
            batch_size=training_args.per_device_eval_batch_size,
            layout=trainer.layout,
        )
        metrics = flatten_split_metrics(results)
    trainer.accelerator.wait_for_everyone()

    # Step 5: save model, curves and card (main process), then push.
    output_dir = training_args.output_dir
    if trainer.is_fsdp_enabled:
        trainer.save_model(output_dir)  # gathers the full state dict (or the adapter's) from the shards
        weights_kind = "adapter" if script_args.use_peft else "full"
    elif trainer.is_world_process_zero():
        weights_kind = save_model(
            trainer.accelerator.unwrap_model(trainer.model),
            tokenizer,
            output_dir,
            merge_adapter=script_args.merge_adapter,
            base_model_id=script_args.base_model_hub_id,
        )
    if trainer.is_world_process_zero():
        run = describe_run(trainer)
        save_training_curves(
            trainer.state.log_history, [s["start_step"] for s in run["schedule"]["stages"]], output_dir
        )
        example = evaluation_sets[eval_splits[0]][0]
        answer_tokens = len(tokenizer(" #### " + example["answer"], add_special_tokens=False)["input_ids"])
        write_model_card(
            output_dir,
            title=os.path.basename(os.path.normpath(training_args.hub_model_id or output_dir)),
            model_ref=training_args.hub_model_id or output_dir,
            base_model=None if script_args.scratch_model else script_args.base_model_hub_id or model_name,
            weights_kind=weights_kind,
            dataset=dataset_info,
            metrics=metrics,
            example={
                "question": example["question"],
                "answer": example["answer"],
                "max_new_tokens": answer_tokens + 8,
                # keep_position models expect the answer where the full CoT would have ended
                "position_shift": cot_token_count(example, tokenizer) if trainer.layout.keeps_positions else 0,
            },
            license=script_args.card_license,
            inference_setting=f"{trainer.args.device.type}, batch size {training_args.per_device_eval_batch_size}",
            **run,
        )
        write_text_atomic(Path(output_dir) / "eval_results.json", json.dumps(metrics, indent=2, sort_keys=True) + "\n")
        if push_to_hub:
            url = push_output_dir(
                output_dir,
                training_args.hub_model_id,
                private=bool(training_args.hub_private_repo),
                revision=training_args.hub_revision,
                token=training_args.hub_token,
            )
            logger.info("pushed %s to %s", output_dir, url)
    trainer.end_processes()  # left to interpreter shutdown, the process group's threads can abort a rank (SIGABRT)
    return metrics


def parse_args(argv: list[str] | None = None) -> tuple[ScriptArguments, Any]:
    """``(ScriptArguments, ICoTConfig)`` from ``--config file.yaml`` (defaults) and flags (overrides)."""
    import yaml

    from hf_icot.config import ICoTConfig, parse_config

    argv = list(sys.argv[1:] if argv is None else argv)
    script_args, training_args = parse_config((ScriptArguments, ICoTConfig), argv)
    # A mapping given on the command line updates the config file's mapping instead of replacing it, so that
    # `--task_args '{"a_digits": 5}'` keeps the file's split sizes.
    config_path = next((argv[i + 1] for i, flag in enumerate(argv[:-1]) if flag == "--config"), None)
    if config_path is not None:
        with open(config_path, encoding="utf-8") as stream:
            defaults = yaml.safe_load(stream) or {}
        for name in ("task_args", "scratch_model"):
            if f"--{name}" in argv and isinstance(defaults.get(name), dict):
                setattr(script_args, name, {**defaults[name], **getattr(script_args, name)})
    return script_args, training_args


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    try:
        main(*parse_args())
    except (ValueError, PushError) as error:
        sys.exit(f"error: {error}")
