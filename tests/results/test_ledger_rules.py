"""A test per ledger: every row of every results/<study>/claims.csv has a registered rule (results/<study>/rules.py)
that reaches each of its branches on made-up figures — a rule without a reachable disagree (or agree, or
inconclusive) branch is refused when its study's rules are imported, so this test fails and it cannot be committed —
a claim of no effect or of equality is decided by an equivalence test, and a rule that reads the paper's setting our
way has rows that name the departure."""

from __future__ import annotations

import csv
import importlib
import re
from pathlib import Path

import pytest

from hf_icot.studies.claims import WITHDRAWN, read_ledger
from hf_icot.studies.rules import BRANCHES, RuleBook, RuleError, decided, ledger_problems

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "results"
STUDIES = sorted(path.parent.name for path in RESULTS.glob("*/claims.csv"))
#: the words of a claim of no effect or of equality, which only an equivalence test can agree with
NO_EFFECT = re.compile(r"does not depend|independent of|≈|no effect|the same as")


def test_every_study_with_a_ledger_is_read() -> None:
    assert STUDIES == ["adaptive_pace", "curricula", "marginals", "methods", "mult_cpu", "parity", "semiautomata"]


@pytest.mark.parametrize("study", STUDIES)
def test_every_rule_of_the_ledger_reaches_agree_disagree_and_inconclusive(study: str) -> None:
    book = importlib.import_module(f"results.{study}.rules").RULES  # registration refuses an unreachable branch
    assert isinstance(book, RuleBook) and book.study == study
    rows = read_ledger(RESULTS / study / "claims.csv")
    assert ledger_problems(book, rows) == []
    for rule in book.rules():
        for branch in BRANCHES:
            assert rule.cases[branch], f"{rule.label}: no made-up figures for {branch}"
            for figures in rule.cases[branch]:
                assert rule(figures).branch == branch, f"{rule.label}: {branch} figures reach another branch"
    for row in rows:
        if row["verdict"] != WITHDRAWN and NO_EFFECT.search(row["claim"]):
            assert book[row["id"]].test == "equivalence", f"{study}/{row['id']} claims no effect or equality"


def test_c6s_first_rule_could_not_disagree_on_the_hessians_measured() -> None:
    """'Flatter' (top / |escape curvature| > 1) holds by construction: |v'Hv| / |v|^2 <= max(top, |bottom|), and at
    every plateau point of hessian.csv the top eigenvalue is at least |bottom|. Registered with that as its check,
    the rule C6 read until 2026-12-07 is refused: its disagree figures cannot occur."""
    with open(RESULTS / "marginals" / "hessian.csv") as stream:
        plateau = [row for row in csv.DictReader(stream) if row["on_plateau"] == "True"]
    assert plateau and all(float(row["top"]) >= abs(float(row["bottom"])) for row in plateau)
    assert min(float(row["top_over_escape"]) for row in plateau) > 1

    def as_measured(figures) -> None:
        if figures["top"] < abs(figures["bottom"]) or abs(figures["escape"]) > figures["top"]:
            raise ValueError("top < |bottom| or a curvature beyond the top eigenvalue: never at these plateau points")

    def flatter(figures):
        ratio = figures["top"] / abs(figures["escape"])
        return decided("agree" if ratio >= 167 else "disagree" if ratio <= 1 else "inconclusive")

    cases = {"agree": {"top": 40, "bottom": -12, "escape": 0.01}, "inconclusive": {"top": 40, "bottom": -12, "escape": 1},
             "disagree": {"top": 10, "bottom": -12, "escape": 11}}  # fmt: skip
    with pytest.raises(RuleError, match="disagree branch cannot occur"):
        RuleBook("marginals").rule("C6", cases=cases, check=as_measured)(flatter)
