"""results/methods/make_results.py on run records whose table and verdicts are known by design."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import matplotlib.image
import pytest

from hf_icot.studies.claims import read_ledger
from hf_icot.studies.sweep import RECORD_FILE
from results.methods import make_results
from results.methods.league_tasks import METHODS, SEEDS_OF
from results.methods.thoughts import SWEEP_ONLY

REPO = Path(__file__).resolve().parents[2]
BATCH, MEASUREMENTS = 64, 18  # the league's 1,800 steps of 64, measured every 100
#: method -> (its mode, the final test exact match of seeds 0, 1, 2)
FINALS = {
    "stepwise": ("implicit", [1.0, 1.0, 1.0]),
    "adaptive": ("implicit", [0.9, 0.95, 1.0]),
    "mixture": ("implicit", [0.6, 0.7, 0.8]),
    "coconut": ("latent", [1.0, 1.0, 1.0]),
    "codi": ("latent", [0.5, 0.52, 0.54]),
    "full_cot": ("explicit", [0.5, 0.6, 0.7]),
    "e2e": ("implicit", [0.5, 0.5, 0.51]),
}


def _write(
    root: Path, method: str, seed: int, first_at: int | None, name: str = "", mode: str = "", finals=None
) -> None:
    """A run measured every 100 steps at 0.5 until measurement ``first_at`` (1-based; None: never), 0.95 from there,
    with its final test scores and speeds: 100 answers/s, 3 tokens per implicit answer, 7 per explicit one, and 6
    forward passes per latent one (``name``: the folder's name without its seed; ``mode``, ``finals``: FINALS')."""
    mode, finals = mode or FINALS[method][0], finals or FINALS[method][1]
    folder = root / f"{name or f'parity4_{method}'}_s{seed}"
    folder.mkdir(parents=True)
    (folder / RECORD_FILE).write_text(
        json.dumps({"run": folder.name, "seed": seed, "status": "ok", "wall_s": 100 + seed})
    )
    log = []
    for index in range(1, MEASUREMENTS + 1):
        em = 0.95 if first_at is not None and index >= first_at else 0.5
        log.append(
            {"step": 100 * index, "loss": 0.1, **({"cot/forward_passes": 3.0 + index % 2} if mode == "latent" else {})}
        )
        log.append({"step": 100 * index, f"eval_{mode}/answer_em": em, "train_examples": float(100 * index * BATCH)})
    leg = 200 if (method, seed) == ("coconut", 2) else 100 * MEASUREMENTS  # coconut s2 resumed at step 1,600
    log.append({"step": 100 * MEASUREMENTS, "train_runtime": leg / 2, "train_steps_per_second": 2.0})
    (folder / "training_log.json").write_text(json.dumps(log))
    final = {f"test/{mode}/answer_em": finals[seed], f"test/{mode}/examples_per_s": 100.0}
    final[f"test/{mode}/tokens_per_s"] = {"implicit": 300.0, "explicit": 700.0, "latent": 250.0}.get(mode, 400.0)
    if mode == "latent":
        final[f"test/{mode}/forward_passes"] = 6.0
    final["test/implicit/answer_em"] = final.get("test/implicit/answer_em", 0.0)  # another mode's score: not read
    (folder / "eval_results.json").write_text(json.dumps(final))


def _records(root: Path, methods=tuple(FINALS)) -> None:
    for method in methods:
        for seed in range(3):
            first_at = {"stepwise": 3 + seed, "mixture": 10 if seed == 1 else None, "e2e": None}.get(method, 2)
            _write(root, method, seed, first_at)


def _ledger(tmp_path: Path) -> Path:
    ledger = tmp_path / "claims.csv"
    ledger.write_text((REPO / "results/methods/claims.csv").read_text())
    return ledger


def _main(tmp_path: Path, *extra: str) -> dict:
    folders = [
        "--runs",
        str(tmp_path / "runs"),
        "--studies",
        str(tmp_path / "studies"),
        "--out",
        str(tmp_path / "out"),
    ]
    return make_results.main([*folders, *extra])


def test_the_table_reads_each_method_in_its_own_mode(tmp_path):
    _records(tmp_path / "runs")
    _main(tmp_path)
    with open(tmp_path / "out/table.csv", newline="") as stream:
        table = {row["method"].split(" (")[0]: row for row in csv.DictReader(stream)}
    cost = next(column for column in table["Coconut"] if column.startswith("forward passes / answer"))
    assert "1 per latent thought" in cost
    assert table["stepwise removal"]["test EM, own mode (end)"] == "1.000 ± 0.000 (n=3)"
    assert table["adaptive pace"]["test EM, own mode (end)"] == "0.950 ± 0.124 (n=3)"  # t(2) = 4.30
    assert table["CODI"]["test EM, own mode (end)"] == "0.520 ± 0.050 (n=3)"  # latent, not its implicit 0.0
    # stepwise first >= 90% at measurements 3, 4, 5: 19,200 / 25,600 / 32,000 examples, steps 300 / 400 / 500
    assert table["stepwise removal"]["examples to ≥ 90%"] == "25600 ± 15898 (n=3)"
    assert table["stepwise removal"]["steps to ≥ 90%"] == "400 ± 248 (n=3)"
    assert table["mixture"]["examples to ≥ 90%"] == "1/3 seeds reached it (64,000)"
    assert table["end to end"]["examples to ≥ 90%"] == "not reached in 115,200"
    assert table["full CoT"]["examples to ≥ 90%"] == "12800 ± 0 (n=3)"  # explicit, the second measurement
    assert table["stepwise removal"]["wall time per run"] == "100–102 s"
    assert table["Coconut"]["wall time per run"] == "100–101 s (1 resumed run(s) left out: timed from the resumption)"
    assert table["stepwise removal"][cost] == "3.00 ± 0.00 (n=3)"  # generated tokens: 300 tokens/s / 100 answers/s
    assert table["full CoT"][cost] == "7.00 ± 0.00 (n=3)"
    assert table["Coconut"][cost] == "6.00 ± 0.00 (n=3)"  # its forward_passes, not tokens/s ÷ examples/s (2.5)
    assert (
        table["CODI"]["tokens/s (test)"] == "250 ± 0 (n=3)" and table["CODI"]["examples/s (test)"] == "100 ± 0 (n=3)"
    )
    passes = "forward passes / training example (logged, mean over the run)"
    assert table["Coconut"][passes] == "3.50 ± 0.00 (n=3)"  # logged 3 and 4 in turn: the mean over the run
    assert table["stepwise removal"][passes] == ""  # these made-up token runs logged none
    assert not (tmp_path / "out/partial.md").exists()
    assert matplotlib.image.imread(tmp_path / "out/curves_parity4.png").shape[2] in (3, 4)


def test_the_verdicts_follow_the_ledgers_rules(tmp_path):
    _records(tmp_path / "runs")
    ledger = _ledger(tmp_path)
    _main(tmp_path, "--ledger", str(ledger))
    verdicts = {row["id"]: row for row in read_ledger(ledger)}
    # coconut and stepwise both 1.0 on every seed: zero spread on both sides gives the point d = 0 >= -0.05
    assert verdicts["M1-coconut-stepwise"]["verdict"] == "agree" and verdicts["M1-coconut-stepwise"]["flag"] == ""
    assert verdicts["M1-coconut-stepwise"]["ours"].startswith("d = coconut - stepwise = +0.000 [+0.000, +0.000]; ")
    # codi 0.52 against coconut 1.0: d = -0.48 [-0.530, -0.430], wholly below -0.05
    assert verdicts["M2-codi-coconut"]["verdict"] == "disagree"
    assert verdicts["M2-codi-coconut"]["ours"].startswith("d = codi - coconut = -0.480 [-0.530, -0.430]; ")
    # codi 0.52 against full CoT 0.60: d = -0.08 [-0.316, +0.156] straddles -0.05, within one standard error (0.059)
    assert verdicts["M3-codi-fullcot"]["verdict"] == "inconclusive"
    assert verdicts["M3-codi-fullcot"]["flag"].startswith("knife-edge: d = codi - full_cot -0.08 is within one")
    # stepwise 1.0 ± 0 (the first of the best), end to end 0.503: gap +0.497 [+0.482, +0.511]
    assert verdicts["M0-parity4"]["verdict"] == "agree" and verdicts["M0-parity4"]["flag"] == ""
    assert verdicts["M0-parity4"]["ours"].startswith("best: stepwise 1.000 ± 0.000 (n=3); end to end 0.503")
    assert "gap +0.497 [+0.482, +0.511]" in verdicts["M0-parity4"]["ours"]
    later = ("published", "M4", "S1", "S2", "P1", "P2", "T0", "T1")  # issues 51, 53: no record of theirs here
    registered = {claim: row for claim, row in verdicts.items() if not any(word in claim for word in later)}
    assert {row["seeds"] for claim, row in registered.items() if not claim.endswith("counter7")} == {"3"}
    # The published-protocol rows (issue 51), SIM-CoT's and PCCoT's (issue 53) have no record here: they wait
    assert {row["verdict"] for claim, row in verdicts.items() if claim not in registered} == {"pending"}
    assert {row["verdict"] for claim, row in verdicts.items() if claim.endswith("counter7")} == {"pending"}
    before = {row["id"]: row for row in read_ledger(REPO / "results/methods/claims.csv")}
    assert all(verdicts[claim]["rule"] == before[claim]["rule"] for claim in before)


def test_a_method_short_of_its_seeds_is_tabled_apart_and_its_verdicts_wait(tmp_path):
    _records(tmp_path / "runs")
    for seed in (1, 2):
        shutil.rmtree(tmp_path / f"runs/parity4_codi_s{seed}")
    failed = {"run": "parity4_codi_s1", "status": "failed", "exit_code": 1, "log_tail": ["IndexError: out of range"]}
    (tmp_path / "runs/parity4_codi_s1").mkdir()  # the harness's record of a failed run: sweep.json alone
    (tmp_path / f"runs/parity4_codi_s1/{RECORD_FILE}").write_text(json.dumps(failed))
    readme = tmp_path / "README.md"
    readme.write_text("# League\n\n```bash\nrun it\n```\n\n<!-- begin table -->\nold\n<!-- end table -->\n\nProse.\n")
    ledger = _ledger(tmp_path)
    _main(tmp_path, "--ledger", str(ledger), "--readme", str(readme))
    league, partial = (tmp_path / "out/table.md").read_text(), (tmp_path / "out/partial.md").read_text()
    assert "| CODI" not in league and "| Coconut" in league
    assert partial.count("| CODI") == 1 and "| 1 | 0.500 (n=1) |" in partial
    verdicts = {row["id"]: row for row in read_ledger(ledger)}
    assert verdicts["M1-coconut-stepwise"]["verdict"] == "agree"  # it reads neither codi nor the others
    for claim in ("M2-codi-coconut", "M3-codi-fullcot", "M0-parity4"):
        assert verdicts[claim]["verdict"] == "pending" and verdicts[claim]["seeds"] == "1", claim
        assert verdicts[claim]["ours"].endswith("; fewer than 3 seeds"), claim
    text = readme.read_text()
    assert text.startswith("# League\n\n```bash\nrun it\n```\n") and text.endswith("<!-- end table -->\n\nProse.\n")
    assert league in text and partial in text and "old" not in text
    assert "a latent thought costs one forward pass" in text and "](curves_parity4.png)" in text
    assert "Failed (no scores; rerun through the harness):\n\n* parity4_codi_s1: IndexError: out of range\n" in text


def test_verdicts_wait_for_the_runs_the_sweep_defines(tmp_path):
    """Every recorded method has 3 seeds, but runs.yaml beside the records defines a fourth Coconut seed: the verdicts
    reading Coconut wait for it; M3 (CODI against full CoT) does not."""
    _records(tmp_path / "runs")
    runs = "".join(f"  - {{name: parity4_{method}, args: [], seeds: [0, 1, 2]}}\n" for method in FINALS)
    (tmp_path / "runs.yaml").write_text(
        "study: methods\ncommand: [python]\noutput_root: outputs/methods\ndone_file: eval_results.json\nruns:\n"
        + runs
        + "  - {name: parity4_coconut, args: [], seeds: [3]}\n"
    )
    ledger = _ledger(tmp_path)
    _main(tmp_path, "--ledger", str(ledger))
    verdicts = {row["id"]: row for row in read_ledger(ledger)}
    for claim in ("M1-coconut-stepwise", "M2-codi-coconut"):
        assert verdicts[claim]["verdict"] == "pending"
        assert verdicts[claim]["ours"].endswith("; 1 run(s) of runs.yaml not recorded yet")
    assert verdicts["M3-codi-fullcot"]["verdict"] == "inconclusive"
    assert verdicts["M0-parity4"]["verdict"] == "pending"  # Coconut is one of its candidates


def test_no_record_yet_leaves_every_verdict_pending(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# League\n\n<!-- begin table -->\n<!-- end table -->\n")
    ledger = _ledger(tmp_path)
    _main(tmp_path, "--ledger", str(ledger), "--readme", str(readme))
    assert (tmp_path / "out/table.md").read_text() == "_no method has its 3 seeds recorded yet_\n"
    assert not (tmp_path / "out/curves_parity4.png").exists() and not (tmp_path / "out/partial.md").exists()
    assert {row["verdict"] for row in read_ledger(ledger)} == {"pending"}
    assert "_no method has its 3 seeds recorded yet_" in readme.read_text()


def test_a_record_of_another_method_is_refused(tmp_path):
    _write(tmp_path / "runs", "stepwise", 0, 2)  # a whole record, under the name of a method not in the league
    (tmp_path / "runs/parity4_stepwise_s0").rename(tmp_path / "runs/parity4_log_icot_s1")
    with pytest.raises(ValueError, match=r"^run record 'parity4_log_icot_s1' is not <task>_<method>_s<seed> with"):
        _main(tmp_path)


#: counter7: method -> (the folder its records are in: a league run or a semiautomata run, its mode, its finals)
COUNTER7 = {
    "stepwise": ("studies/semiautomata/runs/claim_counter7_t32_left", "implicit", [0.99, 1.0, 0.99]),
    "mixture": ("studies/semiautomata/runs/claim_counter7_t32_mixture", "hint=0", [0.78, 0.84, 0.85]),
    "full_cot": ("studies/semiautomata/runs/regime_counter7_t32_full_cot", "explicit", [1.0, 1.0, 1.0]),
    "coconut": ("runs/counter7_coconut", "latent", [0.99, 0.98, 1.0]),
    "codi": ("runs/counter7_codi", "latent", [0.3, 0.2, 0.25]),
    "e2e": ("runs/counter7_e2e", "implicit", [0.14, 0.15, 0.17]),
}


def _counter7(tmp_path: Path) -> None:
    for method, (where, mode, finals) in COUNTER7.items():
        folder, name = where.rsplit("/", 1)
        for seed in range(3):
            _write(tmp_path / folder, method, seed, 2, name=name, mode=mode, finals=finals)
            if folder.startswith("studies"):  # the study's runs evaluated at the end only: no curve
                log = tmp_path / folder / f"{name}_s{seed}/training_log.json"
                log.write_text(json.dumps([row for row in json.loads(log.read_text()) if "train_examples" not in row]))


def test_counter7_reads_the_semiautomata_records_it_borrows_each_in_its_mode(tmp_path):
    _records(tmp_path / "runs")
    _counter7(tmp_path)
    ledger = _ledger(tmp_path)
    _main(tmp_path, "--ledger", str(ledger))
    with open(tmp_path / "out/table.csv", newline="") as stream:
        table = {(row["task"], row["method"].split(" (")[0]): row for row in csv.DictReader(stream)}
    assert table["counter7", "mixture"]["mode"] == "hint=0"
    assert table["counter7", "mixture"]["test EM, own mode (end)"] == "0.823 ± 0.094 (n=3)"  # hint 0, not implicit
    assert table["counter7", "stepwise removal"]["examples to ≥ 90%"] == "not measured (evaluated at the end only)"
    assert table["counter7", "Coconut"]["examples to ≥ 90%"] == "12800 ± 0 (n=3)"
    assert table["parity4", "stepwise removal"]["test EM, own mode (end)"] == "1.000 ± 0.000 (n=3)"
    assert (tmp_path / "out/curves_counter7.png").is_file() and (tmp_path / "out/curves_parity4.png").is_file()
    verdicts = {row["id"]: row for row in read_ledger(ledger)}
    # coconut 0.990 against stepwise 0.993: d = -0.003, the interval within [-0.05, ...]
    assert verdicts["M1-counter7"]["verdict"] == "agree"
    assert verdicts["M1-counter7"]["ours"].startswith("d = coconut - stepwise = -0.003 [")
    assert verdicts["M2-counter7"]["verdict"] == "disagree" and verdicts["M3-counter7"]["verdict"] == "disagree"
    # the best internalizing method (stepwise 0.993) against end to end 0.153; adaptive is not run on counter7
    assert verdicts["M0-counter7"]["verdict"] == "agree"
    assert verdicts["M0-counter7"]["ours"].startswith("best: stepwise 0.993 ± ")
    assert verdicts["M1-coconut-stepwise"]["ours"].startswith("d = coconut - stepwise = +0.000")  # parity4's own


def test_coconuts_stage_boundaries_are_read_from_its_log_in_examples():
    log = [{"step": 50, "cot/stage": 0}, {"step": 100, "cot/stage": 0}, {"step": 150, "cot/stage": 1}]
    log += [{"step": 100, "cot/stage": 1}, {"step": 200, "train_examples": 12800.0}, {"step": 250, "cot/stage": 2}]
    # a resumed leg logs stage 1 again from step 100: each stage starts at its first logged step
    assert make_results.stage_starts({"log": log}) == [6400.0, 16000.0]


def test_a_league_record_of_a_method_the_task_borrows_is_refused(tmp_path):
    _write(tmp_path / "runs", "stepwise", 0, 2, name="counter7_stepwise")
    with pytest.raises(ValueError, match=r"^run record 'counter7_stepwise_s0': counter7 reads stepwise from another"):
        _main(tmp_path)


def test_every_run_of_the_sweep_answers_in_the_mode_the_analysis_reads():
    from hf_icot.studies.sweep import load_sweep

    runs = load_sweep(REPO / "results/methods").runs
    five = ("_published_", "_simcot_", "_pccot_")  # issues 51 and 53: 5 seeds each (the thoughts sweep: 3)
    sweep = [run for run in runs if run.name.split("_", 1)[1].rsplit("_s", 1)[0] in SWEEP_ONLY]
    published = [run for run in runs if any(word in run.name for word in five) and run not in sweep]
    assert len(sweep) == (8 + 4) * 3 and {run.seed for run in sweep} == {0, 1, 2}  # parity4's 6 and 12, counter7's 16
    rest = {run.seed for run in runs if not run.name.startswith("counter7_e2e_") and run not in published}
    assert sorted(rest) == [0, 1, 2]
    # parity4: 2 published rows and 3 of SIM-CoT / PCCoT; counter7: the same 5 (S1-P1-counter7 registered later)
    assert sorted({run.seed for run in published}) == list(range(5)) and len(published) == 10 * 5
    # M0-counter7's end to end: 5 more seeds, registered to decide the premise (issue 54)
    assert sorted(run.seed for run in runs if run.name.startswith("counter7_e2e_")) == list(range(8))
    for task in make_results.TASKS.values():
        own = [method for method in make_results.METHODS if method not in task.borrowed]
        ran = {run.name.rsplit("_s", 1)[0] for run in runs if run.name.startswith(f"{task.name}_")}
        assert ran <= {f"{task.name}_{method}" for method in own}, task.name
    for run in runs:
        method = run.name.split("_", 1)[1].rsplit("_s", 1)[0]
        assert run.command[run.command.index("--eval_modes") + 1] == make_results.METHODS[method][1], run.name
    fives = sum(SEEDS_OF.values())  # the methods of 5 seeds, all run on parity4
    counter7_only = {method for method in SWEEP_ONLY if method.endswith("_t16")}  # the sweep's counter7 rows
    threes = len(METHODS) - len(SEEDS_OF) - len(counter7_only)
    assert len([run for run in runs if run.name.startswith("parity4_")]) == 3 * threes + fives


def test_a_seed_that_falls_off_the_plateau_late_does_not_stay_at_it():
    """M4 reads each seed's curve (issue 51): the share of its late evaluations (the second half) at >= 0.9."""
    from results.methods import stability

    collapsed = [0.5, 1.0, 1.0, 1.0, 0.7, 0.4]  # at the plateau early, off it late (CODI's parity4 seed 0)
    assert stability.late_share(collapsed, 0.9) == pytest.approx(1 / 3)
    assert not stability.at_plateau(0.5, 1 / 3, 0.9, 0.8)
    assert stability.late_share([0.5, 0.6, 1.0, 1.0], 0.9) == 1.0 and stability.at_plateau(1.0, 1.0, 0.9, 0.8)
    assert not stability.at_plateau(1.0, 0.5, 0.9, 0.8)  # ends at 1.0 but spent half its late checks below
    assert stability.late_share([], 0.9) is None and stability.median([0.5, 1.0]) == 0.75


