"""A sweep: the committed list of a study's runs (``results/<study>/runs.yaml``) and where each run stands.

The file names a base command and, per run, its arguments and seeds::

    study: semiautomata
    command: [python, recipes/semiautomata.py, --config, recipes/configs/semiautomata_cpu.yaml]
    output_root: outputs/semiautomata     # each run's folder: <output_root>/<run name>, given as --output_dir
    done_file: eval_results.json          # a run folder holding it has finished
    records: [eval_results.json, stages.json, training_log.json]   # what is kept of it, in runs/<run name>/
    env: {OMP_NUM_THREADS: "1"}
    runs:
      - name: c7_t16_left                 # seeds: one run per seed, named c7_t16_left_s0, ...; --seed N appended
        args: [--removal_side, left, --task_args, '{"seed": ${seed}}']
        seeds: [0, 1, 2]
      - name: c7_t16_full_cot             # seed: one run, named as given
        args: [--schedule, full_cot]
        seed: 0

``${seed}`` in an argument is replaced by the run's seed (e.g. to seed the data too). Optional keys: ``seed_flag``
(default ``--seed``; null: the seed reaches the command only through ``${seed}``), ``output_flag`` (default
``--output_dir``), ``resume_args`` (added when the run folder holds a complete checkpoint; default
``[--resume_from_checkpoint, "true"]``), ``restart_args`` (added when it holds a run stopped before any checkpoint;
default ``[--overwrite_output_dir, "true"]``), ``timeout_s`` (per run; default none), ``moved_from`` (see below). A run
entry may override ``command``, ``env``, ``done_file`` and ``records``.

Each finished run leaves ``runs/<run name>/`` in the study's folder: its record files and :data:`RECORD_FILE`, what the
harness knows of it (command, seed, status, exit code, wall time, the definition it ran). A record whose definition
is not the sweep file's any more is refused rather than silently mixed with runs of the new definition.

A file the commands name that moved after runs were recorded (a script or a config: the same file under a new path) is
no new definition. ``moved_from`` maps each new path to the old one, as whole command-line arguments::

    moved_from: {results/parity/train.py: recipes/parity.py}

The commands run the new path; the definition reads the old one, so the records made before the move stay the runs'
own (their ``sweep.json`` keeps the command they ran) and so do run folders started before it.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from string import Template
from typing import Any

import yaml

SWEEP_FILE = "runs.yaml"
RECORDS_FOLDER = "runs"
#: What the harness writes beside a run's records.
RECORD_FILE = "sweep.json"
DEFAULTS = {
    "seed_flag": "--seed",
    "output_flag": "--output_dir",
    "resume_args": ["--resume_from_checkpoint", "true"],
    "restart_args": ["--overwrite_output_dir", "true"],
    "env": {},
    "records": [],
    "timeout_s": None,
    "moved_from": {},
}
TOP_KEYS = {"study", "command", "output_root", "done_file", "runs", *DEFAULTS}
RUN_KEYS = {"name", "args", "seed", "seeds", "command", "env", "done_file", "records"}
#: A run's state: recorded (finished, its record kept), failed (recorded as failed), finished (its folder holds the
#: done file, not yet recorded), stale (its folder holds the done file of another definition of the run: it runs
#: again from scratch), started (a folder without the done file), missing.
STATES = ("recorded", "failed", "finished", "stale", "started", "missing")
#: Written into a run's folder when the harness starts it: the definition the folder is being computed for.
DEFINITION_MARKER = ".sweep-definition"
#: In a run's folder while a harness runs it: that harness's process id, under an exclusive lock the kernel drops
#: when the process dies (a marker nobody holds locked is a killed harness's, and is taken over).
RUNNING_MARKER = ".sweep-running"


class SweepError(ValueError):
    """A sweep file that cannot be used, or records that do not belong to it."""


@dataclass(frozen=True)
class Run:
    """One run of a sweep: a command, its environment, and where its folder and its record are."""

    name: str
    seed: int | None
    argv: tuple[str, ...]
    env: Mapping[str, str]
    output_dir: Path
    output_flag: str
    done_file: str
    records: tuple[str, ...]
    record_dir: Path
    resume_args: tuple[str, ...] = ()
    restart_args: tuple[str, ...] = ()
    timeout_s: float | None = None
    moved_from: Mapping[str, str] = field(default_factory=dict)

    @property
    def command(self) -> list[str]:
        """The command that runs it from scratch (the run folder last)."""
        return [*self.argv, self.output_flag, str(self.output_dir)]

    @property
    def definition(self) -> str:
        """A digest of what the run computes (its command without the folder, and its environment; a moved file by
        its old path): a record made under another definition is not this run's."""
        argv = [self.moved_from.get(part, part) for part in self.argv]
        payload = json.dumps({"argv": argv, "env": dict(sorted(self.env.items()))}, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:16]

    def shell_line(self) -> str:
        """The command as one shell line, its environment in front (``commands`` prints these)."""
        env = [f"{key}={shlex.quote(value)}" for key, value in sorted(self.env.items())]
        return " ".join([*env, shlex.join(self.command)])

    def record(self) -> dict[str, Any] | None:
        """The harness's record of the run (:data:`RECORD_FILE`), or None."""
        path = self.record_dir / RECORD_FILE
        if not path.is_file():
            return None
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            raise SweepError(f"{path} is unreadable; delete it to run {self.name} again.") from None

    def state(self) -> str:
        """One of :data:`STATES`."""
        record = self.record()
        if record is not None:
            return "recorded" if record.get("status") == "ok" else "failed"
        if (self.output_dir / self.done_file).is_file():
            marker = self.output_dir / DEFINITION_MARKER  # none: a folder run outside the harness, collected as is
            stale = marker.is_file() and marker.read_text(encoding="utf-8").strip() != self.definition
            return "stale" if stale else "finished"
        started = self.output_dir.is_dir() and any(p.name != RUNNING_MARKER for p in self.output_dir.iterdir())
        return "started" if started else "missing"


