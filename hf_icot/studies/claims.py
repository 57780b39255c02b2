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
decide them. :func:`write_claims_index` gathers every study's ledger into ``results/CLAIMS.md`` (claims tallied by
their decisive point, our questions and goals apart, and what each re-read moved and why) and writes each study
README's verdict table; :func:`stale_claim_outputs` says which of them no longer match their ledgers.
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


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _claim_of(row: Mapping[str, str]) -> str:
    return row["claim_id"] or row["id"]


def _point_of(row: Mapping[str, str]) -> str:
    return row["point"] or "decisive"


def _kind_of(row: Mapping[str, str]) -> str:
    return row["kind"] or "claim"


def read_ledgers(results_root: str | os.PathLike) -> dict[str, list[dict[str, str]]]:
    """Every study's ledger under ``results_root`` (``<study>/claims.csv``), study name -> rows, checked together.

    Raises:
        LedgerError: a ledger :func:`read_ledger` refuses, a row id in two studies, a claim with no decisive row or
            with two, or a claim whose rows disagree on its kind.
    """
    root = Path(results_root)
    ledgers = {path.parent.name: read_ledger(path) for path in sorted(root.glob(f"*/{LEDGER_FILE}"))}
    where: dict[str, str] = {}
    decisive: dict[str, list[str]] = {}
    kinds: dict[str, set[str]] = {}
    for study, rows in ledgers.items():
        for row in rows:
            if row["id"] in where:
                raise LedgerError(
                    f"the id {row['id']!r} is in the ledgers of both {where[row['id']]} and {study}; "
                    "give every row an id of its own across studies (e.g. A8-parity)."
                )
            where[row["id"]] = study
            claim = _claim_of(row)
            decisive.setdefault(claim, [])
            kinds.setdefault(claim, set()).add(_kind_of(row))
            if _point_of(row) == "decisive":
                decisive[claim].append(f"{study}/{row['id']}")
    for claim, rows in decisive.items():
        if len(rows) != 1:
            raise LedgerError(
                f"the claim {claim!r} has {len(rows)} decisive rows ({', '.join(rows) or 'none'}); "
                "mark exactly one row of each claim point=decisive, the others point=other."
            )
        if len(kinds[claim]) != 1:
            raise LedgerError(f"the rows of the claim {claim!r} give it the kinds {sorted(kinds[claim])}; give one.")
    return ledgers


def _tally(claims: list[dict[str, str]]) -> str:
    counts = {verdict: sum(row["verdict"] == verdict for row in claims) for verdict in VERDICTS}
    return ", ".join(f"{count} {verdict}" for verdict, count in counts.items() if count) or "none"


def _verdict_cell(row: Mapping[str, str]) -> str:
    """The verdict, with the word it held before a re-read (``history``: ``<old> until re-read on <date>: ...``)."""
    old = row["history"].split(" until re-read on ", 1)[0] if " until re-read on " in row["history"] else ""
    return f"{row['verdict']} (re-read; was {old})" if old in VERDICTS else row["verdict"]


def latest_reread(row: Mapping[str, str]) -> dict[str, str] | None:
    """A row's latest history entry when it records a re-read: its ``date``, who asked (``by``, may be empty), the
    verdict it held (``was``: the same as now where only the rule was re-registered) and ``why``; None otherwise."""
    entry = row["history"].split(EARLIER, 1)[0].strip()
    for pattern in (_MOVED, _REREGISTERED):
        match = pattern.match(entry)
        if match is not None:
            was = match.groupdict().get("was") or row["verdict"]
            if was in VERDICTS:
                return {"date": match["date"], "by": match["by"] or "", "was": was, "why": match["why"]}
    return None


