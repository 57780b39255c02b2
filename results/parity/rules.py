"""The rules of results/parity/claims.csv as code (:mod:`hf_icot.studies.rules`), each as its row's ``rule`` words
say; the analysis (``make_results.py``) computes the figures from the records and asks :data:`RULES`.

Model A's rows (B1-B5, B1-n4, B2-n4) run our reading of the papers' algorithm and B3 compares its curricula at equal
samples; A8-parity runs our reading of Algorithm 2. Those rules carry the reading (:data:`MODEL_A_READING`,
:data:`MODEL_B_READING`), so an agree reads ``agree under our reading`` and the rows name the departure.

B3 was re-registered on 2026-12-07 (issue 54), before the ten more seeds a curriculum it asks ran (``a_b3_*``
in runs.yaml): 20 seeds a side, the gap tested (Fisher's exact test for agree, Welch's interval for disagree).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hf_icot.studies.rules import Cut, Decision, RuleBook, decided
from hf_icot.studies.statistics import difference

MODEL_A_READING = (
    "one plain gradient step per stage on a fresh batch of B = n^(2+ε) examples (ε = 1 at n^3, 2 at n^4; the seed "
    "gives no ε), with the learning rate derived (7,454), not given"
)
MODEL_B_READING = "a removed CoT position reads what the model itself computed there"
#: B1, B4, A8-parity: the share of seeds that must succeed to agree, and at most to disagree
AGREE_SHARE, DISAGREE_SHARE = 0.8, 0.2
#: B3 and B5: the gap in success rate Log-ICoT must show over token by token
GAP = 0.3

RULES = RuleBook("parity")


def _rate_cuts(successes: int, seeds: int) -> tuple[Cut, Cut]:
    rate = successes / seeds
    error = (rate * (1 - rate) / seeds) ** 0.5
    return Cut("the share of seeds", rate, AGREE_SHARE, error), Cut("the share of seeds", rate, DISAGREE_SHARE, error)


def by_share(figures: Mapping[str, Any]) -> Decision:
    """``successes`` of ``seeds``: agree with >= 80% of the seeds, disagree with <= 20%, else inconclusive."""
    won, seeds = figures["successes"], figures["seeds"]
    verdict = (
        "agree" if won >= AGREE_SHARE * seeds else "disagree" if won <= DISAGREE_SHARE * seeds else "inconclusive"
    )
    return decided(verdict, *_rate_cuts(won, seeds))


def _counts(figures: Mapping[str, Any]) -> None:
    if not 0 <= figures["successes"] <= figures["seeds"] or figures["seeds"] < 1:
        raise ValueError(f"{figures['successes']} successes of {figures['seeds']} seeds")


SHARE_CASES = {"agree": {"successes": 10, "seeds": 10}, "disagree": {"successes": 0, "seeds": 10},
               "inconclusive": {"successes": 4, "seeds": 10}}  # fmt: skip
RULES.rule("B1", "B1-n4", "B4", cases=SHARE_CASES, check=_counts, reading=MODEL_A_READING)(by_share)
RULES.rule("A8-parity", cases=SHARE_CASES, check=_counts, reading=MODEL_B_READING)(by_share)


@RULES.rule(
    "B2", "B2-n4",
    cases={"agree": {"share": 1.0, "per_seed": [1.0] * 10}, "disagree": {"share": 0.5, "per_seed": [0.5] * 10},
           "inconclusive": {"share": 0.807, "per_seed": [1.0] * 4 + [0.68] * 6}},
    reading=MODEL_A_READING,
)  # fmt: skip
def children(figures: Mapping[str, Any]) -> Decision:
    """``share``: of every seed's nodes, those attending to their two children (``per_seed``: each seed's share).
    Agree if >= 0.95, disagree if < 0.80, else inconclusive."""
    share, per_seed = figures["share"], figures["per_seed"]
    error = None
    if len(per_seed) > 1:
        mean = sum(per_seed) / len(per_seed)
        error = (sum((x - mean) ** 2 for x in per_seed) / (len(per_seed) - 1) / len(per_seed)) ** 0.5
    high, low = Cut("the share of nodes", share, 0.95, error), Cut("the share of nodes", share, 0.80, error)
    if share >= 0.95:
        return decided("agree", high)
    return decided("disagree", low) if share < 0.80 else decided("inconclusive", high, low)


def _outcomes(won: int, seeds: int) -> list[float]:
    return [1.0] * won + [0.0] * (seeds - won)


def _b3(log_won: int, log_n: int, step_won: int, step_n: int) -> dict[str, list[float]]:
    return {"log_icot": _outcomes(log_won, log_n), "stepwise": _outcomes(step_won, step_n)}


@RULES.rule(
    "B3",
    cases={"agree": _b3(9, 20, 1, 20), "disagree": [_b3(10, 20, 12, 20), _b3(20, 20, 20, 20)],
           "inconclusive": [_b3(4, 10, 0, 10), _b3(1, 20, 0, 20), _b3(8, 20, 3, 20)]},
    reading="at equal total samples (5B), Log-ICoT's 5 steps each on a batch B and token by token's 16 each on 5B/16",
)  # fmt: skip
def stages(figures: Mapping[str, Sequence[float]]) -> Decision:
    """Per seed, 1 for a success and 0 for a failure, of Log-ICoT (``log_icot``) and token by token (``stepwise``)
    at equal samples. Inconclusive if neither succeeds in >= 30% of its seeds; agree if Log-ICoT's success rate
    exceeds token by token's by >= 0.3 with Fisher's exact two-sided p < 0.05; disagree if Welch's 95% interval of
    the gap lies below 0.3 (Log-ICoT shown not to succeed 0.3 more often); else inconclusive."""
    from scipy import stats

    log_icot, stepwise = figures["log_icot"], figures["stepwise"]
    gap = difference(log_icot, stepwise)
    cut = Cut.of("Log-ICoT's success rate - token by token's", gap, GAP)
    if max(sum(log_icot) / len(log_icot), sum(stepwise) / len(stepwise)) < GAP:
        return decided("inconclusive", cut)
    table = [[sum(log_icot), len(log_icot) - sum(log_icot)], [sum(stepwise), len(stepwise) - sum(stepwise)]]
    if gap.mean >= GAP - 1e-9 and stats.fisher_exact(table).pvalue < 0.05:
        return decided("agree", cut)
    return decided("disagree" if gap.high is not None and gap.high < GAP else "inconclusive", cut)


def fisher_p(figures: Mapping[str, Sequence[float]]) -> float:
    """Fisher's exact two-sided p of B3's two success counts (reported beside its verdict)."""
    from scipy import stats

    log_icot, stepwise = figures["log_icot"], figures["stepwise"]
    table = [[sum(log_icot), len(log_icot) - sum(log_icot)], [sum(stepwise), len(stepwise) - sum(stepwise)]]
    return float(stats.fisher_exact(table).pvalue)


@RULES.rule(
    "B5",
    cases={"agree": {"grid": [(4, 10, 0, 10), (9, 10, 2, 10)]}, "disagree": {"grid": [(8, 10, 9, 10)]},
           "inconclusive": [{"grid": [(1, 10, 0, 10), (10, 10, 9, 10)]}, {"grid": [(4, 10, 0, 10)]}]},
    reading=MODEL_A_READING,
)  # fmt: skip
def minimal_budget(figures: Mapping[str, Any]) -> Decision:
    """``grid``: per batch B from the smallest, (Log-ICoT's successes, seeds, token by token's successes, seeds).
    B* = the smallest B where Log-ICoT succeeds in >= 8/10; agree if token by token's rate there is >= 0.3 below
    Log-ICoT's; disagree if token by token succeeds at least as often there; else inconclusive (no B*)."""
    star = next((point for point in figures["grid"] if point[0] >= AGREE_SHARE * point[1]), None)
    if star is None:
        return decided("inconclusive")
    log_rate, step_rate = star[0] / star[1], star[2] / star[3]
    if log_rate - step_rate >= GAP - 1e-9:
        return decided("agree")
    return decided("disagree" if step_rate >= log_rate else "inconclusive")


