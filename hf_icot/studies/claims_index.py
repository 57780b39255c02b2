"""``results/CLAIMS.md`` and the studies' README verdict tables, written from the ledgers
(:mod:`hf_icot.studies.claims`): every study's claims tallied by their decisive point, our questions and goals apart,
what each re-read moved and why, and which written outputs no longer match their ledgers."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from hf_icot.studies.claims import (
    _MOVED,
    _REREGISTERED,
    BEGIN_VERDICTS,
    COLUMNS,
    EARLIER,
    END_VERDICTS,
    INDEX_FILE,
    LEDGER_FILE,
    README_FILE,
    VERDICTS,
    LedgerError,
    read_ledger,
)


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
