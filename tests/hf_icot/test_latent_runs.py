"""Coconut, CODI and PCCoT runs as clusters treat them: killed (SIGKILL) or preempted (SIGTERM) mid-stage and resumed,
they end at the uninterrupted run's weights (CODI's and PCCoT's projections and SIM-CoT's decoder included); two processes under
``accelerate launch``; a resumed run with other latent settings is refused naming the setting."""

import json
import signal

import pytest
import torch
from safetensors.torch import load_file

from tests.hf_icot.test_multiprocess import launch_two_processes
from tests.hf_icot.test_resume import launch, schedule_log
from tests.hf_icot.train_tiny_icot import build_trainer


def assert_same_weights(expected_folder, got_folder):
    expected, got = (
        load_file(expected_folder / "final-rank0.safetensors"),
        load_file(got_folder / "final-rank0.safetensors"),
    )
    assert expected.keys() == got.keys()
    for name in expected:
        assert torch.allclose(expected[name], got[name], atol=1e-6), name
    return got


@pytest.mark.parametrize(
    ("schedule", "stop", "simcot"),
    [
        ("coconut", "--kill_at_step", False),
        ("codi", "--term_at_step", False),
        ("pccot", "--kill_at_step", False),
        ("coconut", "--kill_at_step", True),
        ("codi", "--term_at_step", True),
        pytest.param("coconut", "--term_at_step", False, marks=pytest.mark.slow),
        pytest.param("codi", "--kill_at_step", False, marks=pytest.mark.slow),
        pytest.param("pccot", "--term_at_step", False, marks=pytest.mark.slow),
    ],
)
def test_a_latent_run_stopped_mid_stage_resumes_to_the_uninterrupted_weights(tmp_path, schedule, stop, simcot):
    whole, stopped = tmp_path / "whole", tmp_path / "stopped"
    # 7 steps per epoch, a checkpoint every 4 steps: step 10 is mid-stage (Coconut's stage 1 is steps 7-13).
    flags = ["--schedule", schedule, *(["--simcot"] if simcot else [])]
    runs = [launch(whole, *flags), launch(stopped, *flags, stop, "10")]
    expected_status = -signal.SIGKILL if stop == "--kill_at_step" else 75
    assert [run.wait(timeout=300) for run in runs] == [0, expected_status], (stopped / "stdout.txt").read_text()[
        -2000:
    ]
    checkpoints = sorted((stopped / "run").glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    checkpoint = checkpoints[-1]  # SIGKILL: 8, the last before step 10; SIGTERM: 11, saved after step 10
    assert checkpoint.name == ("checkpoint-8" if stop == "--kill_at_step" else "checkpoint-11")
    state = json.loads((checkpoint / "trainer_state.json").read_text())["stateful_callbacks"]["ICoTStateCallback"]
    assert state["attributes"]["schedule"]["name"] == schedule
    projected = schedule in ("codi", "pccot")
    if projected:
        assert (checkpoint / "latent_projection.safetensors").is_file()
    assert (checkpoint / "simcot_decoder" / "model.safetensors").is_file() == simcot
    resumed = launch(stopped, *flags, "--resume", str(checkpoint))
    assert resumed.wait(timeout=300) == 0, (stopped / "stdout.txt").read_text()[-3000:]
    got = assert_same_weights(whole, stopped)
    assert any(name.startswith("latent_projection.") for name in got) == projected
    assert any(name.startswith("simcot_decoder.") for name in got) == simcot
    if simcot:  # the step term was trained and logged in both halves of the stopped run
        logged = [entry for entry in json.loads((stopped / "log-rank0.json").read_text()) if "loss" in entry]
        assert any("simcot/step_ce" in entry for entry in logged)
    assert schedule_log(stopped) == schedule_log(whole)  # same stages, resets and per-example latent plans
    if schedule == "coconut":
        log = schedule_log(whole)
        assert [log[step]["stage"] for step in (0, 7, 14, 21)] == [0, 1, 2, 3]
        assert {tuple(plan) for plan in log[9]["plans"]} >= {(1, 2)}  # stage 1: one step as c = 2 thoughts

    # A resumed run with other latent settings is refused, naming the setting.
    if simcot:
        return
    other = build_trainer(tmp_path / "other", schedule=schedule)
    changed = {"coconut": "c_thought", "codi": "num_latent", "pccot": "num_iterations"}[schedule]
    before = getattr(other.schedule, changed)
    setattr(other.schedule, changed, before + 1)
    with pytest.raises(ValueError, match=f"with {changed} {before}, but this run has {changed} {before + 1};"):
        other.train(resume_from_checkpoint=str(checkpoint))


@pytest.mark.parametrize(
    ("schedule", "simcot"),
    [("coconut", False), ("coconut", True), ("pccot", False), pytest.param("codi", False, marks=pytest.mark.slow),
     pytest.param("codi", True, marks=pytest.mark.slow)],
)  # fmt: skip
def test_two_process_latent_runs_keep_their_replicas_identical(tmp_path, schedule, simcot):
    flags = ["--schedule", schedule, *(["--simcot"] if simcot else [])]
    launch_two_processes(tmp_path, "--max_steps", "8", "--save_steps", "100", *flags)
    logs = [[json.loads(line) for line in (tmp_path / f"schedule-rank{rank}.jsonl").read_text().splitlines()]
            for rank in (0, 1)]  # fmt: skip
    assert logs[0] == logs[1] and len(logs[0]) == 8
    weights = [load_file(tmp_path / f"final-rank{rank}.safetensors") for rank in (0, 1)]
    assert all(torch.equal(weights[0][name], weights[1][name]) for name in weights[0])
    initial = load_file(next((tmp_path / "init-rank0").glob("*.safetensors")))
    assert not torch.equal(initial["transformer.h.0.mlp.c_fc.weight"], weights[0]["transformer.h.0.mlp.c_fc.weight"])
    history = json.loads((tmp_path / "log-rank0.json").read_text())
    assert any("loss" in entry for entry in history)
    if schedule != "coconut":
        assert any(f"{schedule}/distill" in entry for entry in history)
    if simcot:  # the decoder trained on both processes, to the same weights (stage 1 begins at step 4 here)
        assert any(name.startswith("simcot_decoder.") for name in weights[0])
        assert any("simcot/step_ce" in entry for entry in history)
