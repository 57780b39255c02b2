"""Write a run folder's files so that a kill mid-write never leaves half a file: a trained model and its tokenizer
written aside and moved in (:func:`save_model`, :func:`move_into`), text through a temporary file and a rename
(:func:`write_text_atomic`), every file with the mode ``open()`` would give it (:func:`default_file_mode`)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any


def default_file_mode() -> int:
    """The mode ``open()`` gives a new file under the current umask (temporary files get 0600 instead)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


#: The prefix of the folders a model is written into before it is moved into the run folder.
SAVING_PREFIX = ".saving-"


def move_into(staging: Path, output_dir: Path) -> None:
    """Move every file of ``staging`` into ``output_dir`` (same filesystem, so each move is an atomic rename)."""
    for path in sorted(staging.rglob("*")):
        if path.is_file():
            target = output_dir / path.relative_to(staging)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.chmod(path, default_file_mode())
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

    Raises:
        hf_icot.errors.DiskFullError: the disk filled up; nothing of this save is left in ``output_dir``.
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
    from hf_icot.publishing.disk_space import disk_full_error, folder_bytes, is_disk_full

    written = None
    with tempfile.TemporaryDirectory(dir=output_dir, prefix=SAVING_PREFIX) as staging:
        try:
            model.save_pretrained(staging, safe_serialization=True)
            tokenizer.save_pretrained(staging)
        except Exception as error:
            if not is_disk_full(error, staging):  # read before the staging folder is removed, freeing the space
                raise
            written = folder_bytes(staging)
        else:
            move_into(Path(staging), output_dir)
    if written is not None:
        weights = sum(parameter.numel() * parameter.element_size() for parameter in model.parameters())
        raise disk_full_error(
            output_dir,
            "the model",
            max(written, weights),
            "then run the same command with --resume_from_checkpoint true (training resumes from the last checkpoint)",
        )
    return kind


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename: readers never see half a file."""
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, encoding="utf-8", suffix=".tmp") as handle:
        handle.write(text)
    os.chmod(handle.name, default_file_mode())
    os.replace(handle.name, path)
