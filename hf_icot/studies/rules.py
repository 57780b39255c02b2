"""Executable rules: the rule of every ledger row as a function of its deciding figures, registered only when
made-up figures reach each of its branches.

A study keeps its rules in ``results/<study>/rules.py``: one :class:`RuleBook` (``RULES``) and one registration per
rule, naming the ledger rows it decides. The rule's code, like its words in ``claims.csv``, is dated by the commit
that adds it, before the runs it decides (``git log -p results/<study>/rules.py``). A rule takes a mapping of figures
(an interval as :class:`Estimate` or :class:`~hf_icot.studies.statistics.Summary`, counts, means), never records, and
returns a :class:`Decision`: the verdict and the cuts it was decided on. The study's analysis computes the figures
from its records and asks the book (``RULES["C2"](figures)``); the tests feed the same rules made-up figures.

Registration refuses a rule with a :class:`RuleError` naming it and the branch:

* whose made-up figures (``cases``) do not reach each of agree, disagree and inconclusive: a rule that cannot
  disagree is no test, and one that cannot be inconclusive decides on noise;
* whose made-up figures for a branch are figures its ``check`` refuses: figures that cannot occur (a direction's
  curvature above every eigenvalue of the Hessian) do not make a branch reachable.

A claim of no effect or of equality is decided by :meth:`RuleBook.equivalence`: agree when every interval lies
inside the margin, disagree when one lies wholly outside it, inconclusive when one straddles it. An interval that
merely contains 0 is absence of evidence, not evidence of absence. A claim that one side is not worse than the other
by more than a margin reads :func:`non_inferiority`.

Every decision's ``flag`` is computed one way (:attr:`Decision.flag`): a figure within one standard error of a cut
it was decided on is a knife-edge. A rule that reads the paper's setting our way says so (``reading``): its agree is
``agree under our reading``, and :func:`ledger_problems` asks its rows to state the reading in their claim
(``under our reading: ...``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from hf_icot.studies.claims import UNDER_OUR_READING, WITHDRAWN, knife_edge
from hf_icot.studies.statistics import Summary

#: every rule reaches each of these on made-up figures
BRANCHES = ("agree", "disagree", "inconclusive")
#: the verdicts of the agree branch
AGREEING = ("agree", "agree in kind", UNDER_OUR_READING)
#: what a claim's rows must say when their rule reads the paper's setting our way (``..., under our reading: ...``)
READING_MARK = "under our reading"
Figures = Mapping[str, Any]


class RuleError(ValueError):
    """A rule the kit refuses (a branch it cannot reach, a verdict outside its branches), or figures it refuses."""


@dataclass(frozen=True)
class Estimate:
    """A figure with its 95% interval and standard error (``low``/``high``/``standard_error`` None: no interval)."""

    mean: float
    low: float | None = None
    high: float | None = None
    standard_error: float | None = None

    def shifted(self, by: float) -> Estimate:
        """The same estimate less ``by`` (a difference from a claimed value)."""
        low, high = (None, None) if self.low is None else (self.low - by, self.high - by)
        return Estimate(self.mean - by, low, high, self.standard_error)


def standard_error(summary: Summary | Estimate | None) -> float | None:
    """The standard error of a :class:`Summary`'s mean (Welch's difference keeps it as ``std``) or an
    :class:`Estimate`'s; None for one value or none."""
    if summary is None or summary.low is None:
        return None
    if isinstance(summary, Estimate):
        return summary.standard_error
    return summary.std if summary.method == "welch" else summary.std / math.sqrt(summary.n)


def estimate(summary: Summary | Estimate) -> Estimate:
    """``summary`` as an :class:`Estimate`."""
    if isinstance(summary, Estimate):
        return summary
    return Estimate(summary.mean, summary.low, summary.high, standard_error(summary))


@dataclass(frozen=True)
class Cut:
    """A figure compared with a cut of its rule, and the figure's standard error (None: no flag possible)."""

    what: str
    figure: float | None
    cut: float
    standard_error: float | None = None

    @classmethod
    def of(cls, what: str, summary: Summary | Estimate | None, cut: float) -> Cut:
        """The cut on ``summary``'s mean, with its standard error."""
        return cls(what, None if summary is None else summary.mean, cut, standard_error(summary))

    @property
    def flag(self) -> str:
        return knife_edge(self.figure, self.cut, self.standard_error, self.what)


