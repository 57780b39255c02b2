"""A sweep's missing runs as a Slurm job array: a manifest (one run name a line) and the ``sbatch`` script that runs
line ``$SLURM_ARRAY_TASK_ID`` through the harness.

    python -m hf_icot.studies slurm results/semiautomata --partition cpu --time 02:00:00 --cpus-per-task 1 \\
        --max-parallel 20
    sbatch outputs/slurm/semiautomata/job.sh

Each array task runs ``python -m hf_icot.studies run <study> --only <its run>``, so its record lands in
``<study>/runs/<run>/`` as on a workstation (commit them afterwards, or run ``status`` to see what is in). The task's
harness ignores SIGTERM and waits: Slurm sends SIGTERM to every process of a preempted or timed-out job, the run saves
a checkpoint and exits with :data:`hf_icot.errors.PREEMPTED_EXIT_STATUS` (75), and the task then requeues itself
(``scontrol requeue``; the script asks for ``--requeue``); started again, the harness resumes the run from its
checkpoint (the sweep's ``resume_args``). A task whose run is recorded meanwhile does nothing. No Slurm library is
needed: the script is plain bash, and outside Slurm it runs one line with ``SLURM_ARRAY_TASK_ID`` set by hand.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from hf_icot.errors import PREEMPTED_EXIT_STATUS
from hf_icot.studies.sweep import Sweep, SweepError

MANIFEST_FILE = "manifest.txt"
SCRIPT_FILE = "job.sh"
#: Slurm's ``--time`` forms: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS.
TIME_PATTERN = re.compile(r"\d+(:\d{2}){0,2}|\d+-\d+(:\d{2}){0,2}")


@dataclass(frozen=True)
class SlurmJob:
    """What :func:`write_slurm_job` wrote: the script to ``sbatch``, the manifest, and the runs in it, in order."""

    script: Path
    manifest: Path
    runs: list[str]


def missing_runs(sweep: Sweep, retry_failed: bool = False) -> list[str]:
    """The names of the runs still to do (not recorded; failed ones too with ``retry_failed``), in sweep order."""
    done = ("recorded",) if retry_failed else ("recorded", "failed")
    return [run.name for run in sweep.runs if run.state() not in done]


def write_slurm_job(
    sweep: Sweep,
    study: str,
    out_dir: str | os.PathLike,
    partition: str | None = None,
    time: str | None = None,
    cpus_per_task: int = 1,
    max_parallel: int | None = None,
    retry_failed: bool = False,
    python: str | None = None,
) -> SlurmJob | None:
    """Write ``out_dir/manifest.txt`` and ``out_dir/job.sh`` for the missing runs of ``sweep``; None when none is
    missing (nothing written).

    Args:
        sweep: the loaded sweep.
        study: the study folder as the harness takes it (made absolute in the script).
        out_dir: where the manifest, the script and the tasks' logs (``logs/``) go.
        partition, time: ``sbatch --partition`` / ``--time`` (Slurm's forms, e.g. ``02:00:00``, ``1-00:00:00``);
            None leaves them to the cluster's defaults.
        cpus_per_task: ``--cpus-per-task`` (>= 1); also each run's threads (``--threads``).
        max_parallel: at most this many tasks at once (``--array=1-N%M``); None: no limit.
        retry_failed: also run the runs recorded as failed.
        python: the interpreter the tasks run the harness with (default: this one; ``$PYTHON`` overrides it at run
            time).

    Raises:
        SweepError: a bad ``time``, ``cpus_per_task`` or ``max_parallel``, or a run name with a character a shell
            pattern would read (the harness selects runs by pattern).
    """
    if time is not None and not TIME_PATTERN.fullmatch(time):
        raise SweepError(f"--time {time!r} is not a Slurm time; give e.g. 90, 02:00:00 or 1-12:00:00.")
    if cpus_per_task < 1:
        raise SweepError(f"--cpus-per-task {cpus_per_task} is not allowed; give >= 1.")
    if max_parallel is not None and max_parallel < 1:
        raise SweepError(f"--max-parallel {max_parallel} is not allowed; give >= 1 (or leave it unset).")
    runs = missing_runs(sweep, retry_failed)
    for name in runs:
        if set(name) & set("*?[]\n "):
            raise SweepError(f"run name {name!r} holds a shell-pattern character; rename it in the sweep file.")
    if not runs:
        return None
    out = Path(out_dir).resolve()
    (out / "logs").mkdir(parents=True, exist_ok=True)
    manifest = out / MANIFEST_FILE
    manifest.write_text("".join(f"{name}\n" for name in runs), encoding="utf-8")
    array = f"1-{len(runs)}" + (f"%{max_parallel}" if max_parallel is not None else "")
    options = [
        f"--job-name=hf_icot-{sweep.study}",
        f"--array={array}",
        *([f"--partition={partition}"] if partition else []),
        *([f"--time={time}"] if time else []),
        f"--cpus-per-task={cpus_per_task}",
        "--requeue",  # a preempted task comes back and resumes its run from the checkpoint
        "--open-mode=append",  # a requeued task's log continues the same file
        f"--output={out / 'logs' / '%A_%a.out'}",
    ]
    q = shlex.quote
    study_path = str(Path(study).resolve())
    script = "\n".join(
        [
            "#!/usr/bin/env bash",
            *(f"#SBATCH {option}" for option in options),
            f"# Written by `python -m hf_icot.studies slurm {study}`: {len(runs)} runs, one per line of the manifest.",
            "# Outside Slurm: SLURM_ARRAY_TASK_ID=1 bash job.sh runs the first line here.",
            "set -uo pipefail",
            f"cd {q(str(Path.cwd()))}  # the sweep's commands and run folders are relative to the repository root",
            f'run=$(sed -n "${{SLURM_ARRAY_TASK_ID:?set it to a line of the manifest}}p" {q(str(manifest))})',
            f'[ -n "$run" ] || {{ echo "no line $SLURM_ARRAY_TASK_ID in {manifest}" >&2; exit 2; }}',
            "# Slurm sends SIGTERM to every process of a preempted job: the run saves a checkpoint and exits "
            f"{PREEMPTED_EXIT_STATUS};",
            "# the harness (which inherits the ignored SIGTERM) waits for it instead of dying first.",
            "trap '' TERM",
            f'${{PYTHON:-{q(python or sys.executable)}}} -m hf_icot.studies run {q(study_path)} --only "$run" '
            f'--threads "${{SLURM_CPUS_PER_TASK:-{cpus_per_task}}}"',
            "status=$?",
            f'if [ "$status" -eq {PREEMPTED_EXIT_STATUS} ] && [ -n "${{SLURM_JOB_ID:-}}" ]; then',
            '    scontrol requeue "${SLURM_ARRAY_JOB_ID:-$SLURM_JOB_ID}_${SLURM_ARRAY_TASK_ID}"',
            "fi",
            'exit "$status"',
            "",
        ]
    )
    path = out / SCRIPT_FILE
    path.write_text(script, encoding="utf-8")
    path.chmod(0o755)
    return SlurmJob(path, manifest, runs)
