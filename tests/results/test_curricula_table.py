"""results/curricula/make_results.py on run records whose table and verdicts are known by design."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import matplotlib.image
import pytest

from hf_icot.studies import league
from hf_icot.studies.claims import read_ledger
from hf_icot.studies.sweep import RECORD_FILE
from results.curricula import make_results

REPO = Path(__file__).resolve().parents[2]
BATCH = 64


def _write(root: Path, name: str, seed: int, ems: list[float], final: float, mode: str = "implicit",
           gone_step: int | None = None) -> None:  # fmt: skip
    """A run measured every 100 steps with the exact matches ``ems`` (without CoT) and the final test score."""
    folder = root / f"{name}_s{seed}"
    folder.mkdir(parents=True)
    (folder / RECORD_FILE).write_text(
        json.dumps({"run": folder.name, "seed": seed, "status": "ok", "wall_s": 100 + seed})
    )
    log = []
    for index, em in enumerate(ems, start=1):
        step = 100 * index
        kept = 0.0 if gone_step is not None and step >= gone_step else 3.0
        log.append({"step": step, "loss": 0.1, "cot/kept_tokens_mean": kept})
        log.append({"step": step, f"eval_{mode}/answer_em": em, "train_examples": float(step * BATCH)})
    (folder / "training_log.json").write_text(json.dumps(log))
    (folder / "eval_results.json").write_text(json.dumps({f"test/{mode}/answer_em": final}))


def _records(root: Path) -> None:
    for seed, first in enumerate([6, 7, 8]):  # stepwise150 reaches 90% at measurement 6, 7, 8 (38,400 ... 51,200)
        _write(root, "parity4_stepwise150", seed, [0.5] * (first - 1) + [0.95] * (12 - first + 1), 1.0, gone_step=700)
    for seed in range(3):  # only seed 0 of the slower pace gets there
        _write(root, "parity4_stepwise300", seed, [0.5] * 11 + [0.92 if seed == 0 else 0.6], 0.9 if seed == 0 else 0.6)
    for seed, first in enumerate([2, 3, 4]):  # adaptive: 12,800 / 19,200 / 25,600 -> ratio 44,800 / 19,200 = 2.33
        _write(
            root, "parity4_adaptive_answer", seed, [0.5] * (first - 1) + [1.0] * (12 - first + 1), 0.99, gone_step=300
        )
    for seed in range(3):  # the mixture is read on hint=0 (its implicit mode has no hint token)
        _write(root, "parity4_mixture_hints", seed, [0.5] * 4 + [0.97] * 8, 0.97, mode="hint=0")
        _write(root, "parity4_e2e", seed, [0.5] * 12, 0.5 + 0.01 * seed)
        _write(root, "counter7_stepwise40", seed, [0.3] * 5 + [0.93] * 7, 0.95, gone_step=400)
        _write(root, "counter7_adaptive_answer", seed, [0.3] * 12, 0.3)
        _write(root, "counter7_e2e", seed, [0.3] * 12, 0.3)


def test_the_table_reads_examples_to_90_percent_and_the_ratio(tmp_path):
    _records(tmp_path / "runs")
    rows = {(row["task"], row["curriculum"]): row for row in league.points(league.load_runs(tmp_path / "runs"))}
    assert rows["parity4", "stepwise150"]["to_bar_values"] == [38_400, 44_800, 51_200]
    assert rows["parity4", "stepwise300"]["reached"] == 1 and rows["parity4", "stepwise300"]["to_bar"] is None
    assert rows["parity4", "mixture_hints"]["to_bar_values"] == [32_000] * 3  # hint=0, the fifth measurement
    assert rows["parity4", "stepwise150"]["cot_gone"].mean == 700 * BATCH
    assert rows["parity4", "e2e"]["cot_gone"] is None
    compared = make_results.comparisons(list(rows.values()))
    assert compared["parity4"]["fixed"]["curriculum"] == "stepwise150"  # stepwise300 had a seed short of 90%
    assert compared["parity4"]["ratio"]["ratio"] == pytest.approx(44_800 / 19_200)
    assert 1 < compared["parity4"]["ratio"]["low"] <= 44_800 / 19_200 <= compared["parity4"]["ratio"]["high"]
    assert compared["counter7"]["ratio"] is None and compared["counter7"]["adaptive"] is None
    text = {row["curriculum"]: row for row in league.table_rows(list(rows.values())) if row["task"] == "parity4"}
    assert text["stepwise, fixed pace of 300 steps / token"]["examples to ≥ 90%"] == "1/3 seeds reached it (76,800)"
    assert text["end to end (no CoT ever)"]["examples to ≥ 90%"] == "not reached in 76,800"
    assert text["end to end (no CoT ever)"]["wall time per run"] == "100–102 s"
    # The study names its own curricula; the league knows only its naming rules (stepwise<P>, e2e).
    named = {row["curriculum"] for row in league.table_rows(list(rows.values()), make_results.label)}
    assert {"mixture with length hints (hint 0)", "adaptive pace (answer-token accuracy)"} <= named
    assert "stepwise, fixed pace of 150 steps / token" in named and league.label("mixture_hints") == "mixture_hints"


def test_the_command_writes_the_tables_plots_and_verdicts(tmp_path):
    _records(tmp_path / "runs")
    ledger = tmp_path / "claims.csv"
    ledger.write_text((REPO / "results/curricula/claims.csv").read_text())
    make_results.main(["--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--ledger", str(ledger)])
    verdicts = {row["id"]: row for row in read_ledger(ledger)}
    assert verdicts["L1-parity4"]["verdict"] == "agree" and "2.33" in verdicts["L1-parity4"]["ours"]
    assert verdicts["L1-counter7"]["verdict"] == "inconclusive"  # no adaptive pace reached 90%: no ratio
    assert verdicts["L2-parity4"]["verdict"] == "agree"  # stepwise150 at 1.000, end to end 0.51
    assert verdicts["L2-counter7"]["verdict"] == "agree"  # stepwise40 at 0.95 over 3 seeds, end to end 0.30
    before = {row["id"]: row for row in read_ledger(REPO / "results/curricula/claims.csv")}
    assert verdicts["L1-cyclic7"] == before["L1-cyclic7"]  # no records of cyclic7 here: its rows are left as they were
    assert "**2.33×**" in (tmp_path / "out/ratios.md").read_text()
    for task in ("parity4", "counter7"):
        assert matplotlib.image.imread(tmp_path / f"out/curves_{task}.png").shape[2] in (3, 4)


def test_the_readme_gets_the_table_in_its_generated_section_and_keeps_its_prose(tmp_path):
    _records(tmp_path / "runs")
    readme = tmp_path / "README.md"
    readme.write_text(
        "# League\n\nProse above.\n\n<!-- begin table -->\nan old table\n<!-- end table -->\n\nProse below.\n"
    )
    make_results.main(["--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--readme", str(readme)])
    text = readme.read_text()
    before, generated, after = (
        text.split("<!-- begin table -->\n")[0],
        *text.split("<!-- begin table -->\n")[1].split("<!-- end table -->"),
    )
    assert before == "# League\n\nProse above.\n\n" and after == "\n\nProse below.\n"
    assert "an old table" not in generated
    assert generated.startswith((tmp_path / "out/table.md").read_text())
    assert "**2.33×**" in generated and "](curves_parity4.png)" in generated and "](curves_counter7.png)" in generated

    readme.write_text("# League without a generated section\n")
    with pytest.raises(ValueError, match=r"README.md has no section 'table': it needs a line <!-- begin table -->"):
        make_results.main(
            ["--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "fresh"), "--readme", str(readme)]
        )
    assert not (tmp_path / "fresh").exists(), "nothing is written when the README has no section for the table"


def test_a_task_short_of_three_seeds_is_tabled_apart_from_the_league(tmp_path):
    _records(tmp_path / "runs")
    for name in ("stepwise40", "e2e"):  # cyclic7 on seed 0 only: at chance
        _write(tmp_path / "runs", f"cyclic7_{name}", 0, [0.14] * 12, 0.14, gone_step=400)
    readme = tmp_path / "README.md"
    readme.write_text("# League\n\n<!-- begin table -->\n<!-- end table -->\n")
    make_results.main(["--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--readme", str(readme)])
    league, screen = (tmp_path / "out/table.md").read_text(), (tmp_path / "out/screen.md").read_text()
    assert "| cyclic7 |" not in league and "| parity4 |" in league and "| counter7 |" in league
    assert screen.count("| cyclic7 |") == 2 and "| parity4 |" not in screen
    assert "Short of 3 seeds, so not in the league table (cyclic7; " in readme.read_text()
    assert screen in readme.read_text()

    for name in ("stepwise40", "e2e"):  # once its records are gone, so is the screen's table
        shutil.rmtree(tmp_path / "runs" / f"cyclic7_{name}_s0")
    make_results.main(["--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--readme", str(readme)])
    assert not (tmp_path / "out/screen.md").exists() and "Short of" not in readme.read_text()


def test_verdicts_stay_pending_while_a_run_of_the_sweep_has_no_record(tmp_path):
    """Every recorded curriculum of parity4 has 3 seeds, but the sweep beside the records defines one more run: the
    verdicts of parity4 wait for it (and say so); counter7, whose runs are all recorded, is decided."""
    _records(tmp_path / "runs")
    (tmp_path / "runs.yaml").write_text(
        "study: league\ncommand: [python]\noutput_root: outputs/league\ndone_file: eval_results.json\nruns:\n"
        "  - {name: parity4_stepwise150, args: [], seeds: [0, 1, 2]}\n"
        "  - {name: parity4_adaptive_sequence, args: [], seeds: [0]}\n"
        "  - {name: counter7_e2e, args: [], seeds: [0, 1, 2]}\n"
    )
    ledger = tmp_path / "claims.csv"
    ledger.write_text((REPO / "results/curricula/claims.csv").read_text())
    make_results.main(["--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--ledger", str(ledger)])
    verdicts = {row["id"]: row for row in read_ledger(ledger)}
    for claim in ("L1-parity4", "L2-parity4"):
        assert verdicts[claim]["verdict"] == "pending"
        assert verdicts[claim]["ours"].endswith("; 1 run(s) of runs.yaml not recorded yet")
    assert verdicts["L2-counter7"]["verdict"] == "agree"


def test_a_record_with_a_name_outside_the_sweep_is_refused(tmp_path):
    (tmp_path / "runs/parity4-e2e").mkdir(parents=True)
    with pytest.raises(ValueError, match=r"^run record 'parity4-e2e' is not named <task>_<curriculum>_s<seed>"):
        league.load_runs(tmp_path / "runs")


def test_every_league_run_parses_into_its_recipes_arguments_at_its_tasks_budget():
    """results/curricula/runs.yaml: parity4 and counter7, 10 curricula x 3 seeds each, and cyclic7's 10 curricula on
    seed 0 alone (its seeds 1-2 left the sweep before they ran: screen.md); each seed seeding data and model, each
    task's curricula at one budget, and each schedule's own flags reaching the trainer (a misspelt flag fails here)."""
    from hf_icot.command_line.arguments import parse_recipe_args
    from hf_icot.studies.sweep import load_sweep

    sweep = load_sweep(REPO / "results/curricula")
    seeds = {}
    for run in sweep.runs:
        seeds.setdefault(run.name.split("_", 1)[0], []).append(run.seed)
    assert {task: sorted(found) for task, found in seeds.items()} == {
        "parity4": [0] * 10 + [1] * 10 + [2] * 10,
        "counter7": [0] * 10 + [1] * 10 + [2] * 10,
        "cyclic7": [0] * 10,
    }
    budgets, schedules = {}, {}
    for run in sweep.runs:
        task = run.name.split("_", 1)[0]
        assert run.command[:2] == [
            "python",
            "recipes/icot_gpt2.py" if task == "parity4" else "recipes/semiautomata.py",
        ]
        script_args, training_args, _ = parse_recipe_args(run.command[2:])
        assert script_args.task_args["seed"] == training_args.seed == run.seed, run.name
        assert training_args.output_dir.endswith(run.name) and training_args.generation_eval_steps == 100, run.name
        budgets.setdefault(task, set()).add(training_args.max_steps * training_args.per_device_train_batch_size)
        schedules.setdefault(task, set()).add(training_args.schedule)
        if "adaptive_sequence" in run.name:
            assert training_args.adaptive_metric == "sequence", run.name
        if "mixture" in run.name:
            assert training_args.length_hint and "hint=0" in training_args.eval_modes, run.name
        if task == "cyclic7":
            assert script_args.task_args["kind"] == "cyclic", run.name
    assert budgets == {"parity4": {153_600}, "counter7": {192_000}, "cyclic7": {192_000}}
    assert schedules["parity4"] == {"stepwise", "staged", "log_icot", "mixture", "adaptive", "no_cot"}


def _cyclic7_sweep(folder: Path, curricula: list[str]) -> None:
    runs = "".join(f"  - {{name: cyclic7_{name}, args: [], seeds: [0, 1, 2]}}\n" for name in curricula)
    (folder / "runs.yaml").write_text(
        "study: league\ncommand: [python]\noutput_root: outputs/league\ndone_file: eval_results.json\nruns:\n" + runs
    )


@pytest.mark.parametrize(
    ("stepwise40_final", "unrun", "l1", "l2"),
    [
        (0.14, [], "inconclusive", "disagree"),  # every seed 0 at chance: seeds 1-2 cannot lift a mean to 0.90
        (0.75, [], "inconclusive", "pending"),  # (0.75 + 1 + 1) / 3 = 0.917: seeds 1-2 could still reach 0.90
        # a curriculum of the sweep not run yet could score anything: L2 waits; L1 compares only the paces, and
        # one side (here both) already has no pace whose every seed can reach 90%
        (0.14, ["staged_left"], "inconclusive", "pending"),
        (0.14, ["stepwise80", "adaptive_sequence"], "pending", "pending"),  # both sides could still reach it
    ],
)
def test_seed_zero_settles_what_the_other_seeds_cannot_change(tmp_path, stepwise40_final, unrun, l1, l2):
    curricula = ["stepwise40", "adaptive_answer", "e2e"]
    for name in curricula:
        final = stepwise40_final if name == "stepwise40" else 0.14
        _write(tmp_path / "runs", f"cyclic7_{name}", 0, [0.14] * 11 + [final], final, gone_step=400)
    _cyclic7_sweep(tmp_path, curricula + unrun)
    ledger = tmp_path / "claims.csv"
    ledger.write_text((REPO / "results/curricula/claims.csv").read_text())
    make_results.main(["--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--ledger", str(ledger)])
    verdicts = {row["id"]: row for row in read_ledger(ledger)}
    assert (verdicts["L1-cyclic7"]["verdict"], verdicts["L2-cyclic7"]["verdict"]) == (l1, l2)
    if l2 == "disagree":
        assert (
            "no curriculum can reach a mean of 0.90 over 3 seeds (the highest still possible: 0.713)"
            in (verdicts["L2-cyclic7"]["ours"])
        )
        assert "settled before every seed" in verdicts["L1-cyclic7"]["ours"]
