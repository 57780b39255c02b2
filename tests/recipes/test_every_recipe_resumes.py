"""Every study recipe on the shared set-up (``hf_icot.command_line.recipe.RecipeRun``): SIGKILLed after a checkpoint,
``--resume_from_checkpoint true`` continues to the uninterrupted run's weights, bit for bit (every run on one thread);
a new run into a folder holding another run is refused in one sentence, the folder untouched. recipes/icot_gpt2.py has
its own, longer tests of the same (test_recipe_resume.py)."""

from __future__ import annotations

import csv
import importlib
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests import forked
from tests.recipes.conftest import REPO
from tests.recipes.killed_recipe import COMMAND as KILLED_RECIPE
from tests.recipes.killed_recipe import recipe_module

SAVE = ["--save_strategy", "steps", "--save_steps", "2", "--logging_steps", "1", "--report_to", "none",
        "--disable_tqdm", "true", "--seed", "0"]  # fmt: skip
PARITY_A = [
    "--config", str(REPO / "results/parity/configs/parity_log_icot.yaml"), "--task_args",
    json.dumps({"n_bits": 10, "k": 4, "train_size": 256, "validation_size": 16, "test_size": 16}),
    "--scratch_model", json.dumps({"n_bits": 10, "k": 4, "num_layers": 2}), "--stage_length", "2", "--max_steps", "8",
    "--per_device_train_batch_size", "32", "--per_device_eval_batch_size", "16", "--eval_steps", "4",
]  # fmt: skip
PARITY_MLP = [
    "--config", str(REPO / "results/parity/configs/parity_mlp_mixture.yaml"), "--task_args",
    json.dumps({"n_bits": 10, "k": 4, "train_size": 256, "validation_size": 16, "test_size": 16}),
    "--scratch_model", json.dumps({"n_bits": 10, "k": 4, "hidden_size": 16}), "--max_steps", "8",
    "--per_device_train_batch_size", "32", "--per_device_eval_batch_size", "16", "--eval_strategy", "no",
]  # fmt: skip
SEMIAUTOMATA = [
    "--config", str(REPO / "recipes/configs/semiautomata_cpu.yaml"), "--task_args",
    json.dumps({"kind": "counter", "modulus": 3, "length": 8, "train_size": 96, "test_size": 16, "ood_size": 16}),
    "--scratch_model", json.dumps({"depth": 2, "param_budget": 20_000, "n_head": 2, "n_positions": 24}),
    "--stage_length", "2", "--steps_per_stage", "2", "--max_steps", "8", "--per_device_train_batch_size", "16",
    "--per_device_eval_batch_size", "16", "--generation_eval_examples", "8",
]  # fmt: skip
MARGINALS = [
    "--config", str(REPO / "results/marginals/configs/marginals.yaml"),
    "--task_args", json.dumps({"n_bases": 12, "k": 3}),
    "--scratch_model", json.dumps({"n_layer": 2, "n_head": 2, "n_embd": 32, "n_inner": 64}), "--max_steps", "8",
    "--diagnostics_interval", "3", "--diagnostic_examples", "9", "--per_device_train_batch_size", "16",
]  # fmt: skip
RECIPES = {  # name -> (the script, from the repository root; its arguments)
    "parity (theory model A)": ("results/parity/train.py", PARITY_A),
    "parity (mixture MLP)": ("results/parity/train.py", PARITY_MLP),
    "semiautomata": ("recipes/semiautomata.py", SEMIAUTOMATA),
    "marginals": ("results/marginals/train.py", MARGINALS),
}


def command(script: str, argv: list[str], output: Path, *extra: str) -> list[str]:
    return [*argv, *SAVE, "--output_dir", str(output), *extra]


def run(script_args: list[str], timeout: int = 300) -> subprocess.CompletedProcess:
    """``python *script_args`` on one thread, offline: forked from the test session's server of pre-imported
    processes (``tests.forked``), or under ``accelerate launch`` its own interpreters."""
    return forked.run(
        script_args,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"},
    )


def weights(folder: Path) -> dict[str, torch.Tensor]:
    return load_file(folder / "model.safetensors")


@pytest.fixture(scope="module", params=list(RECIPES), ids=list(RECIPES))
def uninterrupted(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    name = request.param
    script, argv = RECIPES[name]
    output = tmp_path_factory.mktemp("whole") / "run"
    result = run([str(REPO / script), *command(script, argv, output)])
    assert result.returncode == 0, result.stderr[-3000:]
    return name, output


def test_a_killed_run_resumes_to_the_uninterrupted_weights(uninterrupted: tuple[str, Path], tmp_path: Path) -> None:
    name, whole = uninterrupted
    script, argv = RECIPES[name]
    output = tmp_path / "run"
    killed = run([*KILLED_RECIPE, "--recipe", script, "step", "5", *command(script, argv, output)])
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert sorted(p.name for p in output.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-4"]
    resumed = run([str(REPO / script), *command(script, argv, output, "--resume_from_checkpoint", "true")])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resuming from {output / 'checkpoint-4'}: its 4 optimizer steps are done" in resumed.stderr
    expected, got = weights(whole), weights(output)
    assert expected.keys() == got.keys() and all(torch.equal(expected[k], got[k]) for k in expected)
    assert any(not torch.equal(got[k], weights(output / "checkpoint-2")[k]) for k in got), "the weights trained"
    if "marginals" in script:  # the diagnostics continue from the checkpoint's rows: the same file as uninterrupted
        assert (output / "diagnostics.csv").read_text() == (whole / "diagnostics.csv").read_text()
        rows = list(csv.DictReader((output / "diagnostics.csv").open()))
        assert [int(row["step"]) for row in rows] == [0, 3, 6, 8]


@pytest.mark.parametrize("name", list(RECIPES))
def test_a_new_run_into_a_folder_holding_another_run_is_refused(name: str, tmp_path: Path) -> None:
    script, argv = RECIPES[name]
    output = tmp_path / "run"
    (output / "checkpoint-4").mkdir(parents=True)
    (output / "model.safetensors").write_bytes(b"an earlier run's weights")
    before = sorted(p.name for p in output.rglob("*"))
    recipe = importlib.import_module(recipe_module(script))
    parse = getattr(recipe, "parse_args", None) or (
        lambda args: recipe.parse_config((recipe.MarginalsArguments, recipe.RunArguments), args)
    )
    with pytest.raises(ValueError) as refused:
        recipe.main(*parse([*command(script, argv, output)]))
    assert str(refused.value) == (
        f"output_dir '{output}' already holds another run (model.safetensors, checkpoint-4); continue it with "
        "--resume_from_checkpoint true, or start over with --overwrite_output_dir (which deletes its checkpoints)."
    )
    assert sorted(p.name for p in output.rglob("*")) == before
