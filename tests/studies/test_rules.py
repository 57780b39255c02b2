"""The rules kit: a rule is registered only when made-up figures reach each of its branches; equivalence, non-inferiority
and the knife-edge flag computed one way; a rule with a reading and the rows it decides."""

from __future__ import annotations

import pytest

from hf_icot.studies import league
from hf_icot.studies.rules import (
    Cut,
    Estimate,
    RuleBook,
    RuleError,
    decided,
    equivalence,
    ledger_problems,
    non_inferiority,
    standard_error,
)
from hf_icot.studies.statistics import difference, summarize


def _at_least(figures) -> object:
    """A rule that reads 'x above 0.5' and can never disagree: it has no branch for it."""
    return decided("agree" if figures["x"] > 0.5 else "inconclusive")


def test_a_rule_that_cannot_disagree_is_refused_naming_it_and_the_branch() -> None:
    book = RuleBook("alpha")
    with pytest.raises(RuleError, match=r"alpha/X1 \(_at_least\) has no made-up figures that reach its disagree"):
        book.rule("X1", cases={"agree": {"x": 0.9}, "inconclusive": {"x": 0.1}})(_at_least)
    with pytest.raises(RuleError, match=r"the made-up figures for its disagree branch reach 'inconclusive'"):
        book.rule("X1", cases={"agree": {"x": 0.9}, "inconclusive": {"x": 0.1}, "disagree": {"x": -1}})(_at_least)
    assert "X1" not in book


def test_figures_that_cannot_occur_do_not_make_a_branch_reachable() -> None:
    """C6's old rule: 'flatter' (top / |escape curvature| > 1) holds by construction where the top eigenvalue is at
    least |bottom|, since |v'Hv| / |v|^2 <= max(top, |bottom|): its disagree figures cannot occur."""

    def rayleigh(figures) -> None:
        if abs(figures["escape"]) > max(figures["top"], abs(figures["bottom"])):
            raise ValueError("a direction's curvature exceeds every eigenvalue")
        if figures["top"] < abs(figures["bottom"]):
            raise ValueError("the top eigenvalue is below |bottom| (never, at the plateau points measured)")

    def flatter(figures):
        ratio = figures["top"] / abs(figures["escape"])
        return decided("agree" if ratio > 100 else "disagree" if ratio <= 1 else "inconclusive")

    book = RuleBook("marginals")
    cases = {"agree": {"top": 10, "bottom": -2, "escape": 0.01}, "inconclusive": {"top": 10, "bottom": -2, "escape": 1},
             "disagree": {"top": 1, "bottom": -2, "escape": 2}}  # fmt: skip
    with pytest.raises(RuleError, match="disagree branch cannot occur .*below \\|bottom\\|.* unreachable"):
        book.rule("C6", cases=cases, check=rayleigh)(flatter)


def _a_share(figures) -> None:
    if not 0 <= figures["x"] <= 1:
        raise ValueError("x outside [0, 1]")


def test_a_registered_rule_decides_real_figures_and_refuses_impossible_ones() -> None:
    book = RuleBook("alpha")

    @book.rule("X1", "X1-b", cases={"agree": {"x": 0.9}, "disagree": {"x": 0.1}, "inconclusive": {"x": 0.5}},
               check=_a_share)  # fmt: skip
    def share(figures):
        x = figures["x"]
        return decided("agree" if x >= 0.8 else "disagree" if x <= 0.2 else "inconclusive", Cut("x", x, 0.8, 0.05))

    assert book["X1"] is book["X1-b"] is share and book.rules() == [share]
    assert share({"x": 0.82}).verdict == "agree"
    assert share({"x": 0.82}).flag == "knife-edge: x 0.82 is within one standard error (0.05) of the rule's cut 0.8"
    with pytest.raises(RuleError, match="refuses these figures: x outside"):
        share({"x": 2})
    with pytest.raises(RuleError, match="already have a rule"):
        book.rule("X1", cases={"agree": {"x": 0.9}, "disagree": {"x": 0.1}, "inconclusive": {"x": 0.5}})(share.decide)
    with pytest.raises(RuleError, match="alpha has no rule for 'X2'; register it"):
        book["X2"]


def test_equivalence_agrees_only_inside_the_margin_and_a_wide_interval_through_zero_is_inconclusive() -> None:
    inside, wide, outside = Estimate(5, -20, 30), Estimate(20, -118, 158), Estimate(120, 80, 160)
    assert equivalence([inside], 54) == "agree"
    assert equivalence([inside, wide], 54) == "inconclusive"  # absence of evidence is not evidence of absence
    assert equivalence([inside, outside], 54) == "disagree"
    assert equivalence([Estimate(0.0)], 54) == "inconclusive"  # one seed: no interval
    with pytest.raises(RuleError, match="margin must be > 0"):
        equivalence([inside], 0)


