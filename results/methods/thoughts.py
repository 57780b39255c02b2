"""The methods league's thoughts sweep (issue 53): Coconut and CODI, each with and without SIM-CoT's step
supervision, at 3, 6 and 12 continuous thoughts on parity4, where collapse as thoughts grow can show.

SIM-CoT's claim is about stability as the number of thoughts grows: plain latent methods collapse into homogeneous
thoughts, step supervision keeps them apart. The issue names counter7 at 4, 8 and 16 thoughts as an example; at this
CPU's budget (a counter7 run of Coconut takes 20-30 minutes at 8 thoughts, CODI's 45-55) the sweep runs on parity4,
where a run takes minutes: 3 thoughts are the league's own published-protocol rows (``coconut_published``,
``simcot_coconut``, ``codi_published``, ``simcot_codi``, 5 seeds), 6 and 12 are new rows of 3 seeds each (Coconut:
``c_thought`` 2 and 4 over the chain's 3 steps; CODI: ``num_latent`` 6 and 12), with a 48-position model (the 12
thoughts do not fit the quickstart's 32; a larger position table changes only which draw initialises the weights).
Claims (``claims.csv``, rules in ``rules.py``): T0 (the premise: the plain method falls by more than 5 points from 3
to 12 thoughts) and T1 (SIM-CoT gains at 12 thoughts where T0 holds), each for Coconut and for CODI.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from hf_icot.studies.report import pyplot, save_figure
from hf_icot.studies.statistics import Summary, difference, summarize
from results.methods.rules import RULES

#: family -> {number of thoughts: the league's method (runs.yaml: parity4_<method>)}
SWEEP = {
    "coconut": {3: "coconut_published", 6: "coconut_t6", 12: "coconut_t12"},
    "simcot_coconut": {3: "simcot_coconut", 6: "simcot_coconut_t6", 12: "simcot_coconut_t12"},
    "codi": {3: "codi_published", 6: "codi_t6", 12: "codi_t12"},
    "simcot_codi": {3: "simcot_codi", 6: "simcot_codi_t6", 12: "simcot_codi_t12"},
}
NAMES = {"coconut": "Coconut", "simcot_coconut": "Coconut + SIM-CoT", "codi": "CODI", "simcot_codi": "CODI + SIM-CoT"}
#: the sweep's own rows (6 and 12 thoughts): kept out of the league's curves, drawn in thoughts_parity4.png
SWEEP_ONLY = {method for family in SWEEP.values() for thoughts, method in family.items() if thoughts != 3}
#: claim -> (the plain family, the SIM-CoT family or None for T0)
CLAIMS = {"T0-coconut": ("coconut", None), "T1-coconut": ("coconut", "simcot_coconut"),
          "T0-codi": ("codi", None), "T1-codi": ("codi", "simcot_codi")}  # fmt: skip
FEWEST, MOST = 3, 12


def signed(summary: Summary) -> str:
    """A difference and its 95% interval, signed: ``-0.410 [-0.500, -0.320]``."""
    text = f"{summary.mean:+.3f}"
    return text if summary.low is None else f"{text} [{summary.low:+.3f}, {summary.high:+.3f}]"


def unrecorded(rows: dict[str, dict], methods: tuple[str, ...], seeds: int, short: str) -> dict | None:
    """A verdict's ledger cells while one of ``methods`` has no record (pending, naming them), else None."""
    absent = [method for method in methods if method not in rows]
    if not absent:
        return None
    return {"verdict": "pending", "flag": "", "seeds": seeds, "ours": f"no record of {' or '.join(absent)} yet{short}"}


def verdict(rows: dict[str, dict], claim: str, missing: dict, waiting: Callable) -> dict:
    """T0 / T1 (``claim``) by its rule: ``drop`` = the plain method's final test scores at 12 thoughts minus at 3,
    ``gain`` = SIM-CoT's at 12 minus the plain method's at 12 (Welch); pending while a row it reads is short (see
    ``make_results._waiting``, passed as ``waiting``)."""
    plain, simcot = CLAIMS[claim]
    needed = (SWEEP[plain][FEWEST], SWEEP[plain][MOST], *((SWEEP[simcot][MOST],) if simcot else ()))
    seeds, short = waiting(rows, "parity4", needed, missing)
    if (waits := unrecorded(rows, needed, seeds, short)) is not None:
        return waits
    scores = {method: rows[method]["scores"] for method in needed}
    drop = difference(scores[needed[1]], scores[needed[0]])
    figures = {"drop": drop}
    ours = f"{NAMES[plain]} at 12 thoughts - at 3: {signed(drop)}"
    if simcot:
        figures["gain"] = gain = difference(scores[needed[2]], scores[needed[1]])
        ours += f"; {NAMES[simcot]} - {NAMES[plain]} at 12 thoughts: {signed(gain)}"
    if short:
        return {"verdict": "pending", "flag": "", "seeds": seeds, "ours": ours + short}
    decision = RULES[claim](figures)
    return {"verdict": decision.verdict, "flag": decision.flag, "seeds": seeds, "ours": ours}


def plot(rows: dict[str, dict], out: Path) -> Path | None:
    """``thoughts_parity4.png``: final test accuracy against the number of thoughts per family, mean with its 95%
    t-interval and each seed as a dot (None, nothing written, before any 6- or 12-thought row has a record)."""
    if not any(method in rows for method in SWEEP_ONLY):
        return None
    plt = pyplot()
    figure, axis = plt.subplots(figsize=(7, 5))
    for index, (family, points) in enumerate(SWEEP.items()):
        xs, means, errors = [], [], []
        for thoughts, method in points.items():
            if method not in rows:
                continue
            scores = rows[method]["scores"]
            axis.scatter([thoughts + 0.15 * (index - 1.5)] * len(scores), scores, s=10, color=f"C{index}", alpha=0.4)
            summary = summarize(scores)
            xs.append(thoughts)
            means.append(summary.mean)
            errors.append(0.0 if summary.low is None else summary.mean - summary.low)
        style = "--" if family.startswith("simcot") else "-"
        axis.errorbar(xs, means, yerr=errors, color=f"C{index}", linestyle=style, marker="o", capsize=3,
                      label=f"{NAMES[family]} (mean, 95% t-interval; seeds as dots)")  # fmt: skip
    axis.set_xticks(sorted({t for points in SWEEP.values() for t in points}))
    axis.set_ylim(-0.02, 1.02)
    axis.set_xlabel("continuous thoughts per answer")
    axis.set_ylabel("final test exact match (latent)")
    axis.set_title("parity4: accuracy as the number of continuous thoughts grows")
    axis.legend(fontsize=7, loc="lower left")
    return save_figure(figure, out / "thoughts_parity4.png")
