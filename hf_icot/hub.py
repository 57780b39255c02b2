"""Save a trained ICoT model with its card and curves, and push the folder to the Hugging Face Hub.

A finished run leaves one self-contained folder: safetensors weights (a full model, or a LoRA adapter alone), the
tokenizer, ``training_curves.png`` (loss with the curriculum's stage boundaries), ``training_log.json`` (the Trainer's
log history) and ``README.md`` (the model card, rendered from ``model_cards/model_card.md.j2``). Pushing uploads that
folder as it is, so an upload that fails can be retried without retraining::

    python -m hf_icot.hub push OUTPUT_DIR --repo USER/NAME [--private] [--revision BRANCH]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

CURVES_PNG = "training_curves.png"
LOG_JSON = "training_log.json"
CARD_FILE = "README.md"
#: What a run folder may hold that is not part of the published model (Trainer and per-stage checkpoints,
#: TensorBoard runs, staging folders); a pattern's ``*`` also matches ``/``.
PUSH_IGNORE = ["checkpoint-*", "stage-*", "runs/*", ".*", "*.lock"]

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
    "log_icot": """@article{logicot2026,
  title   = {Transformers Provably Learn to Internalize Chain-of-Thought},
  journal = {arXiv preprint arXiv:2605.28600},
  year    = {2026}
}""",
}


class PushError(RuntimeError):
    """An upload that did not happen; the message is one sentence saying why and how to retry."""


# ---------------------------------------------------------------------------------------------------------------
# Saving


def _default_file_mode() -> int:
    """The mode ``open()`` gives a new file under the current umask (temporary files get 0600 instead)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _move_into(staging: Path, output_dir: Path) -> None:
    """Move every file of ``staging`` into ``output_dir`` (same filesystem, so each move is an atomic rename)."""
    for path in sorted(staging.rglob("*")):
        if path.is_file():
            target = output_dir / path.relative_to(staging)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.chmod(path, _default_file_mode())
            os.replace(path, target)


def save_model(
    model: Any,
    tokenizer: Any,
    output_dir: str | os.PathLike,
    *,
    merge_adapter: bool = False,
    base_model_id: str | None = None,
) -> str:
    """Save ``model`` (safetensors) and ``tokenizer`` into ``output_dir``, written aside first and then moved in.

    Args:
        model: a ``PreTrainedModel`` or a PEFT model wrapping one.
        tokenizer: its tokenizer.
        output_dir: the run folder (created if missing).
        merge_adapter: for a PEFT model, merge the adapter into the base weights and save a plain model.
        base_model_id: for an adapter saved alone, the Hub id written as ``base_model_name_or_path`` in
            ``adapter_config.json`` (so that others can load it); by default the path the base was loaded from.

    Returns:
        ``"full"`` (a plain model), ``"merged"`` (a plain model with the adapter merged in) or ``"adapter"``.
    """
    from peft import PeftModel

    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    kind = "full"
    if isinstance(model, PeftModel):
        if merge_adapter:
            model, kind = model.merge_and_unload(), "merged"
        else:
            kind = "adapter"
            if base_model_id:
                for config in model.peft_config.values():
                    config.base_model_name_or_path = base_model_id
    with tempfile.TemporaryDirectory(dir=output_dir, prefix=".saving-") as staging:
        model.save_pretrained(staging, safe_serialization=True)
        tokenizer.save_pretrained(staging)
        _move_into(Path(staging), output_dir)
    return kind


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
    json_path, png_path = output_dir / LOG_JSON, output_dir / CURVES_PNG
    _write_atomic(json_path, json.dumps(list(log_history), indent=2, sort_keys=True) + "\n")

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
    os.chmod(handle.name, _default_file_mode())
    os.replace(handle.name, png_path)
    return png_path, json_path


def _write_atomic(path: Path, text: str) -> None:
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, encoding="utf-8", suffix=".tmp") as handle:
        handle.write(text)
    os.chmod(handle.name, _default_file_mode())
    os.replace(handle.name, path)


# ---------------------------------------------------------------------------------------------------------------
# Model card


