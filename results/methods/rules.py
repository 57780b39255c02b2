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

#: M4: a seed stays at the plateau when its final score and at least this share of its late evaluations (the second
#: half of its curve) are >= the league's 90% bar
PLATEAU_SHARE = 0.8

RULES = RuleBook("methods")
RULES.rule("M0-parity4", "M0-counter7", cases=league.PREMISE_CASES)(league.premise_rule)
PUBLISHED = [f"M{n}-published-{task}" for n in (1, 2, 3) for task in ("parity4", "counter7")]
#: SIM-CoT's and PCCoT's accuracy rows (issue 53), read as M1-M3 are
FRONTIER = [f"{claim}-{task}" for claim in ("S1", "S2", "P1") for task in ("parity4", "counter7")]
#: P2: PCCoT's training step against Coconut's, r = Coconut's seconds per step / PCCoT's in each quiet run
CHEAPER, DEARER = 1.1, 0.9


def _d(first: list[float], second: list[float]) -> dict[str, Any]:
    return {"d": difference(first, second), "what": "d = first - second"}


@RULES.rule(
    "M1-coconut-stepwise", "M2-codi-coconut", "M3-codi-fullcot", "M1-counter7", "M2-counter7", "M3-counter7",
    *PUBLISHED, *FRONTIER,
    cases={"agree": _d([1.0, 0.99, 1.0], [0.99, 1.0, 0.98]), "disagree": _d([0.6, 0.65, 0.62], [1.0, 0.99, 1.0]),
           "inconclusive": [_d([1.0, 1.0, 0.0], [1.0, 0.99, 1.0]), _d([1.0], [0.9])]},
)  # fmt: skip
def not_worse(figures: Mapping[str, Any]) -> Decision:
    """d (Welch's Summary of the first method's final scores minus the second's, ``what`` naming it): agree if its
    interval's lower bound >= -0.05, disagree if its upper bound < -0.05, else inconclusive (no interval)."""
    d = figures["d"]
    cuts = () if d.low is None else (Cut.of(figures["what"], d, -MARGIN),)
    return decided(non_inferiority(d, MARGIN), *cuts)


@RULES.rule(
    "M4-parity4", "M4-counter7",
    cases={"agree": {"stable": 5, "seeds": 5}, "disagree": {"stable": 1, "seeds": 5},
           "inconclusive": [{"stable": 3, "seeds": 5}, {"stable": 3, "seeds": 3}]},
)  # fmt: skip
def stays_at_plateau(figures: Mapping[str, Any]) -> Decision:
    """M4 (registered 2026-12-07, issue 51, before its runs): CODI at its scripts' settings does not collapse. Over 5
    seeds, ``stable`` of them stay at the plateau (final >= 0.9 and >= 80% of the late evaluations >= 0.9): agree at
    4 or 5, disagree at 2 or fewer (it collapses on most seeds, as the defaults did on 2 of 3), inconclusive at 3 or
    with fewer than 5 seeds."""
    stable, seeds = figures["stable"], figures["seeds"]
    if seeds < 5 or stable == 3:
        return decided("inconclusive")
    return decided("agree" if stable >= 4 else "disagree")


@RULES.rule(
    "P2-parity4",
    cases={"agree": {"ratios": [1.6, 1.4, 1.5]}, "disagree": {"ratios": [0.6, 0.7, 0.65]},
           "inconclusive": [{"ratios": [1.2, 0.95, 1.3]}, {"ratios": [1.5, 1.6]}]},
)  # fmt: skip
def cheaper_step(figures: Mapping[str, Any]) -> Decision:
    """P2 (registered 2026-12-07, issue 53, before its runs): PCCoT's training step costs less than Coconut's at the
    same number of thoughts. ``ratios``: Coconut's seconds per training step over PCCoT's, one per quiet run of
    ``bench/bench_latent_cost.py`` at the league's shape: agree when each of 3 runs gives >= 1.1, disagree when each
    gives <= 0.9, else (mixed, within 10% of 1, or fewer than 3 runs) inconclusive."""
    ratios = list(figures["ratios"])
    if len(ratios) < 3:
        return decided("inconclusive")
    low, high = min(ratios), max(ratios)
    cuts = (Cut("the smallest of Coconut's / PCCoT's seconds per step", low, CHEAPER),
            Cut("the largest of Coconut's / PCCoT's seconds per step", high, DEARER))  # fmt: skip
    if low >= CHEAPER:
        return decided("agree", cuts[0])
    return decided("disagree", cuts[1]) if high <= DEARER else decided("inconclusive")


