"""The rules of results/marginals/claims.csv as code (:mod:`hf_icot.studies.rules`), each as its row's ``rule`` words
say; ``marginals_claims`` and ``marginals_mechanism`` compute the figures from the run rows and ask :data:`RULES`.

Re-registered on 2026-12-07 (issue 54), on records already in (the ledger's history keeps the old rules and words):

* C2, a claim of no effect, by an equivalence test (:meth:`~hf_icot.studies.rules.RuleBook.equivalence`): both
  Welch intervals of τ(K) - τ(10) inside the rule's own margin of 20% of τ(10); it was 'both contain 0';
* C3, a claim of a value (δ ≈ 1.19), by an equivalence test with a margin of 10% of 1.19 (C1's 10%, chosen with the
  interval already known: the history says so); it was 'the interval contains 1.19';
* C6 on the magnitude band [500/3, 1,000 x 3] read on the study's own measure of the escape direction; the study's
  code measures no Hessian, so no reading of ours is its measure and C6 is inconclusive until it is known. The old
  rule's 'flatter' (top / |escape curvature| > 1) could not fail: |v'Hv| / |v|^2 <= max(top, |bottom|), and top >=
  |bottom| at every plateau point measured (:func:`rayleigh`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from hf_icot.studies.rules import Cut, Decision, Estimate, RuleBook, decided
from hf_icot.studies.statistics import Summary, difference, summarize

MIN_SEEDS = 3
STUDY_DELTA = 1.19
#: C3's equivalence margin: 10% of the study's exponent
DELTA_MARGIN = 0.1 * STUDY_DELTA
#: C2's equivalence margin: this share of τ(10)
TAU_MARGIN = 0.2
#: C6: the study's escape direction is 500-1,000x flatter than the dominant curvature; within this factor agrees
STUDY_FLATNESS, FLATNESS_FACTOR = (500, 1000), 3
FLATNESS_BAND = (STUDY_FLATNESS[0] / FLATNESS_FACTOR, STUDY_FLATNESS[1] * FLATNESS_FACTOR)

RULES = RuleBook("marginals")


# -- C1: the plateau at log K and a sharp drop ----------------------------------------------------------------------


@RULES.rule(
    "C1",
    cases={"agree": {"points": [(1.02, 0.3), (0.97, 0.4)]}, "disagree": {"points": [(1.2, 0.3), (1.3, 0.4), (1.0, 0.4)]},
           "inconclusive": {"points": [(1.05, 0.3), (1.12, 0.55)]}},
)  # fmt: skip
def plateau(figures: Mapping[str, Any]) -> Decision:
    """``points``: per (B, z) -> A point, (mean plateau ratio to log K, mean drop width over τ or None). Agree when
    every ratio lies in [0.9, 1.1] and every drop is <= 0.5 τ; disagree when the level misses at most points."""
    points = figures["points"]
    level = [0.9 <= ratio <= 1.1 for ratio, _ in points]
    sharp = [width is not None and width <= 0.5 for _, width in points]
    if all(level) and all(sharp):
        return decided("agree")
    return decided("disagree" if sum(not ok for ok in level) > len(level) / 2 else "inconclusive")


# -- C2: τ does not depend on K at fixed D --------------------------------------------------------------------------


def tau_gaps(figures: Mapping[str, Any]) -> list[tuple[str, Summary]] | None:
    """τ(K) - τ(10) for K = 5 and 20 (Welch), or None while a K has fewer than 3 seeds."""
    tau = figures["tau"]
    if min(len(values) for values in tau.values()) < MIN_SEEDS:
        return None
    return [(f"τ({k}) - τ(10)", difference(tau[k], tau[10])) for k in (5, 20)]


def _tau(five: list[float], ten: list[float], twenty: list[float]) -> dict[str, Any]:
    return {"tau": {5: five, 10: ten, 20: twenty}}


RULES.equivalence(
    "C2",
    estimates=tau_gaps,
    margin=lambda figures: TAU_MARGIN * float(sum(figures["tau"][10]) / len(figures["tau"][10])),
    cases={"agree": _tau([270, 280, 275, 268], [272, 270, 275, 271], [280, 270, 276, 266]),
           "disagree": _tau([400, 420, 410], [272, 270, 275], [280, 270, 276]),
           "inconclusive": [_tau([254, 330, 292], [250, 295, 270], [250, 300, 296]), _tau([270, 280], [272], [280])]},
    name="tau_flat_in_k",
)  # fmt: skip


# -- C3: τ ∝ D^δ with δ ≈ 1.19 ------------------------------------------------------------------------------------


def _exponent(figures: Mapping[str, Any]) -> list[tuple[str, Estimate]] | None:
    fit = figures["fit"]
    if figures["min_seeds"] < MIN_SEEDS:
        return None
    low, high = fit["ci95_low"], fit["ci95_high"]
    return [("δ - 1.19", Estimate(fit["exponent_b"], low, high, (high - low) / 3.92).shifted(STUDY_DELTA))]


def _fit(delta: float, low: float, high: float, min_seeds: int = 3) -> dict[str, Any]:
    return {"fit": {"exponent_b": delta, "ci95_low": low, "ci95_high": high}, "min_seeds": min_seeds}


RULES.equivalence(
    "C3",
    estimates=_exponent,
    margin=lambda figures: DELTA_MARGIN,
    cases={"agree": _fit(1.2, 1.12, 1.28), "disagree": _fit(0.9, 0.8, 1.0),
           "inconclusive": [_fit(1.156, 1.04, 1.27), _fit(1.2, 1.12, 1.28, min_seeds=2)]},
    name="exponent",
)  # fmt: skip


# -- C4: noise delays τ ------------------------------------------------------------------------------------------


def _noise(lr: tuple[list[float], list[float]], batch: tuple[list[float], list[float]]) -> dict[str, Any]:
    return {"lr": difference(*lr), "batch": difference(*batch)}


@RULES.rule(
    "C4",
    cases={"agree": _noise(([600, 640, 620], [250, 260, 255]), ([500, 520, 540], [180, 190, 170])),
           "disagree": _noise(([200, 210, 190], [400, 420, 410]), ([500, 520, 540], [180, 190, 170])),
           "inconclusive": _noise(([300, 600, 420], [250, 260, 255]), ([500, 520, 540], [180, 190, 170]))},
)  # fmt: skip
def noise(figures: Mapping[str, Any]) -> Decision:
    """``lr``: Welch's τ(lr 2e-3) - τ(5e-4), ``batch``: τ(batch 64) - τ(256). Agree when both intervals lie above 0;
    disagree when either lies below 0; else inconclusive."""
    lr, batch = figures["lr"], figures["batch"]
    cuts = (Cut.of("τ(lr 2e-3) - τ(5e-4)", lr, 0), Cut.of("τ(batch 64) - τ(256)", batch, 0))
    if all(g.low is not None and g.low > 0 for g in (lr, batch)):
        return decided("agree", *cuts)
    return decided(
        "disagree" if any(g.high is not None and g.high < 0 for g in (lr, batch)) else "inconclusive", *cuts
    )


# -- C5: a routing head leads the transition, and removing it delays it --------------------------------------------


def lead_part(onsets: Sequence[float]) -> str:
    """C5 (a): the routing head's onsets / τ over the base point's seeds (``pending`` with none)."""
    if not onsets:
        return "pending"
    summary = summarize(onsets)
    if summary.n >= MIN_SEEDS and 0.25 <= summary.low and summary.high <= 0.75 and max(onsets) < 1:
        return "agree"  # the interval within the band, as disagreeing asks it outside (issue 40; was the mean)
    if summary.n >= MIN_SEEDS and (summary.high < 0.25 or summary.low > 0.75):
        return "disagree"
    return "inconclusive"


def delay_part(delay: Summary | None, base_tau: Sequence[float]) -> str:
    """C5 (b): Welch's τ_ablated - τ_base from step 0 (``pending`` with no such run) against 0 and 0.1 mean τ."""
    if delay is None:
        return "pending"
    if delay.n >= MIN_SEEDS and delay.low is not None and delay.low > 0:
        return "agree"
    if delay.n >= MIN_SEEDS and delay.high is not None and delay.high < 0.1 * sum(base_tau) / len(base_tau):
        return "disagree"
    return "inconclusive"