BENCH_OUTPUT = """GPT-2 4x64, batch 64, cpu, 1 thread(s), PCCoT 2 iterations; seconds are medians
| thoughts | passes seq / PCCoT | Coconut s/step | CODI s/step | PCCoT s/step | Coconut/PCCoT | CODI/PCCoT | seq |
|---|---|---|---|---|---|---|---|
| 3 | 3 / 3 | 0.0400 | 0.0700 | {pccot} | {ratio}x | 0.90x | 0.01 |
"""


@pytest.mark.parametrize(
    ("ratios", "verdict"),
    [((1.5, 1.3, 1.2), "agree"), ((0.6, 0.55, 0.7), "disagree"), ((1.3, 0.8, 1.2), "inconclusive")],
)
def test_p2_reads_pccots_step_cost_beside_the_sweep(tmp_path, ratios, verdict):
    """P2 reads step_cost.json beside runs.yaml (as the harness's records): each run's Coconut / PCCoT seconds per
    step, parsed from the bench's own table row for 3 thoughts; pending while the file is absent."""
    from results.methods import step_cost

    parsed = [step_cost.ratio_of(BENCH_OUTPUT.format(pccot=f"{0.04 / r:.4f}", ratio=f"{r:.2f}")) for r in ratios]
    assert [row["ratio"] for row in parsed] == list(ratios) and parsed[0]["coconut_s"] == 0.04
    with pytest.raises(ValueError, match="no row for 3 thoughts"):
        step_cost.ratio_of("| 6 | 6 / 3 | 0.1 | 0.1 | 0.1 | 1.00x |")
    ledger = _ledger(tmp_path)
    _main(tmp_path, "--ledger", str(ledger))
    assert {row["id"]: row for row in read_ledger(ledger)}["P2-parity4"]["verdict"] == "pending"
    record = {"machine": {"cpu": "a test CPU"}, "runs": [{**row, "load_before": 0.0, "output": ""} for row in parsed]}
    (tmp_path / "step_cost.json").write_text(json.dumps(record))
    _main(tmp_path, "--ledger", str(ledger))
    row = {row["id"]: row for row in read_ledger(ledger)}["P2-parity4"]
    assert row["verdict"] == verdict and row["seeds"] == "3 runs" and "(a test CPU)" in row["ours"]


