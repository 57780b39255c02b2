"""results/marginals/make_results.py on a fixture of run folders whose τ, onsets and switches are known by design."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

from hf_icot.studies.rules import RuleError
from results.marginals import hessian_around_tau, make_results
from results.marginals import train as marginals_train
from results.marginals.rules import RULES

REPO = Path(__file__).resolve().parents[2]


def _write_run(root: Path, name: str, *, k: int, n_b: int, tau: float, lr=0.001, batch=128, seed=0,
               direction="bz_to_a", schedule="constant", learned: float | None = None, removed: str = "",
               removed_from: int = 0, hessian: bool = False) -> None:  # fmt: skip
    """A run folder in the recipe's format, designed so that every figure is known: the candidate loss sits at
    log K, falls linearly from 0.8 τ to 0 at 1.2 τ (so it crosses 0.5 log K at τ exactly, between measurements
    every τ/20, and goes from 0.9 to 0.1 log K in 0.32 τ); Δz and layer-0 head 1's selector attention switch on at
    τ/2; every base switches at τ; the training loss decays exponentially through 0.05 at ``learned``. ``removed``
    ("0:1") trains that head zeroed from ``removed_from``; ``hessian`` adds a Hessian 2,000x flatter along the escape
    direction than the top eigenvalue, with a negative bottom eigenvalue, at 0.25, 0.5 and 1.0 τ."""
    folder = root / name
    folder.mkdir(parents=True)
    log_k, interval = math.log(k), tau / 20
    learned = learned or 1.5 * tau
    steps = [round(i * interval, 3) for i in range(math.ceil(max(2 * tau, 1.5 * learned) / interval) + 1)]
    record = {"task": {"config": name, "direction": direction, "k": k, "n_bases": n_b, "seed": seed}, "k": k,
              "n_bases": n_b, "dataset_size": k * n_b, "log_k": log_k, "tau": None, "tau_fraction": 0.5,
              "learning_rate": lr, "batch_size": batch, "seed": seed, "max_steps": steps[-1],
              "schedule": {"lr_scheduler_type": schedule}}  # fmt: skip
    if removed:
        record["diagnostics"] = {"ablate_heads": [removed], "ablate_from_step": removed_from}
    (folder / "run.json").write_text(json.dumps(record))
    if hessian:
        with open(folder / "hessian.csv", "w", newline="") as stream:
            writer = csv.writer(stream)
            writer.writerow(["step", "fraction_of_tau", "top", "bottom", "escape_curvature", "top_over_escape"])
            writer.writerows([f * tau, f, 10.0, -1.0, -0.005, 2000.0] for f in (0.25, 0.5, 1.0))
    with open(folder / "diagnostics.csv", "w", newline="") as stream:
        writer = csv.writer(stream)
        if direction == "a_to_b":
            writer.writerow(["step", "groups_solved_fraction"])
            writer.writerows([s, 1.0 if s >= learned else 0.0] for s in steps)
        else:
            writer.writerow(["step", "z_shuffle_gap", "first_token_loss_clean", "candidate_loss", "attn_z_l0h0",
                             "attn_z_l0h1"])  # fmt: skip
            for s in steps:
                cand = log_k * min(1.0, max(0.0, (1.2 * tau - s) / (0.4 * tau)))
                writer.writerow([s, 1.0 if s >= tau / 2 else 0.0, cand, cand, 0.2, 0.9 if s >= tau / 2 else 0.2])
    with open(folder / "group_accuracy.csv", "w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(["step", "b0", "b1", "b2", "b3"])
        writer.writerows([s] + [1.0 if s >= round(tau, 3) else 0.1] * 4 for s in steps)  # from the step at τ
    losses = [{"step": s, "loss": 2.0 * math.exp(-math.log(40) * s / learned)} for s in steps[1:]]
    (folder / "training_log.json").write_text(json.dumps(losses))
    (folder / "ablation.json").write_text(json.dumps({"zero": [[0.0, 2.5], [0.1, 0.0]], "mean": [[0, 1], [0, 0]]}))


def _tau(d: int, seed: int) -> float:
    return 0.01 * d**1.5 * (0.95, 1.0, 1.05)[seed]  # δ = 1.5 exactly; the seeds 5% apart at every D


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    for seed in (0, 1, 2):
        for n_b in (100, 200, 400, 800):
            _write_run(
                root,
                f"d{n_b}_s{seed}",
                k=10,
                n_b=n_b,
                tau=_tau(10 * n_b, seed),
                seed=seed,
                hessian=n_b == 200 and seed < 2,
            )  # C6 on two seeds of the base point
        base = _tau(2000, seed)
        for k, n_b in ((5, 400), (20, 100)):  # τ flat in K at fixed D
            _write_run(root, f"k{k}_s{seed}", k=k, n_b=n_b, tau=base, seed=seed)
        for lr, factor in ((0.0005, 0.8), (0.002, 1.5)):
            _write_run(root, f"lr{lr}_s{seed}", k=10, n_b=200, tau=factor * base, lr=lr, seed=seed)
        for batch, factor in ((64, 2.0), (256, 0.7)):
            _write_run(root, f"bs{batch}_s{seed}", k=10, n_b=200, tau=factor * base, batch=batch, seed=seed)
        _write_run(root, f"cos_s{seed}", k=10, n_b=200, tau=1.3 * base, seed=seed, schedule="cosine")
        # A -> B learns twice as slowly as (B, z) -> A at the same seed (whose loss reaches 0.05 at 1.5 τ)
        _write_run(root, f"ab_s{seed}", k=10, n_b=200, tau=base, seed=seed, direction="a_to_b", learned=3 * base)
        # C5: the routing head (l0h1, onset τ/2) zeroed from the start delays τ by half, from 0.25 τ by a fifth;
        # the control head (l0h0) not at all
        _write_run(root, f"c5_start_s{seed}", k=10, n_b=200, tau=1.5 * base, seed=seed, removed="0:1")
        _write_run(root, f"c5_quarter_s{seed}", k=10, n_b=200, tau=1.2 * base, seed=seed, removed="0:1",
                   removed_from=round(0.25 * base))  # fmt: skip
        _write_run(root, f"c5_control_s{seed}", k=10, n_b=200, tau=base, seed=seed, removed="0:0")
    return root


def test_tables_plots_and_verdicts_from_the_designed_fixture(runs: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    ledger = tmp_path / "claims.csv"
    ledger.write_text((REPO / "results/marginals/claims.csv").read_text())
    rows = make_results.main(["--runs", str(runs), "--out", str(out), "--ledger", str(ledger)])
    by_run = {row["run"]: row for row in rows}
    base = by_run["d200_s1"]
    assert base["tau"] == pytest.approx(0.01 * 2000**1.5, abs=0.1), "the crossing interpolated between measurements"
    assert base["tau_resolution"] == pytest.approx(base["tau"] / 20, rel=1e-3)
    assert base["plateau_candidate_over_log_k"] == 1.0 and base["plateau_candidate_minus_log_k"] == 0.0
    assert base["drop_width_over_tau"] == pytest.approx(0.4, abs=0.1)  # 0.32 τ, to the measurement grid
    assert base["dz_onset_over_tau"] == pytest.approx(0.5, abs=0.06)
    assert base["selector_head_l0"] == "l0h1" and base["bases_switched"] == "4/4" and base["switch_iqr_over_tau"] == 0
    assert base["steps_to_train_loss_0.05"] == pytest.approx(1.5 * base["tau"], rel=1e-4)
    assert by_run["ab_s1"]["steps_to_train_loss_0.05"] == pytest.approx(3 * base["tau"], rel=1e-4)
    assert base["max_zero_ablation"] == "l0h1: +2.50"
    assert (base["bases_at_80pct_half_tau"], base["bases_at_80pct_tau"]) == (0.0, 1.0), "every base switches at τ"

    with open(out / "tau_fit.csv") as stream:
        fit = next(csv.DictReader(stream))
    assert float(fit["exponent_b"]) == pytest.approx(1.5, abs=1e-3) and (fit["runs"], fit["points"]) == ("12", "4")
    assert (
        float(fit["ci95_low"]) < 1.5 < float(fit["ci95_high"])
        and float(fit["ci95_high"]) - float(fit["ci95_low"]) < 0.1
    )
    with open(out / "points.csv") as stream:
        point = {(r["direction"], r["schedule"], r["D"], r["lr"], r["batch"]): r for r in csv.DictReader(stream)}
    assert point[("bz_to_a", "constant", "2000", "0.001", "128")]["seeds"] == "0,1,2"
    with open(out / "schedules.csv") as stream:
        assert float(next(csv.DictReader(stream))["ratio"]) == pytest.approx(1.3, abs=0.01)

    verdicts = {row["id"]: row for row in csv.DictReader(ledger.open())}
    assert {claim: verdicts[claim]["verdict"] for claim in ("C1", "C2", "C3", "C4", "C7")} == {
        "C1": "agree",
        "C2": "agree",
        "C3": "disagree",
        "C4": "agree",
        "C7": "agree",
    }
    assert "2 [2, 2] (n=3)" in verdicts["C7"]["ours"]
    committed = {row["id"]: row for row in csv.DictReader((REPO / "results/marginals/claims.csv").open())}
    assert all(verdicts[c]["rule"] == committed[c]["rule"] for c in committed), "the rules stay as committed"
    for name in ("runs.md", "points.md", "loss_curves.png", "dz_attention.png", "tau_vs_d.png", "tau_vs_k.png",
                 "tau_vs_noise.png", "group_heatmap.png", "direction.png", "schedules.png", "c5_routing.png",
                 "c5_ablation.png", "c8_collective.png", "hessian.png"):  # fmt: skip
        assert (out / name).stat().st_size > 0, name


def test_the_mechanism_tables_and_verdicts_from_the_designed_fixture(runs: Path, tmp_path: Path) -> None:
    out, ledger = tmp_path / "out", tmp_path / "claims.csv"
    ledger.write_text((REPO / "results/marginals/claims.csv").read_text())
    rows = make_results.main(["--runs", str(runs), "--out", str(out), "--ledger", str(ledger)])
    assert {r["setup"] for r in rows if r["run"].startswith("c5_")} == {"ablate_l0h1_from0", "ablate_l0h0_from0",
                                                                       *{f"ablate_l0h1_from{round(0.25 * _tau(2000, s))}"
                                                                         for s in (0, 1, 2)}}  # fmt: skip

    def table(name: str) -> list[dict]:
        with open(out / f"{name}.csv") as stream:
            return list(csv.DictReader(stream))

    routing = {r["run"]: r for r in table("c5_routing")}
    assert not any(name.startswith("c5_") for name in routing), "runs with a head removed are not read for routing"
    assert (routing["d200_s1"]["routing_head"], float(routing["d200_s1"]["onset_over_tau"])) == ("l0h1", 0.5)
    assert routing["d200_s1"]["routing_head_ablation_rank"] == "1"
    ablation = {(r["ablation"], r["seed"]): r for r in table("c5_ablation")}
    assert len(ablation) == 9 and ablation[("from_start", "2")]["head"] == "l0h1"
    assert float(ablation[("from_start", "1")]["delta_over_tau_base"]) == pytest.approx(0.5, abs=0.01)
    assert float(ablation[("from_quarter_tau", "0")]["from_over_tau_base"]) == pytest.approx(0.25, abs=0.01)
    assert ablation[("control_from_start", "0")]["head"] == "l0h0"
    assert float(ablation[("control_from_start", "0")]["delta"]) == pytest.approx(0, abs=1)
    collective = {r["run"]: r for r in table("c8_collective")}
    assert (collective["d200_s2"]["at_80pct_half_tau"], collective["d200_s2"]["at_80pct_tau"]) == ("0.0", "1.0")
    hessian = table("hessian")
    assert [r["on_plateau"] for r in hessian] == ["True", "True", "False"] * 2, "the loss leaves log K at 0.8 τ"

    verdicts = {row["id"]: row for row in csv.DictReader(ledger.open())}
    # C6 reads the band on the study's own measure of the escape direction, which no reading here is
    assert {claim: verdicts[claim]["verdict"] for claim in ("C5", "C6", "C8")} == {"C5": "agree", "C6": "inconclusive",
                                                                                  "C8": "agree"}  # fmt: skip
    assert "(a) lead: agree" in verdicts["C5"]["ours"] and "(b) delay: agree" in verdicts["C5"]["ours"]
    assert "bottom eigenvalue negative at 4/4 plateau points" in verdicts["C6"]["ours"]
    assert verdicts["C6"]["seeds"] == "2" and "2,000-2,000x" in verdicts["C6"]["ours"]


def test_no_run_folders_is_one_sentence(tmp_path: Path) -> None:
    with pytest.raises(
        SystemExit, match=r"holds no run folders with run.json; run `python -m hf_icot.studies run results/marginals`"
    ):
        make_results.main(["--runs", str(tmp_path), "--out", str(tmp_path / "out")])


def test_hessian_around_tau_on_a_real_tiny_run(tmp_path: Path) -> None:
    from tests.recipes.test_marginals_recipe import _args, _parse

    argv = _args(tmp_path, "--save_strategy", "steps", "--save_steps", "2", "--save_only_model", "true")
    marginals_train.main(*_parse(argv))
    run = tmp_path / "run"
    record = json.loads((run / "run.json").read_text())
    record["tau"] = 4  # a 6-step run has no transition; pretend it had one at step 4
    (run / "run.json").write_text(json.dumps(record))
    rows = hessian_around_tau.main(["--run", str(run), "--points", "0.5", "1.5", "--examples", "4", "--tol", "0.1"])
    assert [row["step"] for row in rows] == [2], "the checkpoint nearest 0.5τ; 1.5τ is the last, the escape end"
    for row in rows:
        assert row["top"] >= row["bottom"] and math.isfinite(row["escape_curvature"]) and row["escape_step"] == 6
        assert row["bottom"] <= row["escape_curvature"] <= row["top"], "a Rayleigh quotient lies between the extremes"
    with open(run / "hessian.csv") as stream:
        assert [int(r["step"]) for r in csv.DictReader(stream)] == [2]


def test_hessian_around_tau_needs_checkpoints_and_a_tau(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"holds no checkpoint-\* folders; train the run with --save_strategy steps"):
        hessian_around_tau.checkpoints(tmp_path)


def _readings(ratios: dict, top: float = 40.0, bottom: float = -12.0) -> list[dict]:
    return [{"seed": seed, "top": top, "bottom": bottom, "curvature": -top / ratio}
            for seed, values in ratios.items() for ratio in values]  # fmt: skip


@pytest.mark.parametrize(
    ("ratios", "verdict"),
    [
        ({0: [800, 1200], 1: [700], 2: [900]}, "agree"),  # within a factor 3 of the study's 500-1,000x
        ({0: [3386, 10973], 1: [3435, 15285], 2: [3766, 11392]}, "disagree"),  # flatter, beyond the factor 3
        ({0: [3.3], 1: [3.4], 2: [4.0]}, "disagree"),  # the bottom eigenvector: a few times flatter only
        ({0: [1000], 1: [5000], 2: [2500]}, "inconclusive"),  # the interval crosses 3,000x
    ],
)
def test_c6_reads_the_interval_over_seeds_on_the_studys_own_measure_against_its_band(
    ratios: dict, verdict: str
) -> None:
    study = {"readings": {"the study's": _readings(ratios)}, "study_reading": "the study's"}
    assert RULES["C6"](study).verdict == verdict
    # the study's own measure unknown (its code has no Hessian): no reading of ours decides it
    assert RULES["C6"]({"readings": {"ours": _readings(ratios)}, "study_reading": None}).verdict == "inconclusive"


def test_c6_refuses_a_curvature_beyond_the_hessians_eigenvalues() -> None:
    with pytest.raises(RuleError, match="beyond the eigenvalues"):
        RULES["C6"]({"readings": {"ours": _readings({0: [0.5]})}, "study_reading": "ours"})