@dataclass(frozen=True)
class Decision:
    """A verdict (agree, agree in kind, agree under our reading, disagree or inconclusive) and the cuts it was decided
    on (their knife-edges are its :attr:`flag`)."""

    verdict: str
    cuts: tuple[Cut, ...] = ()

    @property
    def branch(self) -> str:
        """``agree``, ``disagree`` or ``inconclusive``."""
        return "agree" if self.verdict in AGREEING else self.verdict

    @property
    def flag(self) -> str:
        """Every cut whose figure lies within one standard error of it, one ``knife-edge: ...`` each, ``; ``-joined."""
        return "; ".join(flag for flag in (cut.flag for cut in self.cuts) if flag)


def decided(verdict: str, *cuts: Cut) -> Decision:
    """``Decision(verdict, cuts)``: what a rule returns, with the cuts its verdict was decided on."""
    return Decision(verdict, tuple(cuts))


def equivalence(estimates: Sequence[Summary | Estimate], margin: float) -> str:
    """The equivalence test of a claim of no effect: ``agree`` when every interval lies within [-margin, margin],
    ``disagree`` when one lies wholly outside it, ``inconclusive`` otherwise (an interval straddling a bound, or an
    estimate with no interval)."""
    if margin <= 0:
        raise RuleError(f"an equivalence margin must be > 0; got {margin!r}.")
    if not estimates or any(e.low is None for e in estimates):
        return "inconclusive"
    if all(-margin <= e.low and e.high <= margin for e in estimates):
        return "agree"
    if any(e.high < -margin or e.low > margin for e in estimates):
        return "disagree"
    return "inconclusive"


def non_inferiority(difference: Summary | Estimate, margin: float) -> str:
    """``difference`` (first - second) against ``-margin``: ``agree`` when its interval's lower bound is >= -margin
    (the first not worse by more than the margin), ``disagree`` when its upper bound is below -margin, else
    ``inconclusive`` (no interval included)."""
    if difference.low is None:
        return "inconclusive"
    if difference.low >= -margin:
        return "agree"
    return "disagree" if difference.high < -margin else "inconclusive"


@dataclass(frozen=True)
class Rule:
    """A registered rule: the ledger rows it decides (``ids``), its function of the figures, the made-up figures
    that reach each branch, an optional ``check`` of figures (raises ``ValueError`` on figures that cannot occur),
    the reading it takes of the paper's setting, and its test (``effect`` or ``equivalence``)."""

    study: str
    ids: tuple[str, ...]
    decide: Callable[[Figures], Decision]
    cases: Mapping[str, tuple[Figures, ...]]
    check: Callable[[Figures], None] | None = None
    reading: str | None = None
    test: str = "effect"
    name: str = field(default="")

    def __call__(self, figures: Figures) -> Decision:
        """The decision on ``figures``.

        Raises:
            RuleError: figures the rule's ``check`` refuses, or a verdict outside its branches.
        """
        if self.check is not None:
            try:
                self.check(figures)
            except ValueError as error:
                raise RuleError(f"{self.label} refuses these figures: {error}") from None
        decision = self.decide(figures)
        if not isinstance(decision, Decision) or decision.branch not in BRANCHES:
            raise RuleError(f"{self.label} returned {decision!r}; a rule returns a Decision on one of {BRANCHES}.")
        if self.reading and decision.verdict == "agree":
            decision = replace(decision, verdict=UNDER_OUR_READING)
        return decision

    @property
    def label(self) -> str:
        return f"the rule of {self.study}/{', '.join(self.ids)}" + (f" ({self.name})" if self.name else "")

    def reach(self) -> None:
        """Run the rule on each branch's made-up figures.

        Raises:
            RuleError: a branch with no made-up figures, figures the rule's ``check`` refuses, or figures that reach
                another branch — naming the rule and the branch.
        """
        for branch in BRANCHES:
            cases = self.cases.get(branch, ())
            if not cases:
                raise RuleError(
                    f"{self.label} has no made-up figures that reach its {branch} branch; a rule whose {branch} "
                    "branch cannot be reached is refused: give it figures that reach it, or change the rule."
                )
            for case in cases:
                try:
                    decision = self(case)
                except RuleError as error:
                    raise RuleError(
                        f"{self.label}: the made-up figures for its {branch} branch cannot occur ({error}); its "
                        f"{branch} branch is unreachable, so the rule is refused."
                    ) from None
                if decision.branch != branch:
                    raise RuleError(
                        f"{self.label}: the made-up figures for its {branch} branch reach {decision.verdict!r}; "
                        f"its {branch} branch is not shown reachable, so the rule is refused."
                    )


