"""Write task datasets as Hub dataset repos (one folder per config, Parquet shards, a card) and push them.

Layout of an output folder ``DIR``::

    DIR/README.md                                   dataset card; its YAML lists every config and its files
    DIR/<config>/<split>-00000-of-0000N.parquet     the rows, sharded
    DIR/<config>/icot_config.json                   what built the config: task, params, sizes, fingerprint

The card is rendered from every ``icot_config.json`` in ``DIR``, so building another config into ``DIR`` adds it to
the card and leaves the other configs' files untouched. A build is staged in a temporary folder next to ``DIR`` (the
untouched files hard-linked, not copied) and swapped into place only when complete: a failed or interrupted build
leaves ``DIR`` as it was (the card: :mod:`datasets_builder.card`). Builds into one parent folder take turns (a lock on the parent), so the next build of
``DIR`` can tell leftovers of a killed build from a running one: it removes them, and if the kill fell between the
two renames of a swap (``DIR`` missing), it first puts the previous ``DIR`` back.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import math
import os
import shlex
import shutil
import tempfile
from pathlib import Path
from typing import Any

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
from tqdm import tqdm

from datasets_builder import registry
from datasets_builder.card import CARD_FILE, CONFIG_FILE, read_configs, render_card
from hf_icot.cot import example_features
from hf_icot.publishing.disk_space import disk_full_error, folder_bytes, is_disk_full
from hf_icot.publishing.hub import PushError, describe_push_failure, upload_in_one_commit

logger = logging.getLogger(__name__)

#: Shards are cut so that each holds at most this much Arrow data (the Hub's own default for datasets).
MAX_SHARD_BYTES = 500 * 2**20
#: Rows per Parquet row group: small enough for the Hub's dataset viewer to page through text rows.
ROW_GROUP_ROWS = 10_000
_SCHEMA_COLUMNS = ("question", "cot", "answer")


# ---------------------------------------------------------------------------------------------------------------
# Building


def build_config(
    out_dir: str | os.PathLike,
    task_name: str,
    params: Any,
    progress: bool = True,
    license: str | None = None,
    max_shard_bytes: int = MAX_SHARD_BYTES,
    config_name: str | None = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Generate a config of task ``task_name`` and write it into ``out_dir``.

    The config is named ``config_name`` or, by default, ``params.config_name()``. ``out_dir`` may be missing, empty,
    or a folder this function wrote before: other configs are kept byte for byte; a config of the same name built
    from the same task and parameters is rebuilt in place (same bytes), one built from other parameters is replaced
    only with ``overwrite`` (names like ``mult_4x4`` leave out the seed and sizes, so a silent replacement would lose
    data). Returns the config's record, as saved in ``<config>/icot_config.json``.

    Raises:
        ValueError: unknown task, a config name outside [A-Za-z0-9_], an ``out_dir`` holding foreign files, a config
            of that name built from other parameters (without ``overwrite``), or a generator whose output breaks the
            shared schema. ``out_dir`` is unchanged whenever anything raises.
    """
    task = registry.get_task(task_name)
    config = config_name or params.config_name()
    if not registry.CONFIG_NAME_PATTERN.fullmatch(config):
        raise ValueError(f"config name {config!r} is not allowed; use letters, digits and underscores.")
    out_dir = Path(os.path.abspath(out_dir))  # "." must have a real name and parent for the staging folder
    created = [folder for folder in out_dir.parents if not folder.exists()]  # deepest first
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    try:
        with _builds_take_turns(out_dir.parent):
            _recover_interrupted_build(out_dir)
            return _build_locked(out_dir, task, config, params, progress, license, max_shard_bytes, overwrite)
    except BaseException:
        for folder in created:
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
        raise


@contextlib.contextmanager
def _builds_take_turns(parent: Path):
    """Hold an exclusive lock on the folder ``parent`` (``flock``; a no-op where the platform has none)."""
    try:
        import fcntl
    except ImportError:  # not POSIX
        yield
        return
    handle = os.open(parent, os.O_RDONLY)
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX)
        except OSError as error:  # some network file systems refuse locks: build anyway, as before locking existed
            logger.warning("could not lock %s (%s); do not run two builds into it at once", parent, error)
        yield
    finally:
        os.close(handle)  # releases the lock


