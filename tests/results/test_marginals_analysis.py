"""results/marginals/make_results.py on a fixture of run folders whose τ, onsets and switches are known by design."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

from tests.recipes.conftest import load_script

REPO = Path(__file__).resolve().parents[2]


def _analysis():
    return load_script(REPO / "results/marginals/make_results.py", "marginals_analysis")


def _hessian_script():
    return load_script(REPO / "results/marginals/hessian_around_tau.py", "hessian_around_tau")


def _write_run(root: Path, name: str, *, k: int, n_b: int, tau: int, lr=0.001, batch=128, seed=0, direction="bz_to_a"):
    """A run folder in the recipe's format: candidate loss at log K until τ, then 0; Δz and layer-0 head 1's
    selector attention switch on at τ/2; every base switches at τ."""
    folder = root / name
    folder.mkdir(parents=True)
    log_k = math.log(k)
    steps = list(range(0, 2 * tau + 1, tau // 10))
    record = {"task": {"config": name, "direction": direction, "k": k, "n_bases": n_b, "seed": seed}, "k": k,
              "n_bases": n_b, "dataset_size": k * n_b, "log_k": log_k, "tau": tau, "tau_fraction": 0.5,
              "learning_rate": lr, "batch_size": batch, "seed": seed, "max_steps": steps[-1]}  # fmt: skip
    (folder / "run.json").write_text(json.dumps(record))
    columns = ["step", "z_shuffle_gap", "first_token_loss_clean", "candidate_loss", "attn_z_l0h0", "attn_z_l0h1"]
    with open(folder / "diagnostics.csv", "w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(columns)
        for s in steps:
            solved = s >= tau
            writer.writerow([s, 1.0 if s >= tau / 2 else 0.0, 0.0 if solved else log_k, 0.0 if solved else log_k,
                             0.2, 0.9 if s >= tau / 2 else 0.2])  # fmt: skip
    with open(folder / "group_accuracy.csv", "w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(["step", "b0", "b1", "b2", "b3"])
        for s in steps:
            writer.writerow([s] + [1.0 if s >= tau else 0.1] * 4)
    losses = [{"step": s, "loss": 0.01 if s >= tau else log_k / 5} for s in steps[1:]]
    (folder / "training_log.json").write_text(json.dumps(losses))
    (folder / "ablation.json").write_text(json.dumps({"zero": [[0.0, 2.5], [0.1, 0.0]], "mean": [[0, 1], [0, 0]]}))


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    for n_b in (100, 200, 400, 800):  # τ = 0.01 · D^1.5, exactly
        _write_run(root, f"d{n_b}", k=10, n_b=n_b, tau=round(0.01 * (10 * n_b) ** 1.5))
    _write_run(root, "lr", k=10, n_b=200, tau=1000, lr=0.002)
    _write_run(root, "k5", k=5, n_b=400, tau=800)
    return root


def test_tables_and_plots_from_the_fixture(runs: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    rows = _analysis().main(["--runs", str(runs), "--out", str(out)])
    by_run = {row["run"]: row for row in rows}
    assert set(by_run) == {"d100", "d200", "d400", "d800", "lr", "k5"}
    base = by_run["d200"]
    assert base["tau"] == round(0.01 * 2000**1.5) == 894
    assert base["plateau_first_token_loss"] == pytest.approx(math.log(10), abs=1e-3)
    assert base["dz_onset_over_tau"] == pytest.approx(0.5, abs=0.11)  # measured every τ/10
    assert base["selector_head_l0"] == "l0h1" and base["attn_onset_over_tau"] == pytest.approx(0.5, abs=0.11)
    assert base["bases_switched"] == "4/4" and base["switch_iqr_over_tau"] == 0.0
    assert base["switch_within_20pct_of_tau"] == 1.0
    assert base["max_zero_ablation"] == "l0h1: +2.50"

    with open(out / "tau_fit.csv") as stream:
        fit = next(csv.DictReader(stream))
    assert float(fit["exponent_b"]) == pytest.approx(1.5, abs=0.01) and int(fit["points"]) == 4
    assert float(fit["ci95_low"]) <= 1.5 <= float(fit["ci95_high"])
    for name in ("runs.md", "loss_curves.png", "dz_attention.png", "tau_vs_d.png", "tau_vs_k.png",
                 "tau_vs_noise.png", "group_heatmap.png"):  # fmt: skip
        assert (out / name).stat().st_size > 0, name


def test_no_run_folders_is_one_sentence(tmp_path: Path) -> None:
    with pytest.raises(
        SystemExit, match=r"holds no run folders with run.json; run `python -m hf_icot.studies run results/marginals`"
    ):
        _analysis().main(["--runs", str(tmp_path), "--out", str(tmp_path / "out")])


def test_hessian_around_tau_on_a_real_tiny_run(tmp_path: Path) -> None:
    from tests.recipes.test_marginals_recipe import _args, _parse, _recipe

    argv = _args(tmp_path, "--save_strategy", "steps", "--save_steps", "2", "--save_only_model", "true")
    _recipe().main(*_parse(argv))
    run = tmp_path / "run"
    record = json.loads((run / "run.json").read_text())
    record["tau"] = 4  # a 6-step run has no transition; pretend it had one at step 4
    (run / "run.json").write_text(json.dumps(record))
    rows = _hessian_script().main(["--run", str(run), "--points", "0.5", "1.5", "--examples", "4", "--tol", "0.1"])
    assert [row["step"] for row in rows] == [2], "the checkpoint nearest 0.5τ; 1.5τ is the last, the escape end"
    for row in rows:
        assert row["top"] >= row["bottom"] and math.isfinite(row["escape_curvature"]) and row["escape_step"] == 6
        assert row["bottom"] <= row["escape_curvature"] <= row["top"], "a Rayleigh quotient lies between the extremes"
    with open(run / "hessian.csv") as stream:
        assert [int(r["step"]) for r in csv.DictReader(stream)] == [2]


def test_hessian_around_tau_needs_checkpoints_and_a_tau(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"holds no checkpoint-\* folders; train the run with --save_strategy steps"):
        _hessian_script().checkpoints(tmp_path)
