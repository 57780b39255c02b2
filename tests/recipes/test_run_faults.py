"""What a run survives besides being killed, through ``python recipes/icot_gpt2.py ...``: a loss that diverges, a last
checkpoint whose files were cut short, and a disk that fills up while a checkpoint, the final model or a dataset is
written. Each ends in one sentence, and leaves the run folder as it was before the failed write."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from hf_icot.runs.run_folder import CHECKPOINT_WRITING, checkpoint_problem
from tests.recipes.conftest import RECIPE, REPO, recipe_args
from tests.recipes.test_recipe_resume import SAVE_EVERY_2, run_command, same_weights

#: constant_with_warmup over 3 steps from a learning rate of 0: step 1 trains nothing, step 2 at 3.3e11 sends the
#: weights far out, and the loss of step 3 is NaN.
DIVERGING = ["--learning_rate", "1e12", "--lr_scheduler_type", "constant_with_warmup", "--warmup_steps", "3",
             "--max_grad_norm", "0", "--save_strategy", "steps", "--save_steps", "1"]  # fmt: skip


def last_line(result: subprocess.CompletedProcess) -> str:
    """The run's one error line (progress bars may print after it)."""
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.stderr[-3000:]
    return errors[0]


def test_a_diverging_loss_stops_the_run_naming_step_loss_and_learning_rate(tiny_gpt2: Path, tmp_path: Path) -> None:
    output = tmp_path / "run"
    result = run_command(RECIPE, *recipe_args(tiny_gpt2, output, *DIVERGING))
    assert result.returncode == 1
    assert last_line(result) == (
        "error: the training loss is nan at step 3 (stage 3, first 3 CoT tokens from the left (+ smoothing λ=4.0) "
        "removed) with learning rate 6.67e+11; training stopped before the optimizer step, and the last good "
        f"checkpoint is {output / 'checkpoint-2'}; lower the learning rate (or slow the curriculum) and resume from it."
    )
    assert "Traceback" not in result.stderr
    assert sorted(p.name for p in output.iterdir()) == ["checkpoint-1", "checkpoint-2"], "no final model"
    assert all(checkpoint_problem(output / name) is None for name in ("checkpoint-1", "checkpoint-2"))
    assert all(torch.isfinite(t).all() for t in load_file(output / "checkpoint-2" / "model.safetensors").values())


# ---------------------------------------------------------------------------------------------------------------
# A broken last checkpoint


