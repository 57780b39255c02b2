"""The rules of results/semiautomata/claims.csv as code (:mod:`hf_icot.studies.rules`), each as its row's ``rule``
words say; ``semiautomata_regime`` (R, R2, A2) and ``semiautomata_claims`` (A1, A3-A8 at a point) compute the figures
from the runs and ask :data:`RULES`. A row ``<claim>-counter`` or ``<claim>-counter64`` is its claim's rule at
another point.

R and R2 were re-registered on 2026-12-07 (issue 54), their verdicts kept: R chose a point but had no branch to
disagree (every point of the sweep missing its bars), R2 agreed or disagreed on means with no branch for a point too
noisy to say; both now read R's bars on their intervals (:func:`regime_bars`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hf_icot.studies.rules import Cut, Decision, RuleBook, decided
from hf_icot.studies.statistics import Summary, difference, summarize

EPS = 1e-9
#: rule R: full CoT near-perfect (mean, and its interval's lower bound), end to end at least GAP below (its interval
#: above GAP_LOW)
FULL_COT_BAR, FULL_COT_LOW, GAP, GAP_LOW = 0.95, 0.90, 0.30, 0.15
#: A2: end to end within this of full CoT at every T disagrees; rising by more than this between Ts is not failing
SHORTCUT = 0.05
#: A4-A6: one side better by at least this, with the difference's interval above 0
BETTER = 0.05

RULES = RuleBook("semiautomata")


def regime_bars(cot: Summary, gap: Summary) -> Decision:
    """R's bars at one point: full CoT's explicit ID (``cot``) and full CoT - end to end (``gap``, Welch). Agree if
    full CoT's mean >= 0.95 with its lower bound >= 0.90 and the gap's mean >= 0.30 with its interval above 0.15;
    disagree if full CoT's interval lies below 0.95 or the gap's below 0.30; else inconclusive."""
    cuts = (Cut.of("full CoT's mean", cot, FULL_COT_BAR), Cut.of("the gap to end to end", gap, GAP))
    cot_low, gap_low = (cot.low if cot.low is not None else -1), (gap.low if gap.low is not None else -1)
    if (
        cot.mean >= FULL_COT_BAR - EPS
        and cot_low >= FULL_COT_LOW - EPS
        and gap.mean >= GAP - EPS
        and gap_low > GAP_LOW
    ):
        return decided("agree", *cuts)
    below = (cot.high is not None and cot.high < FULL_COT_BAR) or (gap.high is not None and gap.high < GAP)
    return decided("disagree" if below else "inconclusive", *cuts)


def _point(cot: list[float], e2e: list[float]) -> dict[str, Summary]:
    return {"cot": summarize(cot), "gap": difference(cot, e2e)}


REGIME_CASES = {
    "agree": _point([1.0, 1.0, 1.0], [0.15, 0.1, 0.2]),
    "disagree": [_point([1.0, 1.0, 1.0], [0.99, 1.0, 0.98]), _point([0.5, 0.6, 0.55], [0.1, 0.12, 0.14])],
    "inconclusive": _point([1.0, 0.9, 0.97], [0.5, 0.9, 0.2]),
}


@RULES.rule(
    "R",
    cases={"agree": {"chosen": REGIME_CASES["agree"], "points": []},
           "disagree": {"chosen": None, "points": REGIME_CASES["disagree"]},
           "inconclusive": [{"chosen": REGIME_CASES["inconclusive"], "points": []},
                            {"chosen": None, "points": [REGIME_CASES["inconclusive"], *REGIME_CASES["disagree"]]}]},
)  # fmt: skip
def regime(figures: Mapping[str, Any]) -> Decision:
    """``chosen``: the cheapest point whose means meet R's bars (``cot``, ``gap``; None: none does), ``points``: every
    point of the sweep once each has its seeds. The chosen point read by :func:`regime_bars`; with none chosen,
    disagree when every point misses the bars on its intervals, else inconclusive."""
    if figures["chosen"] is not None:
        return regime_bars(figures["chosen"]["cot"], figures["chosen"]["gap"])
    missed = [regime_bars(point["cot"], point["gap"]).branch == "disagree" for point in figures["points"]]
    return decided("disagree" if missed and all(missed) else "inconclusive")


@RULES.rule("R2", cases=REGIME_CASES)
def second_regime(figures: Mapping[str, Any]) -> Decision:
    """R2's point (the counter C7 at T = 32) by :func:`regime_bars`."""
    return regime_bars(figures["cot"], figures["gap"])


