"""results/semiautomata/semiautomata_regime.py: rules R and R2 on regime points whose figures are known by design."""

from __future__ import annotations

from pathlib import Path

from hf_icot.studies.statistics import difference, summarize
from tests.recipes.conftest import load_script

REPO = Path(__file__).resolve().parents[2]


def _regime():
    return load_script(REPO / "results/semiautomata/semiautomata_regime.py", "semiautomata_regime_analysis")


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
    regime = _regime()
    found = _table([0.15, 0.2, 0.12])
    assert regime.chosen(found)["automaton"] == "C7 group"
    assert (regime.second(found)["automaton"], regime.second(found)["T"]) == ("C7", 32)
    verdict = regime.verdict_r2(found)
    assert verdict["verdict"] == "agree" and verdict["seeds"] == 6
    assert verdict["ours"].startswith("C7 at T = 32: full CoT 1.000")


def test_r2_disagrees_when_end_to_end_is_close_to_full_cot_there():
    regime = _regime()
    found = _table([0.9, 0.95, 0.92])
    assert regime.second(found) is None
    assert regime.verdict_r2(found)["verdict"] == "disagree"


def test_r2_is_pending_while_its_point_is_short_of_seeds():
    regime = _regime()
    found = _table([0.15, 0.2])  # two seeds of end to end
    assert regime.second(found) is None
    assert regime.verdict_r2(found) == {
        "verdict": "pending",
        "seeds": 5,
        "ours": "C7 at T = 32: short of 3 seeds per regime",
    }


def test_a_shared_failure_is_reported_as_a_floor_not_a_working_shortcut():
    regime = _regime()
    ours = regime.verdict_r(_table([0.15, 0.2, 0.12]))["ours"]
    assert ours.endswith("end to end within 0.05 of full CoT at: C7 T=16, C7 group T=64 (a floor: both fail)")
