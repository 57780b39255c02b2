"""Running a sweep: what is missing, N runs at a time, each run's record kept (and committed) as it lands.

:func:`run_sweep` skips every recorded run, records a run whose folder already finished (one a cluster job ran, say)
without training it again — unless the harness started that folder under another definition of the run (the
``.sweep-definition`` it writes into every folder it starts says which): then the run starts over —, resumes a run
stopped after a checkpoint (the sweep's ``resume_args``) and restarts one stopped before any (``restart_args``), and
runs the rest ``jobs`` at a time. A run that fails is recorded as failed
with its exit status and the last lines of its log, is not tried again unless asked (``retry_failed``), and the sweep
goes on with the others. A run that exits with :data:`hf_icot.errors.PREEMPTED_EXIT_STATUS` (it saved a checkpoint on a
preemption signal) is not recorded: the next sweep resumes it; so is one that died of SIGTERM leaving a complete checkpoint
(a command that does not catch the signal, or one stopped before it could). Children get SIGTERM when the harness dies (Linux), so a killed sweep leaves no run writing
on its own; started again, it continues where it stopped.

Two harnesses on one sweep (two shells, say, each with its ``--only`` patterns that overlap) do not run a run twice:
each holds a run, when its turn comes, by an exclusive lock on the :data:`RUNNING_MARKER` in the run's folder (the
kernel drops it when the holder dies), skips the run when another process on this machine holds it, and checks the
run's state again while holding it, so a run recorded meanwhile is not run again.
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

from hf_icot.errors import PREEMPTED_EXIT_STATUS
from hf_icot.studies.sweep import DEFINITION_MARKER, RECORD_FILE, RUNNING_MARKER, Run, Sweep, SweepError

LOG_TAIL_LINES = 20
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def _die_with_parent() -> None:
    """In the child, before exec: ask the kernel for SIGTERM when the harness dies (prctl PR_SET_PDEATHSIG)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)
    except OSError:  # not Linux: a killed sweep may leave its runs going
        pass


def git_commit_paths(paths: Sequence[Path], message: str) -> bool:
    """Commit exactly ``paths`` (new or changed), leaving whatever else is staged alone; False when git refuses (not
    a repository, nothing to commit)."""
    top = subprocess.run(
        ["git", "-C", str(paths[0].parent), "rev-parse", "--show-toplevel"], capture_output=True, text=True
    )
    if top.returncode != 0:
        return False
    repo = top.stdout.strip()
    relative = [os.path.relpath(path, repo) for path in paths]
    for attempt in range(5):  # another git command (the user's) may hold the index lock for a moment
        added = subprocess.run(["git", "-C", repo, "add", "--", *relative], capture_output=True, text=True)
        done = added.returncode == 0 and (
            subprocess.run(
                ["git", "-C", repo, "commit", "-q", "-m", message, "--", *relative], capture_output=True, text=True
            ).returncode
            == 0
        )
        if done:
            return True
        time.sleep(1 + attempt)
    return False


def _killed_with_a_checkpoint(code: int, output_dir: Path) -> bool:
    """Whether a run that exited with ``code`` died of SIGTERM (``-15``, or ``143`` through a shell) after leaving a
    complete checkpoint in ``output_dir``: preempted, as far as its next run can tell."""
    from hf_icot.runs.run_folder import last_complete_checkpoint

    return (
        code in (-int(signal.SIGTERM), 128 + int(signal.SIGTERM)) and last_complete_checkpoint(output_dir) is not None
    )


def _log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> list[str]:
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
    except OSError:
        return []


def machine() -> dict[str, Any]:
    """The machine a run ran on, as its record keeps it: the CPU's model name (``/proc/cpuinfo``, else
    ``platform.processor()``), its logical cores and the platform. A result at the edge of stability can depend on
    the CPU's floating-point path (the methods league's parity runs end differently on an Intel Xeon and an AMD EPYC),
    so every record says where it came from."""
    cpu = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as stream:
            cpu = next((line.split(":", 1)[1].strip() for line in stream if line.startswith("model name")), "")
    except OSError:
        pass
    return {
        "cpu": cpu or platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "platform": platform.platform(),
    }


def _git_commit_of(folder: Path) -> str | None:
    out = subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True)
    return out.stdout.strip() or None if out.returncode == 0 else None


