"""The rules of results/methods/claims.csv as code (:mod:`hf_icot.studies.rules`): M0 on each task (the league's
premise, :func:`hf_icot.studies.league.premise_rule`) and M1-M3 (one method not worse than another by more than 5
points: :func:`hf_icot.studies.rules.non_inferiority` of d, the first's mean minus the second's).

M0 was registered on 2026-12-05 without a branch for end to end solving the task too; that branch (disagree when the
gap's interval lies below 0.30) was added on 2026-12-07 (issue 54), the league's premise as curricula's L2 reads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hf_icot.studies import league
from hf_icot.studies.rules import Cut, Decision, RuleBook, decided, non_inferiority
from hf_icot.studies.statistics import difference

#: M1-M3: d's interval against -MARGIN
MARGIN = 0.05

RULES = RuleBook("methods")
RULES.rule("M0-parity4", "M0-counter7", cases=league.PREMISE_CASES)(league.premise_rule)


def _d(first: list[float], second: list[float]) -> dict[str, Any]:
    return {"d": difference(first, second), "what": "d = first - second"}


@RULES.rule(
    "M1-coconut-stepwise", "M2-codi-coconut", "M3-codi-fullcot", "M1-counter7", "M2-counter7", "M3-counter7",
    cases={"agree": _d([1.0, 0.99, 1.0], [0.99, 1.0, 0.98]), "disagree": _d([0.6, 0.65, 0.62], [1.0, 0.99, 1.0]),
           "inconclusive": [_d([1.0, 1.0, 0.0], [1.0, 0.99, 1.0]), _d([1.0], [0.9])]},
)  # fmt: skip
def not_worse(figures: Mapping[str, Any]) -> Decision:
    """d (Welch's Summary of the first method's final scores minus the second's, ``what`` naming it): agree if its
    interval's lower bound >= -0.05, disagree if its upper bound < -0.05, else inconclusive (no interval)."""
    d = figures["d"]
    cuts = () if d.low is None else (Cut.of(figures["what"], d, -MARGIN),)
    return decided(non_inferiority(d, MARGIN), *cuts)
