"""The claims ledger: one row per claim at one point of a study, in ``results/<study>/claims.csv``.

Columns (:data:`COLUMNS`): ``id`` (the row's id, unique across every study), ``claim_id`` (the claim the row is a
point of, one id per claim across studies; empty: the row's own id), ``point`` (:data:`POINTS`: ``decisive`` for the
one row whose verdict is the claim's, ``other`` for a point reported beside it; empty: ``decisive``), ``kind``
(:data:`KINDS`: a paper's ``claim``, ``question`` of ours, or reproduction ``goal``; empty: ``claim``), ``claim`` (one
line; where the verdict is ``agree under our reading``, the reading), ``rule`` (how the runs decide it, written and
committed before they run), ``verdict`` (:data:`VERDICTS`; ``pending`` until the runs are in), ``flag`` (a knife-edge:
the figure within one standard error of the rule's cut, see :func:`knife_edge`), ``seeds`` (how many seeds stand
behind the verdict), ``ours`` (our figure), ``theirs`` (the study's figure, where it gives one), ``why`` (why they
differ; for ``inconclusive``: what scale or run would decide it) and ``history`` (the verdicts a row held before it was
re-read, and when: ``agree until re-read on 2026-12-04 (issue 40): ...``, or ``rule re-registered on <date> (<by>):
...`` where the rule changed and the verdict did not, ``re-worded on ...`` where the claim's words did; the latest
entry first, older ones after ``; earlier: ``; a verdict is never changed silently).

The vocabulary: ``agree``; ``agree in kind`` (the direction is right, the magnitude outside the study's figure);
``agree under our reading`` (the claim holds under the reading the row's claim states, where the seed leaves it
open); ``disagree``; ``inconclusive``; ``pending``; ``withdrawn``.

``withdrawn`` marks a claim dropped before its deciding runs: set by hand, in a commit of its own, with ``why`` saying
why (a ledger refuses a withdrawn row without one). The analysis never revives it: :func:`update_ledger` leaves a
withdrawn row as it is and may not withdraw one itself.

A study's analysis script fills the result columns from its records, each verdict by the row's registered rule
(``results/<study>/rules.py``, :mod:`hf_icot.studies.rules`), with :func:`update_ledger`, which never rewrites a
claim, its rule, its links or its history: those change only by hand, in a commit of their own, before the runs that
decide them. :func:`hf_icot.studies.claims_index.write_claims_index` gathers every study's ledger into ``results/CLAIMS.md`` (claims tallied by
their decisive point, our questions and goals apart, and what each re-read moved and why) and writes each study
README's verdict table; :func:`~hf_icot.studies.claims_index.stale_claim_outputs` says which of them no longer match their ledgers.
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

LEDGER_FILE = "claims.csv"
INDEX_FILE = "CLAIMS.md"
README_FILE = "README.md"
COLUMNS = (
    "id", "claim_id", "point", "kind", "claim", "rule", "verdict", "flag", "seeds", "ours", "theirs", "why", "history"
)  # fmt: skip
VERDICTS = (
    "agree", "agree in kind", "agree under our reading", "disagree", "inconclusive", "pending", "withdrawn"
)  # fmt: skip
#: ``decisive``: the row whose verdict is its claim's; ``other``: a point reported beside it.
POINTS = ("decisive", "other")
#: ``claim``: a paper's claim; ``question``: a question of ours; ``goal``: a reproduction goal of ours.
KINDS = ("claim", "question", "goal")
#: The verdict only a hand edit may set (with a ``why``); :func:`update_ledger` leaves such a row untouched.
WITHDRAWN = "withdrawn"
#: The verdict whose row states, in its claim, the reading it agrees under (checked on every read and update).
UNDER_OUR_READING = "agree under our reading"
#: What :func:`update_ledger` may fill in from the records; the claim, its rule, links and history stay as committed.
RESULT_COLUMNS = ("verdict", "flag", "seeds", "ours", "theirs", "why")
#: Between a row's history entries, the latest first.
EARLIER = "; earlier: "
_MOVED = re.compile(
    r"^(?P<was>.+?) until re-read on (?P<date>\d{4}-\d{2}-\d{2})(?: \((?P<by>[^)]*)\))?: (?P<why>.*)$", re.S
)
_REREGISTERED = re.compile(
    r"^(?:rule re-registered|re-worded) on (?P<date>\d{4}-\d{2}-\d{2})(?: \((?P<by>[^)]*)\))?: (?P<why>.*)$", re.S
)
#: The markers between which :func:`write_claims_index` writes a study README's verdict table.
BEGIN_VERDICTS = "<!-- begin verdicts: written by `python -m hf_icot.studies claims` from claims.csv; do not edit -->"
END_VERDICTS = "<!-- end verdicts -->"


class LedgerError(ValueError):
    """A ledger that cannot be read, or an update it refuses."""


def _check_row(path: Path, row: dict[str, str]) -> None:
    claim = row["id"]
    if row["verdict"] not in VERDICTS:
        raise LedgerError(
            f"{path}: claim {claim!r} has the verdict {row['verdict']!r}; allowed: {', '.join(VERDICTS)}."
        )
    if row["point"] not in ("", *POINTS):
        raise LedgerError(f"{path}: claim {claim!r} has the point {row['point']!r}; allowed: {', '.join(POINTS)}.")
    if row["kind"] not in ("", *KINDS):
        raise LedgerError(f"{path}: claim {claim!r} has the kind {row['kind']!r}; allowed: {', '.join(KINDS)}.")
    if row["verdict"] == UNDER_OUR_READING and "reading" not in row["claim"]:
        raise LedgerError(
            f"{path}: claim {claim!r} agrees under our reading, but its claim does not state the reading; write it "
            "there by hand ('..., under our reading: ...')."
        )
    if row["verdict"] == WITHDRAWN and not row["why"].strip():
        raise LedgerError(
            f"{path}: claim {claim!r} is withdrawn with an empty why; say why it was dropped before its runs."
        )


def read_ledger(path: str | os.PathLike) -> list[dict[str, str]]:
    """The rows of a ``claims.csv``, in file order.

    Raises:
        LedgerError: a missing file, columns other than :data:`COLUMNS`, a repeated id, a verdict, point or kind
            outside :data:`VERDICTS`, :data:`POINTS`, :data:`KINDS`, an ``agree under our reading`` whose claim does
            not state the reading, or a withdrawn claim with no why.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise LedgerError(
            f"{path} does not exist; a study's ledger is its claims.csv ({', '.join(COLUMNS)})."
        ) from None
    reader = csv.DictReader(io.StringIO(text))
    if tuple(reader.fieldnames or ()) != COLUMNS:
        raise LedgerError(f"{path} has the columns {reader.fieldnames}; a ledger has exactly {', '.join(COLUMNS)}.")
    rows, seen = [], set()
    for row in reader:
        if row["id"] in seen:
            raise LedgerError(f"{path} lists the claim {row['id']!r} twice; give each claim one row.")
        _check_row(path, row)
        seen.add(row["id"])
        rows.append(dict(row))
    return rows