@dataclass
class Sweep:
    """A study's sweep file, expanded into its runs (see the module docstring)."""

    study: str
    folder: Path
    runs: list[Run] = field(default_factory=list)

    @property
    def records_dir(self) -> Path:
        return self.folder / RECORDS_FOLDER

    def select(self, patterns: Sequence[str] | None) -> list[Run]:
        """The runs whose name matches one of the shell-style ``patterns`` (all when None or empty).

        Raises:
            SweepError: a pattern that matches no run.
        """
        if not patterns:
            return list(self.runs)
        for pattern in patterns:
            if not any(fnmatch.fnmatchcase(run.name, pattern) for run in self.runs):
                hint = "see `status` for the names"
                if any(fnmatch.fnmatchcase(run.name, f"{pattern}_s*") for run in self.runs):  # a name without seed
                    hint = f"run names end in their seed (_s0, _s1, ...): {pattern + '_s*'!r} matches every seed"
                raise SweepError(f"--only {pattern!r} matches no run of {self.study}; {hint}.")
        return [run for run in self.runs if any(fnmatch.fnmatchcase(run.name, p) for p in patterns)]

    def check_records(self) -> None:
        """Refuse records that are not this sweep's: a record folder of no run of the file, or a record made under
        another definition of its run.

        Raises:
            SweepError: naming the first such record and what to do.
        """
        names = {run.name: run for run in self.runs}
        if self.records_dir.is_dir():
            for folder in sorted(self.records_dir.iterdir()):
                if folder.is_dir() and (folder / RECORD_FILE).is_file() and folder.name not in names:
                    raise SweepError(
                        f"{folder} is the record of a run that {self.folder / SWEEP_FILE} does not define; add the "
                        "run back to the sweep file or move the record out."
                    )
        for run in self.runs:
            record = run.record()
            if record is not None and record.get("definition") != run.definition:
                raise SweepError(
                    f"the record {run.record_dir} was made by another definition of {run.name} "
                    f"({record.get('definition')}, the sweep file's is now {run.definition}: command "
                    f"{shlex.join(record.get('command', []))!r}); give the changed run a new name, or delete the "
                    "old record to rerun it."
                )