def _cases(cases: Mapping[str, Figures | Sequence[Figures]]) -> dict[str, tuple[Figures, ...]]:
    unknown = sorted(set(cases) - set(BRANCHES))
    if unknown:
        raise RuleError(f"made-up figures for {unknown}; the branches are {', '.join(BRANCHES)}.")
    return {branch: (value,) if isinstance(value, Mapping) else tuple(value) for branch, value in cases.items()}


class RuleBook:
    """One study's rules, by ledger row id.

    Raises (on registration):
        RuleError: a rule refused by :meth:`Rule.reach`, or an id that already has a rule.
    """

    def __init__(self, study: str) -> None:
        self.study = study
        self._rules: dict[str, Rule] = {}

    def _add(self, rule: Rule) -> Rule:
        rule.reach()
        taken = [claim for claim in rule.ids if claim in self._rules]
        if taken:
            raise RuleError(f"{self.study}: {', '.join(taken)} already have a rule; one rule decides a row.")
        for claim in rule.ids:
            self._rules[claim] = rule
        return rule

    def rule(
        self,
        *ids: str,
        cases: Mapping[str, Figures | Sequence[Figures]],
        check: Callable[[Figures], None] | None = None,
        reading: str | None = None,
    ) -> Callable[[Callable[[Figures], Decision]], Rule]:
        """Register the decorated function as the rule of the rows ``ids``; ``cases`` maps each branch to made-up
        figures (one mapping or several) that must reach it."""

        def register(decide: Callable[[Figures], Decision]) -> Rule:
            return self._add(Rule(self.study, ids, decide, _cases(cases), check, reading, name=decide.__name__))

        return register

    def equivalence(
        self,
        *ids: str,
        estimates: Callable[[Figures], Sequence[tuple[str, Summary | Estimate]] | None],
        margin: Callable[[Figures], float],
        cases: Mapping[str, Figures | Sequence[Figures]],
        check: Callable[[Figures], None] | None = None,
        name: str = "equivalence",
    ) -> Rule:
        """Register the equivalence test of a claim of no effect or of equality for the rows ``ids``: ``estimates``
        gives the named differences from no effect (None: too few seeds for any, inconclusive) and ``margin`` the
        equivalence margin, both from the figures; decided by :func:`equivalence`, each difference's mean cut at
        +-margin."""

        def decide(figures: Figures) -> Decision:
            named = estimates(figures)
            if named is None:
                return decided("inconclusive")
            bound = margin(figures)
            cuts = [Cut.of(what, value, side * bound) for what, value in named for side in (-1, 1)]
            return decided(equivalence([value for _, value in named], bound), *cuts)

        return self._add(Rule(self.study, ids, decide, _cases(cases), check, test="equivalence", name=name))

    def __getitem__(self, claim: str) -> Rule:
        try:
            return self._rules[claim]
        except KeyError:
            raise RuleError(
                f"{self.study} has no rule for {claim!r}; register it in results/{self.study}/rules.py before its runs."
            ) from None

    def __contains__(self, claim: object) -> bool:
        return claim in self._rules

    def __iter__(self) -> Iterator[str]:
        return iter(self._rules)

    def rules(self) -> list[Rule]:
        """Each registered rule once, in registration order."""
        return list({id(rule): rule for rule in self._rules.values()}.values())


def ledger_problems(book: RuleBook, rows: Sequence[Mapping[str, str]]) -> list[str]:
    """What a study's ledger ``rows`` and its rule book disagree on, one sentence each (empty: none): a row with no
    rule (a withdrawn one needs none), a rule for a row the ledger lacks, a row whose rule reads the paper's setting
    our way but whose claim does not say ``under our reading: ...``, or whose verdict is a plain ``agree``."""
    problems = []
    ids = {row["id"] for row in rows}
    for row in rows:
        if row["verdict"] == WITHDRAWN:
            continue
        if row["id"] not in book:
            problems.append(f"{book.study}/{row['id']} has no registered rule (results/{book.study}/rules.py).")
            continue
        rule = book[row["id"]]
        if rule.reading and READING_MARK not in row["claim"]:
            problems.append(
                f"{book.study}/{row['id']}: its rule reads the paper's setting our way ({rule.reading}); its claim must "
                f"name the departure ('{READING_MARK}: ...')."
            )
        if rule.reading and row["verdict"] == "agree":
            problems.append(f"{book.study}/{row['id']} reads plain 'agree' under a rule with a reading.")
    for claim in book:
        if claim not in ids:
            problems.append(f"{book.study} has a rule for {claim!r}, which its ledger does not list.")
    return problems
