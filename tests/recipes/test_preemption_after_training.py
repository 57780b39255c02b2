"""Preemption after the last optimizer step: a SIGTERM sent to the run's whole process group (a scheduler's cancel)
while it evaluates or saves its final model leaves the trained weights as a checkpoint and exits with status 75 and
the line to continue; ``--resume_from_checkpoint true`` trains no step and ends with the uninterrupted run's
``eval_results.json`` and model bytes, on one process and on two under ``accelerate launch``. A run that finishes
leaves no checkpoint it was not asked for."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hf_icot.errors import PREEMPTED_EXIT_STATUS
from tests import forked
from tests.recipes.conftest import RECIPE, REPO, recipe_args
from tests.recipes.test_preemption import LAUNCH_TWO
from tests.recipes.test_recipe_resume import KILLED_RECIPE, trained_steps

#: What a run measures in seconds, which no two runs share.
TIMED = ("per_second", "seconds", "_s/", "tokens_per")


def run_in_own_session(*argv: str, timeout: int = 300) -> subprocess.CompletedProcess:
    """``python *argv`` on one thread in a new session, so that a signal to its process group reaches it and its
    children only (not pytest); forked from the session's pre-imported server (``tests.forked``) where it can be."""
    return forked.run(argv, timeout=timeout, start_new_session=True,
                      env={**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"})  # fmt: skip


def results(folder: Path) -> dict[str, float]:
    metrics = json.loads((folder / "eval_results.json").read_text())
    return {key: value for key, value in metrics.items() if not any(part in key for part in TIMED)}


def preempted_line(output: Path) -> str:
    return (
        f"preempted by SIGTERM after the last step (12 of 12): saved {output / 'checkpoint-12'}; continue with the same "
        "command and --resume_from_checkpoint true, which skips training."
    )


@pytest.fixture(scope="module")
def whole(tiny_gpt2: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    output = tmp_path_factory.mktemp("whole") / "run"
    result = run_in_own_session(str(RECIPE), *recipe_args(tiny_gpt2, output))
    assert result.returncode == 0, result.stderr[-3000:]
    return output


def test_a_finished_run_leaves_no_checkpoint_it_was_not_asked_for(whole: Path) -> None:
    assert not list(whole.glob("checkpoint-*")), "the weights kept against a preemption go when the run ends"


def stop_after_training(moment: str, model: Path, output: Path) -> None:
    stopped = run_in_own_session(*KILLED_RECIPE, "sigterm_group", moment, *recipe_args(model, output))
    assert stopped.returncode == PREEMPTED_EXIT_STATUS, stopped.stderr[-3000:]
    assert stopped.stderr.strip().splitlines()[-1] == preempted_line(output)
    assert "Traceback" not in stopped.stderr
    assert sorted(p.name for p in output.iterdir()) == ["checkpoint-12"], "no final model, nothing half-written"


@pytest.fixture(scope="module")
def stopped_in_evaluation(tiny_gpt2: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    output = tmp_path_factory.mktemp("stopped") / "run"
    stop_after_training("evaluation", tiny_gpt2, output)
    return output


def resume_to_the_uninterrupted_results_and_bytes(model: Path, output: Path, whole: Path) -> None:
    resumed = run_in_own_session(str(RECIPE), *recipe_args(model, output, "--resume_from_checkpoint", "true"))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resuming from {output / 'checkpoint-12'}: its 12 optimizer steps are done" in resumed.stderr
    assert trained_steps(resumed.stdout + resumed.stderr) == [], "the resumed run trained no step"
    assert results(output) == results(whole)
    assert (output / "model.safetensors").read_bytes() == (whole / "model.safetensors").read_bytes()


def test_sigterm_to_the_group_during_the_final_evaluation_resumes_to_the_uninterrupted_results_and_bytes(
    tiny_gpt2: Path, whole: Path, stopped_in_evaluation: Path, tmp_path: Path
) -> None:
    output = tmp_path / "run"
    shutil.copytree(stopped_in_evaluation, output)  # the checkpoint names no folder: it resumes from anywhere
    resume_to_the_uninterrupted_results_and_bytes(tiny_gpt2, output, whole)


@pytest.mark.slow  # ~50 s on 2 cores; the same path as the final evaluation's, one moment later
def test_sigterm_to_the_group_while_the_final_model_is_saved_resumes_to_the_uninterrupted_bytes(
    tiny_gpt2: Path, whole: Path, tmp_path: Path
) -> None:
    output = tmp_path / "run"
    stop_after_training("saved", tiny_gpt2, output)
    resume_to_the_uninterrupted_results_and_bytes(tiny_gpt2, output, whole)


def test_a_checkpoint_of_a_finished_run_cannot_train_on_without_its_optimizer(
    tiny_gpt2: Path, stopped_in_evaluation: Path, tmp_path: Path
) -> None:
    output = tmp_path / "run"
    shutil.copytree(stopped_in_evaluation, output)
    more = run_in_own_session(str(RECIPE), *recipe_args(tiny_gpt2, output, "--resume_from_checkpoint", "true",
                                                        "--num_train_epochs", "5"))  # fmt: skip
    assert more.returncode == 1
    assert more.stderr.strip().splitlines()[-1] == (
        f"error: {output / 'checkpoint-12'} holds only the weights of a finished run (12 steps), not its optimizer, "
        "so it cannot train on to 15 steps; resume with the run's own number of steps, or start a new run from its "
        "model."
    )


@pytest.mark.skipif(sys.platform != "linux", reason="two gloo processes on one machine: tested on Linux")
@pytest.mark.slow  # ~2 min on 2 cores: two accelerate processes, run three times
def test_two_processes_sigterm_to_the_group_during_evaluation_resume_to_the_uninterrupted_results_and_bytes(
    tiny_gpt2: Path, tmp_path: Path
) -> None:
    two = ["--per_device_train_batch_size", "8"]  # the same 16 examples per optimizer step
    whole = tmp_path / "whole"
    done = run_in_own_session(*LAUNCH_TWO, str(RECIPE), *recipe_args(tiny_gpt2, whole, *two), timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    output = tmp_path / "run"
    stopped = run_in_own_session(*LAUNCH_TWO, *KILLED_RECIPE, "sigterm_group", "evaluation",
                                 *recipe_args(tiny_gpt2, output, *two), timeout=600)  # fmt: skip
    assert stopped.returncode != 0  # the launcher reports its workers' status 75 as their failure
    assert preempted_line(output) in stopped.stderr, stopped.stderr[-3000:]
    assert sorted(p.name for p in output.iterdir()) == ["checkpoint-12"]
    resumed = run_in_own_session(*LAUNCH_TWO, str(RECIPE), *recipe_args(tiny_gpt2, output, *two,
                                 "--resume_from_checkpoint", "true"), timeout=600)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert trained_steps(resumed.stdout + resumed.stderr) == []
    assert results(output) == results(whole)
    assert (output / "model.safetensors").read_bytes() == (whole / "model.safetensors").read_bytes()
