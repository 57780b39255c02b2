"""Preemption through a recipe's command line: the scheduler's warning signal (SIGTERM, or SIGUSR1 when configured)
saves a complete checkpoint at the end of the step under way, prints how to continue, exits with status 75, and
``--resume_from_checkpoint true`` continues to the uninterrupted run's weights, bit for bit (every run on one thread),
from the middle of a curriculum stage, on one process and on two under ``accelerate launch``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from hf_icot.errors import PREEMPTED_EXIT_STATUS
from tests.recipes.conftest import REPO
from tests.recipes.test_every_recipe_resumes import KILLED_RECIPE, PARITY_A, SAVE, run, weights

PARITY = str(REPO / "results" / "parity" / "train.py")
LAUNCH_TWO = [
    "-m", "accelerate.commands.launch", "--config_file", str(REPO / "recipes/accelerate/ddp_cpu.yaml"),
    "--multi_gpu", "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
]  # fmt: skip
#: Two processes share each batch of 32: 16 examples per process, the same 32 per optimizer step.
TWO_PROCESSES = ["--per_device_train_batch_size", "16"]


def parity_args(output: Path, *extra: str) -> list[str]:
    """The 8-step Log-ICoT parity run (stages of 2 steps), checkpointed every 2 steps."""
    return [*PARITY_A, *SAVE, "--output_dir", str(output), *extra]


def same_weights(folder: Path, reference: Path) -> bool:
    expected, got = weights(reference), weights(folder)
    return expected.keys() == got.keys() and all((expected[k] == got[k]).all() for k in expected)


def preempted_line(output: Path, signal_name: str, step: int) -> str:
    return (
        f"preempted by {signal_name} after step {step} of 8: saved {output / f'checkpoint-{step}'}; continue with the "
        "same command and --resume_from_checkpoint true."
    )


@pytest.fixture(scope="module")
def whole(tmp_path_factory: pytest.TempPathFactory) -> Path:
    output = tmp_path_factory.mktemp("whole") / "run"
    result = run([PARITY, *parity_args(output)])
    assert result.returncode == 0, result.stderr[-3000:]
    return output


def test_sigterm_saves_the_step_under_way_and_the_resumed_run_ends_bitwise_as_the_uninterrupted_one(
    whole: Path, tmp_path: Path
) -> None:
    output = tmp_path / "run"
    # SIGTERM as step 3 begins: mid-stage (stages end at 2, 4, 6) and off the save schedule (every 2 steps).
    stopped = run([*KILLED_RECIPE, "--recipe", "results/parity/train.py", "sigterm", "2", *parity_args(output)])
    assert stopped.returncode == PREEMPTED_EXIT_STATUS, stopped.stderr[-3000:]
    assert stopped.stderr.strip().splitlines()[-1] == preempted_line(output, "SIGTERM", 3)
    assert sorted(p.name for p in output.iterdir()) == ["checkpoint-2", "checkpoint-3"], "no final model, no stage"
    resumed = run([PARITY, *parity_args(output, "--resume_from_checkpoint", "true")])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resuming from {output / 'checkpoint-3'}: its 3 optimizer steps are done" in resumed.stderr
    assert same_weights(output, whole)
    assert not same_weights(output / "checkpoint-3", whole), "the resumed run trained"


def test_sigusr1_is_the_preemption_signal_when_configured(tmp_path: Path) -> None:
    output = tmp_path / "run"
    argv = parity_args(output, "--preemption_signals", "SIGUSR1", "--max_steps", "8")
    stopped = run([*KILLED_RECIPE, "--recipe", "results/parity/train.py", "sigusr1", "4", *argv])
    assert stopped.returncode == PREEMPTED_EXIT_STATUS, stopped.stderr[-3000:]
    assert stopped.stderr.strip().splitlines()[-1] == preempted_line(output, "SIGUSR1", 5)
    wrong = run([PARITY, *parity_args(tmp_path / "other", "--preemption_signals", "SIGKIL")])
    assert wrong.returncode == 1
    assert wrong.stderr.strip().splitlines()[-1] == (
        "error: --preemption_signals 'SIGKIL' is not a signal a run can catch; give names such as SIGTERM, SIGUSR1 "
        "or SIGINT (or none)."
    )


@pytest.mark.skipif(sys.platform != "linux", reason="two gloo processes on one machine: tested on Linux")
@pytest.mark.slow  # ~100 s on 2 cores: two accelerate processes, run twice
def test_two_processes_stop_at_the_same_step_when_one_is_signalled_and_resume_bitwise(tmp_path: Path) -> None:
    whole = tmp_path / "whole"
    result = run([*LAUNCH_TWO, PARITY, *parity_args(whole, *TWO_PROCESSES)], timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    output = tmp_path / "run"
    recipe = ["results/parity/train.py", "sigterm", "2", *parity_args(output, *TWO_PROCESSES)]
    stopped = run([*LAUNCH_TWO, *KILLED_RECIPE, "--recipe", *recipe], timeout=600)
    # Only the first process got SIGTERM; both stopped after step 3 with a complete checkpoint. Each exits with 75,
    # which the launcher reports as its workers' failure.
    assert stopped.returncode != 0
    assert preempted_line(output, "SIGTERM", 3) in stopped.stderr
    assert f"exitcode  : {PREEMPTED_EXIT_STATUS}" in stopped.stderr
    assert sorted(p.name for p in output.iterdir()) == ["checkpoint-2", "checkpoint-3"]
    assert sorted(p.name for p in (output / "checkpoint-3").glob("rng_state_*.pth")) == [
        "rng_state_0.pth", "rng_state_1.pth"
    ]  # fmt: skip
    resumed = run([*LAUNCH_TWO, PARITY, *parity_args(output, *TWO_PROCESSES, "--resume_from_checkpoint", "true")],
                  timeout=600)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert same_weights(output, whole)