def write_ledger(path: str | os.PathLike, rows: Sequence[Mapping[str, Any]]) -> None:
    """Write ``rows`` as a ``claims.csv`` (every value as text; missing columns empty)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({column: "" if row.get(column) is None else str(row.get(column)) for column in COLUMNS})
    Path(path).write_text(buffer.getvalue(), encoding="utf-8")


def update_ledger(path: str | os.PathLike, results: Mapping[str, Mapping[str, Any]]) -> list[dict[str, str]]:
    """Fill the result columns of the ledger at ``path`` from ``results`` (claim id -> a mapping of some of
    :data:`RESULT_COLUMNS`) and write it back; returns the rows.

    A withdrawn claim's row is left as it is (its entry in ``results`` is ignored).

    Raises:
        LedgerError: a claim id the ledger does not have, a column outside :data:`RESULT_COLUMNS` (``claim``,
            ``rule``, the links and ``history`` are fixed by hand), an unknown verdict, ``withdrawn`` (only a hand
            edit withdraws), or ``agree under our reading`` for a claim that does not state the reading.
    """
    rows = read_ledger(path)
    by_id = {row["id"]: row for row in rows}
    for claim_id, values in results.items():
        if claim_id not in by_id:
            raise LedgerError(
                f"claim {claim_id!r} is not in {path}; add its row (claim and rule) by hand, before its runs."
            )
        fixed = sorted(set(values) - set(RESULT_COLUMNS))
        if fixed:
            raise LedgerError(
                f"the analysis may not set {', '.join(fixed)} of claim {claim_id!r}; only {', '.join(RESULT_COLUMNS)}."
            )
        verdict = values.get("verdict", by_id[claim_id]["verdict"])
        if verdict not in VERDICTS:
            raise LedgerError(f"claim {claim_id!r}: verdict {verdict!r} is unknown; allowed: {', '.join(VERDICTS)}.")
        if by_id[claim_id]["verdict"] == WITHDRAWN:
            continue
        if verdict == WITHDRAWN:
            raise LedgerError(
                f"the analysis may not withdraw claim {claim_id!r}; withdraw it by hand in claims.csv, with a why."
            )
        if verdict == UNDER_OUR_READING and "reading" not in by_id[claim_id]["claim"]:
            raise LedgerError(
                f"claim {claim_id!r} would agree under our reading, but its claim does not state the reading; write "
                "it there by hand, before the analysis sets this verdict."
            )
        by_id[claim_id].update({key: "" if value is None else str(value) for key, value in values.items()})
    write_ledger(path, rows)
    return rows


def knife_edge(figure: float | None, cut: float, standard_error: float | None, what: str = "the figure") -> str:
    """The ``flag`` of a verdict decided on a figure within one standard error of its rule's cut, else ``""``.

    ``figure`` and ``standard_error`` of ``None`` or NaN (no figure, or one seed) flag nothing.

    Raises:
        ValueError: a negative standard error.
    """
    if figure is None or standard_error is None or math.isnan(figure) or math.isnan(standard_error):
        return ""
    if standard_error < 0:
        raise ValueError(f"standard_error={standard_error!r} is negative; a standard error is >= 0.")
    if abs(figure - cut) > standard_error:
        return ""
    gap = f"one standard error ({standard_error:.2g})"
    return f"knife-edge: {what} {figure:.3g} is within {gap} of the rule's cut {cut:g}"
