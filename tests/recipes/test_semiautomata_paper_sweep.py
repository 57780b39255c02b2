"""results/semiautomata/paper/runs.yaml, the paper-scale sweep for a GPU, kept working on a CPU: every command parses
into the recipe's arguments; a tiny copy of three of its runs (the paper config with every size shrunk, the runs' own
flags untouched) goes through the harness to finished records (``slow`` marker: ``pytest -m slow``); the GPU cost
estimate counts the sweep's FLOPs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hf_icot.command_line.arguments import parse_recipe_args
from hf_icot.studies.sweep import RECORD_FILE, load_sweep
from tests import forked

REPO = Path(__file__).resolve().parents[2]
STUDY = REPO / "results" / "semiautomata" / "paper"
PAPER_CONFIG = "recipes/configs/semiautomata_paper.yaml"
#: the paper config's sizes, shrunk: what the tiny copy changes (every other key stays the paper's)
TINY = {
    "task_args": {"train_size": 64, "test_size": 8, "ood_size": 8},
    "scratch_model": {"param_budget": 130_000, "n_head": 2},
    "stage_length": 1,
    "max_steps": 20,
    "warmup_steps": 0,
    "per_device_train_batch_size": 8,
    "per_device_eval_batch_size": 8,
    "generation_eval_examples": 4,
    "evaluate_each_stage": False,
    "dataloader_num_workers": 0,
    "save_steps": 10,
    "logging_steps": 5,
    "use_cpu": True,
}


def test_every_paper_run_parses_into_the_recipes_arguments():
    sweep = load_sweep(STUDY)
    assert len(sweep.runs) == 30 and {run.seed for run in sweep.runs} == {0, 1, 2}
    for run in sweep.runs:
        command = run.command
        assert command[:2] == ["python", "recipes/semiautomata.py"], run.name
        script_args, training_args, model_args = parse_recipe_args(command[2:])
        assert script_args.task == "semiautomaton" and script_args.task_args["length"] == 64, run.name
        assert script_args.task_args["seed"] == run.seed == training_args.seed, run.name
        assert training_args.max_steps == 60_000 and training_args.output_dir.endswith(run.name), run.name
    depths = {run.name: parse_recipe_args(run.command[2:])[2].scratch_model["depth"] for run in sweep.runs}
    assert {name for name, depth in depths.items() if depth == 25} == {f"c13_left_d25_s{seed}" for seed in range(3)}
    assert set(depths.values()) == {4, 25}  # a tiny copy at depth 25 is not trained: its probes alone take minutes
    moduli = {parse_recipe_args(run.command[2:])[0].task_args["modulus"] for run in sweep.runs}
    assert moduli == {13, 14, 15, 17}


def _tiny_study(tmp_path: Path) -> Path:
    """The paper sweep with its config replaced by the tiny copy and its outputs under ``tmp_path``."""
    config = yaml.safe_load((REPO / PAPER_CONFIG).read_text())
    for key, value in TINY.items():
        config[key] = {**config[key], **value} if isinstance(value, dict) else value
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(config))
    sweep = yaml.safe_load((STUDY / "runs.yaml").read_text())
    sweep["command"] = [str(tmp_path / "tiny.yaml") if part == PAPER_CONFIG else part for part in sweep["command"]]
    sweep["output_root"] = str(tmp_path / "outputs")
    sweep["env"] = {**sweep["env"], "OMP_NUM_THREADS": "1"}
    study = tmp_path / "study"
    study.mkdir()
    (study / "runs.yaml").write_text(yaml.safe_dump(sweep))
    return study


def _run_tiny(tmp_path: Path, name: str) -> Path:
    """``name`` of the tiny copy through the harness; the folder of its records."""
    study = _tiny_study(tmp_path)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "hf_icot.studies", "run", str(study), "--jobs", "1", "--only", name],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    records = study / "runs" / name
    assert json.loads((records / RECORD_FILE).read_text())["status"] == "ok"
    return records


@pytest.mark.slow  # ~1-4 min on 2 cores: the probes alone fit 2 x 5 layers x 64 steps of logistic regressions
def test_a_tiny_copy_of_the_mixture_run_goes_through_the_harness(tmp_path):
    records = _run_tiny(tmp_path, "c13_mixture_s1")
    metrics = json.loads((records / "eval_results.json").read_text())
    assert {"test/hint=0/answer_em", "test/hint=64/answer_em", "test_ood_p0_1/hint=0/answer_em"} <= set(metrics)
    task = json.loads((records / "task_args.json").read_text())
    assert task["modulus"] == 13 and task["seed"] == 1 and task["train_size"] == 64 and task["length"] == 64


@pytest.mark.slow
@pytest.mark.parametrize("name, depth", [("c13_left_s0", 4), ("c17_left_s2", 4)])
def test_a_tiny_copy_of_the_curriculum_runs_goes_through_the_harness(tmp_path, name, depth):
    records = _run_tiny(tmp_path, name)
    assert json.loads((records / "model_size.json").read_text())["n_layer"] == depth  # the run's own flag kept
    metrics = json.loads((records / "eval_results.json").read_text())
    assert {"test/implicit/answer_em", "test_ood_p0_9/explicit/answer_em"} <= set(metrics)


def test_the_gpu_cost_estimate_counts_the_sweeps_flops_and_times_a_step(tmp_path):
    out = tmp_path / "cost.json"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    done = forked.run(
        ["results/semiautomata/paper/estimate_gpu_cost.py", "--steps", "1", "--batch", "2", "--gpu-tflops", "10",
         "--threads", "1", "--out", str(out)], env=env, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads(out.read_text())
    assert [shape["depth"] for shape in record["shapes"]] == [4, 25]
    assert [shape["runs"] for shape in record["shapes"]] == [27, 3]
    for shape in record["shapes"]:  # the paper's 2 M budget within 5%, a step of ~0.4-0.5 TFLOP at batch 256
        assert abs(shape["parameters"] - 2_000_000) <= 100_000 and 0.3 < shape["tflop_per_step"] < 0.7
        assert shape["cpu_s_per_step"] > 0
    expected = sum(s["tflop_per_step"] * s["runs"] for s in record["shapes"]) * 60_000 / 1e3
    assert abs(record["sweep_pflop"] - expected) < 1e-6 * expected
    assert abs(record["gpu_hours_at_tflops"]["10"] - record["sweep_pflop"] * 1e3 / 10 / 3600) < 1e-9
    assert "ESTIMATE at 10 TFLOP/s effective" in done.stdout