def test_the_thoughts_sweep_reads_its_premise_before_sim_cots_gain(tmp_path):
    """T0: the plain method at 12 thoughts against 3; T1: SIM-CoT against the plain method at 12, read only where T0
    holds. Coconut collapses here and SIM-CoT keeps it; CODI does not collapse, so its T1 has nothing to show."""
    finals = {
        "coconut_published": [1.0] * 5, "coconut_t12": [0.6, 0.55, 0.62], "simcot_coconut_t12": [0.95, 0.97, 0.99],
        "codi_published": [1.0] * 5, "codi_t12": [1.0, 0.99, 1.0], "simcot_codi_t12": [1.0, 1.0, 1.0],
        "coconut_t6": [0.9, 0.8, 0.85],
    }  # fmt: skip
    for method, scores in finals.items():
        for seed, _ in enumerate(scores):
            _write(tmp_path / "runs", method, seed, 2, name=f"parity4_{method}", mode="latent", finals=scores)
    ledger = _ledger(tmp_path)
    _main(tmp_path, "--ledger", str(ledger))
    verdicts = {row["id"]: row for row in read_ledger(ledger)}
    assert verdicts["T0-coconut"]["verdict"] == "agree"
    assert verdicts["T0-coconut"]["ours"].startswith("Coconut at 12 thoughts - at 3: -0.410")
    assert (
        verdicts["T1-coconut"]["verdict"] == "agree"
        and "Coconut + SIM-CoT - Coconut at 12 thoughts: +0.380" in (verdicts["T1-coconut"]["ours"])
    )
    assert verdicts["T0-codi"]["verdict"] == "disagree" and verdicts["T1-codi"]["verdict"] == "inconclusive"
    image = matplotlib.image.imread(tmp_path / "out/thoughts_parity4.png")
    assert image.shape[0] > 100 and image.shape[1] > 100