def _rereads(ledgers: Mapping[str, list[dict[str, str]]]) -> list[str]:
    """The re-reads section of ``CLAIMS.md``: per date, what moved, then one line per re-read row, the latest first."""
    found = [(reread, study, row) for study, rows in ledgers.items() for row in rows
             if (reread := latest_reread(row)) is not None]  # fmt: skip
    if not found:
        return []
    found.sort(key=lambda item: item[0]["date"], reverse=True)
    lines = ["## Re-reads: what moved and why", "",
             "Each row whose history records a re-read, by its latest entry: the verdict it held, the one it holds",
             "now, and why (the row's history keeps the older entries); a date counts the rows whose latest re-read",
             "it is.", ""]  # fmt: skip
    for date in dict.fromkeys(reread["date"] for reread, _, _ in found):
        on_date = [(reread, row) for reread, _, row in found if reread["date"] == date]
        by = ", ".join(sorted({reread["by"] for reread, _ in on_date if reread["by"]}))
        moves: dict[str, int] = {}
        for reread, row in on_date:
            if reread["was"] != row["verdict"]:
                moves[f"{reread['was']} → {row['verdict']}"] = moves.get(f"{reread['was']} → {row['verdict']}", 0) + 1
        kept = sum(reread["was"] == row["verdict"] for reread, row in on_date)
        moved = ", ".join(f"{move} ({count})" for move, count in moves.items()) or "none"
        lines.append(f"* {date}{f' ({by})' if by else ''}: {sum(moves.values())} verdicts moved — {moved}; "
                     f"{kept} re-read with the verdict kept.")  # fmt: skip
    lines += ["", "| date | study | row | was | now | why |", "|---|---|---|---|---|---|"]
    for reread, study, row in found:
        cells = [reread["date"], study, row["id"], reread["was"], row["verdict"], reread["why"]]
        lines.append("| " + " | ".join(_cell(cell) for cell in cells) + " |")
    return [*lines, ""]


