"""results/semiautomata: rules R and R2 (semiautomata_regime.py) and A5-counter's learning-rate screen (semiautomata_claims.py) on
figures known by design."""

from __future__ import annotations

from pathlib import Path

from hf_icot.studies.statistics import difference, summarize
from results.semiautomata import choose_t64_rates, semiautomata_claims, semiautomata_regime

REPO = Path(__file__).resolve().parents[2]


def _point(automaton: str, length: int, cot: list[float], e2e: list[float]) -> dict:
    """A point of the regime table as ``points`` builds it: full CoT and end to end ID over seeds, and their gap."""
    return {"automaton": automaton, "T": length, "cot_seeds": len(cot), "e2e_seeds": len(e2e),
            "cot_id": summarize(cot), "e2e_id": summarize(e2e), "gap": difference(cot, e2e)}  # fmt: skip


def _table(counter_t32_e2e: list[float]) -> list[dict]:
    """Cheapest first, as ``points`` orders them: R's point is the C7 group at T = 16, R2's the counter at T = 32."""
    return [
        _point("C7", 16, [1.0, 1.0, 1.0], [1.0, 0.99, 1.0]),
        _point("C7 group", 16, [1.0, 1.0, 1.0], [0.15, 0.14, 0.16]),
        _point("C7", 32, [1.0, 1.0, 1.0], counter_t32_e2e),
        _point("C7 group", 64, [0.17, 0.16, 0.18], [0.15, 0.16, 0.15]),
    ]


def test_r2_is_the_counter_at_t32_when_it_meets_r_bars():
    found = _table([0.15, 0.2, 0.12])
    assert semiautomata_regime.chosen(found)["automaton"] == "C7 group"
    assert (semiautomata_regime.second(found)["automaton"], semiautomata_regime.second(found)["T"]) == ("C7", 32)
    verdict = semiautomata_regime.verdict_r2(found)
    assert verdict["verdict"] == "agree" and verdict["seeds"] == 6
    assert verdict["ours"].startswith("C7 at T = 32: full CoT 1.000")


def test_r2_disagrees_when_end_to_end_is_close_to_full_cot_there():
    found = _table([0.9, 0.95, 0.92])
    assert semiautomata_regime.second(found) is None
    assert semiautomata_regime.verdict_r2(found)["verdict"] == "disagree"


def test_r2_is_pending_while_its_point_is_short_of_seeds():
    found = _table([0.15, 0.2])  # two seeds of end to end
    assert semiautomata_regime.second(found) is None
    assert semiautomata_regime.verdict_r2(found) == {
        "verdict": "pending",
        "seeds": 5,
        "ours": "C7 at T = 32: short of 3 seeds per regime",
    }


def test_a_shared_failure_is_reported_as_a_floor_not_a_working_shortcut():
    ours = semiautomata_regime.verdict_r(_table([0.15, 0.2, 0.12]))["ours"]
    assert ours.endswith("end to end within 0.05 of full CoT at: C7 T=16, C7 group T=64 (a floor: both fail)")


def _left(depth: int, lr: float, seed: int, test: float) -> dict:
    """A left-curriculum run at the counter C7, T = 32, as ``load_run`` describes it."""
    return {"automaton": "C7", "T": 32, "regime": "left curriculum", "mode": "implicit", "depth": depth, "lr": lr,
            "seed": seed, "metrics": {"test/implicit/answer_em": test}, "splits": {}}  # fmt: skip


def test_a5_counter_chooses_each_shapes_rate_on_seed_0_and_needs_three_seeds_only_there():
    point = {"automaton": "C7", "T": 32}
    screen = {(4, 3e-4): 0.5, (4, 1e-3): 0.9, (4, 3e-3): 0.7, (16, 3e-4): 0.2, (16, 1e-3): 0.3, (16, 3e-3): 0.6}
    runs = [_left(depth, lr, 0, test) for (depth, lr), test in screen.items()]
    pending = semiautomata_claims.a5(semiautomata_claims.groups_at(runs[:-1], [], point), screen_seed=0)
    assert pending["verdict"] == "pending" and pending["ours"].startswith("no seed-0 run yet at: depth 16, lr 0.003")
    runs += [_left(4, 1e-3, seed, test) for seed, test in ((1, 0.95), (2, 0.92))]
    short = semiautomata_claims.a5(semiautomata_claims.groups_at(runs, [], point), screen_seed=0)
    assert short["verdict"] == "pending" and short["ours"].endswith("short of 3 seeds: depth 16, lr 0.003 (1 seeds)")
    runs += [_left(16, 3e-3, seed, test) for seed, test in ((1, 0.55), (2, 0.62))]
    decided = semiautomata_claims.a5(semiautomata_claims.groups_at(runs, [], point), screen_seed=0)
    assert decided["verdict"] == "agree" and decided["seeds"] == 6
    assert "depth 4 best at lr 0.001" in decided["ours"] and "depth 16 best at lr 0.003" in decided["ours"]
    # Over every seed of the grid (A5's own rule) the unscreened rates still lack seeds.
    assert semiautomata_claims.a5(semiautomata_claims.groups_at(runs, [], point))["verdict"] == "pending"