def test_the_thoughts_sweep_on_counter7_reads_8_against_16_thoughts(tmp_path):
    """counter7's rows (registered 2026-12-08): 8 thoughts from the league's rows, 16 from the sweep's; CODI collapses
    here and SIM-CoT does not keep it; Coconut holds. parity4's claims stay pending without their records."""
    finals = {
        "coconut_published": [1.0, 0.99, 1.0, 1.0, 0.98], "coconut_t16": [1.0, 0.99, 1.0],
        "simcot_coconut_t16": [1.0, 1.0, 1.0], "codi_published": [1.0] * 5, "codi_t16": [0.5, 0.49, 0.51],
        "simcot_codi_t16": [0.5, 0.5, 0.49],
    }  # fmt: skip
    for method, scores in finals.items():
        for seed, _ in enumerate(scores):
            _write(tmp_path / "runs", method, seed, 2, name=f"counter7_{method}", mode="latent", finals=scores)
    ledger = _ledger(tmp_path)
    _main(tmp_path, "--ledger", str(ledger))
    verdicts = {row["id"]: row for row in read_ledger(ledger)}
    assert verdicts["T0-counter7-codi"]["verdict"] == "agree"
    assert verdicts["T0-counter7-codi"]["ours"].startswith("CODI at 16 thoughts - at 8: -0.500")
    assert verdicts["T1-counter7-codi"]["verdict"] == "disagree"
    assert verdicts["T0-counter7-coconut"]["verdict"] == "disagree"
    assert verdicts["T1-counter7-coconut"]["verdict"] == "inconclusive"
    assert verdicts["T0-coconut"]["verdict"] == "pending"
    assert (tmp_path / "out/thoughts_counter7.png").is_file() and not (tmp_path / "out/thoughts_parity4.png").exists()


