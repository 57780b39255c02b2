"""The pure readings of ``bench/marginals_vs_study/run.py`` (the study's τ, onset and plateau rules, the weight scales,
the commands it builds). The bench itself needs the study's checkout and its own virtual environment, so it is never
run here."""

from __future__ import annotations

import math

import pytest

from bench.marginals_vs_study import run


def test_first_below_is_the_first_evaluation_under_the_threshold() -> None:
    steps, losses = [10, 20, 30, 40], [2.4, 1.3, 1.0, 0.2]
    assert run.first_below(steps, losses, 0.5 * math.log(10)) == 30.0
    assert run.first_below(steps, [3.0] * 4, 1.0) is None


def test_binding_onset_needs_three_gaps_in_a_row() -> None:
    steps = [10, 20, 30, 40, 50, 60, 70]
    gaps = [0.0, 0.6, 0.7, 0.1, 0.9, 1.2, 2.0]  # 20-30 is a run of two only
    assert run.binding_onset(steps, gaps) == 50.0
    assert run.binding_onset(steps, [0.0] * 7) is None


def test_plateau_before_onset_is_the_mean_before_it() -> None:
    steps, values = [10, 20, 30, 40], [3.0, 2.0, 1.0, 0.0]
    assert run.plateau_before_onset(steps, values, 30.0) == 2.5
    assert run.plateau_before_onset(steps, values, None) == 1.5  # no onset: every evaluation
    assert run.plateau_before_onset(steps, values, 10.0) == 3.0  # onset at the first: the first value


def test_plateau_window_is_the_median_over_a_quarter_to_three_quarters_of_tau() -> None:
    steps = list(range(0, 110, 10))
    values = [float(s) for s in steps]
    assert run.plateau_window(steps, values, 100.0) == 50.0  # 30, 40, ..., 70
    assert run.plateau_window(steps, values, None) is None


def test_weight_scales_pool_the_parameters_of_a_kind() -> None:
    parameters = {"blocks.0.attn.W_O": [100, 0.1], "blocks.1.attn.W_O": [300, 0.2], "embed.W_E": [10, 1.0]}
    scales = run.weight_scales(parameters, {"attention out": (".attn.W_O",), "MLP in": (".mlp.W_in",)})
    assert scales == {"attention out": pytest.approx(math.sqrt((100 * 0.01 + 300 * 0.04) / 400))}


def test_the_commands_carry_the_point_and_the_schedule(tmp_path) -> None:
    schedule = {
        "batch_size": 128,
        "learning_rate": 0.001,
        "weight_decay": 0.01,
        "warmup_steps": 500,
        "max_steps": 5000,
    }
    overrides = run.study_overrides(10, 200, 0, schedule, 10, "run", tmp_path)
    for expected in ("data.k=10", "data.n_unique_b=200", "experiment.seed=0", "training.warmup_steps=500",
                     "training.max_steps=5000", "training.checkpoint_every=10",
                     "data.enforce_unique_a_first_char_per_b=true"):  # fmt: skip
        assert expected in overrides
    ours = run.our_command(10, 200, 0, tmp_path)
    assert ours[ours.index("--task_args") + 1] == '{"direction": "bz_to_a", "k": 10, "n_bases": 200, "seed": 0}'
    assert "results/marginals/configs/marginals_study_schedule.yaml" in ours