# -- A1: full CoT near-perfect in distribution and on biased inputs -----------------------------------------------


@RULES.rule(
    "A1", "A1-counter", "A1-counter64",
    cases={"agree": {"splits": {"test": summarize([1.0, 1.0, 0.99]), "ood": summarize([0.98, 0.99, 1.0])}},
           "disagree": {"splits": {"test": summarize([1.0, 1.0, 0.99]), "ood": summarize([0.6, 0.62, 0.58])}},
           "inconclusive": {"splits": {"test": summarize([1.0, 1.0, 1.0]), "ood": summarize([0.61, 0.91, 0.9])}}},
)  # fmt: skip
def full_cot(figures: Mapping[str, Any]) -> Decision:
    """``splits``: explicit answer EM per split (test and every OOD split) over seeds. Agree if every mean >= 0.95
    and every lower bound >= 0.90; disagree if some split's interval lies wholly below 0.80; else inconclusive. The
    cut decided on: the worst split's mean against the nearer of 0.95 and 0.80."""
    found = figures["splits"]
    good = all(s.mean >= 0.95 - EPS and (s.low if s.low is not None else s.mean) >= 0.90 - EPS for s in found.values())
    worst = min(found, key=lambda split: found[split].mean)
    figure = found[worst].mean
    cut = Cut.of(f"full CoT's {worst} mean", found[worst], 0.95 if abs(figure - 0.95) < abs(figure - 0.80) else 0.80)
    below = any(s.high is not None and s.high < 0.80 for s in found.values())
    return decided("agree" if good else "disagree" if below else "inconclusive", cut)


# -- A2: end to end much harder, and failing as T grows -----------------------------------------------------------


@RULES.rule(
    "A2", "A2-counter",
    cases={"agree": {"gap": difference([1.0] * 3, [0.15, 0.1, 0.2]), "e2e_by_t": [0.15, 0.14, 0.15], "gaps": [0.85]},
           "disagree": {"gap": difference([1.0] * 3, [0.99, 1.0, 0.98]), "e2e_by_t": [0.99, 0.99], "gaps": [0.01, 0.0]},
           "inconclusive": {"gap": difference([1.0] * 3, [0.15, 0.1, 0.2]), "e2e_by_t": [0.15, 0.4], "gaps": [0.85, 0.6]}},
)  # fmt: skip
def end_to_end(figures: Mapping[str, Any]) -> Decision:
    """``gap``: full CoT - end to end ID at the chosen T (Welch), ``e2e_by_t``: end to end's mean ID by T (ascending),
    ``gaps``: the gap's mean by T. Agree if the gap's mean >= 0.30 with its interval above 0.15 and end to end does
    not rise by more than 0.05 between consecutive T; disagree if end to end is within 0.05 of full CoT at every T;
    else inconclusive."""
    gap, by_t = figures["gap"], figures["e2e_by_t"]
    cut = Cut.of("the gap at the chosen T", gap, GAP)
    if all(abs(g) <= SHORTCUT for g in figures["gaps"]):
        return decided("disagree", cut)
    rises = any(later - earlier > SHORTCUT for earlier, later in zip(by_t, by_t[1:]))
    interval = gap.low is not None and gap.low > GAP_LOW
    return decided("agree" if gap.mean >= GAP - EPS and interval and not rises else "inconclusive", cut)


# -- A3: the left curriculum keeps ID high while biased-input accuracy drops ----------------------------------------


@RULES.rule(
    "A3", "A3-counter", "A3-counter64",
    cases={"agree": {"ids": [0.99, 1.0, 0.99], "oods": [0.1, 0.05, 0.2]},
           "disagree": {"ids": [0.99, 1.0, 0.99], "oods": [0.98, 0.99, 0.99]},
           "inconclusive": [{"ids": [0.14, 0.15, 0.13], "oods": [0.15, 0.16, 0.14]},
                            {"ids": [0.99, 1.0, 0.99], "oods": [0.9, 0.99, 0.7]}]},
)  # fmt: skip
def left_ood(figures: Mapping[str, Sequence[float]]) -> Decision:
    """The left curriculum's implicit ID (``ids``) and mean OOD (``oods``) per seed. Inconclusive if ID's mean <
    0.90; agree if (ID - mean OOD) has its interval above 0.05; disagree if it lies wholly below 0.05; else
    inconclusive."""
    ids = summarize(figures["ids"])
    if ids.mean < 0.90 - EPS:
        return decided("inconclusive", Cut.of("the left curriculum's ID", ids, 0.90))
    drop = difference(figures["ids"], figures["oods"])
    cut = Cut.of("ID - OOD", drop, 0.05)
    if drop.low is not None and drop.low > 0.05:
        return decided("agree", cut)
    return decided("disagree" if drop.high is not None and drop.high < 0.05 else "inconclusive", cut)


