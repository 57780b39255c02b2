"""The claims ledgers against results/CLAIMS.md and the study READMEs, and the ledger's vocabulary, links and flags."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hf_icot.studies.claims import (
    BEGIN_VERDICTS,
    EARLIER,
    END_VERDICTS,
    VERDICTS,
    LedgerError,
    knife_edge,
    read_ledger,
    update_ledger,
    write_ledger,
)
from hf_icot.studies.claims_index import claims_markdown, read_ledgers, stale_claim_outputs, write_claims_index

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "results"
README = f"# A study\n\n{BEGIN_VERDICTS}\n{END_VERDICTS}\n\nWhat it says.\n"


def _row(row_id: str, verdict: str = "agree", **columns: str) -> dict[str, str]:
    return {"id": row_id, "claim": f"claim {row_id}", "rule": f"rule of {row_id}", "verdict": verdict, **columns}


def _study(root: Path, name: str, rows: list[dict[str, str]]) -> Path:
    (root / name).mkdir(parents=True, exist_ok=True)
    write_ledger(root / name / "claims.csv", rows)
    (root / name / "README.md").write_text(README)
    return root / name / "claims.csv"


def test_every_ledger_matches_claims_md_and_its_readmes_verdict_table() -> None:
    """Fails when a claims.csv changed and `python -m hf_icot.studies claims` was not run after it."""
    assert stale_claim_outputs(RESULTS) == []


def test_a_ledger_changed_after_the_index_is_caught(tmp_path: Path) -> None:
    root = tmp_path / "results"
    shutil.copytree(RESULTS, root, ignore=shutil.ignore_patterns("runs", "*.png", "first_round", "paper"))
    assert stale_claim_outputs(root) == []
    ledger = root / "marginals" / "claims.csv"
    rows = read_ledger(ledger)
    write_ledger(ledger, [{**row, "verdict": "pending"} if row["id"] == "C2" else row for row in rows])
    stale = stale_claim_outputs(root)
    assert len(stale) == 2 and "CLAIMS.md differs from its ledgers" in stale[0] and "marginals" in stale[1]
    write_claims_index(root)
    assert stale_claim_outputs(root) == []
    assert (
        "| C2 | C2 | decisive | τ does not depend on K at fixed D = K n_b | **pending** |"
        in (root / "marginals" / "README.md").read_text()
    )


def test_claims_md_tallies_each_claim_once_by_its_decisive_row_and_our_goals_apart(tmp_path: Path) -> None:
    _study(tmp_path, "alpha", [
        _row("A1", "inconclusive", claim_id="A1", point="other"),
        _row("A1-later", "agree in kind", claim_id="A1", point="decisive"),
        _row("G1", "pending", kind="goal"),
    ])  # fmt: skip
    was = "disagree until re-read on 2026-12-04: the old rule's mean"
    _study(tmp_path, "beta", [_row("B1", "inconclusive", history=was), _row("Q1", "agree", kind="question")])
    text = claims_markdown(tmp_path)
    assert "## The papers' claims: 2 claims, 1 agree in kind, 1 inconclusive" in text
    assert "| A1 | claim | alpha | claim A1-later | agree in kind | A1-later | alpha/A1: inconclusive |  |" in text
    assert "| B1 | claim | beta | claim B1 | inconclusive (re-read; was disagree) | B1 | — |  |" in text
    assert "## Our own questions and reproduction goals: 2, 1 agree, 1 pending" in text
    assert "| [alpha](alpha/README.md) | 3 rows: 1 agree in kind, 1 inconclusive, 1 pending |" in text


def test_the_real_index_counts_claims_not_rows() -> None:
    ledgers = read_ledgers(RESULTS)
    rows = [row for study in ledgers.values() for row in study]
    claims = {row["claim_id"] for row in rows if row["kind"] == "claim"}
    text = (RESULTS / "CLAIMS.md").read_text()
    assert f"## The papers' claims: {len(claims)} claims, " in text
    assert len(claims) < sum(row["kind"] == "claim" for row in rows), "semiautomata's points are rows, not claims"
    assert {"A8-parity", "A8-semiautomata"} <= {row["claim_id"] for row in rows}
    assert "A8" not in {row["id"] for row in ledgers["parity"]}, "parity's Theorem 2 and the probe question differ"
    for row in rows:  # a verdict re-read is never silently changed: the old word stays in each history entry
        for entry in row["history"].split(EARLIER):
            if " until re-read on " in entry:
                assert entry.split(" until re-read on ")[0] in VERDICTS, row["id"]


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([_row("X", "mostly agree")], r"claim 'X' has the verdict 'mostly agree'; allowed: agree, agree in kind, "),
        ([_row("X", point="main")], r"claim 'X' has the point 'main'; allowed: decisive, other"),
        ([_row("X", kind="hunch")], r"claim 'X' has the kind 'hunch'; allowed: claim, question, goal"),
        ([_row("X", "agree under our reading")], r"claim 'X' agrees under our reading, but its claim does not state"),
    ],
)
def test_a_ledger_outside_the_vocabulary_is_one_sentence(tmp_path: Path, rows: list, message: str) -> None:
    write_ledger(tmp_path / "claims.csv", rows)
    with pytest.raises(LedgerError, match=message):
        read_ledger(tmp_path / "claims.csv")


def test_the_analysis_may_not_agree_under_a_reading_the_claim_does_not_state(tmp_path: Path) -> None:
    path = tmp_path / "claims.csv"
    write_ledger(path, [_row("X", "pending"), _row("Y", "pending", claim="Y, under our reading: zeros are absent")])
    with pytest.raises(LedgerError, match=r"^claim 'X' would agree under our reading, but its claim does not state"):
        update_ledger(path, {"X": {"verdict": "agree under our reading"}})
    rows = update_ledger(path, {"Y": {"verdict": "agree under our reading", "flag": "knife-edge: ..."}})
    assert (rows[1]["verdict"], rows[1]["flag"]) == ("agree under our reading", "knife-edge: ...")
    with pytest.raises(LedgerError, match=r"^the analysis may not set history of claim 'Y'"):
        update_ledger(path, {"Y": {"history": "agree until yesterday"}})


@pytest.mark.parametrize(
    ("alpha", "beta", "message"),
    [
        ([_row("C1")], [_row("C1")], r"the id 'C1' is in the ledgers of both alpha and beta"),
        ([_row("C1"), _row("C2", claim_id="C1")], [], r"the claim 'C1' has 2 decisive rows \(alpha/C1, alpha/C2\)"),
        ([_row("C1", point="other")], [], r"the claim 'C1' has 0 decisive rows \(none\)"),
        (
            [_row("C1")],
            [_row("C1-b", claim_id="C1", point="other", kind="goal")],
            r"give it the kinds \['claim', 'goal'\]",
        ),
    ],
)
def test_ids_and_links_are_checked_across_studies(tmp_path: Path, alpha: list, beta: list, message: str) -> None:
    _study(tmp_path, "alpha", alpha)
    _study(tmp_path, "beta", beta)
    with pytest.raises(LedgerError, match=message):
        claims_markdown(tmp_path)


def test_a_readme_without_its_verdict_block_is_named(tmp_path: Path) -> None:
    _study(tmp_path, "alpha", [_row("C1")])
    write_claims_index(tmp_path)
    (tmp_path / "alpha" / "README.md").write_text("# A study with no table\n")
    with pytest.raises(LedgerError, match=r"README.md has 0 verdict blocks; put one pair of lines"):
        stale_claim_outputs(tmp_path)


def test_a_knife_edge_is_a_figure_within_one_standard_error_of_the_cut() -> None:
    assert knife_edge(0.807, 0.80, 0.058, "the share") == (
        "knife-edge: the share 0.807 is within one standard error (0.058) of the rule's cut 0.8"
    )
    assert knife_edge(0.782, 0.50, 0.207) == ""  # 0.282 away: firm
    assert knife_edge(0.5, 0.5, None) == "" and knife_edge(float("nan"), 0.5, 0.1) == ""  # one seed: no error
    with pytest.raises(ValueError, match=r"standard_error=-0.1 is negative"):
        knife_edge(0.5, 0.5, -0.1)


def test_claims_md_says_what_each_re_read_moved_and_why(tmp_path: Path) -> None:
    moved = "agree until re-read on 2026-12-07 (issue 54): the interval straddles the margin; earlier: pending until re-read on 2026-12-04 (issue 40): old"
    kept = "rule re-registered on 2026-12-07 (issue 54): a disagree branch added; the verdict holds"
    _study(tmp_path, "alpha", [_row("C2", "inconclusive", history=moved), _row("R", "agree", history=kept),
                               _row("C3", "agree", history="registered on 2026-12-05, before its runs")])  # fmt: skip
    text = claims_markdown(tmp_path)
    assert (
        "* 2026-12-07 (issue 54): 1 verdicts moved — agree → inconclusive (1); 1 re-read with the verdict kept."
        in text
    )
    assert "| 2026-12-07 | alpha | C2 | agree | inconclusive | the interval straddles the margin |" in text
    assert "| 2026-12-07 | alpha | R | agree | agree | a disagree branch added; the verdict holds |" in text
    assert "| C2 | claim | alpha | claim C2 | inconclusive (re-read; was agree) | C2 | — |  |" in text
    assert "| 2026-12-07 | alpha | C3 |" not in text and "| 2026-12-05 | alpha | C3 |" not in text