def _c5(onsets: list[float], ablated: list[float] | None, base: list[float]) -> dict[str, Any]:
    return {"onsets": onsets, "delay": None if ablated is None else difference(ablated, base), "base_tau": base}


@RULES.rule(
    "C5",
    cases={"agree": _c5([0.5, 0.45, 0.55], [400, 420, 410], [255, 295, 265]),
           "disagree": [_c5([0.9, 0.95, 0.92], [400, 420, 410], [255, 295, 265]),
                        _c5([0.5, 0.45, 0.55], [240, 250, 245], [255, 295, 265])],
           "inconclusive": [_c5([0.79, 0.34, 0.38], [262.6, 297.3, 258.1], [254.5, 295.5, 265.1]),
                            _c5([0.5, 0.45, 0.55], None, [255, 295, 265])]},
)  # fmt: skip
def routing(figures: Mapping[str, Any]) -> Decision:
    """(a) the lead (:func:`lead_part` of ``onsets``) and (b) the delay (:func:`delay_part` of ``delay`` against
    ``base_tau``): agree when both agree, disagree when either disagrees, else inconclusive."""
    parts = [lead_part(figures["onsets"]), delay_part(figures["delay"], figures["base_tau"])]
    return decided("disagree" if "disagree" in parts else "agree" if parts == ["agree", "agree"] else "inconclusive")