def test_an_equivalence_rule_is_built_by_the_kit_from_its_estimates_and_margin() -> None:
    book = RuleBook("marginals")
    rule = book.equivalence(
        "C2",
        estimates=lambda f: None if f["n"] < 3 else [("τ(5) - τ(10)", f["gap"])],
        margin=lambda f: 0.2 * f["tau10"],
        cases={"agree": {"n": 3, "tau10": 270, "gap": Estimate(10, -20, 40, 15)},
               "disagree": {"n": 3, "tau10": 270, "gap": Estimate(150, 100, 200, 25)},
               "inconclusive": [{"n": 3, "tau10": 270, "gap": Estimate(20, -118, 158, 32)},
                                {"n": 2, "tau10": 270, "gap": Estimate(0)}]},
    )  # fmt: skip
    assert rule.test == "equivalence"
    decision = rule({"n": 3, "tau10": 270, "gap": Estimate(40, 10, 70, 15)})
    assert decision.verdict == "inconclusive"
    assert decision.flag == "knife-edge: τ(5) - τ(10) 40 is within one standard error (15) of the rule's cut 54"


def test_non_inferiority_reads_the_interval_against_the_margin() -> None:
    assert non_inferiority(Estimate(0.0, -0.04, 0.04), 0.05) == "agree"
    assert non_inferiority(Estimate(-0.3, -0.5, -0.1), 0.05) == "disagree"
    assert non_inferiority(Estimate(0.0, -0.3, 0.3), 0.05) == "inconclusive"
    assert non_inferiority(Estimate(0.0), 0.05) == "inconclusive"


def test_the_standard_error_of_a_mean_of_a_welch_difference_and_of_one_seed() -> None:
    mean = summarize([0.1, 0.5, 0.9])
    assert standard_error(mean) == pytest.approx(0.4 / 3**0.5)
    gap = difference([0.1, 0.5, 0.9], [0.0, 0.0, 0.1])
    assert standard_error(gap) == gap.std
    assert standard_error(summarize([0.5])) is None and standard_error(None) is None


def test_a_rule_with_a_reading_agrees_under_it_and_its_rows_must_say_so() -> None:
    book = RuleBook("parity")
    cases = {"agree": {"won": 10}, "disagree": {"won": 0}, "inconclusive": {"won": 5}}

    @book.rule("B1-n4", cases=cases, reading="one plain GD step per stage")
    def by_share(figures):
        won = figures["won"]
        return decided("agree" if won >= 8 else "disagree" if won <= 2 else "inconclusive")

    assert by_share({"won": 10}).verdict == "agree under our reading"
    rows = [{"id": "B1-n4", "claim": "Log-ICoT reaches 100%", "verdict": "agree"},
            {"id": "B9", "claim": "no rule", "verdict": "pending"},
            {"id": "B8", "claim": "dropped", "verdict": "withdrawn"}]  # fmt: skip
    problems = ledger_problems(book, rows)
    assert problems == [
        "parity/B1-n4: its rule reads the paper's setting our way (one plain GD step per stage); its claim must name "
        "the departure ('under our reading: ...').",
        "parity/B1-n4 reads plain 'agree' under a rule with a reading.",
        "parity/B9 has no registered rule (results/parity/rules.py).",
    ]
    fixed = [{**rows[0], "claim": "Log-ICoT reaches 100%, under our reading: one step", "verdict": "agree under our "
              "reading"}, rows[2]]  # fmt: skip
    assert ledger_problems(book, fixed) == []
    assert ledger_problems(book, fixed[1:]) == ["parity has a rule for 'B1-n4', which its ledger does not list."]


def test_the_leagues_premise_disagrees_when_end_to_end_solves_the_task_too() -> None:
    """L2-counter7's figures: the best curriculum 0.999 and end to end 0.999 (gap 0.001 [-0.004, 0.005]) — the
    premise fails, which the rule first registered could only call inconclusive."""
    book = RuleBook("curricula")
    premise = book.rule("L2", cases=league.PREMISE_CASES)(league.premise_rule)
    solved = {"best": summarize([0.999, 1.0, 0.998]), "best_name": "adaptive", "gap": difference([0.999, 1.0, 0.998],
              [0.998, 1.0, 0.999])}  # fmt: skip
    assert premise(solved).verdict == "disagree"
    edge = {"best": summarize([0.99, 0.99, 0.513]), "best_name": "adaptive pace", "gap": None}
    assert premise(edge).verdict == "disagree"
    assert premise(edge).flag.startswith("knife-edge: adaptive pace's mean 0.831 is within one standard error")
