"""Turning "no space left on device" into one sentence naming the folder and the space a write needs.

Writers report a full disk in their own words: ``OSError`` with ``errno.ENOSPC`` from Python, ``SafetensorError("...
No space left on device (os error 28)")`` from safetensors, and from ``torch.save`` a ``RuntimeError`` that says only
"unexpected pos" (checked on torch 2.13). :func:`is_disk_full` reads the first two from the error and the third from
the disk itself, before the half-written files are removed.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

from hf_icot.errors import DiskFullError

#: Less free space than this after a failed write means the write ran out of it.
NEARLY_FULL_BYTES = 64 * 1024
_FULL_WORDS = ("No space left on device", "os error 28", "StorageFull")


def is_disk_full(error: BaseException, folder: str | os.PathLike) -> bool:
    """Whether ``error``, raised while writing into ``folder``, came from a full disk: ENOSPC (or its words) anywhere
    in the error's chain, or (for writers that do not say) ``folder``'s disk nearly full now."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if any(words in str(seen) for words in _FULL_WORDS):
            return True
        seen = seen.__cause__ or seen.__context__
    return free_bytes(folder) < NEARLY_FULL_BYTES


def free_bytes(folder: str | os.PathLike) -> int:
    """Bytes free to this user on the disk of ``folder`` (or of its nearest existing parent)."""
    path = Path(folder).absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return shutil.disk_usage(path).free


def folder_bytes(folder: str | os.PathLike) -> int:
    """The bytes of every file under ``folder`` (0 for a missing one)."""
    return sum(path.stat().st_size for path in Path(folder).rglob("*") if path.is_file())


def readable_size(count: float) -> str:
    """``1536`` -> ``"1.5 KiB"``."""
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "bytes" else f"{count:.1f} {unit}"
        count /= 1024
    raise AssertionError("unreachable")


def disk_full_error(folder: str | os.PathLike, what: str, needed: int, advice: str) -> DiskFullError:
    """The one-sentence error of a write of ``what`` into ``folder`` that ran out of space.

    Args:
        folder: where the write went.
        what: what was being written (``"checkpoint-6"``, ``"the final model"``).
        needed: about how many bytes the write needs.
        advice: how to go on once there is space (``"then resume with --resume_from_checkpoint true"``).
    """
    return DiskFullError(
        f"no space left on device in {str(folder)!r} while writing {what}: it needs about {readable_size(needed)} "
        f"and {readable_size(free_bytes(folder))} is free; what was half-written is removed and everything written "
        f"before is intact; free some space or choose another folder, {advice}."
    )