def load_sweep(folder: str | os.PathLike, root: str | os.PathLike | None = None) -> Sweep:
    """Read ``folder/runs.yaml`` into a :class:`Sweep`; relative run folders are taken from ``root`` (default: left
    relative, to the current directory: the repository root the commands run from).

    Raises:
        SweepError: a missing or malformed file, an unknown key, a run without a name or with both ``seed`` and
            ``seeds``, a seed that is not an integer, or two runs of the same name — one sentence each.
    """
    folder = Path(folder)
    path = folder / SWEEP_FILE
    try:
        spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SweepError(
            f"{folder} has no {SWEEP_FILE}; a study's sweep is the list of its runs in that file."
        ) from None
    except yaml.YAMLError as error:
        raise SweepError(f"{path} is not valid YAML ({getattr(error, 'problem', error)}); fix it.") from None
    if not isinstance(spec, dict):
        raise SweepError(f"{path} holds a {type(spec).__name__}; it must be a mapping (study, command, runs, ...).")
    unknown = sorted(set(spec) - TOP_KEYS)
    if unknown:
        raise SweepError(f"{path} has unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(TOP_KEYS))}.")
    for key in ("study", "command", "output_root", "done_file", "runs"):
        if key not in spec:
            raise SweepError(f"{path} lacks {key!r}; a sweep file needs study, command, output_root, done_file, runs.")
    settings = {**DEFAULTS, **spec}
    moved = settings["moved_from"]
    if not isinstance(moved, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in moved.items()):
        raise SweepError(f"{path}: moved_from is {moved!r}; give a mapping of new path -> old path.")
    sweep = Sweep(str(spec["study"]), folder)
    root = Path(root) if root is not None else Path()
    seen: set[str] = set()
    for entry in spec["runs"] or []:
        for run in _expand(entry, settings, root, sweep.records_dir, path):
            if run.name in seen:
                raise SweepError(f"{path} defines the run {run.name!r} twice; give each run its own name.")
            seen.add(run.name)
            sweep.runs.append(run)
    return sweep


def _expand(entry: Any, settings: Mapping[str, Any], root: Path, records_dir: Path, path: Path) -> list[Run]:
    if not isinstance(entry, dict) or "name" not in entry:
        raise SweepError(f"{path}: every run is a mapping with a name (and args, seed or seeds); got {entry!r}.")
    unknown = sorted(set(entry) - RUN_KEYS)
    if unknown:
        raise SweepError(f"{path}: run {entry['name']!r} has unknown key(s) {', '.join(unknown)}.")
    if "seed" in entry and "seeds" in entry:
        raise SweepError(f"{path}: run {entry['name']!r} gives seed and seeds; give one.")
    seeds = entry.get("seeds", [entry.get("seed")])
    if not isinstance(seeds, list) or not seeds or not all(s is None or isinstance(s, int) for s in seeds):
        raise SweepError(f"{path}: run {entry['name']!r} has seeds {seeds!r}; give a list of integers.")
    merged = {**settings, **{key: entry[key] for key in ("command", "env", "done_file", "records") if key in entry}}
    runs = []
    for seed in seeds:
        name = f"{entry['name']}_s{seed}" if "seeds" in entry else str(entry["name"])
        values = {"seed": "" if seed is None else str(seed)}
        args = [Template(str(arg)).safe_substitute(values) for arg in entry.get("args") or []]
        if seed is not None and merged["seed_flag"]:
            args += [merged["seed_flag"], str(seed)]
        runs.append(
            Run(
                name=name,
                seed=seed,
                argv=tuple([*(str(part) for part in merged["command"]), *args]),
                env={str(key): str(value) for key, value in (merged["env"] or {}).items()},
                output_dir=root / merged["output_root"] / name,
                output_flag=merged["output_flag"],
                done_file=merged["done_file"],
                records=tuple(merged["records"] or []),
                record_dir=records_dir / name,
                resume_args=tuple(merged["resume_args"] or ()),
                restart_args=tuple(merged["restart_args"] or ()),
                timeout_s=merged["timeout_s"],
                moved_from=dict(merged["moved_from"]),
            )
        )
    return runs
