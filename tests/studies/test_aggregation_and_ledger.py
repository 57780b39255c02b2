"""Aggregation over seeds on hand-checkable numbers, the claims ledger rebuilt from records, and the results kit's
tables and plots."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from hf_icot.studies.claims import COLUMNS, LedgerError, read_ledger, update_ledger, write_ledger
from hf_icot.studies.claims_index import claims_markdown, write_claims_index
from hf_icot.studies.report import (
    error_bars,
    fmt,
    mark_steps,
    markdown_table,
    plateau_median,
    pyplot,
    save_figure,
    write_table,
)
from hf_icot.studies.statistics import success_rate, summarize, summarize_points


def test_the_t_interval_of_three_seeds_is_the_textbook_one() -> None:
    summary = summarize([1.0, 2.0, 3.0])
    # mean 2, sample std 1, t(0.975, df=2) = 4.302653, half-width 4.302653 / sqrt(3)
    assert (summary.n, summary.mean, summary.std, summary.minimum, summary.maximum) == (3, 2.0, 1.0, 1.0, 3.0)
    assert summary.half_width == pytest.approx(4.302653 / math.sqrt(3), abs=1e-6)
    assert summary.low == pytest.approx(2 - 2.484138, abs=1e-6) and summary.high == pytest.approx(4.484138, abs=1e-6)
    assert summary.text(2) == "2.00 ± 2.48 (n=3)"


def test_one_seed_has_no_interval_and_equal_seeds_a_zero_one() -> None:
    single = summarize([0.7])
    assert single.low is None and single.high is None and single.half_width is None and single.std == 0.0
    assert single.text() == "0.700 (n=1)"
    same = summarize([0.5, 0.5, 0.5, 0.5])
    assert same.low == same.high == 0.5


def test_the_bootstrap_interval_is_seeded_and_brackets_the_mean() -> None:
    values = [0.1, 0.4, 0.35, 0.8, 0.5]
    first, again = summarize(values, method="bootstrap"), summarize(values, method="bootstrap")
    assert first == again and first.low < first.mean < first.high
    assert 0.1 <= first.low and first.high <= 0.8  # a resampled mean never leaves the range of the values
    assert summarize(values, method="bootstrap", seed=1).low != first.low


@pytest.mark.parametrize(
    ("values", "options", "message"),
    [
        ([], {}, "needs at least one value"),
        ([1.0, math.nan], {}, "every value must be a finite number"),
        ([1.0], {"confidence": 1.5}, "confidence 1.5 is not allowed"),
        ([1.0], {"method": "jackknife"}, "interval method 'jackknife' is unknown; allowed: t, bootstrap."),
    ],
)
def test_bad_values_are_one_sentence(values: list, options: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        summarize(values, **options)


def test_points_group_records_by_their_keys_across_seeds() -> None:
    records = [
        {"K": 5, "seed": 0, "tau": 100.0},
        {"K": 5, "seed": 1, "tau": 120.0},
        {"K": 10, "seed": 0, "tau": 90.0},
        {"K": 10, "seed": 1, "tau": None},  # a run that never transitioned
    ]
    rows = summarize_points(records, ["K"], "tau")
    assert [(row["K"], row["seeds"], row["summary"].n, row["summary"].mean) for row in rows] == [
        (5, 2, 2, 110.0),
        (10, 2, 1, 90.0),
    ]


LEDGER = [
    {"id": "C1", "claim": "plateau at log K", "rule": "candidate loss within 10% of log K", "verdict": "pending"},
    {"id": "C2", "claim": "τ flat in K", "rule": "slope CI contains 0", "verdict": "pending"},
]


def test_the_ledger_keeps_claims_and_rules_and_fills_the_results(tmp_path: Path) -> None:
    path = tmp_path / "study" / "claims.csv"
    path.parent.mkdir()
    write_ledger(path, LEDGER)
    rows = update_ledger(path, {"C1": {"verdict": "agree", "seeds": 3, "ours": "1.02 log K", "theirs": "log K"}})
    assert [row["verdict"] for row in rows] == ["agree", "pending"]
    again = read_ledger(path)
    assert again[0] == {**dict.fromkeys(COLUMNS, ""), **LEDGER[0], "verdict": "agree", "seeds": "3",
                        "ours": "1.02 log K", "theirs": "log K"}  # fmt: skip
    assert list(again[0]) == list(COLUMNS)
    with pytest.raises(LedgerError, match=r"^the analysis may not set rule of claim 'C2'"):
        update_ledger(path, {"C2": {"rule": "a looser one"}})
    with pytest.raises(LedgerError, match=r"^claim 'C9' is not in .*add its row \(claim and rule\) by hand"):
        update_ledger(path, {"C9": {"verdict": "agree"}})
    with pytest.raises(LedgerError, match=r"verdict 'maybe' is unknown"):
        update_ledger(path, {"C2": {"verdict": "maybe"}})
    assert read_ledger(path) == again, "a refused update leaves the ledger as it was"


def test_a_withdrawn_claim_needs_a_why_and_the_analysis_leaves_it_alone(tmp_path: Path) -> None:
    path = tmp_path / "claims.csv"
    dropped = {**LEDGER[1], "verdict": "withdrawn", "why": "its runs would compare two floors"}
    write_ledger(path, [LEDGER[0], dropped])
    rows = update_ledger(path, {"C1": {"verdict": "agree", "seeds": 3}, "C2": {"verdict": "pending", "ours": "none"}})
    assert rows[0]["verdict"] == "agree" and rows[1] == {**dict.fromkeys(COLUMNS, ""), **dropped}
    assert read_ledger(path)[1]["verdict"] == "withdrawn"
    with pytest.raises(LedgerError, match=r"^the analysis may not withdraw claim 'C1'; withdraw it by hand"):
        update_ledger(path, {"C1": {"verdict": "withdrawn", "why": "it failed"}})
    assert read_ledger(path)[0]["verdict"] == "agree", "a refused update leaves the ledger as it was"
    write_ledger(path, [{**dropped, "why": "  "}])
    with pytest.raises(LedgerError, match=r"claim 'C2' is withdrawn with an empty why; say why it was dropped"):
        read_ledger(path)


def test_the_claims_index_gathers_every_study(tmp_path: Path) -> None:
    for study, verdict in (("alpha", "agree"), ("beta", "inconclusive")):
        (tmp_path / study).mkdir()
        row = {**LEDGER[0], "id": f"C1-{study}", "verdict": verdict, "seeds": 1}
        write_ledger(tmp_path / study / "claims.csv", [row])
    text = claims_markdown(tmp_path)
    assert "## The papers' claims: 2 claims, 1 agree, 1 inconclusive" in text
    assert "| [alpha](alpha/README.md) | 1 rows: 1 agree |" in text
    row = "| alpha | C1-alpha |  |  |  | plateau at log K | candidate loss within 10% of log K | agree |  | 1 |"
    assert row in text
    path = write_claims_index(tmp_path)
    assert path == tmp_path / "CLAIMS.md" and path.read_text() == text
    (tmp_path / "gamma").mkdir()
    (tmp_path / "gamma" / "claims.csv").write_text("id,claim\nX,y\n")
    with pytest.raises(LedgerError, match=r"has the columns \['id', 'claim'\]; a ledger has exactly id, claim_id"):
        claims_markdown(tmp_path)


def test_tables_are_written_as_csv_and_markdown_with_every_column(tmp_path: Path) -> None:
    rows = [{"run": "a", "acc": 0.91234}, {"run": "b", "acc": None, "steps": 10}]
    markdown = write_table(rows, tmp_path, "table", cell=fmt)
    assert markdown == "| run | acc | steps |\n|---|---|---|\n| a | 0.912 |  |\n| b |  | 10 |\n"
    assert (tmp_path / "table.md").read_text() == markdown
    assert (tmp_path / "table.csv").read_text().splitlines() == ["run,acc,steps", "a,0.912,", "b,,10"]
    assert markdown_table([]) == "_no runs_\n" and write_table([], tmp_path, "none") == "_no runs_\n"
    assert not (tmp_path / "none.csv").exists()


def test_error_bars_plot_each_point_with_its_interval(tmp_path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots()
    container = error_bars(ax, [1, 2, 3], [summarize([1.0, 2.0, 3.0]), None, summarize([5.0])], label="τ")
    mark_steps(ax, [1.5, 2.5], label="stage boundary")
    lines = ax.get_lines()
    assert list(container.lines[0].get_xdata()) == [1, 3]  # the missing point is left out
    segments = container.lines[2][0].get_segments()
    assert segments[0][0][1] == pytest.approx(2 - 2.484138, abs=1e-6) and segments[1][0][1] == 5.0
    dashed = [line for line in lines if line.get_linestyle() == "--"]
    assert [line.get_xdata()[0] for line in dashed] == [1.5, 2.5]
    assert ax.get_legend_handles_labels()[1] == ["stage boundary", "τ"], "the boundaries are named once"
    path = save_figure(fig, tmp_path / "plot.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_welch_interval_of_a_difference_of_means() -> None:
    from hf_icot.studies.statistics import difference

    gap = difference([1.0, 2.0, 3.0], [0.0, 0.0, 0.0, 0.0])
    # se = sqrt(1/3 + 0) and Welch's dof = 2: the one-sample interval of the first side, shifted by the second's mean
    assert gap.mean == 2.0 and gap.std == pytest.approx(1 / math.sqrt(3))
    assert gap.low == pytest.approx(2 - 2.484138, abs=1e-6) and gap.high == pytest.approx(4.484138, abs=1e-6)
    assert difference([0.5], [0.1, 0.2]).low is None
    equal = difference([1.0, 1.0], [0.5, 0.5])
    assert equal.low == equal.high == 0.5


def test_a_success_rate_has_the_exact_binomial_interval_inside_zero_one() -> None:
    # Clopper-Pearson by hand: with no success the upper end u solves (1 - u)^n = alpha / 2; with every one,
    # the lower end l solves l^n = alpha / 2.
    none, every, some = success_rate(0, 10), success_rate(10, 10), success_rate(4, 10)
    assert (none.mean, none.low) == (0.0, 0.0) and none.high == pytest.approx(1 - 0.025 ** (1 / 10))
    assert (every.mean, every.high) == (1.0, 1.0) and every.low == pytest.approx(0.025 ** (1 / 10))
    assert (
        some.mean == 0.4
        and some.low == pytest.approx(0.1216, abs=1e-4)
        and some.high == pytest.approx(0.7376, abs=1e-4)
    )
    assert (some.minimum, some.maximum, some.method) == (0.0, 1.0, "clopper-pearson")
    with pytest.raises(ValueError, match=r"success_rate got 11 of 10; it needs trials >= 1"):
        success_rate(11, 10)


def test_the_plateau_is_the_median_over_a_quarter_to_three_quarters_of_tau() -> None:
    steps = list(range(0, 110, 10))
    assert plateau_median(steps, [float(s) for s in steps], 100.0) == 50.0  # 30, 40, ..., 70
    assert plateau_median(steps, [float(s) for s in steps], 10.0) is None  # no measurement in 2.5-7.5
