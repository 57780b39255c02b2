"""Claim B5 (issue 19 part 3): how often model A succeeds under the papers' algorithm as the per-stage batch B grows,
Log-ICoT (5 one-step stages of B) against token by token (16 one-step stages of 5B/16, the same samples).

``make_results.py`` calls :func:`budget_rows` (``budget.csv`` / ``.md``), :func:`plot_budget` (``budget.png``) and
:func:`verdict_b5`; the groups are the ``a_budget_*`` runs of ``runs.yaml`` and, at B = n^3, ``a_paper_*``.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from hf_icot.studies.report import error_bars, fmt, pyplot, save_figure
from hf_icot.studies.statistics import success_rate, summarize
from results.parity.rules import RULES

#: per-stage batch of Log-ICoT -> (its label, Log-ICoT's group, token by token's group); n = 30
BUDGETS = {
    4_930: ("n^2.5", "a_budget_log_icot_b4930", "a_budget_stepwise_b4930"),
    27_000: ("n^3", "a_paper_log_icot", "a_paper_stepwise"),
    147_885: ("n^3.5", "a_budget_log_icot_b147885", "a_budget_stepwise_b147885"),
    810_000: ("n^4", "a_budget_log_icot_b810000", "a_budget_stepwise_b810000"),
}
#: total samples of a run: Log-ICoT 5 steps of B, token by token 16 steps of its batch (runs.yaml)
SAMPLES = {
    "log_icot": {b: 5 * b for b in BUDGETS},
    "stepwise": {4_930: 24_656, 27_000: 134_992, 147_885: 739_424, 810_000: 4_050_048},
}
CURRICULA = {"log_icot": "Log-ICoT (5 stages)", "stepwise": "token by token (16 stages)"}
RULE = 0.8  # B1's share of seeds that must succeed at B*
GROUPS = [group for _, log_icot, stepwise in BUDGETS.values() for group in (log_icot, stepwise)]


def _group(batch: int, curriculum: str) -> str:
    return BUDGETS[batch][1 if curriculum == "log_icot" else 2]


def _first_step_loss(run: dict[str, Any]) -> float | None:
    """The validation loss after the first step: ~1e-4 when every node's children got one rounded score, ~1e-2 when
    rounding split a node's two children (results/parity/README.md, B1)."""
    losses = [entry["eval_loss"] for entry in run["log"] if "eval_loss" in entry]
    return losses[0] if losses else None


def _exact_first_step(run: dict[str, Any]) -> bool:
    """Whether the first step gave every node its children exactly: a validation loss of ~1e-4 after it, two orders
    below a split's ~1e-2 (the threshold 1e-3 sits between them at every B of the grid)."""
    loss = _first_step_loss(run)
    return loss is not None and loss < 1e-3


def _median_first_step_loss(runs: list[dict[str, Any]]) -> str:
    """The median over ``runs`` of :func:`_first_step_loss`, e.g. 2.8e-04 (every node exact) or 1.2e-02 (a split)."""
    losses = [loss for loss in map(_first_step_loss, runs) if loss is not None]
    return f"{statistics.median(losses):.1e}" if losses else ""


def budget_rows(groups: dict[str, list[dict[str, Any]]], succeeded: Any, implicit: Any) -> list[dict[str, Any]]:
    """Per budget and curriculum: seeds, successes with the exact 95% interval, test implicit EM over seeds, and the
    median validation loss after the first step of the seeds that succeeded and of those that failed."""
    rows = []
    for batch, (label, *_) in BUDGETS.items():
        for curriculum, name in CURRICULA.items():
            runs = groups.get(_group(batch, curriculum), [])
            if not runs:
                continue
            won = [run for run in runs if succeeded(run)]
            rate = success_rate(len(won), len(runs))
            rows.append({
                "B": f"{batch:,} ({label})", "curriculum": name, "samples": f"{SAMPLES[curriculum][batch]:,}",
                "seeds": len(runs), "succeeded": f"{len(won)}/{len(runs)} [{fmt(rate.low, 2)}, {fmt(rate.high, 2)}]",
                "test implicit EM": summarize([implicit(run) for run in runs]).text(),
                "first step exact (val loss < 1e-3)": f"{sum(_exact_first_step(run) for run in runs)}/{len(runs)}",
                "first-step val loss, succeeded (median)": _median_first_step_loss(won),
                "first-step val loss, failed (median)": _median_first_step_loss([r for r in runs if r not in won]),
            })  # fmt: skip
    return rows