def test_the_t64_screen_adds_seeds_to_each_shapes_chosen_rate_alone(tmp_path, capsys):
    """choose_t64_rates.py on the committed runs.yaml: depth 16's best seed-0 rate (3e-3) and depth 4's tie (1e-3 and
    3e-3 at 0.99: the first of the grid, 1e-3, which already has its seeds) get seeds 1-2; nothing else changes."""
    import json
    import shutil

    from hf_icot.studies.sweep import load_sweep

    shutil.copy(REPO / "results/semiautomata/runs.yaml", tmp_path / "runs.yaml")
    scores = {16: {"3e-4": 0.5, "1e-3": 0.7, "3e-3": 0.8}, 4: {"3e-4": 0.9, "1e-3": 0.99, "3e-3": 0.99}}
    for depth, by_rate in scores.items():
        for rate, score in by_rate.items():
            folder = tmp_path / "runs" / f"claim_counter7_t64_left_d{depth}_lr{rate}_s0"
            folder.mkdir(parents=True)
            (folder / "eval_results.json").write_text(json.dumps({"test/implicit/answer_em": score}))
    before = {run.name for run in load_sweep(tmp_path).runs}
    patterns = choose_t64_rates.main([str(tmp_path)])
    assert patterns == ["claim_counter7_t64_left_d16_lr3e-3_s[12]", "claim_counter7_t64_left_d4_lr1e-3_s[12]"]
    added = {run.name for run in load_sweep(tmp_path).runs} - before
    assert added == {"claim_counter7_t64_left_d16_lr3e-3_s1", "claim_counter7_t64_left_d16_lr3e-3_s2"}
    assert "3e-4 0.500, 1e-3 0.700, 3e-3 0.800" in (tmp_path / "runs.yaml").read_text()
    assert "depth 4: the screen" not in capsys.readouterr().err


def test_the_t64_screen_chooses_nothing_for_a_shape_short_of_its_three_runs(tmp_path, capsys):
    (tmp_path / "runs.yaml").write_text((REPO / "results/semiautomata/runs.yaml").read_text())
    folder = tmp_path / "runs/claim_counter7_t64_left_d16_lr3e-4_s0"
    folder.mkdir(parents=True)
    (folder / "eval_results.json").write_text('{"test/implicit/answer_em": 0.9}')
    assert choose_t64_rates.main([str(tmp_path)]) == []
    assert "depth 16: the screen is not all recorded; no choice" in capsys.readouterr().err
    assert (tmp_path / "runs.yaml").read_text() == (REPO / "results/semiautomata/runs.yaml").read_text()


def _run(mode: str, seed: int, test: float, ood: float, full: float | None = None) -> dict:
    """A run at the counter C7, T = 32 with one OOD split; ``full``: the mixture's OOD read with its whole CoT."""
    metrics = {f"test/{mode}/answer_em": test, f"test_ood_p0_1/{mode}/answer_em": ood}
    if full is not None:
        metrics["test_ood_p0_1/hint=32/answer_em"] = full
    return {"mode": mode, "seed": seed, "metrics": metrics, "splits": {"test_ood_p0_1": {}}}


def test_a7_disagrees_only_on_an_interval_beyond_its_margin_as_it_agrees_on_one():
    left = [_run("implicit", s, 0.99 + 0.003 * s, 0.08) for s in range(3)]
    # the mixture 0.17 behind without CoT, its interval across -0.10 (as A7-counter's -0.168 ± 0.088): no verdict
    straddles = [_run("hint=0", s, v, 0.1, 0.75) for s, v in enumerate((0.74, 0.83, 0.92))]
    groups = {"left curriculum": left, "mixture (hints)": straddles}
    assert semiautomata_claims.a7(groups, 32)["verdict"] == "inconclusive"
    beyond = [_run("hint=0", s, v, 0.1, 0.75) for s, v in enumerate((0.70, 0.71, 0.72))]  # wholly below -0.10
    assert semiautomata_claims.a7({**groups, "mixture (hints)": beyond}, 32)["verdict"] == "disagree"


def test_a1_flags_a_worst_split_within_one_standard_error_of_its_cut():
    cot = [_run("explicit", s, 1.0, v) for s, v in enumerate((0.61, 0.91, 0.907))]  # mean 0.809, as A1-counter64
    found = semiautomata_claims.a1({"full CoT": cot})
    assert found["verdict"] == "inconclusive" and found["flag"].startswith("knife-edge: full CoT's test_ood_p0_1")
    firm = [_run("explicit", s, 1.0, v) for s, v in enumerate((0.99, 1.0, 0.995))]
    assert semiautomata_claims.a1({"full CoT": firm}) == {
        **semiautomata_claims.a1({"full CoT": firm}),
        "verdict": "agree",
        "flag": "",
    }