@pytest.fixture(scope="module")
def whole_run(tiny_gpt2: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    output = tmp_path_factory.mktemp("whole") / "run"
    result = run_command(RECIPE, *recipe_args(tiny_gpt2, output, *SAVE_EVERY_2))
    assert result.returncode == 0, result.stderr[-3000:]
    return output


def cut_in_half(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


@pytest.mark.parametrize("broken", ["model.safetensors", "optimizer.pt"])
def test_a_cut_short_last_checkpoint_is_skipped_by_true_and_refused_by_path(
    broken: str, tiny_gpt2: Path, whole_run: Path, tmp_path: Path
) -> None:
    output = tmp_path / "run"
    for step in (2, 4, 6, 8):  # the run as it stood after 8 of its 12 steps
        shutil.copytree(whole_run / f"checkpoint-{step}", output / f"checkpoint-{step}")
    cut_in_half(output / "checkpoint-8" / broken)

    explicit = run_command(RECIPE, *recipe_args(tiny_gpt2, output, *SAVE_EVERY_2, "--resume_from_checkpoint",
                                                str(output / "checkpoint-8")))  # fmt: skip
    assert explicit.returncode == 1
    assert last_line(explicit).startswith(
        f"error: --resume_from_checkpoint '{output / 'checkpoint-8'}' cannot be resumed from: its {broken} is cut "
        "short"
    )
    assert last_line(explicit).endswith("; give a complete checkpoint-<step> folder, or true for the last complete "
                                        "one in output_dir.")  # fmt: skip

    resumed = run_command(RECIPE, *recipe_args(tiny_gpt2, output, *SAVE_EVERY_2, "--resume_from_checkpoint", "true"))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"skipping {output / 'checkpoint-8'}: its {broken} is cut short" in resumed.stderr
    assert f"resuming from {output / 'checkpoint-6'}: its 6 optimizer steps are done" in resumed.stderr
    assert same_weights(output, whole_run)


# ---------------------------------------------------------------------------------------------------------------
# A full disk


@pytest.fixture
def small_disk(tmp_path: Path):
    """A function mounting a tmpfs of the given size at a fresh folder (root only); unmounted afterwards."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a size-limited filesystem needs root to mount a tmpfs")
    mounted = []

    def mount(kib: int) -> Path:
        folder = tmp_path / f"disk{len(mounted)}"
        folder.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={kib}k", "tmpfs", str(folder)],
                              capture_output=True, text=True)  # fmt: skip
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        mounted.append(folder)
        return folder

    yield mount
    for folder in mounted:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def test_a_checkpoint_that_fills_the_disk_is_removed_and_the_earlier_one_stays_usable(
    tiny_gpt2: Path, small_disk, tmp_path: Path
) -> None:
    output = small_disk(700) / "run"  # room for one checkpoint (about 480 KiB), not for two
    result = run_command(RECIPE, *recipe_args(tiny_gpt2, output, *SAVE_EVERY_2))
    assert result.returncode == 1
    message = last_line(result)
    assert message.startswith(
        f"error: no space left on device in '{output}' while writing checkpoint-4: it needs about "
    ), message
    assert message.endswith(
        "what was half-written is removed and everything written before is intact; free some space or choose another "
        f"folder, then resume with --resume_from_checkpoint true (from {output / 'checkpoint-2'})."
    )
    assert sorted(p.name for p in output.iterdir()) == ["checkpoint-2"]
    assert checkpoint_problem(output / "checkpoint-2") is None
    assert not list(output.rglob(CHECKPOINT_WRITING))


def test_a_final_model_that_fills_the_disk_leaves_no_part_of_it(tiny_gpt2: Path, small_disk) -> None:
    output = small_disk(100) / "run"  # the model is about 150 KiB
    result = run_command(RECIPE, *recipe_args(tiny_gpt2, output))
    assert result.returncode == 1
    message = last_line(result)
    assert message.startswith(f"error: no space left on device in '{output}' while writing the model: it needs "), (
        message
    )
    assert "Traceback" not in result.stderr
    # no half model, no staging folder: the folder is empty, or gone when the run had created it and left it empty
    assert not output.exists() or sorted(p.name for p in output.iterdir()) == []


def test_a_dataset_build_that_fills_the_disk_leaves_the_earlier_build_usable(small_disk) -> None:
    disk = small_disk(400)
    data = disk / "data"

    def build(digits: int, train_size: int) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "datasets_builder", "build", "--task", "multiplication", "--out", str(data),
             "--no-progress", "--a_digits", str(digits), "--b_digits", str(digits), "--train_size", str(train_size),
             "--validation_size", "10", "--test_size", "10"],
            capture_output=True, text=True, cwd=REPO, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)},
        )  # fmt: skip

    first = build(2, 100)
    assert first.returncode == 0, first.stderr[-3000:]
    before = {p.relative_to(data): p.read_bytes() for p in data.rglob("*") if p.is_file()}
    second = build(3, 30_000)  # about 3 MiB of Parquet
    assert second.returncode == 1, second.stderr[-3000:]
    message = second.stderr.strip().splitlines()[-1]
    assert message.startswith(f"python -m datasets_builder build: error: no space left on device in '{disk}' while "
                              "writing config 'mult_3x3' of data: it needs about "), message  # fmt: skip
    assert {p.relative_to(data): p.read_bytes() for p in data.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in disk.iterdir()) == ["data"], "no staging folder left"
    from hf_icot.data import load_icot_dataset

    assert len(load_icot_dataset(str(data), "mult_2x2")["train"]) == 100
