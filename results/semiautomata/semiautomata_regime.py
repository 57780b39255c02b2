"""The second round's first sweep: end to end against full CoT at one budget, per automaton and length T, over
seeds — where the counting shortcut stops working — and the regime chosen from it (claims R and A2 of claims.csv).

A run belongs to this sweep when the harness named it ``regime_...`` (``runs.yaml``); the rest of each run's
description (automaton, T, regime, size, seed) comes from its records, as everywhere in this folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hf_icot.studies.report import error_bars, pyplot, save_figure
from hf_icot.studies.statistics import Summary, difference
from results.semiautomata.rules import RULES
from results.semiautomata.semiautomata_runs import EPS, accuracy, chance, mean, ood_splits, select, summary_of

PREFIX = "regime_"
#: rule R (claims.csv): full CoT near-perfect, end to end at least this far below it
FULL_COT_BAR, GAP = 0.95, 0.30
#: the points where end to end stays this close to full CoT: the counting shortcut still works there
SHORTCUT = 0.05
MIN_SEEDS = 3
#: A2 reads end to end over the sweep's lengths: pending until the chosen automaton has all of them
LENGTHS = (16, 32, 64)
#: cheapest first: shorter sequences, then the simpler automaton
AUTOMATON_ORDER = ("C7", "C7 group", "s3")
#: Rule R2 (claims.csv): the claims' second point, fixed from this sweep's table once R's point (C7 group, T = 16)
#: proved one where no curriculum internalizes (claim_cyclic7_t16_left on 3 seeds and both pilots end at chance)
SECOND_POINT = {"automaton": "C7", "T": 32}


def sweep_runs(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [run for run in runs if run["sweep_run"].startswith(PREFIX)]


def _order(automaton: str) -> int:
    return AUTOMATON_ORDER.index(automaton) if automaton in AUTOMATON_ORDER else len(AUTOMATON_ORDER)


def points(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One point per (automaton, T): full CoT (explicit) and end to end (implicit) on test and on the mean of the OOD
    splits, each a :class:`Summary` over seeds, and the ID difference (Welch)."""
    found = []
    for automaton, length in sorted({(r["automaton"], r["T"]) for r in runs}, key=lambda p: (p[1], _order(p[0]))):
        cot = select(runs, automaton=automaton, T=length, regime="full CoT")
        e2e = select(runs, automaton=automaton, T=length, regime="end to end")
        point = {"automaton": automaton, "T": length, "cot_seeds": len(cot), "e2e_seeds": len(e2e)}
        for name, group in (("cot", cot), ("e2e", e2e)):
            point[f"{name}_id"] = summary_of([accuracy(run, "test") for run in group])
            point[f"{name}_ood"] = summary_of([mean([accuracy(run, s) for s in ood_splits(run)]) for run in group])
        ids = [[accuracy(run, "test") for run in group] for group in (cot, e2e)]
        point["gap"] = difference(*ids) if all(ids) else None
        point["chance"] = mean([chance(run, "test") for run in cot + e2e])
        wall = mean([run["wall_s"] for run in cot + e2e])
        point["wall_s"] = None if wall is None else round(wall)
        found.append(point)
    return found


def _text(summary: Summary | None) -> str:
    return summary.text() if summary is not None else ""


def table_rows(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "automaton": p["automaton"],
            "T": p["T"],
            "full CoT ID (explicit)": _text(p["cot_id"]),
            "end to end ID (implicit)": _text(p["e2e_id"]),
            "ID gap (Welch)": _text(p["gap"]),
            "full CoT OOD": _text(p["cot_ood"]),
            "end to end OOD": _text(p["e2e_ood"]),
            "ID chance": p["chance"],
            "wall s per run": p["wall_s"],
        }
        for p in found
    ]


def complete(point: dict[str, Any]) -> bool:
    return point["cot_seeds"] >= MIN_SEEDS and point["e2e_seeds"] >= MIN_SEEDS


def meets_bars(point: dict[str, Any]) -> bool:
    """Full CoT ID >= 0.95 and end to end ID <= full CoT - 0.30 (bounds met to within float rounding count as met)."""
    return point["cot_id"].mean >= FULL_COT_BAR - EPS and point["gap"].mean >= GAP - EPS