def _recover_interrupted_build(out_dir: Path) -> None:
    """Clean up after a build of ``out_dir`` that was killed (no other build of it runs: the caller holds the lock)."""
    building, replaced = f".{out_dir.name}.building-", f".{out_dir.name}.replaced-"
    leftovers = sorted(entry for entry in out_dir.parent.iterdir() if entry.name.startswith((building, replaced)))
    retired = [entry for entry in leftovers if entry.name.startswith(replaced)]
    if retired and not out_dir.exists():  # killed between the two renames of a swap: restore the previous folder
        restored = max(retired, key=lambda entry: entry.stat().st_mtime)
        restored.rename(out_dir)
        leftovers.remove(restored)
        logger.warning("restored %s from %s, left by a build that was killed while swapping", out_dir, restored.name)
    for entry in leftovers:
        shutil.rmtree(entry, ignore_errors=True)
        logger.warning("removed %s, left by a build of %s that was killed", entry, out_dir.name)


def _build_locked(
    out_dir: Path,
    task: Any,
    config: str,
    params: Any,
    progress: bool,
    license: str | None,
    max_shard_bytes: int,
    overwrite: bool,
) -> dict[str, Any]:
    """The body of :func:`build_config`, run while this process alone builds into ``out_dir``'s parent."""
    _check_output_folder(out_dir)
    existing = read_configs(out_dir).get(config) if out_dir.is_dir() else None
    new_identity = {"task": task.TASK_NAME, "params": dataclasses.asdict(params)}
    if existing and not overwrite and {k: existing.get(k) for k in new_identity} != new_identity:
        raise ValueError(
            f"config {config!r} in {out_dir} was built from other parameters; pass --overwrite to replace it or "
            f"--config_name to add this build under another name."
        )
    dataset = task.build(params, progress=progress)
    features = _check_schema(dataset, task.TASK_NAME)

    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.building-", dir=out_dir.parent))
    try:
        if out_dir.exists():
            _link_tree(out_dir, staging, skip={config, CARD_FILE})
        files = _write_splits(staging / config, dataset, max_shard_bytes, progress)
        record = {
            "config_name": config,
            "task": task.TASK_NAME,
            "generator_version": task.GENERATOR_VERSION,
            "description": task.DESCRIPTION,
            "params": dataclasses.asdict(params),
            "seed": params.seed,
            "license": license,
            "card_details": task.card_details(params),
            "features": features.to_dict(),
            "splits": files,
            "fingerprint": config_fingerprint(staging / config),
            "built_with": _library_versions(),
        }
        (staging / config / CONFIG_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        (staging / CARD_FILE).write_text(render_card(staging), encoding="utf-8")
        _swap_into_place(staging, out_dir)
    except BaseException as error:  # KeyboardInterrupt too: a half-built staging folder must not outlive the build
        full = isinstance(error, Exception) and is_disk_full(error, staging)  # before the removal frees the space
        written = folder_bytes(staging)
        shutil.rmtree(staging, ignore_errors=True)
        if full:
            needed = max(written, sum(_arrow_table(split).nbytes for split in dataset.values()))
            raise disk_full_error(
                out_dir.parent, f"config {config!r} of {out_dir.name}", needed, "then run the build again"
            ) from None
        raise
    return record


def _check_output_folder(out_dir: Path) -> None:
    """Refuse to restage a folder that is not ours: its files would be linked into the new folder and the old one
    removed, so only folders made of configs, a card and dot-files (e.g. a git clone's ``.git``) are accepted."""
    if not out_dir.exists():
        return
    if not out_dir.is_dir():
        raise ValueError(f"output {str(out_dir)!r} is a file; give a folder (new, empty, or built before).")
    for entry in sorted(out_dir.iterdir()):
        ours = entry.name == CARD_FILE or entry.name.startswith(".") or (entry / CONFIG_FILE).is_file()
        if not ours:
            raise ValueError(
                f"output folder {str(out_dir)!r} holds {entry.name!r}, which is not part of an hf_icot dataset; "
                "build into a new or empty folder."
            )


def _check_schema(dataset: Any, task_name: str) -> datasets.Features:
    """The features shared by every split of ``dataset``, after checking it is a DatasetDict in the shared schema."""
    if not isinstance(dataset, datasets.DatasetDict) or not dataset:
        raise ValueError(
            f"task {task_name!r} built {type(dataset).__name__}; a task must build a non-empty DatasetDict."
        )
    core = example_features()
    features = None
    for split, part in dataset.items():
        for column in _SCHEMA_COLUMNS:
            if part.features.get(column) != core[column]:
                raise ValueError(f"task {task_name!r} split {split!r} column {column!r} breaks the shared schema.")
        if features is not None and part.features != features:
            raise ValueError(f"task {task_name!r} split {split!r} has other columns than the first split.")
        features = part.features
    return features


def _link_tree(source: Path, target: Path, skip: set[str]) -> None:
    """Recreate ``source``'s entries (except ``skip``) under ``target`` with hard links; files are never modified in
    place, so sharing inodes with the live folder is safe. Copies where the file system cannot link."""

    def link_or_copy(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    for entry in sorted(source.iterdir()):
        if entry.name in skip:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, target / entry.name, symlinks=True, copy_function=link_or_copy)
        else:
            link_or_copy(str(entry), str(target / entry.name))


def _swap_into_place(staging: Path, out_dir: Path) -> None:
    """Make ``staging`` the new ``out_dir``. Each rename is atomic; if the second fails the old folder returns."""
    umask = os.umask(0)
    os.umask(umask)
    staging.chmod(0o777 & ~umask)  # mkdtemp makes 0700 folders; the dataset should read like any other folder
    if not out_dir.exists():
        staging.rename(out_dir)
        return
    retired = staging.with_name(staging.name.replace(".building-", ".replaced-"))
    out_dir.rename(retired)
    try:
        staging.rename(out_dir)
    except BaseException:
        retired.rename(out_dir)
        raise
    shutil.rmtree(retired, ignore_errors=True)


def _arrow_table(dataset: datasets.Dataset) -> pa.Table:
    """The rows of ``dataset`` in order (any select/shuffle applied), with the ``datasets`` features in the schema
    metadata so that ``load_dataset`` restores list and integer types exactly."""
    table = dataset.with_format("arrow")[:]
    return table.replace_schema_metadata(dataset.features.arrow_schema.metadata)


def write_parquet(table: pa.Table, path: Path) -> None:
    """Write one Parquet shard. Same table, same pyarrow version: same bytes."""
    pq.write_table(table, path, row_group_size=ROW_GROUP_ROWS, compression="snappy")


def _write_splits(
    folder: Path, dataset: datasets.DatasetDict, max_shard_bytes: int, progress: bool
) -> dict[str, dict[str, Any]]:
    """Write every split of ``dataset`` as ``<split>-0000i-of-0000N.parquet`` shards into ``folder``; returns per
    split its number of examples, Arrow bytes, and shard files with their sha256."""
    folder.mkdir()
    tables = {split: _arrow_table(part) for split, part in dataset.items()}
    n_shards = {split: max(1, math.ceil(table.nbytes / max_shard_bytes)) for split, table in tables.items()}
    n_shards = {split: min(n, max(1, tables[split].num_rows)) for split, n in n_shards.items()}
    splits: dict[str, dict[str, Any]] = {}
    bar = tqdm(total=sum(n_shards.values()), desc=f"writing {folder.name}", unit="shard", disable=not progress)
    with bar:
        for split, table in tables.items():
            shards = []
            bounds = [table.num_rows * i // n_shards[split] for i in range(n_shards[split] + 1)]
            for index in range(n_shards[split]):
                name = f"{split}-{index:05d}-of-{n_shards[split]:05d}.parquet"
                write_parquet(table.slice(bounds[index], bounds[index + 1] - bounds[index]), folder / name)
                shards.append(
                    {"file": name, "sha256": _sha256(folder / name), "bytes": (folder / name).stat().st_size}
                )
                bar.update()
            splits[split] = {"num_examples": table.num_rows, "num_bytes": table.nbytes, "shards": shards}
    return splits


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(2**20), b""):
            digest.update(block)
    return digest.hexdigest()


def config_fingerprint(config_folder: str | os.PathLike) -> str:
    """``sha256:<hex>`` of the config's Parquet files concatenated in sorted name order, i.e. what
    ``cat $(ls <config>/*.parquet | LC_ALL=C sort) | sha256sum`` prints."""
    digest = hashlib.sha256()
    for path in sorted(Path(config_folder).glob("*.parquet"), key=lambda p: p.name):
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(2**20), b""):
                digest.update(block)
    return f"sha256:{digest.hexdigest()}"