def plot_budget(groups: dict[str, list[dict[str, Any]]], succeeded: Any, out: Path) -> None:
    """Share of seeds that succeeded against the samples of the run, both curricula, exact 95% intervals."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    for curriculum, name in CURRICULA.items():
        points = [
            (SAMPLES[curriculum][batch], runs) for batch in BUDGETS if (runs := groups.get(_group(batch, curriculum)))
        ]
        if points:
            rates = [success_rate(sum(map(succeeded, runs)), len(runs)) for _, runs in points]
            error_bars(ax, [samples for samples, _ in points], rates, label=name)
    ax.axhline(RULE, color="grey", linestyle="--", linewidth=0.8, label="B5's bar: 8 of 10 seeds")
    for batch, (label, *_) in BUDGETS.items():
        ax.annotate(f"B = {label}", (5 * batch, 1.04), ha="center", fontsize=7, color="grey")
    ax.set(title="Model A, the papers' algorithm (n = 30, k = 16): success against budget", xscale="log",
           xlabel="training samples of the run (5 B; fresh at every step)",
           ylabel="share of seeds with test implicit EM >= 0.99\n(exact 95% interval)", ylim=(-0.05, 1.1))  # fmt: skip
    ax.set_xticks([5 * batch for batch in BUDGETS], [f"{5 * batch:,}" for batch in BUDGETS], fontsize=8)
    ax.minorticks_off()
    ax.set_xlim(3 * min(BUDGETS), 8 * max(BUDGETS))
    ax.legend(fontsize=8, loc="center right")
    save_figure(fig, out / "budget.png", dpi=110)


def verdict_b5(groups: dict[str, list[dict[str, Any]]], succeeded: Any) -> dict[str, Any] | None:
    """B5 by its rule (``rules.py``): B* = the smallest B with Log-ICoT >= 8/10; token by token compared there."""
    if not any(groups.get(group) for group in GROUPS):
        return None
    rates = {
        (batch, curriculum): (sum(map(succeeded, runs)), len(runs))
        for batch in BUDGETS
        for curriculum in CURRICULA
        if (runs := groups.get(_group(batch, curriculum)))
    }
    shown = "; ".join(
        f"B = {BUDGETS[batch][0]}: " + ", ".join(
            f"{CURRICULA[c].split(' (')[0]} {rates[batch, c][0]}/{rates[batch, c][1]}" for c in CURRICULA
            if (batch, c) in rates
        )
        for batch in BUDGETS
        if any((batch, c) in rates for c in CURRICULA)
    )  # fmt: skip
    reached = {
        curriculum: next((b for b in BUDGETS if (b, curriculum) in rates
                          and rates[b, curriculum][0] >= RULE * rates[b, curriculum][1]), None)
        for curriculum in CURRICULA
    }  # fmt: skip
    grid = [(*rates[batch, "log_icot"], *rates[batch, "stepwise"]) for batch in BUDGETS
            if (batch, "log_icot") in rates and (batch, "stepwise") in rates]  # fmt: skip
    decision = RULES["B5"]({"grid": grid})
    to_success = ", ".join(
        f"{CURRICULA[c].split(' (')[0]} {SAMPLES[c][b]:,} samples (B = {BUDGETS[b][0]})" if b else
        f"{CURRICULA[c].split(' (')[0]} not within the grid"
        for c, b in reached.items()
    )  # fmt: skip
    counts = sorted(n for _, n in rates.values())
    seeds = (
        f"{counts[0]}-{counts[-1]} per point ({sum(counts)} runs)"
        if counts[0] != counts[-1]
        else (f"{counts[0]} per point ({sum(counts)} runs)")
    )
    return {"verdict": decision.verdict, "flag": decision.flag, "seeds": seeds,
            "ours": f"{shown}; samples to >= 8/10: {to_success}"}  # fmt: skip