def chosen(found: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Rule R: the cheapest point that :func:`meets_bars`; None while a cheaper point is short of seeds (it might
    still be the one)."""
    for point in found:  # already cheapest first
        if not complete(point):
            return None
        if meets_bars(point):
            return point
    return None


def _second_candidate(found: list[dict[str, Any]]) -> dict[str, Any] | None:
    return next((p for p in found if all(p[key] == value for key, value in SECOND_POINT.items())), None)


def second(found: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Rule R2's point (:data:`SECOND_POINT`) once it has its seeds and meets R's bars; else None."""
    point = _second_candidate(found)
    return point if point is not None and complete(point) and meets_bars(point) else None


def verdict_r2(found: list[dict[str, Any]]) -> dict[str, Any]:
    """R2: agree when :data:`SECOND_POINT` meets R's bars over its seeds, disagree when it does not."""
    point = _second_candidate(found)
    where = f"{SECOND_POINT['automaton']} at T = {SECOND_POINT['T']}"
    if point is None or not complete(point):
        seeds = 0 if point is None else point["cot_seeds"] + point["e2e_seeds"]
        return {"verdict": "pending", "seeds": seeds, "ours": f"{where}: short of {MIN_SEEDS} seeds per regime"}
    ours = (f"{where}: full CoT {_text(point['cot_id'])}, end to end {_text(point['e2e_id'])}, gap "
            f"{_text(point['gap'])}")  # fmt: skip
    decision = RULES["R2"]({"cot": point["cot_id"], "gap": point["gap"]})
    return {"verdict": decision.verdict, "flag": decision.flag, "seeds": point["cot_seeds"] + point["e2e_seeds"],
            "ours": ours}  # fmt: skip


def shortcut_points(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for p in found if complete(p) and abs(p["gap"].mean) <= SHORTCUT]


def _shortcut_text(found: list[dict[str, Any]]) -> str:
    """The points where end to end stays within :data:`SHORTCUT` of full CoT, each said to be a working shortcut
    (both high) or a floor (full CoT below R's bar too: nothing was learned either way)."""
    labels = [f"{p['automaton']} T={p['T']}" + ("" if p["cot_id"].mean >= FULL_COT_BAR - EPS else " (a floor: both fail)")
              for p in shortcut_points(found)]  # fmt: skip
    return ", ".join(labels) or "none"


def verdict_r(found: list[dict[str, Any]]) -> dict[str, Any]:
    point = chosen(found)
    shortcut = _shortcut_text(found)
    missing = [f"{p['automaton']} T={p['T']}" for p in found if not complete(p)]
    seeds = sum(p["cot_seeds"] + p["e2e_seeds"] for p in found)
    if point is None:
        ours = (
            "no point is chosen yet (the cheapest that meets the rule, once every cheaper one has its seeds); "
            f"end to end within {SHORTCUT} of full CoT at: {shortcut}"
        )
        if missing:
            ours += f"; short of {MIN_SEEDS} seeds: {', '.join(missing)}"
            return {"verdict": "pending", "flag": "", "seeds": seeds, "ours": ours}
        decision = RULES["R"]({"chosen": None, "points": [{"cot": p["cot_id"], "gap": p["gap"]} for p in found]})
        return {"verdict": decision.verdict, "flag": decision.flag, "seeds": seeds, "ours": ours}
    ours = (
        f"{point['automaton']} at T = {point['T']}: full CoT {_text(point['cot_id'])}, end to end "
        f"{_text(point['e2e_id'])}, gap {_text(point['gap'])}; end to end within {SHORTCUT} of full CoT at: {shortcut}"
    )
    decision = RULES["R"]({"chosen": {"cot": point["cot_id"], "gap": point["gap"]}, "points": []})
    return {"verdict": decision.verdict, "flag": decision.flag, "seeds": seeds, "ours": ours}


def verdict_a2(found: list[dict[str, Any]], point: dict[str, Any] | None) -> dict[str, Any] | None:
    """A2 at ``point``'s automaton (R's or R2's point): the gap at its T, and end to end not rising with T."""
    if point is None:
        return None
    series = [p for p in found if p["automaton"] == point["automaton"] and complete(p)]
    missing = sorted(set(LENGTHS) - {p["T"] for p in series})
    if missing:
        ours = (f"{point['automaton']}: gap at T = {point['T']} {_text(point['gap'])}; end to end ID by T so far: "
                + ", ".join(f"T={p['T']}: {p['e2e_id'].mean:.3f}" for p in series)
                + f"; short of {MIN_SEEDS} seeds at T = {', '.join(map(str, missing))}")  # fmt: skip
        return {"verdict": "pending", "seeds": sum(p["cot_seeds"] + p["e2e_seeds"] for p in series), "ours": ours}
    figures = {
        "gap": point["gap"],
        "e2e_by_t": [p["e2e_id"].mean for p in series],
        "gaps": [p["gap"].mean for p in series],
    }
    decision = RULES["A2"](figures)
    trend = ", ".join(f"T={p['T']}: {p['e2e_id'].mean:.3f}" for p in series)
    ours = f"{point['automaton']}: gap at T = {point['T']} {_text(point['gap'])}; end to end ID by T: {trend}"
    return {"verdict": decision.verdict, "flag": decision.flag, "seeds": sum(p["cot_seeds"] + p["e2e_seeds"] for p in series),
            "ours": ours}  # fmt: skip


def plot(found: list[dict[str, Any]], out: Path) -> None:
    """ID accuracy against T per automaton, full CoT and end to end, mean and 95% interval over seeds."""
    automata = sorted({p["automaton"] for p in found}, key=_order)
    if not automata:
        return
    plt = pyplot()
    fig, axes = plt.subplots(1, len(automata), figsize=(4.2 * len(automata), 3.8), squeeze=False, sharey=True)
    for ax, automaton in zip(axes[0], automata):
        series = [p for p in found if p["automaton"] == automaton]
        lengths = [p["T"] for p in series]
        error_bars(ax, lengths, [p["cot_id"] for p in series], label="full CoT (explicit)")
        error_bars(ax, lengths, [p["e2e_id"] for p in series], label="end to end (implicit)")
        error_bars(ax, lengths, [p["e2e_ood"] for p in series], label="end to end, mean OOD", linestyle=":")
        ax.plot(lengths, [p["chance"] for p in series], "k--", linewidth=0.8, label="majority-answer chance")
        ax.set(title=automaton, xlabel="T (input symbols)", xscale="log", xlim=(LENGTHS[0] / 1.25, LENGTHS[-1] * 1.25))
        ax.minorticks_off()  # the log axis's own minor labels (3 x 10^1, ...) would overprint the lengths
        ax.set(xticks=LENGTHS, xticklabels=LENGTHS)
        ax.set_ylim(0, 1.05)
    axes[0][0].set_ylabel("test answer exact match")
    axes[0][0].legend(fontsize=7, loc="lower left")
    fig.suptitle("Where the counting shortcut stops: full CoT vs end to end at one budget (mean, 95% interval)")
    save_figure(fig, out / "regime_vs_T.png", dpi=110)