# -- C6: the escape direction's flatness against the study's band -----------------------------------------------


def rayleigh(figures: Mapping[str, Any]) -> None:
    """Every reading's curvature along a direction is bounded by the Hessian's extreme eigenvalues (|v'Hv| / |v|^2 <=
    max(top, |bottom|)): figures beyond it cannot occur."""
    for name, points in figures["readings"].items():
        for point in points:
            bound = max(point["top"], abs(point["bottom"])) * (1 + 1e-6)
            if abs(point["curvature"]) > bound:
                raise ValueError(f"{name}: curvature {point['curvature']} beyond the eigenvalues' {bound:.4g}")


def flatness(points: Sequence[Mapping[str, Any]]) -> Summary:
    """Per seed the geometric mean of top / |curvature| over its plateau points; their log10 over the seeds."""
    per_seed: dict[Any, list[float]] = {}
    for point in points:
        per_seed.setdefault(point["seed"], []).append(math.log10(point["top"] / abs(point["curvature"])))
    return summarize([sum(values) / len(values) for values in per_seed.values()])


def _points(ratios: dict[int, list[float]], top: float = 40.0, bottom: float = -12.0) -> list[dict[str, Any]]:
    return [{"seed": seed, "top": top, "bottom": bottom, "curvature": -top / ratio}
            for seed, values in ratios.items() for ratio in values]  # fmt: skip


def _c6(ratios: dict[int, list[float]] | None, **readings: dict[int, list[float]]) -> dict[str, Any]:
    named = {name: _points(values) for name, values in readings.items()}
    if ratios is not None:
        named["the study's"] = _points(ratios)
    return {"readings": named, "study_reading": "the study's" if ratios is not None else None}