# -- A4-A6: one side better than the other ------------------------------------------------------------------------


def better(first: Sequence[float], second: Sequence[float], what: str) -> tuple[str | None, tuple[Cut, ...]]:
    """``first`` or ``second`` when one side's mean is >= 0.05 above the other with the difference's interval beyond 0
    (None: neither), and the cut decided on (the mean's against +-0.05, listed where the interval is beyond 0)."""
    if not first or not second:
        return None, ()
    delta = difference(first, second)
    if delta.low is not None and delta.low > 0:
        cut = Cut.of(what, delta, BETTER)
        return ("first" if delta.mean >= BETTER - EPS else None), (cut,)
    if delta.high is not None and delta.high < 0:
        cut = Cut.of(what, delta, -BETTER)
        return ("second" if -delta.mean >= BETTER - EPS else None), (cut,)
    return None, ()


def _pair(first: list[float], second: list[float], oods: tuple[list[float], list[float]] | None = None) -> dict:
    return {"first": first, "second": second, "first_ood": (oods or ([], []))[0], "second_ood": (oods or ([], []))[1]}


@RULES.rule(
    "A4", "A4-counter",
    cases={"agree": _pair([0.9, 0.92, 0.91], [0.5, 0.55, 0.52]), "disagree": _pair([0.5, 0.55, 0.52], [0.9, 0.92, 0.91]),
           "inconclusive": [_pair([0.99, 1.0, 0.99], [1.0, 0.99, 1.0], ([0.3, 0.0, 0.0], [0.05, 0.04, 0.06])),
                            _pair([0.99, 1.0, 0.99], [1.0, 0.99, 1.0], ([0.05, 0.04, 0.06], [0.05, 0.04, 0.06]))]},
)  # fmt: skip
def left_vs_right(figures: Mapping[str, Sequence[float]]) -> Decision:
    """Implicit ID per seed of the left (``first``) and right (``second``) curricula, then their mean OOD
    (``first_ood``, ``second_ood``) as the tie-break: agree if left is better (:func:`better`), disagree if right is,
    else inconclusive."""
    on_id, cuts = better(figures["first"], figures["second"], "left - right ID")
    if on_id is None:
        on_ood, ood_cuts = better(figures["first_ood"], figures["second_ood"], "left - right OOD")
        cuts += ood_cuts
        winner = on_ood
    else:
        winner = on_id
    return decided({"first": "agree", "second": "disagree"}.get(winner, "inconclusive"), *cuts)


@RULES.rule(
    "A5-counter", "A5-counter64",
    cases={"agree": _pair([0.9, 0.92, 0.91], [0.5, 0.55, 0.52]), "disagree": _pair([0.5, 0.55, 0.52], [0.9, 0.92, 0.91]),
           "inconclusive": _pair([0.998, 1.0, 0.996], [0.996, 1.0, 0.992])},
)  # fmt: skip
def shapes(figures: Mapping[str, Sequence[float]]) -> Decision:
    """Implicit ID per seed of depth 4 (``first``) and depth 16 (``second``) at their chosen learning rates: agree if
    depth 4 is better (:func:`better`), disagree if depth 16 is, else inconclusive."""
    winner, cuts = better(figures["first"], figures["second"], "depth 4 - depth 16 ID")
    return decided({"first": "agree", "second": "disagree"}.get(winner, "inconclusive"), *cuts)