def _claims_table(claims: list[dict[str, str]], points: dict[str, list[tuple[str, dict[str, str]]]]) -> list[str]:
    lines = ["| claim | kind | study | the claim | verdict (its decisive row's) | decisive row | other points | flag |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for row in claims:
        claim = _claim_of(row)
        others = "; ".join(
            f"{study}/{other['id']}: {_verdict_cell(other)}" + (" (knife-edge)" if other["flag"] else "")
            for study, other in points[claim]
        )
        cells = [claim, _kind_of(row), row["study"], row["claim"], _verdict_cell(row), row["id"], others or "—",
                 row["flag"]]  # fmt: skip
        lines.append("| " + " | ".join(_cell(cell) for cell in cells) + " |")
    return lines


def claims_markdown(results_root: str | os.PathLike) -> str:
    """Every study's ledger under ``results_root`` (``<study>/claims.csv``) as Markdown: the papers' claims tallied
    one verdict per claim (its decisive row's, the other points listed), our own questions and goals tallied apart,
    then every row.

    Raises:
        LedgerError: as :func:`read_ledgers`.
    """
    ledgers = read_ledgers(results_root)
    decisive: list[dict[str, str]] = []
    points: dict[str, list[tuple[str, dict[str, str]]]] = {}
    for study, rows in ledgers.items():
        for row in rows:
            points.setdefault(_claim_of(row), [])
            if _point_of(row) == "decisive":
                decisive.append({**row, "study": study})
            else:
                points[_claim_of(row)].append((study, row))
    papers = [row for row in decisive if _kind_of(row) == "claim"]
    ours = [row for row in decisive if _kind_of(row) != "claim"]
    lines = [
        "# Claims ledger",
        "",
        "Every study's claims, the rule that decides each (fixed before its runs), our verdict and the figures behind",
        f"it. Written by `python -m hf_icot.studies claims` from each `results/<study>/{LEDGER_FILE}`; do not edit.",
        "A claim's verdict is its decisive row's; its rows at other points are listed beside it. Verdicts: "
        + ", ".join(f"`{verdict}`" for verdict in VERDICTS)
        + " (see `hf_icot/studies/claims.py`); a knife-edge (the figure within one standard error of the rule's cut)"
        " is flagged.",
        "",
        f"## The papers' claims: {len(papers)} claims, {_tally(papers)}",
        "",
        *_claims_table(papers, points),
        "",
        f"## Our own questions and reproduction goals: {len(ours)}, {_tally(ours)}",
        "",
        "Not the papers' claims: the regimes we chose (R, R2), our goals on this CPU (M1, M2, L*, P*) and our own",
        "questions.",
        "",
        *_claims_table(ours, points),
        "",
        *_rereads(ledgers),
        "## Every row, by study",
        "",
        "| study | rows |",
        "|---|---|",
    ]
    for study, rows in ledgers.items():
        lines.append(f"| [{study}]({study}/README.md) | {len(rows)} rows: {_tally(rows)} |")
    lines += ["", "| study | " + " | ".join(COLUMNS) + " |", "|" + "---|" * (len(COLUMNS) + 1)]
    for study, rows in ledgers.items():
        for row in rows:
            cells = [study, *(row[column] for column in COLUMNS)]
            lines.append("| " + " | ".join(_cell(cell) for cell in cells) + " |")
    return "\n".join(lines) + "\n"


def verdict_table(rows: Sequence[Mapping[str, str]]) -> str:
    """A study README's verdict table, one line per ledger row: its id, claim and point, verdict, flag, seeds and
    history (the figures and rules stay in ``claims.csv``)."""
    lines = [
        BEGIN_VERDICTS,
        "",
        "| id | claim id | point | claim | verdict | flag | seeds | history |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        cells = [row["id"], _claim_of(row), _point_of(row), row["claim"], f"**{row['verdict']}**", row["flag"],
                 row["seeds"], row["history"]]  # fmt: skip
        lines.append("| " + " | ".join(_cell(cell) for cell in cells) + " |")
    return "\n".join([*lines, "", END_VERDICTS])


_VERDICT_BLOCK = re.compile(re.escape(BEGIN_VERDICTS) + r".*?" + re.escape(END_VERDICTS), re.DOTALL)


def readme_with_verdicts(readme: str, rows: Sequence[Mapping[str, str]], where: str = "the README") -> str:
    """``readme`` with its verdict block (between :data:`BEGIN_VERDICTS` and :data:`END_VERDICTS`) rewritten from
    ``rows``.

    Raises:
        LedgerError: a README without exactly one verdict block.
    """
    blocks = len(_VERDICT_BLOCK.findall(readme))
    if blocks != 1:
        raise LedgerError(
            f"{where} has {blocks} verdict blocks; put one pair of lines {BEGIN_VERDICTS!r} ... {END_VERDICTS!r} "
            "where its verdict table goes."
        )
    return _VERDICT_BLOCK.sub(lambda _: verdict_table(rows), readme)


def write_readme_verdicts(readme: str | os.PathLike, ledger: str | os.PathLike) -> Path:
    """Rewrite the verdict block of the README at ``readme`` from the ledger at ``ledger``; returns its path."""
    path = Path(readme)
    path.write_text(readme_with_verdicts(path.read_text(encoding="utf-8"), read_ledger(ledger), str(path)), "utf-8")
    return path


def stale_claim_outputs(results_root: str | os.PathLike) -> list[str]:
    """What no longer matches the ledgers under ``results_root``: ``CLAIMS.md`` and each study README's verdict
    block, as a list of one-line reasons (empty when every one is current).

    Raises:
        LedgerError: as :func:`read_ledgers`, or a study README without one verdict block.
    """
    root = Path(results_root)
    stale = []
    index = root / INDEX_FILE
    if not index.exists() or index.read_text(encoding="utf-8") != claims_markdown(root):
        stale.append(f"{index} differs from its ledgers; run python -m hf_icot.studies claims")
    for study, rows in read_ledgers(root).items():
        readme = root / study / README_FILE
        if not readme.exists():
            stale.append(f"{readme} does not exist; a study with a ledger has a README with its verdict table")
            continue
        text = readme.read_text(encoding="utf-8")
        if readme_with_verdicts(text, rows, str(readme)) != text:
            stale.append(
                f"{readme}'s verdict table differs from {study}/{LEDGER_FILE}; run python -m hf_icot.studies claims"
            )
    return stale


def write_claims_index(results_root: str | os.PathLike, out: str | os.PathLike | None = None) -> Path:
    """Write :func:`claims_markdown` to ``out`` (default ``results_root/CLAIMS.md``) and every study README's verdict
    block (a README with none is left alone); returns the index's path."""
    root = Path(results_root)
    target = Path(out) if out is not None else root / INDEX_FILE
    text = claims_markdown(root)
    for study in read_ledgers(root):
        readme = root / study / README_FILE
        if readme.exists() and BEGIN_VERDICTS in readme.read_text(encoding="utf-8"):
            write_readme_verdicts(readme, root / study / LEDGER_FILE)
    target.write_text(text, encoding="utf-8")
    return target
