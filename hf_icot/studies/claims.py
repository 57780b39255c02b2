"""The claims ledger: one row per published claim of a study, in ``results/<study>/claims.csv``.

Columns (:data:`COLUMNS`): ``id``, ``claim`` (one line), ``rule`` (how the runs decide it, written and committed before
they run), ``verdict`` (:data:`VERDICTS`; ``pending`` until the runs are in), ``seeds`` (how many seeds stand behind
the verdict), ``ours`` (our figure), ``theirs`` (the study's figure, where it gives one) and ``why`` (why they differ;
for ``inconclusive``: what scale or run would decide it).

``withdrawn`` marks a claim dropped before its deciding runs: set by hand, in a commit of its own, with ``why`` saying
why (a ledger refuses a withdrawn row without one). The analysis never revives it: :func:`update_ledger` leaves a
withdrawn row as it is and may not withdraw one itself.

A study's analysis script fills the verdict columns from its records with :func:`update_ledger`, which never rewrites a
claim or its rule: those change only by hand, in a commit of their own, before the runs that decide them.
:func:`write_claims_index` gathers every study's ledger into ``results/CLAIMS.md``.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

LEDGER_FILE = "claims.csv"
INDEX_FILE = "CLAIMS.md"
COLUMNS = ("id", "claim", "rule", "verdict", "seeds", "ours", "theirs", "why")
VERDICTS = ("agree", "disagree", "inconclusive", "pending", "withdrawn")
#: The verdict only a hand edit may set (with a ``why``); :func:`update_ledger` leaves such a row untouched.
WITHDRAWN = "withdrawn"
#: What :func:`update_ledger` may fill in from the records; ``claim`` and ``rule`` stay as committed.
RESULT_COLUMNS = ("verdict", "seeds", "ours", "theirs", "why")


class LedgerError(ValueError):
    """A ledger that cannot be read, or an update it refuses."""


def read_ledger(path: str | os.PathLike) -> list[dict[str, str]]:
    """The rows of a ``claims.csv``, in file order.

    Raises:
        LedgerError: a missing file, columns other than :data:`COLUMNS`, a repeated id or an unknown verdict.
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
        if row["verdict"] not in VERDICTS:
            raise LedgerError(
                f"{path}: claim {row['id']!r} has the verdict {row['verdict']!r}; allowed: {', '.join(VERDICTS)}."
            )
        if row["verdict"] == WITHDRAWN and not row["why"].strip():
            raise LedgerError(
                f"{path}: claim {row['id']!r} is withdrawn with an empty why; say why it was dropped before its runs."
            )
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
        LedgerError: a claim id the ledger does not have, a column outside :data:`RESULT_COLUMNS` (``claim`` and
            ``rule`` are fixed before the runs), an unknown verdict, or ``withdrawn`` (only a hand edit withdraws).
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
        by_id[claim_id].update({key: "" if value is None else str(value) for key, value in values.items()})
    write_ledger(path, rows)
    return rows


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def claims_markdown(results_root: str | os.PathLike) -> str:
    """Every study's ledger under ``results_root`` (``<study>/claims.csv``) as one Markdown table, with a count of
    verdicts per study."""
    root = Path(results_root)
    ledgers = sorted(path for path in root.glob(f"*/{LEDGER_FILE}"))
    lines = [
        "# Claims ledger",
        "",
        "Every study's claims, the rule that decides each (fixed before its runs), our verdict and the figures behind",
        f"it. Written by `python -m hf_icot.studies claims` from each `results/<study>/{LEDGER_FILE}`; do not edit.",
        "",
        "| study | verdicts |",
        "|---|---|",
    ]
    tables = []
    for path in ledgers:
        rows = read_ledger(path)
        counts = {verdict: sum(row["verdict"] == verdict for row in rows) for verdict in VERDICTS}
        summary = ", ".join(f"{count} {verdict}" for verdict, count in counts.items() if count)
        study = path.parent.name
        lines.append(f"| [{study}]({study}/README.md) | {summary} |")
        tables.append((study, rows))
    lines += ["", "| study | " + " | ".join(COLUMNS) + " |", "|" + "---|" * (len(COLUMNS) + 1)]
    for study, rows in tables:
        for row in rows:
            cells = [study, *(row[column] for column in COLUMNS)]
            lines.append("| " + " | ".join(_cell(cell) for cell in cells) + " |")
    return "\n".join(lines) + "\n"


def write_claims_index(results_root: str | os.PathLike, out: str | os.PathLike | None = None) -> Path:
    """Write :func:`claims_markdown` to ``out`` (default ``results_root/CLAIMS.md``); returns its path."""
    target = Path(out) if out is not None else Path(results_root) / INDEX_FILE
    target.write_text(claims_markdown(results_root), encoding="utf-8")
    return target
