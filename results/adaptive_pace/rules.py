"""The rules of results/adaptive_pace/claims.csv as code (:mod:`hf_icot.studies.rules`). Both were re-registered on
2026-12-07 (issue 54) on the runs already in, each with the branches its first words lacked (the ledger's history
keeps them): P1 read 'best fixed / best adaptive >= 2' with no branch to disagree or to be inconclusive, P2 'test
implicit EM >= 0.90, end to end <= 0.10' with none to disagree, and read 'disagree' on one seed of one setting.

* P1 is the league's pace ratio (:func:`hf_icot.studies.league.pace_ratio_rule`, curricula's L1) on each task; the
  claim's verdict is the one both tasks give, else inconclusive.
* P2 is mult_cpu's M1 in its first set-up: agree when one setting reaches 0.90 on each of >= 3 seeds with end to
  end <= 0.10; disagree when the best setting's 95% interval over >= 3 seeds lies below 0.90; else inconclusive.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hf_icot.studies import league
from hf_icot.studies.rules import Cut, Decision, Estimate, RuleBook, decided
from hf_icot.studies.statistics import summarize

BAR, E2E_CEILING = 0.90, 0.10

RULES = RuleBook("adaptive_pace")


def _tasks(*ratios: Estimate | None) -> dict[str, Any]:
    return {"ratios": dict(zip(("mult", "parity"), ratios))}


@RULES.rule(
    "P1",
    cases={"agree": _tasks(Estimate(2.5, 1.8, 3.2, 0.36), Estimate(3.0, 2.2, 3.8, 0.4)),
           "disagree": _tasks(Estimate(1.0, 0.9, 1.1, 0.05), Estimate(1.1, 0.95, 1.2, 0.06)),
           "inconclusive": [_tasks(None, None), _tasks(Estimate(2.5, 1.8, 3.2, 0.36), Estimate(1.0, 0.9, 1.1, 0.05))]},
)  # fmt: skip
def pace_ratio(figures: Mapping[str, Any]) -> Decision:
    """``ratios``: per task, best fixed / best adaptive examples to 90% (an Estimate; None: no ratio), each read by
    the league's pace-ratio rule; the verdict both tasks give, else inconclusive."""
    decisions = [league.pace_ratio_rule({"ratio": ratio}) for ratio in figures["ratios"].values()]
    verdicts = {decision.verdict for decision in decisions}
    cuts = [cut for decision in decisions for cut in decision.cuts]
    return decided(verdicts.pop() if len(verdicts) == 1 else "inconclusive", *cuts)


def _settings(best: list[float], e2e: list[float]) -> dict[str, Any]:
    return {"settings": {"fixed": best, "adaptive": [0.1] * len(best)}, "e2e": e2e}


@RULES.rule(
    "P2",
    cases={"agree": _settings([0.95, 0.97, 0.92], [0.0, 0.01, 0.0]),
           "disagree": _settings([0.14, 0.12, 0.2], [0.0, 0.01, 0.0]),
           "inconclusive": [_settings([0.139], [0.001]), _settings([0.95, 0.6, 0.99], [0.0, 0.01, 0.0])]},
)  # fmt: skip
def internalized(figures: Mapping[str, Any]) -> Decision:
    """``settings``: per setting of 3x3 multiplication, its test implicit EM per seed; ``e2e``: end to end's. Agree if
    one setting has >= 3 seeds all >= 0.90 with end to end <= 0.10 on each; disagree if the best setting (by mean)
    has >= 3 seeds and its 95% t-interval lies below 0.90; else inconclusive (one seed: nothing said of a setting)."""
    settings, e2e = figures["settings"], figures["e2e"]
    if any(len(s) >= 3 and min(s) >= BAR for s in settings.values()) and e2e and max(e2e) <= E2E_CEILING:
        return decided("agree")
    best = summarize(max(settings.values(), key=lambda scores: sum(scores) / len(scores)))
    cut = Cut.of("the best setting's mean", best, BAR)
    return decided("disagree" if best.n >= 3 and best.high < BAR else "inconclusive", cut)