def test_the_step_seconds_column_reads_step_seconds_json_beside_the_records(tmp_path):
    """A measured row shows its milliseconds; a token-removal row the range from end to end to full CoT; a row the
    file does not name is blank; without the file the column is blank everywhere."""
    _records(tmp_path / "runs")
    measured = {"parity4": {"coconut": {"seconds_per_step": 0.0918}, "e2e": {"seconds_per_step": 0.02},
                            "full_cot": {"seconds_per_step": 0.0451}}}  # fmt: skip
    (tmp_path / "step_seconds.json").write_text(json.dumps({"tasks": measured}))
    _main(tmp_path)
    with open(tmp_path / "out/table.csv", newline="") as stream:
        table = {row["method"].split(" (")[0]: row for row in csv.DictReader(stream)}
    column = make_results.STEP_MS
    assert table["Coconut"][column] == "91.8"
    assert table["full CoT"][column] == "45.1"
    assert table["stepwise removal"][column] == "20.0–45.1 (e2e to full CoT as its CoT shrinks)"
    assert table["CODI"][column] == ""
    (tmp_path / "step_seconds.json").unlink()
    _main(tmp_path)
    with open(tmp_path / "out/table.csv", newline="") as stream:
        assert {row[column] for row in csv.DictReader(stream)} == {""}


