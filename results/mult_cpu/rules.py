"""The rules of results/mult_cpu/claims.csv as code (:mod:`hf_icot.studies.rules`): M1 (3x3 multiplication
internalized on this CPU while end to end stays near 0) and M2 (4x4 internalized within an hour here), both
registered on 2026-12-02 (issue 22 part 2) before their runs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hf_icot.studies.rules import Cut, Decision, RuleBook, decided
from hf_icot.studies.statistics import summarize

#: M1: every seed of one setting at or above BAR with end to end at or below E2E_CEILING agrees; the best setting's
#: mean below FLOOR disagrees
M1_BAR, M1_E2E_CEILING, M1_FLOOR = 0.90, 0.10, 0.50
#: M2: implicit exact match after an hour's training
M2_BAR = 0.90

RULES = RuleBook("mult_cpu")


def _m1(scores: list[float], e2e: list[float] | None) -> dict[str, Any]:
    return {"scores": scores, "best": summarize(scores), "e2e": e2e}


@RULES.rule(
    "M1",
    cases={"agree": _m1([0.97, 0.99, 0.95], [0.01, 0.0, 0.02]), "disagree": _m1([0.2, 0.4, 0.3], [0.01, 0.0, 0.02]),
           "inconclusive": [_m1([0.97, 0.58, 0.6], [0.01, 0.0, 0.02]), _m1([0.97, 0.99, 0.95], [0.3, 0.2, 0.25]),
                            _m1([0.989, 0.575], [0.0])]},
)  # fmt: skip
def m1(figures: Mapping[str, Any]) -> Decision:
    """``scores``: the best 3x3 setting's final test implicit EM per seed (``best``: their Summary), ``e2e``: end to
    end's at the same budget (None: not run). Agree if >= 3 seeds all >= 0.90 with end to end <= 0.10 on every seed;
    disagree if over >= 3 seeds the best setting's mean < 0.50; else inconclusive (also with fewer than 3 seeds,
    once the seeds to come cannot change it: the analysis holds it pending until then)."""
    scores, e2e, best = figures["scores"], figures["e2e"], figures["best"]
    floor = Cut.of("the best setting's mean", best, M1_FLOOR)
    if len(scores) >= 3 and min(scores) >= M1_BAR and e2e is not None and max(e2e) <= M1_E2E_CEILING:
        return decided("agree", floor)
    return decided("disagree" if len(scores) >= 3 and best.mean < M1_FLOOR else "inconclusive", floor)


@RULES.rule(
    "M2",
    cases={"agree": {"scores": [0.95, 0.97, 0.92]}, "disagree": {"scores": [0.0]},
           "inconclusive": [{"scores": [0.95, 0.5, 0.97]}, {"scores": [0.95]}]},
)  # fmt: skip
def m2(figures: Mapping[str, Any]) -> Decision:
    """``scores``: test implicit EM of each 4x4 run trained for a quiet hour's steps. Disagree if every run is below
    0.90 at the hour; agree if >= 3 runs all reach 0.90; else inconclusive (the analysis holds fewer than 3 runs
    pending)."""
    scores = figures["scores"]
    if max(scores) < M2_BAR:
        return decided("disagree")
    return decided("agree" if len(scores) >= 3 and min(scores) >= M2_BAR else "inconclusive")