def split_metrics(metrics: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Rows ``{split, implicit, explicit}`` from evaluation metrics named ``<split>/<mode>/answer_em``."""
    rows: dict[str, dict[str, Any]] = {}
    for key, value in metrics.items():
        parts = key.split("/")
        if len(parts) == 3 and parts[2] == "answer_em" and parts[1] in ("implicit", "explicit"):
            rows.setdefault(parts[0], {"split": parts[0], "implicit": None, "explicit": None})[parts[1]] = value
    order = {"validation": 0, "test": 1}
    return sorted(rows.values(), key=lambda row: (order.get(row["split"], 2), row["split"]))


_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")


def is_hub_id(name: str | None) -> bool:
    """Whether ``name`` reads as a Hub repo id (``name`` or ``owner/name``) rather than a local path or a label."""
    if not name or os.path.exists(name):
        return False
    return _HUB_ID.fullmatch(name) is not None and ".." not in name


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
        for mode in ("implicit", "explicit"):
            if row[mode] is None:
                continue
            eval_results.append(
                EvalResult(
                    task_type="text-generation",
                    task_name=f"{mode.capitalize()} chain of thought",
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
            :func:`hf_icot.evaluation.flatten_split_metrics` gives them.
        example: ``question``, ``answer`` and ``max_new_tokens`` for the how-to-use snippet.
        peft: LoRA settings, if any.
        license: an SPDX-style license id for the metadata.
        inference_setting: how the throughput was measured (device, batch size), shown beside it.

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
        loss_curve=CURVES_PNG if (output_dir / CURVES_PNG).exists() else None,
        example=dict(example),
        citations=citations_for(str(schedule.get("name", ""))),
        versions=versions,
    )
    path = output_dir / CARD_FILE
    _write_atomic(path, text)
    return path


# ---------------------------------------------------------------------------------------------------------------
# Pushing


def check_pushable(output_dir: str | os.PathLike) -> str:
    """Check that ``output_dir`` holds a saved model or adapter in safetensors; return ``"model"`` or ``"adapter"``.

    Raises:
        ValueError: the folder is missing, holds no ``config.json``/``adapter_config.json`` or no safetensors weights,
            or is an adapter whose ``base_model_name_or_path`` is a local path others cannot load.
    """
    folder = Path(output_dir)
    if not folder.is_dir():
        raise ValueError(f"output folder {str(folder)!r} does not exist; give the output_dir of a finished run.")
    kind = "adapter" if (folder / "adapter_config.json").is_file() else "model"
    if kind == "model" and not (folder / "config.json").is_file():
        raise ValueError(
            f"{str(folder)!r} holds neither config.json nor adapter_config.json; give the output_dir of a finished run."
        )
    if not any(folder.glob("*.safetensors")):
        raise ValueError(f"{str(folder)!r} holds no .safetensors weights; only safetensors models are pushed.")
    if kind == "adapter":
        base = json.loads((folder / "adapter_config.json").read_text()).get("base_model_name_or_path")
        if not is_hub_id(base):
            raise ValueError(
                f"the adapter in {str(folder)!r} names the local base model {base!r}, which others cannot load; "
                "set base_model_name_or_path in adapter_config.json to the base model's Hub id "
                "(the recipe's --base_model_hub_id does this at save time)."
            )
    return kind


def _describe_failure(error: BaseException) -> str:
    """A short reason for a failed Hub call, never containing the token."""
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    if isinstance(error, OfflineModeIsEnabled):
        return "HF_HUB_OFFLINE is set"
    response = getattr(error, "response", None) if isinstance(error, HfHubHTTPError) else None
    status = getattr(response, "status_code", None)
    if status in (401, 403):
        return f"the Hub refused the token (HTTP {status}); check it with `hf auth whoami`"
    if status is not None:
        return f"the Hub answered HTTP {status}"
    return f"the Hub could not be reached ({type(error).__name__})"


def push_command(
    output_dir: str | os.PathLike, repo_id: str, private: bool = False, revision: str | None = None
) -> str:
    """The shell command that (re)uploads ``output_dir`` as it is."""
    command = f"python -m hf_icot.hub push {output_dir} --repo {repo_id}"
    return command + (" --private" if private else "") + (f" --revision {revision}" if revision else "")


def push_output_dir(
    output_dir: str | os.PathLike,
    repo_id: str,
    private: bool = False,
    revision: str | None = None,
    token: str | None = None,
    *,
    endpoint: str | None = None,
) -> str:
    """Upload a finished run folder (model or adapter, tokenizer, card, curves) to the Hub in one commit.

    Trainer checkpoints, hidden files and pickled weights are left out. The folder itself is only read, so a failed
    upload can be retried with :func:`push_command`'s command.

    Args:
        output_dir: the run folder.
        repo_id: ``owner/name`` of the model repo (created if missing).
        private: create the repo private.
        revision: branch to push to (created from main if missing); main by default.
        token: a Hub token; by default the one from ``HF_TOKEN`` or ``hf auth login``.
        endpoint: the Hub URL; by default ``HF_ENDPOINT`` or https://huggingface.co.

    Returns:
        The URL of the commit.

    Raises:
        ValueError: ``output_dir`` is not a pushable run folder (see :func:`check_pushable`).
        PushError: no token, offline mode, or the Hub refused or failed the upload (one sentence with the retry
            command).
    """
    from huggingface_hub import HfApi, constants, get_token

    check_pushable(output_dir)
    retry = push_command(output_dir, repo_id, private, revision)
    if constants.is_offline_mode():
        raise PushError(
            f"cannot push {output_dir} to {repo_id}: HF_HUB_OFFLINE is set, so the Hub is unreachable; "
            f"unset it, then run `{retry}`."
        )
    token = token or get_token()
    if not token:
        raise PushError(
            f"cannot push {output_dir} to {repo_id}: no Hugging Face token found; "
            f"run `hf auth login` or set HF_TOKEN, then run `{retry}`."
        )
    api = HfApi(endpoint=endpoint, token=token)
    try:
        api.create_repo(repo_id, repo_type="model", private=private, exist_ok=True)
        if revision:
            api.create_branch(repo_id, branch=revision, repo_type="model", exist_ok=True)
        commit = api.upload_folder(
            repo_id=repo_id,
            folder_path=output_dir,
            repo_type="model",
            revision=revision,
            ignore_patterns=PUSH_IGNORE + ["*.bin", "*.pt", "*.pth", "*.pkl"],
            commit_message="Upload ICoT model trained with hf_icot",
        )
    except Exception as error:  # any failure of the two Hub calls is reported the same way: nothing local changed
        raise PushError(
            f"pushing {output_dir} to {repo_id} failed: {_describe_failure(error)}; the folder is intact, "
            f"so retry with `{retry}`."
        ) from error
    return str(getattr(commit, "commit_url", commit))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m hf_icot.hub push OUTPUT_DIR --repo ID [--private] [--revision R]``."""
    parser = argparse.ArgumentParser(
        prog="python -m hf_icot.hub",
        description="Upload a finished hf_icot run folder (weights, tokenizer, model card, curves) to the Hugging "
        "Face Hub, as it is on disk: use it to retry a push that failed at the end of training.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    push = commands.add_parser(
        "push",
        help="upload OUTPUT_DIR to a model repo",
        description="Upload OUTPUT_DIR to a model repo in one commit (checkpoints, hidden files and pickles left out). "
        "The token comes from HF_TOKEN or `hf auth login`; HF_ENDPOINT selects another Hub.",
    )
    push.add_argument("output_dir", help="the run folder holding the saved model or adapter")
    push.add_argument("--repo", required=True, help="model repo id, owner/name (created if missing)")
    push.add_argument(
        "--private", action="store_true", help="create the repo private (an existing repo keeps its own)"
    )
    push.add_argument("--revision", default=None, help="branch to push to (created if missing); default main")
    args = parser.parse_args(argv)
    try:
        url = push_output_dir(args.output_dir, args.repo, private=args.private, revision=args.revision)
    except ValueError as error:
        push.error(str(error))
    except PushError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"pushed {args.output_dir} to {args.repo}: {url}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
