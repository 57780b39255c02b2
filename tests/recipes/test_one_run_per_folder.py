"""Two runs into one output folder at once: the second is refused in one sentence naming the first (its pid and
host), on one process and on two under ``accelerate launch``; the lock goes when the first run ends, and a run that
died (SIGKILL) leaves none that blocks the next."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from hf_icot.runs.run_lock import LOCK_FILE
from tests import forked
from tests.recipes.conftest import REPO
from tests.recipes.test_every_recipe_resumes import KILLED_RECIPE, run
from tests.recipes.test_preemption import LAUNCH_TWO, PARITY, TWO_PROCESSES, parity_args


def start_held(launch: list[str], output: Path, hold: Path, *extra: str) -> forked.Started:
    """The first run, started (forked from the session's pre-imported server, or under ``accelerate launch``) and
    waiting as its step 3 begins (until ``hold/release`` exists)."""
    hold.mkdir()
    first = forked.start(
        [*launch, *KILLED_RECIPE, "--recipe", "results/parity/train.py", "hold", "2", *parity_args(output, *extra)],
        env={**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
             "ICOT_TEST_HOLD": str(hold)},
    )  # fmt: skip
    deadline = time.monotonic() + 300
    while not (hold / "held").exists():
        assert first.poll() is None, first.output("stderr")[-3000:]
        assert time.monotonic() < deadline, "the first run never reached step 3"
        time.sleep(0.2)
    return first


def refusal_of(second: subprocess.CompletedProcess, output: Path, pid: int) -> None:
    assert second.returncode == 1, second.stderr[-3000:]
    lines = [line for line in second.stderr.splitlines() if line.startswith("error: ")]
    assert lines and set(lines) == {
        f"error: output_dir '{output}' is in use by another run (pid {pid} on {socket.gethostname()}, started "
        + lines[0].split(", started ", 1)[1]
    }, second.stderr[-3000:]
    assert lines[0].endswith("; wait for it to end, or give another --output_dir.")


@pytest.mark.parametrize(
    "processes", [1, pytest.param(2, marks=pytest.mark.slow)], ids=["one process", "two processes"]
)  # two: ~2 min
def test_a_second_run_into_a_folder_in_use_is_refused_and_the_first_finishes(processes: int, tmp_path: Path) -> None:
    launch, extra = (LAUNCH_TWO, TWO_PROCESSES) if processes == 2 else ([], [])
    output, hold = tmp_path / "run", tmp_path / "hold"
    first = start_held(launch, output, hold, *extra)
    try:
        pid = int((hold / "held").read_text())
        before = sorted(p.name for p in output.iterdir())
        for argv in ([], ["--resume_from_checkpoint", "true"], ["--overwrite_output_dir", "true"]):
            refusal_of(run([*launch, PARITY, *parity_args(output, *extra, *argv)], timeout=600), output, pid)
        assert sorted(p.name for p in output.iterdir()) == before, "the second run changed nothing"
    finally:
        (hold / "release").write_text("")
        first.wait(timeout=600)
    assert first.returncode == 0, first.output("stderr")[-3000:]
    assert (output / "model.safetensors").is_file() and not (output / LOCK_FILE).exists()


def test_the_lock_of_a_killed_run_does_not_block_the_next(tmp_path: Path) -> None:
    output = tmp_path / "run"
    killed = run([*KILLED_RECIPE, "--recipe", "results/parity/train.py", "step", "3", *parity_args(output)])
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert (output / LOCK_FILE).exists(), "the dead run's lock file stays, naming a process that is gone"
    resumed = run([PARITY, *parity_args(output, "--resume_from_checkpoint", "true")])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert not (output / LOCK_FILE).exists()