def _a9(mixture: list[float], e2e: list[float], curriculum_mean: float) -> dict[str, Any]:
    return {"mixture": mixture, "e2e": e2e, "curriculum_mean": curriculum_mean}


@RULES.rule(
    "A9",
    cases={"agree": _a9([1.0, 0.99, 1.0, 1.0, 0.995], [0.5, 0.52, 0.49], 0.9),
           "disagree": _a9([0.55, 0.6, 0.5, 0.58, 0.52], [0.5, 0.52, 0.49], 0.8),
           "inconclusive": _a9([0.62, 0.7, 0.55, 0.6, 0.62], [0.5, 0.52, 0.49], 0.8)},
)  # fmt: skip
def mixture_mlp(figures: Mapping[str, Any]) -> Decision:
    """No-CoT accuracy per seed of the mixture MLP (``mixture``) and the end-to-end MLP (``e2e``) at the (n, k) where
    end to end fails, and the curriculum MLP's mean (``curriculum_mean``). Disagree if the mixture's mean is within
    0.10 of end to end's; agree if >= 80% of the mixture's seeds reach 0.99 and the curriculum does no better; else
    inconclusive."""
    mixture, e2e = figures["mixture"], figures["e2e"]
    gap = difference(mixture, e2e)
    cut = Cut("mixture - end to end", gap.mean, 0.10, gap.std if gap.low is not None else None)
    mixture_mean = sum(mixture) / len(mixture)
    if mixture_mean - sum(e2e) / len(e2e) <= 0.10:
        return decided("disagree", cut)
    wins = sum(value >= 0.99 for value in mixture)
    agree = wins >= AGREE_SHARE * len(mixture) and figures["curriculum_mean"] <= mixture_mean + 0.01
    return decided("agree" if agree else "inconclusive", cut)


def _a10(*pairs: tuple[str, int, int, int, int]) -> dict[str, Any]:
    return {"pairs": list(pairs), "model_b": "b"}


@RULES.rule(
    "A10",
    cases={"agree": [_a10(("a", 10, 10, 0, 10), ("b", 10, 10, 0, 10)), _a10(("a", 4, 10, 0, 10), ("b", 10, 10, 0, 10))],
           "disagree": _a10(("a", 4, 10, 5, 10)), "inconclusive": _a10(("a", 4, 10, 0, 10), ("b", 5, 10, 2, 10))},
)  # fmt: skip
def direct_learning(figures: Mapping[str, Any]) -> Decision:
    """``pairs``: per model and budget, (CoT-then-removal group, its successes, seeds, end to end's successes, seeds).
    Agree if end to end succeeds in <= 1 seed of each while CoT then removal succeeds in >= 80% for at least one model;
    agree under our reading if model B (``model_b``, our reading of Algorithm 2, as A8-parity) is the only such
    model; disagree if end to end succeeds as often as the best CoT then removal; else inconclusive."""
    pairs = figures["pairs"]
    internalized = [name for name, won, seeds, _, _ in pairs if won >= AGREE_SHARE * seeds]
    if internalized and all(e2e_won <= 1 for *_, e2e_won, _ in pairs):
        return decided("agree under our reading" if internalized == [figures["model_b"]] else "agree")
    best = max(won for _, won, _, _, _ in pairs)
    return decided("disagree" if max(e2e_won for *_, e2e_won, _ in pairs) >= best else "inconclusive")