#: The thoughts sweep (issue 53): a drop of more than this from the fewest thoughts to the most (parity4: 3 to 12;
#: counter7: 8 to 16) is a collapse; SIM-CoT helps when it gains at least this much at the most
SWEEP_MARGIN = 0.05


def _sweep(drop: tuple[list[float], list[float]], gain: tuple[list[float], list[float]]) -> dict[str, Any]:
    return {"drop": difference(*drop), "gain": difference(*gain)}


@RULES.rule(
    "T0-coconut", "T0-codi", "T0-counter7-coconut", "T0-counter7-codi",
    cases={"agree": _sweep(([0.6, 0.55, 0.62], [1.0, 1.0, 0.99]), ([0.6], [0.6])),
           "disagree": _sweep(([1.0, 0.99, 1.0], [1.0, 1.0, 0.99]), ([1.0], [1.0])),
           "inconclusive": [_sweep(([1.0, 0.5, 1.0], [1.0, 1.0, 0.99]), ([1.0], [1.0])),
                            _sweep(([0.9], [1.0]), ([1.0], [1.0]))]},
)  # fmt: skip
def collapses(figures: Mapping[str, Any]) -> Decision:
    """T0 (registered 2026-12-07, issue 53, before its runs; counter7's rows 2026-12-08, before theirs; SIM-CoT's
    premise): the method's accuracy falls as its thoughts grow. ``drop`` = mean at the most thoughts - mean at the
    fewest (parity4: 12 and 3; counter7: 16 and 8; Welch): agree if its upper bound < -0.05, disagree if its lower
    bound >= -0.05 (no fall of more than 5 points), else inconclusive (no interval included)."""
    drop = figures["drop"]
    if drop.low is None:
        return decided("inconclusive")
    cut = Cut.of("accuracy at the most thoughts - at the fewest", drop, -SWEEP_MARGIN)
    if drop.high < -SWEEP_MARGIN:
        return decided("agree", cut)
    return decided("disagree", cut) if drop.low >= -SWEEP_MARGIN else decided("inconclusive", cut)


@RULES.rule(
    "T1-coconut", "T1-codi", "T1-counter7-coconut", "T1-counter7-codi",
    cases={"agree": _sweep(([0.6, 0.55, 0.62], [1.0, 1.0, 0.99]), ([0.95, 0.97, 0.99], [0.6, 0.55, 0.62])),
           "disagree": _sweep(([0.6, 0.55, 0.62], [1.0, 1.0, 0.99]), ([0.6, 0.61, 0.6], [0.6, 0.6, 0.61])),
           "inconclusive": [_sweep(([1.0, 0.99, 1.0], [1.0, 1.0, 0.99]), ([1.0, 1.0, 1.0], [1.0, 0.99, 1.0])),
                            _sweep(([0.6, 0.55, 0.62], [1.0, 1.0, 0.99]), ([1.0, 0.5, 0.9], [0.6, 0.55, 0.62]))]},
)  # fmt: skip
def keeps_thoughts_apart(figures: Mapping[str, Any]) -> Decision:
    """T1 (registered 2026-12-07, issue 53, before its runs; counter7's rows 2026-12-08, before theirs): SIM-CoT's step
    supervision keeps the method's accuracy as thoughts grow. Read only where the premise holds (``drop``, the plain
    method's accuracy at the most thoughts - at the fewest, has its upper bound < -0.05: T0 agrees); otherwise
    inconclusive (no collapse to prevent). ``gain`` = SIM-CoT's mean at the most thoughts - the plain method's (Welch):
    agree if its lower bound > 0, disagree if its upper bound < 0.05 (no gain of 5 points shown), else
    inconclusive."""
    drop, gain = figures["drop"], figures["gain"]
    if drop.low is None or drop.high >= -SWEEP_MARGIN or gain.low is None:
        return decided("inconclusive")
    cuts = (
        Cut.of("SIM-CoT - plain at the most thoughts", gain, 0.0),
        Cut.of("SIM-CoT - plain at the most thoughts", gain, SWEEP_MARGIN),
    )
    if gain.low > 0:
        return decided("agree", cuts[0])
    return decided("disagree", cuts[1]) if gain.high < SWEEP_MARGIN else decided("inconclusive", *cuts)
