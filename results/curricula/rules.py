"""The rules of results/curricula/claims.csv as code (:mod:`hf_icot.studies.rules`): L1 (the best fixed pace against
the best adaptive one) and L2 (the table's premise) on each task, both the league's own rules
(:func:`hf_icot.studies.league.pace_ratio_rule`, :func:`hf_icot.studies.league.premise_rule`).

L2 was registered on 2026-12-01 (issue 22) without a branch for its premise failing the other way, end to end solving
the task too; that branch (disagree when the gap's interval lies below 0.30) was added on 2026-12-07 (issue 54) after
L2-counter7 read inconclusive with end to end at 0.999 (the ledger's history keeps the old word).
"""

from __future__ import annotations

from hf_icot.studies import league
from hf_icot.studies.rules import RuleBook

RULES = RuleBook("curricula")
RULES.rule("L1-parity4", "L1-counter7", "L1-cyclic7", cases=league.PACE_RATIO_CASES)(league.pace_ratio_rule)
RULES.rule("L2-parity4", "L2-counter7", "L2-cyclic7", cases=league.PREMISE_CASES)(league.premise_rule)
