"""results/mult_cpu/make_results.py on run records whose stalls and verdict are known by design."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.image
import pytest

from hf_icot.studies.claims import read_ledger
from hf_icot.studies.sweep import RECORD_FILE
from results.mult_cpu import make_results

REPO = Path(__file__).resolve().parents[2]
BATCH = 64


def _write(
    root: Path, name: str, seed: int, final: float, losses: dict[float, float] | None = None, batch: int = BATCH
) -> None:
    """A run that logs ``losses`` (removed CoT tokens -> the loss at the end of that count; None: end to end) and
    measures its held-out implicit exact match every 100 steps of ``batch`` examples, rising to ``final``."""
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
            {
                "step": 100 * index,
                "eval_implicit/answer_em": final * index / 3,
                "train_examples": 100.0 * batch * index,
            }
        )
    (folder / "training_log.json").write_text(json.dumps(log))
    (folder / "eval_results.json").write_text(json.dumps({"test/implicit/answer_em": final}))


def _stalling(removed_at_jump: int, tokens: int = 24) -> dict[float, float]:
    """Losses that climb by 0.01 per removed token and jump by 0.3 when token ``removed_at_jump`` goes."""
    return {float(k): 0.1 + 0.01 * k + (0.3 if k >= removed_at_jump else 0.0) for k in range(0, tokens + 1)} | {
        float("inf"): 0.6
    }


def test_the_stall_names_the_cot_token_whose_removal_was_not_absorbed(tmp_path):
    _write(tmp_path / "runs", "mult3x3_stepwise250_base", 0, 0.12, _stalling(14))
    _write(tmp_path / "runs", "mult3x3_e2e", 0, 0.004)
    runs = {run["curriculum"]: run for run in make_results.league.load_runs(tmp_path / "runs")}
    stall = make_results.stall(runs["stepwise250_base"])
    assert stall["largest rise of the end-of-stage loss"] == "removing token 14 (s1[3]): 0.230 -> 0.540"
    assert stall["CoT removed at the end"] == "all 24"
    assert stall["best held-out implicit EM (examples)"] == "0.120 (19,200)"
    assert make_results.stall(runs["e2e"])["CoT removed at the end"] == "— (no CoT)"
    assert make_results.COT_TOKENS["mult3x3"][:5] == ["p1[1]", "p1[2]", "p1[3]", "p1[4]", "+"]


@pytest.mark.parametrize(
    ("finals", "e2e", "verdict"),
    [
        ([0.95], 0.004, "pending"),  # one seed of the best setting: the screen is not a verdict
        ([0.99, 0.575], 0.004, "inconclusive"),  # settled: seed 2 can neither lift 0.575 nor pull the mean under 0.50
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
    make_results.main(["--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--ledger", str(ledger),
                      "--readme", str(readme)])  # fmt: skip
    m1 = {row["id"]: row for row in read_ledger(ledger)}["M1"]
    assert m1["verdict"] == verdict and m1["seeds"] == str(len(finals))
    assert m1["ours"].startswith("best: stepwise, fixed pace of 250 steps / token (init)")
    text = readme.read_text()
    assert "Where each run stalls:" in text and "](stall_mult3x3.png)" in text and text.endswith("What it says.\n")
    assert matplotlib.image.imread(tmp_path / "out/stall_mult3x3.png").shape[2] in (3, 4)


@pytest.mark.parametrize(("long_e2e", "verdict"), [(0.004, "agree"), (0.30, "inconclusive")])
def test_m1_reads_end_to_end_at_the_best_settings_budget(tmp_path, long_e2e, verdict):
    """Two end-to-end rows: the short one (the screen's budget) is near 0 either way; M1 reads the one trained on
    as many examples as the winner (twice the screen's), so only its score decides."""
    for seed, final in enumerate([0.97, 0.95, 0.93]):
        _write(tmp_path / "runs", "mult3x3_stepwise250_budget16k", seed, final, _stalling(20), batch=2 * BATCH)
    _write(tmp_path / "runs", "mult3x3_e2e", 0, 0.004)
    for seed in range(3):
        _write(tmp_path / "runs", "mult3x3_e2e_budget16k", seed, long_e2e, batch=2 * BATCH)
    ledger = tmp_path / "claims.csv"
    ledger.write_text((REPO / "results/mult_cpu/claims.csv").read_text())
    make_results.main(["--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--ledger", str(ledger)])
    m1 = {row["id"]: row for row in read_ledger(ledger)}["M1"]
    assert m1["verdict"] == verdict, m1["ours"]
    assert f"end to end {long_e2e:.3f}" in m1["ours"] and "gap" in m1["ours"]
    assert (tmp_path / "out/table.md").read_text().count("end to end (no CoT ever) (budget16k)") == 1


def test_the_shipped_3x3_config_is_the_winning_runs_setting():
    """recipes/configs/mult_3x3_cpu.yaml trains what runs.yaml's mult3x3_stepwise250_budget16k ran (seed 0), field
    by field, but for where it writes and the adaptive schedule's own fields, which a stepwise run never reads."""
    from hf_icot.command_line.arguments import parse_recipe_args
    from hf_icot.studies.sweep import load_sweep

    run = next(r for r in load_sweep(REPO / "results/mult_cpu").runs if r.name == "mult3x3_stepwise250_budget16k_s0")
    ran = [vars(group) for group in parse_recipe_args(run.command[2:])]
    shipped = [vars(group) for group in parse_recipe_args(["--config", "recipes/configs/mult_3x3_cpu.yaml"])]
    ignored = {"output_dir", "logging_dir", "disable_tqdm", "distributed_state"}
    ignored |= {name for name in ran[1] if name.startswith(("adaptive_", "min_steps_per", "max_steps_per"))}
    for ran_group, shipped_group in zip(ran, shipped, strict=True):
        differ = {k for k in ran_group if k not in ignored and ran_group[k] != shipped_group.get(k)}
        assert not differ, {k: (ran_group[k], shipped_group.get(k)) for k in differ}
    assert ran[1]["schedule"] == "stepwise" and ran[1]["max_steps"] == 16000


def test_the_4x4_chain_is_named_token_by_token_as_the_task_writes_it():
    from datasets_builder import build_dataset

    dataset, _ = build_dataset("multiplication", {"a_digits": 4, "b_digits": 4, "train_size": 3, "validation_size": 1,
                                                  "test_size": 1, "seed": 0})  # fmt: skip
    cot = " ".join(dataset["train"][0]["cot"]).split()
    names = make_results.COT_TOKENS["mult4x4"]
    assert len(names) == len(cot) == 46
    # the separators sit exactly where the task writes them: p1 + p2 ( s1 ) + p3 ( s2 ) + p4
    assert [name for name, token in zip(names, cot, strict=True) if not token.isdigit()] == [
        "+", "(", ")", "+", "(", ")", "+"
    ]  # fmt: skip
    assert names[names.index("(") + 1] == "s1[1]" and names[-1] == "p4[8]"


@pytest.mark.parametrize(
    ("finals", "verdict"),
    [
        ([0.31], "disagree"),  # below 0.90 over the hour: decided on the run the rule asks for
        ([0.95], "pending"),  # above: seeds 1-2 must follow
        ([0.95, 0.93, 0.92], "agree"),
        ([0.95, 0.93, 0.85], "inconclusive"),
    ],
)
def test_m2_reads_the_4x4_runs_over_the_whole_hour(tmp_path, finals, verdict):
    for seed, final in enumerate(finals):
        _write(tmp_path / "runs", "mult4x4_stepwise62_hour", seed, final, _stalling(30, tokens=46))
    _write(tmp_path / "runs", "mult4x4_stepwise62_60min", 0, 0.02, _stalling(30, tokens=46))  # a shorter budget
    _write(tmp_path / "runs", "mult3x3_stepwise250_base", 0, 0.10, _stalling(14))
    ledger = tmp_path / "claims.csv"
    ledger.write_text((REPO / "results/mult_cpu/claims.csv").read_text())
    make_results.main(["--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--ledger", str(ledger)])
    m2 = {row["id"]: row for row in read_ledger(ledger)}["M2"]
    assert m2["verdict"] == verdict and m2["seeds"] == str(len(finals))
    assert m2["ours"].startswith("over the hour: test implicit EM")
    assert "(60min): test implicit EM 0.020 (n=1) after 19,200 examples" in m2["ours"]  # every budget reported
    assert matplotlib.image.imread(tmp_path / "out/stall_mult4x4.png").shape[2] in (3, 4)
    stall = make_results.stall(
        next(run for run in make_results.league.load_runs(tmp_path / "runs") if run["task"] == "mult4x4")
    )
    assert stall["largest rise of the end-of-stage loss"].startswith("removing token 30 (s2[1])")


def test_m2_stays_pending_until_a_run_over_the_whole_hour(tmp_path):
    _write(tmp_path / "runs", "mult4x4_stepwise62_60min", 0, 0.0, _stalling(30, tokens=46))
    ledger = tmp_path / "claims.csv"
    ledger.write_text((REPO / "results/mult_cpu/claims.csv").read_text())
    make_results.main(["--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--ledger", str(ledger)])
    m2 = {row["id"]: row for row in read_ledger(ledger)}["M2"]
    assert m2["verdict"] == "pending" and m2["ours"].startswith("no run over the whole hour yet; stepwise")