class SweepRunner:
    """Runs the missing runs of one :class:`Sweep` (see the module docstring).

    Args:
        sweep: the loaded sweep.
        jobs: runs at once (>= 1).
        threads_per_run: CPU threads each run may use (``OMP_NUM_THREADS``/``MKL_NUM_THREADS`` unless the run's
            environment sets them); None leaves them to the run.
        commit: commit each record as it lands (only its own files).
        retry_failed: run again the runs recorded as failed.
        echo: where progress lines go.
    """

    def __init__(
        self,
        sweep: Sweep,
        jobs: int = 1,
        threads_per_run: int | None = None,
        commit: bool = False,
        retry_failed: bool = False,
        echo: Callable[[str], None] = print,
    ) -> None:
        if jobs < 1:
            raise SweepError(f"--jobs {jobs} is not allowed; run at least 1 at a time.")
        if threads_per_run is not None and threads_per_run < 1:
            raise SweepError(f"--threads {threads_per_run} is not allowed; give >= 1 (or leave it unset).")
        self.sweep, self.jobs, self.threads = sweep, jobs, threads_per_run
        self.commit, self.retry_failed, self.echo = commit, retry_failed, echo
        self._lock = threading.Lock()
        self._done = 0

    def pending(self, runs: Sequence[Run]) -> list[Run]:
        """The runs that still need work: not recorded (failed ones only when retrying)."""
        wanted = ("finished", "stale", "started", "missing", *(("failed",) if self.retry_failed else ()))
        return [run for run in runs if run.state() in wanted]

    def run(self, runs: Sequence[Run]) -> dict[str, str]:
        """Run ``runs`` (those still pending); returns name -> ``ok`` / ``failed`` / ``preempted`` (not recorded) /
        ``skipped`` (recorded or held by another harness when its turn came) for the ones it handled."""
        self.sweep.check_records()
        todo = self.pending(runs)
        self.echo(f"{self.sweep.study}: {len(todo)} of {len(runs)} runs to do, {self.jobs} at a time")
        self._total, self._done = len(todo), 0
        with ThreadPoolExecutor(max_workers=self.jobs) as pool:
            outcomes = list(pool.map(self._one, todo))
        return dict(zip([run.name for run in todo], outcomes))

    def _environment(self, run: Run) -> dict[str, str]:
        env = {**os.environ, **run.env}
        repo = str(Path.cwd())
        env["PYTHONPATH"] = os.pathsep.join([repo, *filter(None, [os.environ.get("PYTHONPATH")])])
        if self.threads is not None:
            for name in THREAD_VARIABLES:
                if name not in run.env:
                    env[name] = str(self.threads)
        return env

    def _command(self, run: Run, state: str) -> list[str]:
        """The command for ``run`` in ``state`` (:data:`~hf_icot.studies.sweep.STATES`)."""
        if state == "stale":  # finished under another definition: its checkpoints are not this run's either
            return [*run.command, *run.restart_args]
        if state == "started":
            from hf_icot.runs.run_folder import last_complete_checkpoint

            extra = run.resume_args if last_complete_checkpoint(run.output_dir) else run.restart_args
            return [*run.command, *extra]
        return run.command

    def _take(self, run: Run) -> tuple[IO[str] | None, str]:
        """Hold ``run`` for this process: an exclusive ``flock`` on its :data:`RUNNING_MARKER`, which the kernel
        releases when the holder dies, so a killed harness leaves no stale hold. Returns the open marker (keep it
        open while the run runs; None when another process holds the run) and that holder's process id as written
        in the marker."""
        run.output_dir.mkdir(parents=True, exist_ok=True)
        path = run.output_dir / RUNNING_MARKER
        while True:
            marker = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - held open while the run runs
            try:
                fcntl.flock(marker, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                marker.seek(0)
                holder = marker.read().strip() or "unknown"
                marker.close()
                return None, holder
            try:
                current = path.stat().st_ino
            except FileNotFoundError:
                current = None
            if current == os.fstat(marker.fileno()).st_ino:
                break
            marker.close()  # its holder removed it meanwhile: the lock is on a file no longer there; take the new one
        marker.seek(0)
        marker.truncate()
        marker.write(f"{os.getpid()}\n")
        marker.flush()
        return marker, str(os.getpid())

    def _one(self, run: Run) -> str:
        marker, holder = self._take(run)
        if marker is None:
            self.echo(f"skip {run.name}: process {holder} is running it (another harness)")
            return "skipped"
        try:
            if not self.pending([run]):  # asked while holding it, so no other harness can record it meanwhile
                self.echo(f"skip {run.name}: recorded meanwhile (by another harness)")
                return "skipped"
            return self._start(run, run.state())
        finally:
            (run.output_dir / RUNNING_MARKER).unlink(missing_ok=True)
            marker.close()

    def _start(self, run: Run, state: str) -> str:
        if state == "finished":  # its folder finished outside the harness (a cluster job): record it only
            return self._record(run, {"status": "ok", "exit_code": 0, "wall_s": None, "collected": True})
        command = self._command(run, state)
        run.output_dir.mkdir(parents=True, exist_ok=True)
        (run.output_dir / DEFINITION_MARKER).write_text(run.definition + "\n", encoding="utf-8")
        log = run.output_dir.parent / f"{run.name}.log"
        self.echo(f"start {run.name}: {' '.join(command[1:4])} ...")
        start = time.monotonic()
        with open(log, "w", encoding="utf-8") as stream:
            try:
                code = subprocess.run(
                    [sys.executable if command[0] == "python" else command[0], *command[1:]],
                    stdout=stream,
                    stderr=subprocess.STDOUT,
                    env=self._environment(run),
                    timeout=run.timeout_s,
                    preexec_fn=_die_with_parent,
                ).returncode
            except subprocess.TimeoutExpired:
                code = -int(signal.SIGKILL)
                stream.write(f"\nharness: killed after the run's timeout of {run.timeout_s} s\n")
        wall = round(time.monotonic() - start, 1)
        if code == PREEMPTED_EXIT_STATUS or _killed_with_a_checkpoint(code, run.output_dir):  # only circumstances
            with self._lock:
                self._done += 1
                self.echo(
                    f"[{self._done}/{self._total}] preempted {run.name} after {wall:.0f} s; the next run resumes it"
                )
            return "preempted"
        finished = code == 0 and (run.output_dir / run.done_file).is_file()
        outcome = {"status": "ok" if finished else "failed", "exit_code": code, "wall_s": wall, "command": command}
        if not finished:
            outcome["log_tail"] = _log_tail(log)
            if code == 0:
                outcome["log_tail"].append(f"harness: exit status 0 but no {run.done_file} in {run.output_dir}")
        return self._record(run, outcome)

    def _record(self, run: Run, outcome: dict[str, Any]) -> str:
        """Write the run's record folder (its record files and :data:`RECORD_FILE`) in one rename."""
        staging = run.record_dir.with_name(f".{run.name}.tmp")
        if staging.exists():
            shutil.rmtree(staging)
        staging.mkdir(parents=True)
        kept = []
        if outcome["status"] == "ok":
            for name in run.records:
                source = run.output_dir / name
                if source.is_file():
                    shutil.copy2(source, staging / name)
                    kept.append(name)
        record = {
            "run": run.name,
            "seed": run.seed,
            "definition": run.definition,
            "command": outcome.pop("command", run.command),
            "env": dict(run.env),
            **outcome,
            "records": kept,
            "git_commit": _git_commit_of(self.sweep.folder),
            "machine": machine(),
            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        (staging / RECORD_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        with self._lock:
            if run.record_dir.exists():
                shutil.rmtree(run.record_dir)
            os.replace(staging, run.record_dir)
            self._done += 1
            wall = f" in {record['wall_s']:.0f} s" if record["wall_s"] is not None else " (collected)"
            self.echo(f"[{self._done}/{self._total}] {record['status']} {run.name}{wall}")
            if self.commit:
                message = f"results/{self.sweep.study}: {run.name} {record['status']}{wall} (harness record)"
                if not git_commit_paths([run.record_dir], message):
                    self.echo(f"could not commit {run.record_dir}; commit it by hand")
        return record["status"]


def adopt_records(sweep: Sweep) -> list[str]:
    """Record the runs whose record folder was kept before the harness existed (it holds the run's done file but
    no :data:`RECORD_FILE`) as finished under the sweep file's definition; returns their names. The wall time is
    taken from a ``wall_time.json`` (``{"wall_s": ...}``) where the folder has one."""
    adopted = []
    for run in sweep.runs:
        if run.record() is not None or not (run.record_dir / run.done_file).is_file():
            continue
        timing = run.record_dir / "wall_time.json"
        wall = json.loads(timing.read_text(encoding="utf-8")).get("wall_s") if timing.is_file() else None
        record = {
            "run": run.name,
            "seed": run.seed,
            "definition": run.definition,
            "command": run.command,
            "env": dict(run.env),
            "status": "ok",
            "exit_code": 0,
            "wall_s": wall,
            "records": sorted(path.name for path in run.record_dir.iterdir() if path.is_file()),
            "adopted": "recorded before the harness existed, by the study's earlier run script",
        }
        (run.record_dir / RECORD_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        adopted.append(run.name)
    return adopted