@RULES.rule(
    "C6",
    cases={"agree": _c6({0: [700, 900], 1: [600, 800], 2: [650, 1000]}),
           "disagree": [_c6({0: [5200, 5000], 1: [6200, 6300], 2: [5800, 5900]}), _c6({0: [3, 5], 1: [2, 4], 2: [4, 7]})],
           "inconclusive": [_c6(None, displacement={0: [5200], 1: [6200], 2: [5800]},
                                bottom_eigenvector={0: [3.3], 1: [3.4], 2: [4.0]}),
                            _c6({0: [100, 200], 1: [2000, 9000], 2: [400, 800]})]},
    check=rayleigh,
)  # fmt: skip
def escape_flatness(figures: Mapping[str, Any]) -> Decision:
    """``readings``: per reading of the escape direction, its plateau points (seed, top and bottom eigenvalue, and
    the curvature v'Hv/|v|^2 along the reading's direction); ``study_reading``: the reading that is the study's own
    measure (None: not known). On the study's reading, the 95% t-interval over seeds of the per-seed geometric mean
    of top / |curvature| (in log10): agree when it lies within [500/3, 1,000 x 3]; disagree when it lies wholly
    outside; else inconclusive. With the study's measure not known, inconclusive."""
    reading = figures["study_reading"]
    if reading is None:
        return decided("inconclusive")
    summary = flatness(figures["readings"][reading])
    low, high = (math.log10(bound) for bound in FLATNESS_BAND)
    cuts = (
        Cut.of("log10 top / |escape curvature|", summary, low),
        Cut.of("log10 top / |escape curvature|", summary, high),
    )
    if summary.low is None:
        return decided("inconclusive", *cuts)
    if low <= summary.low and summary.high <= high:
        return decided("agree", *cuts)
    return decided("disagree" if summary.high < low or summary.low > high else "inconclusive", *cuts)


# -- C7: A -> B against (B, z) -> A ---------------------------------------------------------------------------------


@RULES.rule(
    "C7",
    cases={"agree": {"ratios": {200: [2.0, 2.2, 2.4]}}, "disagree": {"ratios": {200: [0.82, 0.78, 0.81]}},
           "inconclusive": [{"ratios": {200: [2.0, 0.8, 3.0]}}, {"ratios": {200: [2.0, 2.2, 2.4], 1000: [0.8, 0.9, 0.85]}}]},
)  # fmt: skip
def direction(figures: Mapping[str, Any]) -> Decision:
    """``ratios``: per n_b, A -> B's steps to loss 0.05 over (B, z) -> A's, per seed. Per n_b: agree when over >= 3
    seeds the mean is >= 1.7 with its interval above 1, disagree when the interval lies below 1.7; the claim's verdict
    is the one every n_b gives, else inconclusive."""
    verdicts, cuts = [], []
    for n_b, values in figures["ratios"].items():
        ratio = summarize(values)
        cuts.append(Cut.of(f"A -> B / (B, z) -> A at D = {10 * n_b}", ratio, 1.7))
        if ratio.n >= MIN_SEEDS and ratio.mean >= 1.7 and ratio.low > 1:
            verdicts.append("agree")
        elif ratio.n >= MIN_SEEDS and ratio.high < 1.7:
            verdicts.append("disagree")
        else:
            verdicts.append("inconclusive")
    return decided(verdicts[0] if len(set(verdicts)) == 1 else "inconclusive", *cuts)


# -- C8: the bases switch together ----------------------------------------------------------------------------------

#: C8's committed rule (first round): the interquartile range of the bases' switch steps is at most this share of τ
SWITCH_IQR_BOUND = 0.25


@RULES.rule(
    "C8",
    cases={"agree": {"iqr": [0.1, 0.2, 0.05]}, "disagree": {"iqr": [0.4, 0.3, 0.1]},
           "inconclusive": {"iqr": [0.1, 0.2, 0.3]}},
)  # fmt: skip
def collective(figures: Mapping[str, Any]) -> Decision:
    """``iqr``: per run, the interquartile range of its bases' switch steps over τ. Agree when every run's is <=
    0.25; disagree when most runs' exceed it; else inconclusive."""
    holds = [value <= SWITCH_IQR_BOUND for value in figures["iqr"]]
    if all(holds):
        return decided("agree")
    return decided("disagree" if sum(not ok for ok in holds) > len(holds) / 2 else "inconclusive")
