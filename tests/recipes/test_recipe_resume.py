"""Resume through the recipe's command line: a run SIGKILLed at a random step, or while it writes a checkpoint or its
final model, continues with ``--resume_from_checkpoint true``, trains only the steps it had not done, and ends with
the uninterrupted run's weights; a new run never writes over another one; each wrong resume is one sentence."""

from __future__ import annotations

import hashlib
import json
import logging
import random
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers.trainer_utils import get_last_checkpoint

from hf_icot.runs.run_lock import LOCK_FILE
from tests.recipes.conftest import RECIPE, recipe_args, run_recipe
from tests.recipes.killed_recipe import COMMAND as KILLED_RECIPE
from tests.recipes.test_every_recipe_resumes import run

SAVE_EVERY_2 = ["--save_strategy", "steps", "--save_steps", "2"]
STEPS, STEPS_PER_EPOCH = 12, 3  # recipe_args: 48 examples, 16 per batch, 4 epochs
LOSS_LINE = re.compile(r"\{'loss': [^}]*'epoch': '([0-9.]+)'\}")  # what Trainer prints at each logged step


def run_command(*command: str | Path) -> subprocess.CompletedProcess:
    """Run ``command`` (what follows ``python``: a script or ``-m`` and a module, then its arguments) in a process of
    its own on one thread, as ``run_recipe`` runs the uninterrupted run in this one (the resume tests' one helper:
    ``tests.recipes.test_every_recipe_resumes.run``).

    Runs on the same thread count are bitwise equal (measured); a 1-thread and a 2-thread run of the same recipe
    differ by ~3.5e-6 in the weights on some CPUs (the kernels' reduction order), which says nothing of resume."""
    return run([str(part) for part in command])


def killed(moment: str, at: int, model: Path, output: Path) -> str:
    """Run the recipe, SIGKILLed at ``moment`` (see killed_recipe.py); returns its output."""
    result = run_command(*KILLED_RECIPE, moment, str(at), *recipe_args(model, output, *SAVE_EVERY_2))
    assert result.returncode == -signal.SIGKILL, result.stderr[-3000:]
    return result.stdout + result.stderr


def resumed(model: Path, output: Path) -> str:
    """``python recipes/icot_gpt2.py ... --resume_from_checkpoint true``; returns its output."""
    result = run_command(RECIPE, *recipe_args(model, output, *SAVE_EVERY_2, "--resume_from_checkpoint", "true"))
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout + result.stderr


def trained_steps(output: str) -> list[int]:
    """The optimizer steps a process trained, from its printed logs (logged every step, 3 steps per epoch)."""
    return [round(float(epoch) * STEPS_PER_EPOCH) for epoch in LOSS_LINE.findall(output)]


def same_weights(folder: Path, reference: Path) -> bool:
    """Whether the two folders' weights are bitwise equal."""
    expected, got = load_file(reference / "model.safetensors"), load_file(folder / "model.safetensors")
    return expected.keys() == got.keys() and all(torch.equal(expected[name], got[name]) for name in expected)


def max_weight_difference(folder: Path, reference: Path) -> float:
    expected, got = load_file(reference / "model.safetensors"), load_file(folder / "model.safetensors")
    assert expected.keys() == got.keys()
    return max((expected[name] - got[name]).abs().max().item() for name in expected)


def snapshot(folder: Path) -> dict[str, str]:
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