def _library_versions() -> dict[str, str]:
    import hf_icot

    return {"hf_icot": hf_icot.__version__, "datasets": datasets.__version__, "pyarrow": pa.__version__}


# ---------------------------------------------------------------------------------------------------------------
# Pushing


def push(
    folder: str | os.PathLike,
    repo_id: str,
    private: bool = False,
    revision: str | None = None,
    token: str | None = None,
    commit_message: str | None = None,
) -> str:
    """Upload ``folder`` (a built dataset) to the Hub dataset repo ``repo_id`` in one commit; returns the commit URL.

    The repo is created if missing (``private`` applies only then); ``revision`` names a branch, created from the
    default branch if missing. ``token`` defaults to ``HF_TOKEN`` or the saved login. Nothing local is modified, so
    a failed push can be retried as is.

    Raises:
        ValueError: ``folder`` is not a built dataset, or ``repo_id`` is malformed.
        PushError: offline mode, or the Hub could not be reached or refused the push (one sentence with the retry
            command of :func:`push_command`, token never included).
    """
    from huggingface_hub import HfApi, constants
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    folder = Path(folder)
    records = read_configs(folder) if folder.is_dir() else {}
    if not records or not (folder / CARD_FILE).is_file():
        raise ValueError(f"{str(folder)!r} is not a built dataset folder (README.md and <config>/{CONFIG_FILE}).")
    try:
        validate_repo_id(repo_id)
    except HFValidationError:
        raise ValueError(
            f"repo id {repo_id!r} is not valid; write 'namespace/name' with letters, digits, -, _ or ."
        ) from None

    if constants.is_offline_mode():  # the same command is the retry: no need to spell it out (paths run long)
        raise PushError(
            f"cannot push {folder} to {repo_id}: HF_HUB_OFFLINE is set; unset it and run the same command."
        )
    api = HfApi(token=token)
    message = commit_message or f"Upload hf_icot dataset configs: {', '.join(records)}"
    try:
        commit = upload_in_one_commit(api, folder, repo_id, "dataset", private, revision, message)
    except Exception as error:  # every failure becomes one sentence; the cause stays chained for debugging
        retry = push_command(folder, repo_id, private, revision, commit_message)
        raise PushError(
            f"pushing {folder} to {repo_id} failed: {describe_push_failure(error, repo_id, api.endpoint)}; the local "
            f"folder is unchanged, so retry with `{retry}`."
        ) from error
    return commit.commit_url


def push_command(
    folder: str | os.PathLike,
    repo_id: str,
    private: bool = False,
    revision: str | None = None,
    commit_message: str | None = None,
) -> str:
    """The shell command that (re)pushes ``folder`` as it is; a token is never part of it (``HF_TOKEN`` or the saved
    login supplies one)."""
    command = f"python -m datasets_builder push {shlex.quote(str(folder))} --repo {repo_id}"
    command += " --private" if private else ""
    command += f" --revision {shlex.quote(revision)}" if revision else ""
    return command + (f" --message {shlex.quote(commit_message)}" if commit_message else "")
