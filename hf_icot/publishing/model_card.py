"""The model card of a trained ICoT model, and the loss curve it embeds.

:func:`write_model_card` renders ``model_cards/model_card.md.j2`` into the run folder's ``README.md``: YAML metadata
whose model-index holds implicit and explicit exact match per split (``huggingface_hub.EvalResult``), then the
results, throughput, curriculum stages, hyperparameters, a how-to-use snippet and citations.
:func:`save_training_curves` plots the Trainer's loss with the curriculum's stage boundaries; :func:`describe_run`
gathers from a finished ``ICoTTrainer`` what the card says about the run.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hf_icot.data import split_order
from hf_icot.locations import is_hub_id
from hf_icot.publishing.run_files import CARD_FILE, CURVES_FILE, TRAINING_LOG_FILE
from hf_icot.publishing.saving import default_file_mode, write_text_atomic

CITATIONS = {
    "stepwise": """@article{deng2024explicit,
  title   = {From Explicit CoT to Implicit CoT: Learning to Internalize CoT Step by Step},
  author  = {Deng, Yuntian and Choi, Yejin and Shieber, Stuart},
  journal = {arXiv preprint arXiv:2405.14838},
  year    = {2024}
}""",
    "icot_kd": """@article{deng2023implicit,
  title   = {Implicit Chain of Thought Reasoning via Knowledge Distillation},
  author  = {Deng, Yuntian and Prasad, Kiran and Fernandez, Roland and Smolensky, Paul and Chaudhary, Vishrav
             and Shieber, Stuart},
  journal = {arXiv preprint arXiv:2311.01460},
  year    = {2023}
}""",
    "log_icot": """@article{huang2026provably,
  title   = {Transformers Provably Learn to Internalize Chain-of-Thought},
  author  = {Huang, Yixiao and Zhu, Hanlin and Wang, Zixuan and Jiao, Jiantao and Russell, Stuart and Sojoudi, Somayeh
             and Mei, Song},
  journal = {arXiv preprint arXiv:2605.28600},
  year    = {2026}
}""",
    "coconut": """@article{hao2024training,
  title   = {Training Large Language Models to Reason in a Continuous Latent Space},
  author  = {Hao, Shibo and Sukhbaatar, Sainbayar and Su, DiJia and Li, Xian and Hu, Zhiting and Weston, Jason
             and Tian, Yuandong},
  journal = {arXiv preprint arXiv:2412.06769},
  year    = {2024}
}""",
    "codi": """@article{shen2025codi,
  title   = {CODI: Compressing Chain-of-Thought into Continuous Space via Self-Distillation},
  author  = {Shen, Zhenyi and Yan, Hanqi and Zhang, Linhai and Hu, Zhanghao and Du, Yali and He, Yulan},
  journal = {arXiv preprint arXiv:2502.21074},
  year    = {2025}
}""",
    "pccot": """@article{wu2025parallel,
  title   = {Parallel Continuous Chain-of-Thought with Jacobi Iteration},
  author  = {Wu, Haoyi and Teng, Zhihao and Tu, Kewei},
  journal = {arXiv preprint arXiv:2506.18582},
  year    = {2025}
}""",
}


def save_training_curves(
    log_history: Sequence[Mapping[str, Any]], stage_starts: Sequence[int], output_dir: str | os.PathLike
) -> tuple[Path, Path]:
    """Write the Trainer's ``log_history`` as ``training_log.json`` and plot its losses as ``training_curves.png``.

    Args:
        log_history: ``trainer.state.log_history`` (dicts with ``step`` and ``loss`` and/or ``eval_loss``).
        stage_starts: the optimizer steps at which curriculum stages begin (drawn as dashed lines; 0 is skipped).
        output_dir: where both files go.

    Returns:
        The paths of the PNG and of the JSON file.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    json_path, png_path = output_dir / TRAINING_LOG_FILE, output_dir / CURVES_FILE
    write_text_atomic(json_path, json.dumps(list(log_history), indent=2, sort_keys=True) + "\n")

    figure, axis = plt.subplots(figsize=(7, 4), dpi=100)
    for key, label in (("loss", "training loss"), ("eval_loss", "validation loss")):
        points = [(entry["step"], entry[key]) for entry in log_history if key in entry and "step" in entry]
        if points:
            steps, values = zip(*points)
            axis.plot(steps, values, marker="." if len(points) < 50 else None, label=label)
    for index, step in enumerate(s for s in stage_starts if s > 0):
        axis.axvline(step, color="gray", linestyle="--", linewidth=0.8, label="stage boundary" if index == 0 else None)
    axis.set_xlabel("optimizer step")
    axis.set_ylabel("loss")
    axis.set_title("ICoT training: loss as chain-of-thought tokens are removed")
    if axis.get_legend_handles_labels()[0]:
        axis.legend()
    figure.tight_layout()
    with tempfile.NamedTemporaryFile(dir=output_dir, suffix=".png", delete=False) as handle:
        # Fixed metadata: the same run gives the same bytes.
        figure.savefig(handle, format="png", metadata={"Software": None})
    plt.close(figure)
    os.chmod(handle.name, default_file_mode())
    os.replace(handle.name, png_path)
    return png_path, json_path