@pytest.fixture(scope="module")
def whole_run(tiny_gpt2: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The uninterrupted run, checkpointed every 2 steps; its folder."""
    output = tmp_path_factory.mktemp("whole") / "run"
    run_recipe(recipe_args(tiny_gpt2, output, *SAVE_EVERY_2))
    return output


# ---------------------------------------------------------------------------------------------------------------
# Killed, then resumed


def test_killed_at_a_random_step_resumes_the_remaining_steps_to_the_uninterrupted_weights(
    tiny_gpt2: Path, whole_run: Path, tmp_path: Path
) -> None:
    kill_step = random.Random(13).randint(3, STEPS - 2)  # after the first checkpoint (2), before the last
    output = tmp_path / "run"
    before = killed("step", kill_step, tiny_gpt2, output)
    last = kill_step - kill_step % 2
    assert trained_steps(before) == list(range(1, kill_step + 1)), f"killed as step {kill_step + 1} began"
    kept = sorted(p.name for p in output.iterdir() if p.name != LOCK_FILE)  # a killed run's lock stays, unheld
    assert kept == sorted(f"checkpoint-{s}" for s in range(2, last + 1, 2))

    after = resumed(tiny_gpt2, output)
    assert f"resuming from {output / f'checkpoint-{last}'}: its {last} optimizer steps are done" in after
    # A silent restart from step 0 would also end at the same weights: it would print steps 1 to 12.
    assert trained_steps(after) == list(range(last + 1, STEPS + 1))
    assert same_weights(output, whole_run)
    assert max_weight_difference(output, tiny_gpt2) > 1e-3, "the weights trained"
    losses = [[e["loss"] for e in json.loads((run / "training_log.json").read_text()) if "loss" in e]
              for run in (output, whole_run)]  # fmt: skip
    assert len(losses[0]) == STEPS and losses[0] == losses[1]


def test_killed_while_writing_a_checkpoint_then_its_final_model_resumes_from_the_last_complete_one(
    tiny_gpt2: Path, whole_run: Path, tmp_path: Path
) -> None:
    output = tmp_path / "run"
    killed("checkpoint", 6, tiny_gpt2, output)  # model, optimizer and scheduler of checkpoint-6 written, not the rest
    partial = output / "checkpoint-6"
    assert (partial / "model.safetensors").is_file() and not (partial / "trainer_state.json").exists()
    assert get_last_checkpoint(str(output)) == str(partial), "transformers' own lookup would pick it"

    # Resumed, and killed again halfway through writing the final model.safetensors.
    middle = run_command(
        *KILLED_RECIPE, "final_model", "0",
        *recipe_args(tiny_gpt2, output, *SAVE_EVERY_2, "--resume_from_checkpoint", "true"),
    )  # fmt: skip
    assert middle.returncode == -signal.SIGKILL, middle.stderr[-3000:]
    log = middle.stdout + middle.stderr
    assert f"skipping {partial}: it was being written when its run stopped, so it cannot be resumed from" in log
    assert f"resuming from {output / 'checkpoint-4'}: its 4 optimizer steps are done" in log
    assert trained_steps(log) == list(range(5, STEPS + 1))
    assert not (output / "model.safetensors").exists(), "the half-written weights stayed in the staging folder"
    (staging,) = output.glob(".saving-*")
    assert 0 < (staging / "model.safetensors").stat().st_size < (whole_run / "model.safetensors").stat().st_size
    assert not (partial / ".icot-checkpoint-writing").exists(), "checkpoint-6 was written again, completely"

    after = resumed(tiny_gpt2, output)
    assert f"resuming from {output / f'checkpoint-{STEPS}'}: its {STEPS} optimizer steps are done" in after
    assert trained_steps(after) == []
    assert same_weights(output, whole_run)
    assert not list(output.glob(".saving-*")), "the stopped run's staging folder is gone"


# ---------------------------------------------------------------------------------------------------------------
# Wrong resumes and runs over other runs: one sentence, before any work, the folder untouched


def _refused(argv: list[str]) -> str:
    output = Path(argv[argv.index("--output_dir") + 1])
    before = snapshot(output) if output.exists() else None
    with pytest.raises(ValueError) as caught:
        run_recipe(argv)
    message = str(caught.value)
    assert "\n" not in message and message.endswith("."), message
    assert (snapshot(output) if output.exists() else None) == before, "the run folder is as it was"
    return message


def test_resume_from_a_missing_path(tiny_gpt2: Path, tmp_path: Path) -> None:
    missing = tmp_path / "run" / "checkpoint-4"
    message = _refused(recipe_args(tiny_gpt2, tmp_path / "run", "--resume_from_checkpoint", str(missing)))
    assert message == (
        f"--resume_from_checkpoint '{missing}' cannot be resumed from: it does not exist; give a complete "
        "checkpoint-<step> folder, or true for the last complete one in output_dir."
    )
    assert not (tmp_path / "run").exists()


def test_resume_true_without_a_complete_checkpoint(
    tiny_gpt2: Path, whole_run: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    output = tmp_path / "run"
    message = _refused(recipe_args(tiny_gpt2, output, "--resume_from_checkpoint", "true"))
    assert message == (
        f"--resume_from_checkpoint true found no complete checkpoint-<step> folder in '{output}'; give the "
        "output_dir of a run saved with --save_strategy steps or epoch, or a checkpoint's path."
    )
    assert not output.exists()
    shutil.copytree(whole_run / "checkpoint-2", output / "checkpoint-2")
    (output / "checkpoint-2" / "trainer_state.json").write_text('{"global_step": 2, "log_hist')  # cut short
    with caplog.at_level(logging.WARNING, logger="hf_icot.runs.run_folder"):
        assert _refused(recipe_args(tiny_gpt2, output, "--resume_from_checkpoint", "true")) == message
    assert f"skipping {output / 'checkpoint-2'}: its trainer_state.json is cut short or unreadable" in caplog.text
    message = _refused(recipe_args(tiny_gpt2, output, "--resume_from_checkpoint", str(output / "checkpoint-2")))
    assert message.startswith(f"--resume_from_checkpoint '{output / 'checkpoint-2'}' cannot be resumed from: its ")


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--seed", "1"], "was trained with seed 0, but this run has seed 1; resume with --seed 0, or start a new run."),
        (["--per_device_train_batch_size", "8"], "was trained with 16 examples per optimizer step (per device × "
         "processes × accumulation), but this run has 8; resume with the same batch size, or start a new run."),
        (["--gradient_accumulation_steps", "2"], "was trained with 16 examples per optimizer step (per device × "
         "processes × accumulation), but this run has 32; resume with the same batch size, or start a new run."),
    ],
    ids=["seed", "per-device batch", "accumulation"],
)  # fmt: skip
def test_resume_with_another_seed_or_batch_size(
    tiny_gpt2: Path, whole_run: Path, flags: list[str], message: str
) -> None:
    argv = recipe_args(tiny_gpt2, whole_run, *SAVE_EVERY_2, "--resume_from_checkpoint", "true", *flags)
    assert _refused(argv) == f"checkpoint '{whole_run / f'checkpoint-{STEPS}'}' {message}"


def test_resume_with_another_schedule(tiny_gpt2: Path, whole_run: Path) -> None:
    """Refused by ICoTTrainer when training starts, where the schedule is bound to the data."""
    argv = recipe_args(
        tiny_gpt2, whole_run, *SAVE_EVERY_2, "--resume_from_checkpoint", "true", "--remove_per_epoch", "4"
    )
    message = _refused(argv)
    assert message.startswith(
        "the checkpoint was trained with the schedule 'stepwise' with remove_per_epoch 8.0, but this run has "
        "remove_per_epoch 4.0; "
    )
    assert message.endswith("resume with the same curriculum, batch size and seed, or start a new run.")


def test_a_new_run_into_a_folder_holding_another_run(tiny_gpt2: Path, whole_run: Path, tmp_path: Path) -> None:
    message = _refused(recipe_args(tiny_gpt2, whole_run, *SAVE_EVERY_2))
    assert message == (
        f"output_dir '{whole_run}' already holds another run (eval_results.json, model.safetensors, checkpoint-2 "
        "and 5 more); continue it with --resume_from_checkpoint true, or start over with --overwrite_output_dir "
        "(which deletes its checkpoints)."
    )
    both = ["--resume_from_checkpoint", "true", "--overwrite_output_dir"]
    assert _refused(recipe_args(tiny_gpt2, whole_run, *both)) == (
        "--resume_from_checkpoint continues the run in output_dir and --overwrite_output_dir replaces it; give one "
        "of them."
    )
    # A checkpoint of one run, resumed into the folder of another.
    other = tmp_path / "other"
    shutil.copytree(whole_run / "checkpoint-4", other / "checkpoint-4")
    argv = recipe_args(tiny_gpt2, whole_run, "--resume_from_checkpoint", str(other / "checkpoint-4"))
    assert _refused(argv) == (
        f"output_dir '{whole_run}' holds another run (eval_results.json, model.safetensors, checkpoint-2 and 5 more) "
        f"than the checkpoint '{other / 'checkpoint-4'}'; give the checkpoint's own run folder as --output_dir, or a "
        "new folder."
    )


def test_overwrite_output_dir_starts_over(tiny_gpt2: Path, whole_run: Path, tmp_path: Path) -> None:
    output = tmp_path / "run"
    for step in (2, 4):
        shutil.copytree(whole_run / f"checkpoint-{step}", output / f"checkpoint-{step}")
    (output / "model.safetensors").write_bytes(b"an earlier run's weights")
    (output / "notes.txt").write_text("mine\n")
    run_recipe(recipe_args(tiny_gpt2, output, "--overwrite_output_dir"))  # saves no checkpoints
    assert not list(output.glob("checkpoint-*")), "the earlier run's checkpoints would have mixed with this run's"
    assert same_weights(output, whole_run)
    assert (output / "notes.txt").read_text() == "mine\n", "what is not a run's is left alone"
