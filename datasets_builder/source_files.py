"""Tasks read from files (``reference_text``, ``latent_json``): which file is which split, and the config's name.

Both take files or folders; each file is one split, named from its path by the task's rule; two files giving one
split, a missing path or an empty folder are one sentence each.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path

_NAME = re.compile(r"[A-Za-z0-9_]+")


def split_files(paths: Sequence[str], suffixes: Sequence[str], split_of: Callable[[Path], str], what: str) -> dict:
    """Split name -> file, in the order given (a folder expands to its sorted files ending in one of ``suffixes``).

    Args:
        split_of: the split a file gives (from its stem).
        what: the files in words, for the messages ("file or folder of ...").

    Raises:
        ValueError: no path, a missing one, a folder without such files, a split name that is not letters, digits
            and ``_``, or two files giving one split.
    """
    if not paths:
        raise ValueError(f"path is empty; give at least one {what}.")
    files: list[Path] = []
    for entry in map(Path, paths):
        if entry.is_dir():
            found = sorted(file for file in entry.iterdir() if file.is_file() and file.name.endswith(tuple(suffixes)))
            if not found:
                kinds = " or ".join(suffixes)
                raise ValueError(f"folder {str(entry)!r} holds no {kinds} files; give files or a folder of them.")
            files += found
        elif entry.is_file():
            files.append(entry)
        else:
            raise ValueError(f"path {str(entry)!r} does not exist; give an existing file or folder.")
    splits: dict[str, Path] = {}
    for file in files:
        split = split_of(file)
        if not _NAME.fullmatch(split):
            raise ValueError(f"file {str(file)!r} gives split name {split!r}; rename it to letters, digits and _.")
        if split in splits:
            raise ValueError(f"files {str(splits[split])!r} and {str(file)!r} both give split {split!r}.")
        splits[split] = file
    return splits


def config_name(config: str, files: Sequence[Path]) -> str:
    """``config`` if given, else the name of the one folder holding every file (``default`` when they differ)."""
    if config:
        return config
    folders = {file.resolve().parent.name for file in files}
    name = re.sub(r"[^A-Za-z0-9_]", "_", folders.pop()) if len(folders) == 1 else "default"
    return name or "default"


def check_config(config: str) -> None:
    """Raises: ValueError for a config name that is not letters, digits and underscores."""
    if config and not _NAME.fullmatch(config):
        raise ValueError(f"config {config!r} is not a valid config name; use letters, digits and underscores.")