#: The modes the card's table and model-index show, headline first when evaluated.
CARD_MODES = ("reference", "implicit", "explicit")


def split_metrics(metrics: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Rows ``{split, reference, implicit, explicit}`` from evaluation metrics named ``<split>/<mode>/answer_em``
    (None where a mode was not evaluated; ``reference`` is the stepwise reference's protocol)."""
    rows: dict[str, dict[str, Any]] = {}
    for key, value in metrics.items():
        parts = key.split("/")
        if len(parts) == 3 and parts[2] == "answer_em" and parts[1] in CARD_MODES:
            row = rows.setdefault(parts[0], {"split": parts[0], **dict.fromkeys(CARD_MODES)})
            row[parts[1]] = value
    return sorted(rows.values(), key=lambda row: split_order(row["split"]))


def build_card_data(
    *,
    model_name: str,
    results: Sequence[Mapping[str, Any]],
    dataset_source: str,
    dataset_name: str,
    dataset_config: str | None,
    base_model: str | None,
    license: str | None,
    is_adapter: bool,
) -> Any:
    """The card's YAML metadata: a ``huggingface_hub.ModelCardData`` whose model-index holds one implicit and one
    explicit exact-match ``EvalResult`` per evaluated split (``results`` as returned by :func:`split_metrics`)."""
    from huggingface_hub import EvalResult, ModelCardData

    eval_results = []
    for row in results:
        for mode in CARD_MODES:
            if row.get(mode) is None:
                continue
            eval_results.append(
                EvalResult(
                    task_type="text-generation",
                    dataset_type=dataset_source,
                    dataset_name=dataset_name,
                    dataset_config=dataset_config,
                    dataset_split=row["split"],
                    metric_type="exact_match",
                    metric_name=f"{mode.capitalize()} exact match",
                    metric_value=float(row[mode]),
                )
            )
    return ModelCardData(
        model_name=model_name,
        base_model=base_model if is_hub_id(base_model) else None,
        datasets=[dataset_source] if is_hub_id(dataset_source) else None,
        license=license,
        library_name="peft" if is_adapter else "transformers",
        pipeline_tag="text-generation",
        tags=["implicit-chain-of-thought", "icot", "hf_icot"] + (["lora"] if is_adapter else []),
        eval_results=eval_results or None,
    )


def citations_for(schedule_name: str) -> list[str]:
    """BibTeX entries of the methods behind a schedule (the stepwise ICoT paper always, as the method's origin)."""
    name = schedule_name.lower().replace("-", "").replace("_", "")
    entries = [CITATIONS["stepwise"]]
    if "logicot" in name:
        entries.append(CITATIONS["log_icot"])
    if "kd" in name or "distill" in name:
        entries.append(CITATIONS["icot_kd"])
    if name in ("coconut", "codi", "pccot"):
        entries.append(CITATIONS[name])
    if name == "pccot":  # its teacher, student and distillation are CODI's
        entries.append(CITATIONS["codi"])
    return entries


def write_model_card(
    output_dir: str | os.PathLike,
    *,
    title: str,
    model_ref: str,
    base_model: str | None,
    architecture: str,
    weights_kind: str,
    dataset: Mapping[str, Any],
    schedule: Mapping[str, Any],
    hyperparameters: Mapping[str, Any],
    metrics: Mapping[str, Any],
    example: Mapping[str, Any],
    peft: Mapping[str, Any] | None = None,
    license: str | None = None,
    inference_setting: str = "greedy decoding",
    selection: Mapping[str, Any] | None = None,
) -> Path:
    """Render ``model_cards/model_card.md.j2`` into ``output_dir/README.md``.

    Args:
        title: the card's heading (and the model-index name).
        model_ref: the Hub id (or folder) that the how-to-use snippet loads.
        base_model: the model fine-tuned, or None when trained from scratch.
        architecture: a short description, e.g. ``"GPT-2, 12 layers, 768 wide, 124M parameters"``.
        weights_kind: what :func:`save_model` returned.
        dataset: ``source`` (Hub id or folder), ``config``, ``fingerprint``, ``splits`` ({name: rows}), ``task``.
        schedule: ``name``, ``params`` (the schedule's ``to_dict()``), ``stages`` (list of dicts), ``total_steps``.
        hyperparameters: training hyperparameters shown in a table.
        metrics: flat evaluation metrics (``<split>/<mode>/answer_em``, ``<split>/<mode>/examples_per_s``), as
            :func:`hf_icot.evaluation.generation_accuracy.evaluate_generation` gives them for a mapping of splits.
        example: ``question``, ``answer``, ``max_new_tokens`` and, for keep_position models, ``position_shift`` (the
            CoT tokens removed before the answer) for the how-to-use snippet.
        peft: LoRA settings, if any.
        license: an SPDX-style license id for the metadata.
        inference_setting: how the throughput was measured (device, batch size), shown beside it.
        selection: per-epoch model selection (:meth:`hf_icot.training.selection.BestEpochCallback.summary`), or None.

    Returns:
        The path of the card. The loss-curve PNG is embedded when ``training_curves.png`` is in ``output_dir``.

    Raises:
        ValueError: ``weights_kind`` is not one of full, merged, adapter.
    """
    import huggingface_hub
    import peft as peft_lib
    import torch
    import transformers

    from model_cards import render

    if weights_kind not in ("full", "merged", "adapter"):
        raise ValueError(f"weights_kind {weights_kind!r} is unknown; allowed: full, merged, adapter.")
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    results = split_metrics(metrics)
    card_data = build_card_data(
        model_name=title,
        results=results,
        dataset_source=str(dataset["source"]),
        dataset_name=str(dataset.get("task") or dataset["source"]),
        dataset_config=dataset.get("config"),
        base_model=base_model,
        license=license,
        is_adapter=weights_kind == "adapter",
    )
    throughput = None
    for row in sorted(results, key=lambda row: row["split"] != "test"):  # the test split's speed, else the first
        implicit = metrics.get(f"{row['split']}/implicit/examples_per_s")
        explicit = metrics.get(f"{row['split']}/explicit/examples_per_s")
        if implicit and explicit:
            throughput = {"implicit": implicit, "explicit": explicit, "speedup": implicit / explicit}
            throughput["measured_on"] = f"{row['split']} split, {inference_setting}"
            break
    versions = {
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "peft": peft_lib.__version__,
        "huggingface_hub": huggingface_hub.__version__,
    }
    text = render(
        "model_card.md.j2",
        card_data_yaml=card_data.to_yaml(),
        title=title,
        model_ref=model_ref,
        base_model=base_model,
        base_model_url=f"https://huggingface.co/{base_model}" if is_hub_id(base_model) else None,
        architecture=architecture,
        weights_kind=weights_kind,
        peft=dict(peft) if peft else None,
        dataset=dict(dataset),
        schedule=dict(schedule),
        hyperparameters=dict(hyperparameters),
        results=results,
        throughput=throughput,
        selection=dict(selection) if selection else None,
        loss_curve=CURVES_FILE if (output_dir / CURVES_FILE).exists() else None,
        example=dict(example),
        citations=citations_for(str(schedule.get("name", ""))),
        versions=versions,
    )
    path = output_dir / CARD_FILE
    write_text_atomic(path, text)
    return path


def describe_run(trainer: Any) -> dict[str, Any]:
    """What the card says about a finished :class:`hf_icot.training.trainer.ICoTTrainer` run: ``architecture``, ``schedule``
    (name, parameters, stages, total steps), ``hyperparameters`` and ``peft`` (LoRA settings, or None); the keys are
    :func:`write_model_card` arguments."""
    from transformers.trainer_utils import SchedulerType
    from transformers.training_args import OptimizerNames

    args, model = trainer.args, trainer.accelerator.unwrap_model(trainer.model)
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    # The model that answers: a module the method trains beside it and never runs to answer (SIM-CoT's decoder) is
    # left out of the count, as it is out of model.safetensors.
    beside = {id(p) for module in trainer.method.training_only_modules(model) for p in module.parameters()}
    n_params = sum(p.numel() for p in base.parameters() if id(p) not in beside)
    size = f"{n_params / 1e6:.1f}M" if n_params >= 1e6 else f"{n_params / 1e3:.1f}K"
    layers, width = getattr(base.config, "n_layer", None), getattr(base.config, "n_embd", None)
    shape = f", {layers} layers, {width} wide" if layers and width else ""
    total_steps = trainer.state.max_steps
    schedule = trainer.schedule
    lora = next(iter(getattr(model, "peft_config", {}).values()), None)
    return {
        "architecture": f"{base.config.model_type}{shape}, {size} parameters",
        "schedule": {
            "name": schedule.name,
            # the method's own options (CODI's projection and loss weights, ...) beside its plan's
            "params": {
                **{key: value for key, value in schedule.to_dict().items() if key != "name"},
                **(trainer.method.to_dict() if getattr(trainer, "method", None) is not None else {}),
            },
            "stages": schedule.describe(total_steps),
            "total_steps": total_steps,
        },
        "hyperparameters": {
            "learning rate": args.learning_rate,
            "batch size (per device × accumulation × devices)": (
                f"{args.per_device_train_batch_size} × {args.gradient_accumulation_steps} × {args.world_size}"
            ),
            "epochs": args.num_train_epochs,
            "optimizer steps": total_steps,
            "optimizer": OptimizerNames(args.optim).value,
            "learning-rate schedule": SchedulerType(args.lr_scheduler_type).value,
            "warmup steps": args.warmup_steps,
            "weight decay": args.weight_decay,
            "max grad norm": args.max_grad_norm,
            "precision": "bf16" if args.bf16 else "fp16" if args.fp16 else "fp32",
            "seed": args.seed,
        },
        "peft": None
        if lora is None
        else {
            "rank": lora.r,
            "alpha": lora.lora_alpha,
            "dropout": lora.lora_dropout,
            "target modules": ", ".join(sorted(lora.target_modules)),
        },
    }
