"""recipes/semiautomata.py on a tiny GPT-2 and the counter C_3 over 8 symbols, a few steps per regime: the curricula
remove the states they should at each stage, every split is scored in every mode, the run folder holds the model size
(within 5% of the budget), the stage metrics and the probe map; bad automata, splits and budgets are one sentence."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
import torch

from hf_icot.studies.claims import read_ledger, write_ledger
from recipes import semiautomata
from results.semiautomata import make_results
from tests.recipes.conftest import REPO

T = 8
TASK_ARGS = {"kind": "counter", "modulus": 3, "length": T, "train_size": 96, "test_size": 24, "ood_size": 24}
SPLITS = ("test", "test_ood_p0_1", "test_ood_p0_9")
MODEL = {"depth": 2, "param_budget": 20_000, "n_head": 2, "n_positions": 24}


def _written(out: Path) -> str:
    """What make_results wrote for a reader: README.md (the current rounds) and HISTORY.md (the superseded ones)."""
    return (out / "README.md").read_text() + (out / "HISTORY.md").read_text()


def run(output_dir: Path, *extra: str, task_args: dict | None = None, model: dict | None = None) -> dict:
    argv = [
        "--task", "semiautomaton", "--task_args", json.dumps(task_args or TASK_ARGS),
        "--scratch_model", json.dumps(model or MODEL),
        "--output_dir", str(output_dir),
        "--max_steps", "8", "--per_device_train_batch_size", "16", "--per_device_eval_batch_size", "24",
        "--learning_rate", "1e-3", "--logging_steps", "1", "--save_strategy", "no", "--eval_strategy", "no",
        "--keep_stage_checkpoints", "false", "--report_to", "none", "--use_cpu", "--seed", "0",
        *extra,
    ]  # fmt: skip
    torch.set_num_threads(1)
    return semiautomata.main(*semiautomata.parse_args(argv))


def _json(folder: Path, name: str):
    return json.loads((folder / name).read_text())


def _removed_per_step(folder: Path) -> dict[int, float]:
    """Optimizer step -> the CoT units removed then, from the training log (logged every step)."""
    return {
        e["step"]: e["cot/removed_tokens"] for e in _json(folder, "training_log.json") if "cot/removed_tokens" in e
    }


STAGED = ["--schedule", "staged", "--stage_unit", "steps", "--stage_length", "2", "--steps_per_stage", "2"]
STAGE_EVAL = ["--evaluate_each_stage", "true", "--eval_modes", "implicit", "explicit"]


@pytest.mark.parametrize(
    ("regime", "extra", "modes"),
    [
        pytest.param("no_cot", ["--schedule", "no_cot"], ["implicit", "explicit"], id="no_cot"),
        pytest.param("full_cot", ["--schedule", "full_cot"], ["implicit", "explicit"], id="full_cot"),
        pytest.param("left", [*STAGED, "--removal_side", "left", *STAGE_EVAL], ["implicit", "explicit"], id="left"),
        pytest.param("right", [*STAGED, "--removal_side", "right"], ["implicit", "explicit"], id="right"),
        pytest.param("inductive", [*STAGED, "--removal_side", "inductive"], ["implicit", "explicit"], id="inductive"),
        pytest.param(
            "mixture",
            [
                "--schedule",
                "mixture",
                "--removal_unit",
                "step",
                "--length_hint",
                "true",
                "--eval_modes",
                "hint=0",
                f"hint={T}",
            ],
            ["implicit", "explicit", "hint=0", f"hint={T}"],
            id="mixture",
        ),
    ],  # fmt: skip
)
def test_each_regime_scores_every_split_in_every_mode(tmp_path: Path, regime: str, extra: list, modes: list) -> None:
    out = tmp_path / regime
    metrics = run(out, *extra)
    written = _json(out, "eval_results.json")
    for split in SPLITS:
        for mode in modes:
            assert 0.0 <= metrics[f"{split}/{mode}/answer_em"] <= 1.0
            assert f"{split}/{mode}/answer_em" in written
    size = _json(out, "model_size.json")
    assert size["n_layer"] == 2 and abs(size["parameters"] - 20_000) <= 1_000
    assert size["parameters"] == sum(p.numel() for p in _loaded_model(out).parameters())
    probes = _json(out, "probes.json")
    assert probes["layers"] == [0, 1, 2] and probes["steps"] == list(range(1, T + 1))
    assert len(probes["accuracy"]) == len(probes["accuracy_at_init"]) == 3
    assert set(_json(out, "splits.json")) == set(SPLITS)
    removed = _removed_per_step(out)
    if regime == "no_cot":
        assert set(removed.values()) == {float("inf")} or all(v >= T for v in removed.values())
    if regime == "full_cot":
        assert set(removed.values()) == {0}
    if regime == "inductive":  # stage 1 keeps every 3rd state: 8 - 3 = 5 removed
        assert [removed[step] for step in range(1, 5)] == [0, 0, 2, 2]
    assert _json(out, "schedule.json")["name"] == {"left": "staged", "right": "staged", "inductive": "staged"}.get(
        regime, regime
    )


def _loaded_model(folder: Path):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(folder)


@pytest.mark.parametrize("side", ["left", "right"])
def test_curricula_remove_two_states_per_stage_and_record_each_stage(tmp_path: Path, side: str) -> None:
    out = tmp_path / side
    run(out, *STAGED, "--removal_side", side, *STAGE_EVAL, "--max_steps", "10")
    removed = _removed_per_step(out)
    # 2 steps per stage, 2 states per stage: steps 1-2 remove 0, 3-4 remove 2, ..., 9-10 the whole CoT (8 states).
    assert [removed[step] for step in range(1, 9)] == [0, 0, 2, 2, 4, 4, 6, 6]
    assert all(removed[step] >= T for step in (9, 10))
    stages = _json(out, "stages.json")
    assert [stage["start_step"] for stage in stages] == [0, 2, 4, 6, 8]
    assert stages[1]["removes"].startswith(f"step:{side}:2:drop") and stages[4]["removes"].startswith("step:all")
    per_stage = _json(out, "stage_metrics.json")
    assert sorted(per_stage) == ["0", "1", "2", "3", "4"]
    for split in SPLITS:
        assert 0.0 <= per_stage["2"][f"eval_{split}/implicit/answer_em"] <= 1.0


@pytest.mark.parametrize(
    ("task_args", "model", "extra", "message"),
    [
        ({**TASK_ARGS, "kind": "s4"}, MODEL, [], "kind='s4' is unknown; allowed: counter, cyclic, s3, table."),
        (TASK_ARGS, MODEL, ["--eval_splits", "test_ood_p0_5"], "--eval_splits names 'test_ood_p0_5', which the"),
        (
            TASK_ARGS,
            {**MODEL, "depth": 25, "param_budget": 1_000},
            [],
            "a parameter budget of 1,000 is too small for depth 25",
        ),
        (TASK_ARGS, {**MODEL, "n_layer": 2}, [], "param_budget sizes a GPT-2 from depth"),
    ],  # fmt: skip
)
def test_bad_automaton_split_or_budget_is_one_sentence(tmp_path, task_args, model, extra, message) -> None:
    with pytest.raises(ValueError, match=re.escape(message)) as caught:
        run(tmp_path / "bad", *extra, task_args=task_args, model=model)
    assert "\n" not in str(caught.value)
    assert not (tmp_path / "bad" / "model.safetensors").exists()


def test_another_task_is_refused(tmp_path: Path) -> None:
    argv = ["--task", "parity", "--scratch_model", "{}", "--output_dir", str(tmp_path / "x"), "--use_cpu"]
    with pytest.raises(ValueError, match="--task 'parity' is not this study's"):
        semiautomata.main(*semiautomata.parse_args(argv))


# ---------------------------------------------------------------------------------------------------------------
# results/semiautomata/make_results.py on a fixture of run outputs


def write_fixture_run(runs: Path, name: str, modulus: int, schedule: dict, depth: int, accuracy: dict) -> None:
    """The records recipes/semiautomata.py leaves, with the given answer accuracy per (split, mode)."""
    folder = runs / name
    folder.mkdir(parents=True)
    splits = ("test", "test_ood_p0_1", "test_ood_p0_9")
    records = {
        "task_args.json": {"kind": "counter", "modulus": modulus, "length": 16},
        "schedule.json": {"seed": 0, **schedule},
        "model_size.json": {"n_layer": depth, "n_embd": 64 if depth == 4 else 32, "parameters": 200_000},
        "training_log.json": [{"step": 10, "loss": 1.0}, {"step": 3000, "loss": 0.1}],
        "wall_time.json": {"wall_s": 100},
        "splits.json": {split: {"examples": 500, "majority_answer_share": 0.2} for split in splits},
        "eval_results.json": {f"{split}/{mode}/answer_em": value for (split, mode), value in accuracy.items()},
        "stages.json": [{"index": i, "start_step": 300 * i, "end_step": 300 * (i + 1)} for i in range(9)],
        "stage_metrics.json": {
            str(i): {f"eval_{s}_{m}/answer_em": 0.5 for s in splits for m in ("implicit", "explicit")}
            for i in range(9)
        },
        "probes.json": {
            "layers": list(range(depth + 1)),
            "steps": list(range(1, 17)),
            "accuracy": [[0.5] * 16] * (depth + 1),
            "accuracy_at_init": [[0.3] * 16] * (depth + 1),
            "majority": [0.2] * 16,
        },
    }
    for file, record in records.items():
        (folder / file).write_text(json.dumps(record))


def _everywhere(value: float, mode: str, ood: float | None = None) -> dict:
    return {
        ("test", mode): value,
        ("test_ood_p0_1", mode): value if ood is None else ood,
        ("test_ood_p0_9", mode): value if ood is None else ood,
    }


def test_make_results_writes_tables_plots_and_verdicts_from_run_folders(tmp_path: Path) -> None:
    runs, out = tmp_path / "runs", tmp_path / "out"
    left = {"name": "staged", "side": "left"}
    write_fixture_run(runs, "cot", 7, {"name": "full_cot"}, 4, _everywhere(1.0, "explicit"))
    write_fixture_run(runs, "e2e", 7, {"name": "no_cot"}, 4, _everywhere(0.2, "implicit"))
    write_fixture_run(runs, "left", 7, left, 4, _everywhere(0.99, "implicit", ood=0.25))
    write_fixture_run(runs, "right", 7, {"name": "staged", "side": "right"}, 4, _everywhere(0.5, "implicit"))
    write_fixture_run(runs, "deep", 7, left, 16, _everywhere(0.6, "implicit"))
    for modulus, value in ((6, 0.99), (10, 0.99), (11, 0.5)):
        write_fixture_run(runs, f"c{modulus}", modulus, left, 4, _everywhere(value, "implicit"))
    mixture = {**_everywhere(0.97, "hint=0", ood=0.3), **_everywhere(1.0, "hint=16")}
    write_fixture_run(runs, "mix", 7, {"name": "mixture"}, 4, mixture)

    make_results.main(["--runs", str(runs), "--out", str(out)])

    rows = (out / "results.csv").read_text().splitlines()
    assert len(rows) == 1 + 9 and rows[0].startswith("run,automaton,T,regime,depth")
    for plot in (
        "id_vs_ood",
        "curriculum_stages",
        "prime_vs_composite",
        "width_vs_depth",
        "end_to_end_vs_T",
        "probes",
    ):
        assert (out / f"{plot}.png").stat().st_size > 10_000, plot
    readme = _written(out)
    verdicts = re.findall(r"\*\*Verdict: ([a-z ()]+)\.\*\*", readme)
    # full CoT perfect; E2E 0.2 vs 1.0; left 0.99 ID vs 0.25 OOD; left 0.99 vs right 0.5; depth 4 0.99 vs 16 0.6;
    # composite 0.99 vs prime (C7 0.99, C11 0.5) 0.745; mixture 0.97 ID, full CoT 1.0 OOD vs left 0.25.
    assert verdicts == ["agree"] * 7
    assert "{" not in readme.split("## All runs")[1].replace("{}", "")  # every placeholder filled
    claim3 = (out / "claim3.csv").read_text()
    assert "C7" in claim3 and "C11" in claim3


def _regime_run(runs: Path, kind: str, length: int, schedule: str, seed: int, value: float) -> None:
    """A second-round regime-sweep record (the harness's ``sweep.json`` names it ``regime_...``)."""
    name = f"regime_{kind}7_t{length}_{schedule}_s{seed}"
    mode = "explicit" if schedule == "full_cot" else "implicit"
    write_fixture_run(runs, name, 7, {"name": schedule}, 4, _everywhere(value, mode))
    folder = runs / name
    (folder / "task_args.json").write_text(json.dumps({"kind": kind, "modulus": 7, "length": length}))
    (folder / "sweep.json").write_text(json.dumps({"run": name, "seed": seed, "status": "ok", "wall_s": 60}))


def test_regime_sweep_table_and_rule_r_choose_the_cheapest_point_where_end_to_end_fails(tmp_path: Path) -> None:
    runs, out = tmp_path / "runs", tmp_path / "out"
    write_fixture_run(runs, "cot", 7, {"name": "full_cot"}, 4, _everywhere(1.0, "explicit"))  # a first-round run
    for seed in range(3):
        for length in (16, 32):  # the counter: the shortcut works at both lengths
            _regime_run(runs, "counter", length, "full_cot", seed, 1.0)
            _regime_run(runs, "counter", length, "no_cot", seed, 0.99)
        _regime_run(runs, "cyclic", 16, "full_cot", seed, 1.0)  # the C7 group: end to end fails from T = 16 on
        _regime_run(runs, "cyclic", 16, "no_cot", seed, 0.30 + 0.01 * seed)
        _regime_run(runs, "cyclic", 32, "full_cot", seed, 0.99)
        _regime_run(runs, "cyclic", 32, "no_cot", seed, 0.20 + 0.01 * seed)
    out.mkdir()
    _the_rules(out)
    make_results.main(["--runs", str(runs), "--out", str(out)])
    ledger = {row["id"]: row for row in csv.DictReader((out / "claims.csv").open())}
    assert ledger["A2"]["verdict"] == "pending" and ledger["A2"]["ours"].endswith("short of 3 seeds at T = 64")
    for seed in range(3):  # the sweep's last length: end to end still far below
        _regime_run(runs, "cyclic", 64, "full_cot", seed, 0.98)
        _regime_run(runs, "cyclic", 64, "no_cot", seed, 0.18 + 0.01 * seed)
    _the_rules(out)

    make_results.main(["--runs", str(runs), "--out", str(out)])

    regime_rows = list(csv.DictReader((out / "regime.csv").open()))
    assert [(row["automaton"], row["T"]) for row in regime_rows] == [
        ("C7", "16"), ("C7 group", "16"), ("C7", "32"), ("C7 group", "32"), ("C7 group", "64")
    ]  # fmt: skip
    assert regime_rows[1]["end to end ID (implicit)"].startswith("0.310 ± ")
    assert len((out / "results.csv").read_text().splitlines()) == 1 + 1  # the first round reads its own run only
    ledger = {row["id"]: row for row in csv.DictReader((out / "claims.csv").open())}
    assert ledger["R"]["verdict"] == "agree" and ledger["R"]["ours"].startswith("C7 group at T = 16")
    assert "within 0.05 of full CoT at: C7 T=16, C7 T=32" in ledger["R"]["ours"]
    assert ledger["A2"]["verdict"] == "agree"  # gap ~0.69 with a tight interval; end to end 0.31, 0.21, 0.19
    assert (out / "regime_vs_T.png").stat().st_size > 10_000
    assert "Chosen regime: C7 group at T = 16." in _written(out)


def _claim_run(
    runs: Path, name: str, seed: int, modulus: int, schedule: dict, depth: int, lr: float, accuracy: dict, probe: float
) -> None:
    """A second-round claim record (``claim_...``) at the cyclic group C_modulus, T = 16."""
    folder_name = f"{name}_s{seed}"
    write_fixture_run(runs, folder_name, modulus, {**schedule, "seed": seed}, depth, accuracy)
    folder = runs / folder_name
    (folder / "task_args.json").write_text(json.dumps({"kind": "cyclic", "modulus": modulus, "length": 16}))
    log = [{"step": 50, "learning_rate": lr / 2}, {"step": 3000, "learning_rate": lr}]
    (folder / "training_log.json").write_text(json.dumps(log))
    probes = json.loads((folder / "probes.json").read_text())
    (folder / "probes.json").write_text(json.dumps({**probes, "accuracy": [[probe] * 16] * (depth + 1)}))
    (folder / "sweep.json").write_text(json.dumps({"run": folder_name, "seed": seed, "status": "ok", "wall_s": 60}))


def _the_rules(out: Path) -> None:
    """The study's ledger as its rules stand before any run: every verdict pending (a claim withdrawn in the real
    ledger is read here like the others)."""
    rows = read_ledger(REPO / "results" / "semiautomata" / "claims.csv")
    write_ledger(out / "claims.csv", [{**row, "verdict": "pending", "ours": "", "why": ""} for row in rows])


def _second_round_fixture(runs: Path, seeds: int = 3) -> None:
    left, mixture = {"name": "staged", "side": "left"}, {"name": "mixture"}
    for s in range(3):
        _regime_run(runs, "cyclic", 16, "full_cot", s, 1.0)
        _regime_run(runs, "cyclic", 16, "no_cot", s, 0.15)
        probes = json.loads((runs / f"regime_cyclic7_t16_no_cot_s{s}" / "probes.json").read_text())
        probes["accuracy"] = [[0.3 + 0.01 * s] * 16] * 5  # end to end: the least decodable, the least robust
        (runs / f"regime_cyclic7_t16_no_cot_s{s}" / "probes.json").write_text(json.dumps(probes))
    for s in range(seeds):
        e = 0.01 * s
        _claim_run(
            runs, "claim_cyclic7_t16_left", s, 7, left, 4, 1e-3, _everywhere(0.97 + e, "implicit", 0.5 + e), 0.6 + e
        )
        _claim_run(runs, "claim_cyclic7_t16_right", s, 7, {"name": "staged", "side": "right"}, 4, 1e-3,
                   _everywhere(0.6 + e, "implicit"), 0.5)  # fmt: skip
        _claim_run(runs, "claim_cyclic7_t16_inductive", s, 7, {"name": "staged", "side": "inductive"}, 4, 1e-3,
                   _everywhere(0.8 + e, "implicit"), 0.5)  # fmt: skip
        mix = {**_everywhere(0.96 + e, "hint=0", 0.6 + e), **_everywhere(1.0, "hint=16", 0.95 - e)}
        _claim_run(runs, "claim_cyclic7_t16_mixture", s, 7, mixture, 4, 1e-3, mix, 0.9 + e)
        for depth, lr, value in ((4, 3e-4, 0.7), (4, 3e-3, 0.9), (16, 3e-4, 0.5), (16, 1e-3, 0.6), (16, 3e-3, 0.65)):
            _claim_run(runs, f"claim_cyclic7_t16_left_d{depth}_lr{lr:g}", s, 7, left, depth, lr,
                       _everywhere(value + e, "implicit"), 0.5)  # fmt: skip
        for modulus, value in ((13, 0.4), (17, 0.45), (14, 0.9), (15, 0.85)):
            _claim_run(runs, f"claim_cyclic{modulus}_t16_left", s, modulus, left, 4, 1e-3,
                       _everywhere(value + e, "implicit"), 0.5)  # fmt: skip


def test_second_round_claims_are_read_at_the_chosen_regime_by_their_rules(tmp_path: Path) -> None:
    runs, out = tmp_path / "runs", tmp_path / "out"
    _second_round_fixture(runs)
    left = {"name": "staged", "side": "left"}  # a pilot at the same point: tabled, read by no rule
    _claim_run(runs, "pilot_cyclic7_t16_left_step1", 0, 7, left, 4, 1e-3, _everywhere(0.10, "implicit"), 0.1)
    out.mkdir()
    _the_rules(out)

    make_results.main(["--runs", str(runs), "--out", str(out)])

    ledger = {row["id"]: row for row in csv.DictReader((out / "claims.csv").open())}
    assert ledger["R"]["verdict"] == "agree" and ledger["R"]["ours"].startswith("C7 group at T = 16")
    # full CoT 1.0 everywhere; left 0.97-0.99 ID vs 0.50-0.52 OOD; left vs right 0.6; depth 4's best (1e-3, 0.98)
    # vs depth 16's best (3e-3, 0.66); composite 0.85-0.92 vs prime 0.40-0.47; the mixture within 0.01 of the left
    # curriculum without CoT and 0.44 above it on OOD with its full CoT; probes rank end to end < left < mixture as OOD
    assert {claim: ledger[claim]["verdict"] for claim in ("A1", "A3", "A4", "A5", "A6", "A7", "A8")} == dict.fromkeys(
        ("A1", "A3", "A4", "A5", "A6", "A7", "A8"), "agree"
    )
    assert "depth 4 best at lr 0.001" in ledger["A5"]["ours"] and "depth 16 best at lr 0.003" in ledger["A5"]["ours"]
    assert ledger["A8"]["ours"].endswith("Spearman rho 0.983 (p = 1.99e-06) over 9 runs")  # end to end ties on OOD
    rows = list(csv.DictReader((out / "second_round.csv").open()))
    assert rows[0]["group"] == "full CoT" and rows[0]["ID"] == "1.000 ± 0.000 (n=3)"
    assert not (out / "results.csv").exists()  # no first-round run: the claim runs stay out of its table
    for plot in ("second_round_claims", "second_round_probes"):
        assert (out / f"{plot}.png").stat().st_size > 20_000, plot
    readme = _written(out)
    assert "* **A6: agree** — the groups C13, C14, C15, C17 at T = 16: composite (C14, C15) ID 0.885" in readme
    assert "| A6 | A6 | other | prime orders (C13, C17) are harder" in readme, "the verdict table, from the ledger"
    assert "left curriculum implicit ID 0.980 ± " in ledger["A3"]["ours"]  # the pilot's 0.10 is not in it
    assert [row["run"] for row in csv.DictReader((out / "pilots.csv").open())] == ["pilot_cyclic7_t16_left_step1_s0"]


def test_a_withdrawn_claim_stays_withdrawn_in_the_ledger_and_the_readme(tmp_path: Path) -> None:
    runs, out = tmp_path / "runs", tmp_path / "out"
    _second_round_fixture(runs)
    out.mkdir()
    _the_rules(out)
    rows = read_ledger(out / "claims.csv")
    why = "its runs' fill drop loses the CoT at the first removal"
    write_ledger(out / "claims.csv", [{**row, "verdict": "withdrawn", "why": why} if row["id"] == "A5" else row
                                      for row in rows])  # fmt: skip

    make_results.main(["--runs", str(runs), "--out", str(out)])

    ledger = {row["id"]: row for row in read_ledger(out / "claims.csv")}
    assert (ledger["A5"]["verdict"], ledger["A5"]["why"], ledger["A5"]["ours"]) == ("withdrawn", why, "")
    assert ledger["A4"]["verdict"] == "agree"  # the others are read as before
    readme = _written(out)
    assert f"* **A5: withdrawn** — {why}" in readme and "* **A4: agree** — " in readme


def test_a_second_round_claim_short_of_three_seeds_is_pending_with_its_figures(tmp_path: Path) -> None:
    runs, out = tmp_path / "runs", tmp_path / "out"
    _second_round_fixture(runs, seeds=2)
    out.mkdir()
    _the_rules(out)

    make_results.main(["--runs", str(runs), "--out", str(out)])

    ledger = {row["id"]: row for row in csv.DictReader((out / "claims.csv").open())}
    assert ledger["A1"]["verdict"] == "agree"  # the regime sweep's own runs have their 3 seeds
    for claim in ("A3", "A4", "A5", "A6", "A7", "A8"):
        assert ledger[claim]["verdict"] == "pending", claim
    assert "short of 3 seeds: left curriculum (2 seeds)" in ledger["A3"]["ours"]
    assert "left curriculum implicit ID 0.975 ± " in ledger["A3"]["ours"]


def test_rule_r_waits_while_a_cheaper_point_is_short_of_seeds(tmp_path: Path) -> None:
    runs, out = tmp_path / "runs", tmp_path / "out"
    for seed in range(3):
        _regime_run(runs, "counter", 16, "full_cot", seed, 1.0)
        _regime_run(runs, "cyclic", 16, "full_cot", seed, 1.0)
        _regime_run(runs, "cyclic", 16, "no_cot", seed, 0.15)
    _regime_run(runs, "counter", 16, "no_cot", 0, 0.30)  # one seed: the counter might still be the cheapest choice
    out.mkdir()
    _the_rules(out)

    make_results.main(["--runs", str(runs), "--out", str(out)])

    ledger = {row["id"]: row for row in csv.DictReader((out / "claims.csv").open())}
    assert ledger["R"]["verdict"] == "pending" and "short of 3 seeds: C7 T=16" in ledger["R"]["ours"]
    assert ledger["A1"]["verdict"] == "pending"  # no claim is read before the regime is chosen