def test_step_seconds_times_the_leagues_own_command_at_its_last_stage(tmp_path):
    """The league's seed-0 command with only evaluation, saving, length and folder changed; a staged Coconut command
    starts at its max_latent_stage (the flag over its config), a CODI command at stage 0."""
    from hf_icot.studies.sweep import load_sweep
    from results.methods import step_seconds

    runs = {run.name: list(run.argv) for run in load_sweep(REPO / "results/methods").runs if run.seed == 0}
    coconut = runs["parity4_coconut_published_s0"]
    assert step_seconds.last_stage(coconut) == 3  # coconut_quickstart.yaml's max_latent_stage
    assert step_seconds.last_stage([*coconut, "--max_latent_stage", "2"]) == 2
    assert step_seconds.last_stage(runs["parity4_codi_published_s0"]) == 0
    assert step_seconds.last_stage(runs["counter7_coconut_published_s0"], "counter7") == 8  # no max_latent_stage
    assert step_seconds.last_stage(runs["counter7_codi_published_s0"], "counter7") == 0
    command = step_seconds.timed_command(coconut, 3, tmp_path / "out", tmp_path / "clock.json")
    flags = command[4:]  # after python -c the launcher clock
    assert flags[0] == "recipes/icot_gpt2.py"
    assert "--generation_eval_examples" not in flags
    assert flags[flags.index("--generation_eval_steps") + 1] == str(10 * step_seconds.STEPS)  # after the last step
    assert flags[flags.index("--max_steps") + 1] == str(step_seconds.STEPS)
    assert flags[flags.index("--start_stage") + 1] == "3"
    assert flags[flags.index("--reset_optimizer_every") + 1] == "epoch"  # the row's own flags stay
    assert "--start_stage" not in step_seconds.timed_command(runs["parity4_codi_s0"], 0, tmp_path, tmp_path / "c")
