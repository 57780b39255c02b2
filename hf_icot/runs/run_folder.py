"""The run folder (``output_dir``) between runs: which checkpoints are complete, whether a new run would write over
another one, and which checkpoint ``--resume_from_checkpoint`` names.

A recipe calls :func:`prepare_run_folder` first, before any data are built, and passes what it returns to
``trainer.train(resume_from_checkpoint=...)``; :class:`hf_icot.training.trainer.ICoTTrainer` writes each checkpoint
under a marker (:data:`CHECKPOINT_WRITING`) that it removes once every process has written its part, so a run killed at
any moment leaves either a complete checkpoint or one :func:`checkpoint_problem` names and the lookup skips.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import struct
import zipfile
from pathlib import Path
from typing import Any

from hf_icot.publishing.run_files import EVAL_RESULTS_FILE
from hf_icot.publishing.saving import SAVING_PREFIX

logger = logging.getLogger(__name__)

CHECKPOINT_PATTERN = re.compile(r"^checkpoint-(\d+)$")
#: Written first into a checkpoint folder and removed last (see
#: :meth:`hf_icot.training.trainer.ICoTTrainer._save_checkpoint`).
CHECKPOINT_WRITING = ".icot-checkpoint-writing"
TRAINER_STATE = "trainer_state.json"
#: One of these holds a checkpoint's weights: a full model, a sharded one, a LoRA adapter, FSDP's sharded state.
CHECKPOINT_WEIGHTS = (
    "model.safetensors",
    "model.safetensors.index.json",
    "adapter_model.safetensors",
    "pytorch_model_fsdp_0",
)
#: The folders and files in output_dir that mark it as holding a run (a new run would replace them).
RUN_FOLDERS = re.compile(r"^(checkpoint|stage)-(\d+)$")
RUN_FILES = ("model.safetensors", "model.safetensors.index.json", "adapter_model.safetensors", EVAL_RESULTS_FILE)
STATE_CALLBACK = (
    "ICoTStateCallback"  # hf_icot.training.trainer's ExportableState; named here so nothing imports the trainer
)


def checkpoint_problem(folder: str | os.PathLike) -> str | None:
    """Why ``folder`` cannot be resumed from, as a clause (``"it has no trainer_state.json"``), or None if it is a
    complete checkpoint: not being written, with a trainer state that parses (Trainer writes it last) and weights."""
    folder = Path(folder)
    if not folder.is_dir():
        return "it does not exist" if not folder.exists() else "it is not a folder"
    if (folder / CHECKPOINT_WRITING).exists():
        return "it was being written when its run stopped"
    try:
        state = json.loads((folder / TRAINER_STATE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return f"it has no {TRAINER_STATE}"
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return f"its {TRAINER_STATE} is cut short or unreadable"
    if not isinstance(state, dict) or "global_step" not in state:
        return f"its {TRAINER_STATE} holds no global_step"
    if not any((folder / name).exists() for name in CHECKPOINT_WEIGHTS):
        return "it holds no model weights"
    for path in sorted(folder.iterdir()):
        damage = file_damage(path)
        if damage is not None:
            return f"its {path.name} {damage}"
    return None


def file_damage(path: Path) -> str | None:
    """How a checkpoint file is broken, as a clause (``"is cut short: ..."``), or None when it reads whole: a
    ``.safetensors`` file by its own header (8 bytes of length, the JSON header, then exactly the bytes the header's
    offsets end at, as safetensors itself checks when it loads), a ``.pt``/``.pth`` file (``torch.save``'s zip) by
    its zip directory, which a cut-short copy loses. Cheap: no tensor is read."""
    if path.suffix == ".safetensors":
        return _safetensors_damage(path)
    if path.suffix in (".pt", ".pth", ".bin"):
        try:
            with zipfile.ZipFile(path) as archive:
                archive.infolist()
        except (zipfile.BadZipFile, OSError, EOFError):
            return "is cut short or corrupt (its zip directory is unreadable, so torch.load cannot read it)"
    return None


def _safetensors_damage(path: Path) -> str | None:
    size = path.stat().st_size
    try:
        with open(path, "rb") as stream:
            (length,) = struct.unpack("<Q", stream.read(8))
            if 8 + length > size:
                return f"is cut short: {size} bytes, fewer than its {8 + length}-byte header"
            header = json.loads(stream.read(length))
    except (struct.error, OSError, UnicodeDecodeError, json.JSONDecodeError):
        return "is cut short or corrupt (its header is unreadable)"
    ends = [entry["data_offsets"][1] for key, entry in header.items() if key != "__metadata__"]
    expected = 8 + length + max(ends, default=0)
    if size != expected:
        return f"is cut short or corrupt: {size} bytes where its header says {expected}"
    return None


def last_complete_checkpoint(output_dir: str | os.PathLike) -> str | None:
    """The complete ``checkpoint-<step>`` of ``output_dir`` with the highest step, or None (also for a missing
    folder); each later one that is incomplete is skipped with a warning saying why."""
    folder = Path(output_dir)
    if not folder.is_dir():
        return None
    steps = sorted(
        (int(match.group(1)), entry.name)
        for entry in folder.iterdir()
        if (match := CHECKPOINT_PATTERN.match(entry.name)) and entry.is_dir()
    )
    for _, name in reversed(steps):
        problem = checkpoint_problem(folder / name)
        if problem is None:
            return str(folder / name)
        logger.warning("skipping %s: %s, so it cannot be resumed from", folder / name, problem)
    return None


def earlier_run(output_dir: str | os.PathLike) -> list[str]:
    """The names in ``output_dir`` that belong to a run: its final model and results, then its checkpoint and stage
    folders by step."""
    folder = Path(output_dir)
    if not folder.is_dir():
        return []
    files = sorted(entry.name for entry in folder.iterdir() if entry.is_file() and entry.name in RUN_FILES)
    folders = [
        (match.group(1), int(match.group(2)))
        for entry in folder.iterdir()
        if entry.is_dir() and (match := RUN_FOLDERS.match(entry.name))
    ]
    return files + [f"{kind}-{step}" for kind, step in sorted(folders)]  # checkpoint-2 before checkpoint-10


def _listing(names: list[str]) -> str:
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def run_identity(args: Any) -> dict[str, int]:
    """What a resumed run must share with its checkpoint for its curriculum and data order to continue exactly:
    the seed and the batch of one optimizer step (per device × processes × accumulation)."""
    total = args.train_batch_size * args.gradient_accumulation_steps * args.world_size
    return {"seed": int(args.seed), "total_train_batch_size": int(total)}


def resume_mismatch(
    attributes: dict[str, Any], train_batch_size: int | None, args: Any, checkpoint: str = "the checkpoint"
) -> str | None:
    """One sentence saying how this run differs from the one that wrote ``checkpoint`` (seed or batch size), or None.

    Args:
        attributes: the checkpoint's curriculum state (``trainer_state.json``, ``stateful_callbacks`` →
            ``ICoTStateCallback`` → ``attributes``).
        train_batch_size: the checkpoint's ``train_batch_size`` (per device), for checkpoints that predate the
            recorded :func:`run_identity`.
        args: this run's training arguments.
        checkpoint: how the sentence names the checkpoint.
    """
    recorded = attributes.get("run")
    now = run_identity(args)
    if recorded is None:  # written before the run's identity was recorded: what trainer_state.json holds
        recorded = {"seed": (attributes.get("schedule") or {}).get("seed"), "train_batch_size": train_batch_size}
        now = {**now, "train_batch_size": args.train_batch_size}
    if recorded.get("seed") is not None and recorded["seed"] != now["seed"]:
        return (
            f"{checkpoint} was trained with seed {recorded['seed']}, but this run has seed {now['seed']}; resume with "
            f"--seed {recorded['seed']}, or start a new run."
        )
    for key, what in (
        ("total_train_batch_size", "{} examples per optimizer step (per device × processes × accumulation)"),
        ("train_batch_size", "a batch size of {} per device"),
    ):
        if recorded.get(key) is not None and recorded[key] != now[key]:
            return (
                f"{checkpoint} was trained with {what.format(recorded[key])}, but this run has {now[key]}; resume "
                "with the same batch size, or start a new run."
            )
    return None


def prepare_run_folder(args: Any) -> str | None:
    """Check ``args.output_dir`` and ``args.resume_from_checkpoint`` before any work; return the checkpoint to pass
    to ``trainer.train(resume_from_checkpoint=...)``, or None for a new run.

    ``resume_from_checkpoint`` is a checkpoint folder, ``"true"`` (the last complete checkpoint in ``output_dir``) or
    unset. A new run into an ``output_dir`` that holds another run's checkpoints or model is refused unless
    ``args.overwrite_output_dir``, which removes that run's ``checkpoint-*`` and ``stage-*`` folders (its model files
    are replaced when the new run saves its own).

    Raises:
        ValueError: a checkpoint that does not exist or is incomplete, ``true`` with no complete checkpoint, a
            checkpoint written with another seed or batch size, or a new run over another one.
    """
    output_dir = str(args.output_dir)
    wanted = args.resume_from_checkpoint
    wanted = None if wanted is None or str(wanted).strip().lower() in ("", "false") else str(wanted)
    overwrite = bool(getattr(args, "overwrite_output_dir", False))
    if wanted is not None and overwrite:
        raise ValueError(
            "--resume_from_checkpoint continues the run in output_dir and --overwrite_output_dir replaces it; "
            "give one of them."
        )
    if wanted is None:
        found = earlier_run(output_dir)
        if found and not overwrite:
            raise ValueError(
                f"output_dir {output_dir!r} already holds another run ({_listing(found)}); continue it with "
                "--resume_from_checkpoint true, or start over with --overwrite_output_dir (which deletes its "
                "checkpoints)."
            )
        # Left in place, the earlier run's checkpoints would mix with this run's, and `true` could pick one of them.
        removed = [name for name in found if RUN_FOLDERS.match(name)]
        if removed and args.should_save:
            for name in removed:
                shutil.rmtree(os.path.join(output_dir, name))
            logger.warning("--overwrite_output_dir: removed %s from %s", ", ".join(removed), output_dir)
        return None

    if wanted.lower() == "true":
        checkpoint = last_complete_checkpoint(output_dir)
        if checkpoint is None:
            raise ValueError(
                f"--resume_from_checkpoint true found no complete checkpoint-<step> folder in {output_dir!r}; give "
                "the output_dir of a run saved with --save_strategy steps or epoch, or a checkpoint's path."
            )
    else:
        checkpoint = wanted
        problem = checkpoint_problem(checkpoint)
        if problem is not None:
            raise ValueError(
                f"--resume_from_checkpoint {checkpoint!r} cannot be resumed from: {problem}; give a complete "
                "checkpoint-<step> folder, or true for the last complete one in output_dir."
            )
        elsewhere = Path(checkpoint).resolve().parent != Path(output_dir).resolve()
        found = earlier_run(output_dir)
        if elsewhere and found:
            raise ValueError(
                f"output_dir {output_dir!r} holds another run ({_listing(found)}) than the checkpoint "
                f"{checkpoint!r}; give the checkpoint's own run folder as --output_dir, or a new folder."
            )
    saved = json.loads((Path(checkpoint) / TRAINER_STATE).read_text(encoding="utf-8"))
    attributes = ((saved.get("stateful_callbacks") or {}).get(STATE_CALLBACK) or {}).get("attributes") or {}
    mismatch = resume_mismatch(attributes, saved.get("train_batch_size"), args, f"checkpoint {checkpoint!r}")
    if mismatch is not None:
        raise ValueError(mismatch)
    if (
        args.should_save
    ):  # what the stopped run was saving aside (hf_icot.publishing.saving.save_model) never reached the folder
        for staging in Path(output_dir).glob(f"{SAVING_PREFIX}*"):
            if staging.is_dir():
                shutil.rmtree(staging)
    return checkpoint
