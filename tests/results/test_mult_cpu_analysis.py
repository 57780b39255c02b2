"""results/mult_cpu/make_results.py on run records whose stalls and verdict are known by design."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.image
import pytest

from hf_icot.studies.claims import read_ledger
from hf_icot.studies.sweep import RECORD_FILE
from tests.recipes.conftest import load_script

REPO = Path(__file__).resolve().parents[2]
BATCH = 64


def _analysis():
    return load_script(REPO / "results/mult_cpu/make_results.py", "mult_cpu_analysis")


def _write(root: Path, name: str, seed: int, final: float, losses: dict[float, float] | None = None) -> None:
    """A run that logs ``losses`` (removed CoT tokens -> the loss at the end of that count; None: end to end) and
    measures its held-out implicit exact match every 100 steps, rising to ``final``."""
    folder = root / f"{name}_s{seed}"
    folder.mkdir(parents=True)
    (folder / RECORD_FILE).write_text(json.dumps({"run": folder.name, "seed": seed, "status": "ok", "wall_s": 60.0}))
    counts = losses or {float("inf"): 1.0}
    log, step = [], 0
    for removed, loss in counts.items():
        for drift in (0.05, 0.0):  # two log lines per count: the last one is the end-of-count loss
            step += 50
            log.append({"step": step, "loss": loss + drift, "cot/removed_tokens": removed})
    for index in range(1, 4):
        log.append(
            {"step": 100 * index, "eval_implicit/answer_em": final * index / 3, "train_examples": 6400.0 * index}
        )
    (folder / "training_log.json").write_text(json.dumps(log))
    (folder / "eval_results.json").write_text(json.dumps({"test/implicit/answer_em": final}))


def _stalling(removed_at_jump: int) -> dict[float, float]:
    """Losses that climb by 0.01 per removed token and jump by 0.3 when token ``removed_at_jump`` goes."""
    return {float(k): 0.1 + 0.01 * k + (0.3 if k >= removed_at_jump else 0.0) for k in range(0, 25)} | {
        float("inf"): 0.6
    }


def test_the_stall_names_the_cot_token_whose_removal_was_not_absorbed(tmp_path):
    _write(tmp_path / "runs", "mult3x3_stepwise250_base", 0, 0.12, _stalling(14))
    _write(tmp_path / "runs", "mult3x3_e2e", 0, 0.004)
    analysis = _analysis()
    runs = {run["curriculum"]: run for run in analysis.league.load_runs(tmp_path / "runs")}
    stall = analysis.stall(runs["stepwise250_base"])
    assert stall["largest rise of the end-of-stage loss"] == "removing token 14 (s1[3]): 0.230 -> 0.540"
    assert stall["CoT removed at the end"] == "all 24"
    assert stall["best held-out implicit EM (examples)"] == "0.120 (19,200)"
    assert analysis.stall(runs["e2e"])["CoT removed at the end"] == "— (no CoT)"
    assert analysis.COT_TOKENS[:5] == ["p1[1]", "p1[2]", "p1[3]", "p1[4]", "+"] and len(analysis.COT_TOKENS) == 24


@pytest.mark.parametrize(
    ("finals", "e2e", "verdict"),
    [
        ([0.95], 0.004, "pending"),  # one seed of the best setting: the screen is not a verdict
        ([0.95, 0.92, 0.91], 0.004, "agree"),
        ([0.95, 0.92, 0.88], 0.004, "inconclusive"),  # one seed short of 0.90
        ([0.30, 0.20, 0.25], 0.004, "disagree"),  # the best setting's mean below 0.50
    ],
)
def test_m1_needs_three_seeds_of_one_setting_at_90_percent(tmp_path, finals, e2e, verdict):
    for seed, final in enumerate(finals):
        _write(tmp_path / "runs", "mult3x3_stepwise250_init", seed, final, _stalling(20))
    _write(tmp_path / "runs", "mult3x3_stepwise250_base", 0, 0.10, _stalling(14))
    _write(tmp_path / "runs", "mult3x3_e2e", 0, e2e)
    ledger = tmp_path / "claims.csv"
    ledger.write_text((REPO / "results/mult_cpu/claims.csv").read_text())
    readme = tmp_path / "README.md"
    readme.write_text("# Screen\n\n<!-- begin table -->\n<!-- end table -->\n\nWhat it says.\n")
    _analysis().main(["--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--ledger", str(ledger),
                      "--readme", str(readme)])  # fmt: skip
    m1 = {row["id"]: row for row in read_ledger(ledger)}["M1"]
    assert m1["verdict"] == verdict and m1["seeds"] == str(len(finals))
    assert m1["ours"].startswith("best: stepwise, fixed pace of 250 steps / token (init)")
    text = readme.read_text()
    assert "Where each run stalls:" in text and "](stall.png)" in text and text.endswith("What it says.\n")
    assert matplotlib.image.imread(tmp_path / "out/stall.png").shape[2] in (3, 4)
