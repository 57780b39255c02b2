"""results/marginals/train.py: a few real Trainer steps write the run folder the analysis reads; τ stops a run;
bad input."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
from transformers import AutoModelForCausalLM

from hf_icot.command_line.parsing import parse_config
from results.marginals import train as marginals_train

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "results" / "marginals" / "configs"
TINY_MODEL = {"n_layer": 2, "n_head": 2, "n_embd": 32, "n_inner": 64}


def _args(tmp_path: Path, *extra: str) -> list[str]:
    return [
        "--config", str(CONFIGS / "marginals.yaml"),
        "--task_args", json.dumps({"n_bases": 12, "k": 3}),
        "--scratch_model", json.dumps(TINY_MODEL),
        "--max_steps", "6", "--diagnostics_interval", "3", "--diagnostic_examples", "9",
        "--per_device_train_batch_size", "16", "--logging_steps", "3", "--disable_tqdm", "true",
        "--output_dir", str(tmp_path / "run"), *extra,
    ]  # fmt: skip


def _parse(argv: list[str]):
    from hf_icot.training.config import RunArguments

    return parse_config((marginals_train.MarginalsArguments, RunArguments), argv)


def test_a_few_steps_write_the_run_folder(tmp_path: Path) -> None:
    record = marginals_train.main(*_parse(_args(tmp_path)))
    run = tmp_path / "run"
    assert record == json.loads((run / "run.json").read_text())
    assert (record["k"], record["n_bases"], record["dataset_size"]) == (3, 12, 36)
    assert record["log_k"] == pytest.approx(math.log(3)) and record["max_steps"] == 6
    assert record["task"]["distinct_first_chars"] is True  # the study's option, from the config

    with open(run / "diagnostics.csv", encoding="utf-8") as stream:
        rows = list(csv.DictReader(stream))
    assert [int(r["step"]) for r in rows] == [0, 3, 6]
    assert {"z_shuffle_gap", "candidate_loss", "groups_solved_fraction", "attn_z_l1h1"} <= set(rows[0])
    assert not any(name.startswith("ablate_") for name in rows[0]), "head ablation runs once, on the final model"
    # an untrained model is near uniform over the K = 3 candidates
    assert float(rows[0]["candidate_loss"]) == pytest.approx(math.log(3), abs=0.2)
    with open(run / "group_accuracy.csv", encoding="utf-8") as stream:
        header = next(csv.reader(stream))
    assert len(header) == 1 + 3, "diagnostic_examples=9 at K=3 is 3 whole bases"

    ablation = json.loads((run / "ablation.json").read_text())
    assert set(ablation) == {"zero", "mean"} and len(ablation["zero"]) == 2 and len(ablation["zero"][0]) == 2
    # the diagnostics log at the logging steps too, and the training loss is still logged there
    losses = {e["step"]: e["loss"] for e in json.loads((run / "training_log.json").read_text()) if "loss" in e}
    assert sorted(losses) == [3, 6] and all(math.isfinite(loss) for loss in losses.values())

    model = AutoModelForCausalLM.from_pretrained(run)
    assert model.config.tie_word_embeddings is False and model.config.initializer_range == pytest.approx(0.0707)
    assert model.config.n_layer == 2 and model.config.resid_pdrop == 0.0


def test_a_head_removed_during_training_is_recorded_and_costs_nothing_in_the_final_model(tmp_path: Path) -> None:
    record = marginals_train.main(*_parse(_args(tmp_path, "--ablate_heads", "1:1", "--ablate_from_step", "3")))
    assert (record["diagnostics"]["ablate_heads"], record["diagnostics"]["ablate_from_step"]) == (["1:1"], 3)
    zero = json.loads((tmp_path / "run" / "ablation.json").read_text())["zero"]
    assert zero[1][1] == pytest.approx(0.0, abs=1e-12), "the saved model no longer reads head (1, 1)"
    assert abs(zero[1][0]) > 1e-9
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "run")
    assert (model.transformer.h[1].attn.c_proj.weight[16:] == 0).all()


def test_stop_after_transition_stops_the_fraction_of_tau_after_it() -> None:
    from hf_icot.diagnostics import StopAfterTransition as stop

    diagnostics = SimpleNamespace(
        rows=[{"step": s, "candidate_loss": 1.0 if s < 100 else 0.1} for s in range(0, 200, 10)]
    )
    callback = stop(diagnostics, threshold=0.5, fraction=0.3, min_steps=20)
    for step, stops in [(99, False), (129, False), (130, True)]:
        control = SimpleNamespace(should_training_stop=False)
        callback.on_step_end(None, SimpleNamespace(global_step=step), control)
        assert control.should_training_stop is stops, step
    # before the transition nothing stops the run, and the minimum holds for an early τ
    early = stop(
        SimpleNamespace(rows=[{"step": 0, "candidate_loss": 2.0}, {"step": 10, "candidate_loss": 0.1}]), 0.5, 0.3, 50
    )
    control = SimpleNamespace(should_training_stop=False)
    early.on_step_end(None, SimpleNamespace(global_step=59), control)
    assert control.should_training_stop is False


def test_a_to_b_runs_without_selector_measurements_and_stops_below_the_loss(tmp_path: Path) -> None:
    """The study's A -> B: the question is A alone, the answer its B (6 tokens + <eos>), no τ; the training stops
    5 logging intervals after the first logged loss below the threshold (here a threshold every loss is below)."""
    task = json.dumps({"n_bases": 8, "k": 3, "direction": "a_to_b", "distinct_first_chars": False})
    flags = ["--task_args", task, "--measurements", "group_accuracy", "--max_steps", "40", "--logging_steps", "2",
             "--stop_below_loss", "1e6"]  # fmt: skip
    record = marginals_train.main(*_parse(_args(tmp_path) + flags))
    assert record["task"]["direction"] == "a_to_b" and record["tau"] is None
    assert (record["k"], record["n_bases"], record["dataset_size"]) == (3, 8, 24)
    assert record["max_steps"] == 2 + 5 * 2, "stopped 5 logging intervals after the first log (step 2)"
    with open(tmp_path / "run" / "diagnostics.csv", encoding="utf-8") as stream:
        rows = list(csv.DictReader(stream))
    assert set(rows[0]) == {"step", "groups_solved_fraction"}
    assert record["schedule"] == {"lr_scheduler_type": "constant", "warmup_steps": 0, "max_grad_norm": 0.0,
                                  "max_steps": 40}  # fmt: skip


@pytest.mark.parametrize("direction, refused", [("a_to_b", "z_shuffle_gap, candidate_loss, selector_attention"),
                                                ("az_to_b", "candidate_loss"), ("b_to_a", "z_shuffle_gap")])  # fmt: skip
def test_a_measurement_the_direction_cannot_make_is_refused(tmp_path: Path, direction: str, refused: str) -> None:
    flags = ["--task_args", json.dumps({"n_bases": 8, "k": 3, "direction": direction})]
    with pytest.raises(ValueError, match=rf"^direction '{direction}' cannot measure {refused}"):
        marginals_train.main(*_parse(_args(tmp_path) + flags))
    assert not (tmp_path / "run" / "diagnostics.csv").exists()


def test_the_study_schedule_config_is_the_same_setting_with_warm_up_cosine_and_clipping() -> None:
    configs = CONFIGS
    ours = _parse(["--config", str(configs / "marginals.yaml"), "--output_dir", "x"])
    theirs = _parse(["--config", str(configs / "marginals_study_schedule.yaml"), "--output_dir", "x"])
    assert theirs[0] == ours[0], "the task, model and diagnostics are the same"
    assert (theirs[1].lr_scheduler_type, theirs[1].warmup_steps, theirs[1].max_grad_norm) == ("cosine", 500, 1.0)
    assert (theirs[1].learning_rate, theirs[1].max_steps) == (ours[1].learning_rate, ours[1].max_steps)


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--stop_below_loss", "0"], r"^stop_below_loss=0\.0 is not allowed"),
        (["--diagnostics_interval", "0"], r"^diagnostics_interval=0 is not allowed; it must be >= 1\.$"),
        (["--tau_fraction", "1.5"], r"^tau_fraction=1\.5 is not allowed; it must lie in \(0, 1\)\.$"),
        (["--stop_after_tau", "-1"], r"^stop_after_tau=-1\.0 is not allowed"),
        (["--hessian_interval", "-2"], r"^hessian_interval=-2 is not allowed"),
        (["--measurements", "loss"], r"^measurement 'loss' is unknown; allowed: z_shuffle_gap"),
        (["--task_args", '{"k": 40}'], r"^k=40 targets cannot start with distinct characters"),
        (
            ["--ablate_heads", "2:0"],
            r"^head \(layer=2, head=0\) is outside the model; it has layers 0\.\.1 and heads "
            r"0\.\.1\.$",
        ),
        (["--ablate_heads", "0,1"], r"^head '0,1' is not 'layer:head'"),
        (["--ablate_from_step", "5"], r"^ablate_from_step=5 is not allowed; give a step >= 0, with --ablate_heads\.$"),
    ],
)
def test_bad_input_is_one_sentence_before_training(tmp_path: Path, flags: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        marginals_train.main(*_parse(_args(tmp_path) + flags))
    assert not (tmp_path / "run" / "diagnostics.csv").exists()


def test_the_config_holds_the_study_setting() -> None:
    args, training = _parse(["--config", str(CONFIGS / "marginals.yaml"), "--output_dir", "x"])
    assert args.task_args == {
        "n_bases": 1000,
        "k": 10,
        "direction": "bz_to_a",
        "distinct_first_chars": True,
        "seed": 0,
    }
    assert (training.learning_rate, training.weight_decay, training.per_device_train_batch_size) == (1e-3, 0.01, 128)
    assert training.lr_scheduler_type == "constant" and training.max_grad_norm == 0.0 and training.warmup_steps == 0
    assert args.scratch_model == marginals_train.STUDY_MODEL
    assert (args.scratch_model["n_layer"], args.scratch_model["n_embd"], args.scratch_model["n_inner"]) == (
        4,
        128,
        512,
    )
