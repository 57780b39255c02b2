"""``use_all_cpu_threads``: a lone CPU process that ``accelerate launch`` left with its default ``OMP_NUM_THREADS=1``
gets every core back; a count somebody chose (exported, ``--num_cpu_threads_per_process``, several processes) stays."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

import hf_icot.runs.runtime
from hf_icot.runs.runtime import Launcher, cpu_threads_to_restore, physical_cores, use_all_cpu_threads

REPO = Path(__file__).resolve().parents[2]
#: What ``accelerate launch`` exports to a one-process script by default (the part the decision reads).
LAUNCHED = {"ACCELERATE_MIXED_PRECISION": "no", "ACCELERATE_USE_CPU": "False", "OMP_NUM_THREADS": "1"}
ACCELERATE_ARGV = ("/usr/bin/python3", "/usr/bin/accelerate", "launch", "train.py", "--config", "x.yaml")
#: The launcher as read from a plain ``accelerate launch train.py`` in an environment without OMP_NUM_THREADS.
ACCELERATE = Launcher(ACCELERATE_ARGV)


def decide(environ: dict, launcher: Launcher | None = ACCELERATE, **overrides) -> int | None:
    """``cpu_threads_to_restore`` for a lone process on a 4-core CPU with one torch thread, unless overridden."""
    settings = {"on_cpu": True, "cores": 4, "torch_threads": 1} | overrides
    return cpu_threads_to_restore(environ, launcher, **settings)


def test_the_launchers_default_one_thread_becomes_every_core() -> None:
    assert decide(LAUNCHED) == 4
    assert decide(LAUNCHED | {"WORLD_SIZE": "1", "LOCAL_RANK": "0"}) == 4  # torchrun with one process
    assert decide(LAUNCHED, launcher=None) == 4  # launcher unreadable: the 1 is taken for its default


@pytest.mark.parametrize(
    ("launcher_environ", "flags"),
    [
        ({"OMP_NUM_THREADS": "1"}, ()),  # exported before accelerate launch, which passed it on
        ({}, ("--num_cpu_threads_per_process", "1")),
        ({}, ("--num_cpu_threads_per_process=1",)),
        ({}, ("--num-cpu-threads-per-process", "1")),  # accelerate accepts the dashed spelling too
    ],
)
def test_a_chosen_one_thread_stays(launcher_environ: dict, flags: tuple[str, ...]) -> None:
    launcher = Launcher(ACCELERATE_ARGV[:3] + flags + ACCELERATE_ARGV[3:], launcher_environ)
    assert decide(LAUNCHED, launcher) is None


@pytest.mark.parametrize(
    ("environ", "why"),
    [
        ({"OMP_NUM_THREADS": "1"}, "not started by accelerate launch: the user's 1"),
        ({"ACCELERATE_MIXED_PRECISION": "no"}, "OMP_NUM_THREADS unset: torch already uses every core"),
        (LAUNCHED | {"OMP_NUM_THREADS": "2"}, "another count (use_cpu, or exported)"),
        (LAUNCHED | {"WORLD_SIZE": "2"}, "two processes share the cores"),
        (LAUNCHED | {"OMPI_COMM_WORLD_SIZE": "4"}, "four MPI processes share the cores"),
    ],
)
def test_other_environments_are_left_alone(environ: dict, why: str) -> None:
    assert decide(environ) is None, why


def test_gpu_runs_single_cores_set_counts_and_nested_processes_are_left_alone() -> None:
    assert decide(LAUNCHED, on_cpu=False) is None
    assert decide(LAUNCHED, cores=1) is None
    assert decide(LAUNCHED, torch_threads=3) is None  # this process already chose
    nested = Launcher(("python", "train.py"), {"ACCELERATE_MIXED_PRECISION": "no", "OMP_NUM_THREADS": "1"})
    assert decide(LAUNCHED, nested) is None  # the parent was itself started by accelerate: the 1 is not its default


@pytest.fixture
def torch_threads() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_use_all_cpu_threads_sets_torchs_count_only_when_it_decides_to(
    torch_threads: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hf_icot.runs.runtime, "physical_cores", lambda: 3)
    monkeypatch.setattr(
        hf_icot.runs.runtime, "find_launcher", lambda: Launcher(ACCELERATE_ARGV, {"OMP_NUM_THREADS": "1"})
    )
    for name, value in LAUNCHED.items():
        monkeypatch.setenv(name, value)
    assert use_all_cpu_threads(on_cpu=True) is None and torch.get_num_threads() == 1
    monkeypatch.setattr(hf_icot.runs.runtime, "find_launcher", lambda: Launcher(ACCELERATE_ARGV, {}))
    assert use_all_cpu_threads(on_cpu=False) is None and torch.get_num_threads() == 1
    assert use_all_cpu_threads(on_cpu=True) == 3 and torch.get_num_threads() == 3
    assert os.environ["OMP_NUM_THREADS"] == "1", "only torch's count changes"


PROBE = """\
import torch
from hf_icot.runs.runtime import use_all_cpu_threads
started = torch.get_num_threads()
use_all_cpu_threads(on_cpu=True)
print("threads", started, torch.get_num_threads())
"""


def _threads(command: list[str], **env: str) -> tuple[int, int]:
    """(torch threads at start, after ``use_all_cpu_threads``) of the probe run by ``command`` in a clean env."""
    clean = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS" and not k.startswith("ACCELERATE_")}
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=180, cwd=REPO,
        env={**clean, "PYTHONPATH": str(REPO), **env},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    started, after = result.stdout.split("threads", 1)[1].split()
    return int(started), int(after)


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("probe") / "probe.py"
    path.write_text(PROBE)
    return str(path)


@pytest.fixture(scope="module")
def plain_threads(probe: str) -> int:
    """What ``python script.py`` gets: torch's own count, which the accelerate forms must match."""
    started, after = _threads([sys.executable, probe])
    assert started == after == physical_cores()
    if started < 2:
        pytest.skip("one core: one thread is all there is, so a forced 1 cannot be told from the machine's count")
    return started


def _accelerate(config: str, *flags: str) -> list[str]:
    launch = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", f"recipes/accelerate/{config}"]
    return [*launch, *flags]


def test_cpu_config_gives_the_process_every_core_by_itself(probe: str, plain_threads: int) -> None:
    assert _threads(_accelerate("cpu.yaml", probe)) == (plain_threads, plain_threads)


def test_launchers_default_one_thread_is_restored_and_a_chosen_one_kept(probe: str, plain_threads: int) -> None:
    assert _threads(_accelerate("single_process.yaml", probe)) == (1, plain_threads)
    assert _threads(_accelerate("single_process.yaml", probe), OMP_NUM_THREADS="1") == (1, 1)
    assert _threads(_accelerate("single_process.yaml", "--num_cpu_threads_per_process", "1", probe)) == (1, 1)