@RULES.rule(
    "A6-counter", "A6-counter64",
    cases={"agree": _pair([0.95, 0.96, 0.94], [0.5, 0.55, 0.52], ([0.1, 0.1, 0.1], [0.1, 0.12, 0.11])),
           "disagree": _pair([0.5, 0.55, 0.52], [0.95, 0.96, 0.94], ([0.02, 0.03, 0.02], [0.3, 0.35, 0.32])),
           "inconclusive": _pair([0.95, 1.0, 0.9], [0.97, 0.94, 1.0], ([0.04, 0.01, 0.06], [0.03, 0.05, 0.02]))},
)  # fmt: skip
def primes(figures: Mapping[str, Sequence[float]]) -> Decision:
    """Per seed, composite orders (``first``, ``first_ood``) against prime ones (``second``, ``second_ood``) on ID and
    on mean OOD: agree if composite is better (:func:`better`) on either; disagree if prime is better on both; else
    inconclusive."""
    on_id, id_cuts = better(figures["first"], figures["second"], "composite - prime ID")
    on_ood, ood_cuts = better(figures["first_ood"], figures["second_ood"], "composite - prime OOD")
    if "first" in (on_id, on_ood):
        return decided("agree", *id_cuts, *ood_cuts)
    return decided("disagree" if on_id == on_ood == "second" else "inconclusive", *id_cuts, *ood_cuts)


# -- A7: the mixture against the curriculum ------------------------------------------------------------------------


def _a7(id_pair: tuple[list[float], list[float]], ood_pair: tuple[list[float], list[float]]) -> dict[str, Summary]:
    return {"id": difference(*id_pair), "ood": difference(*ood_pair)}


@RULES.rule(
    "A7", "A7-counter",
    cases={"agree": _a7(([0.98, 0.99, 0.97], [0.99, 1.0, 0.98]), ([0.8, 0.85, 0.9], [0.1, 0.05, 0.2])),
           "disagree": [_a7(([0.6, 0.62, 0.58], [0.99, 1.0, 0.98]), ([0.8, 0.85, 0.9], [0.1, 0.05, 0.2])),
                        _a7(([0.98, 0.99, 0.97], [0.99, 1.0, 0.98]), ([0.05, 0.04, 0.06], [0.1, 0.11, 0.12]))],
           "inconclusive": _a7(([0.83, 0.9, 0.75], [0.99, 1.0, 0.98]), ([0.8, 0.5, 0.95], [0.1, 0.05, 0.3]))},
)  # fmt: skip
def mixture(figures: Mapping[str, Summary]) -> Decision:
    """``id``: mixture (hint 0) - left curriculum implicit ID, ``ood``: mixture asked for the full CoT - left mean
    OOD (both Welch). Agree if the ID difference's mean >= -0.05 with its lower bound >= -0.10 and the OOD
    difference's interval lies above 0.05; disagree if the ID difference's interval lies wholly below -0.10 or the
    OOD difference's at or below 0; else inconclusive."""
    on_id, on_ood = figures["id"], figures["ood"]
    cut = Cut.of("mixture - left ID", on_id, -0.05)
    works = on_id.mean >= -0.05 - EPS and (on_id.low if on_id.low is not None else on_id.mean) >= -0.10 - EPS
    if works and on_ood.low is not None and on_ood.low > 0.05:
        return decided("agree", cut)
    below = (on_id.high is not None and on_id.high < -0.10 - EPS) or (on_ood.high is not None and on_ood.high <= 0)
    return decided("disagree" if below else "inconclusive", cut)


# -- A8: probes against robustness ----------------------------------------------------------------------------------


@RULES.rule(
    "A8", "A8-counter",
    cases={"agree": {"pairs": [(0.5 + 0.05 * i, 0.1 + 0.08 * i) for i in range(9)]},
           "disagree": {"pairs": [(0.5 + 0.05 * i, 0.9 - 0.08 * i) for i in range(9)]},
           "inconclusive": [{"pairs": [(0.9, 0.1), (0.95, 0.3), (0.8, 0.2), (0.7, 0.05), (0.85, 0.4)]},
                            {"pairs": [(0.9, 0.1), (0.9, 0.3), (0.9, 0.2)]}]},
)  # fmt: skip
def probes(figures: Mapping[str, Any]) -> Decision:
    """``pairs``: per run, (the best layer's mean probe accuracy, its mean OOD accuracy). Agree if Spearman's rho >=
    0.5 with p < 0.05; disagree if rho <= 0 with p < 0.05; else inconclusive (also with a constant side)."""
    from scipy import stats

    pairs = figures["pairs"]
    if len({p for p, _ in pairs}) < 2 or len({o for _, o in pairs}) < 2:
        return decided("inconclusive")
    rho, p_value = stats.spearmanr([p for p, _ in pairs], [o for _, o in pairs])
    significant = p_value < 0.05
    return decided(
        "agree" if rho >= 0.5 and significant else "disagree" if rho <= 0 and significant else "inconclusive"
    )
