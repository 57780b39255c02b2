"""The methods league's thoughts sweep (issue 53): Coconut and CODI, each with and without SIM-CoT's step
supervision, at 3, 6 and 12 continuous thoughts on parity4 and at 8 and 16 on counter7, where collapse as thoughts grow
can show.

SIM-CoT's claim is about stability as the number of thoughts grows: plain latent methods collapse into homogeneous
thoughts, step supervision keeps them apart. The issue names counter7 at 4, 8 and 16 thoughts as an example; at this
CPU's budget (a counter7 run of Coconut takes 20-30 minutes at 8 thoughts, CODI's 45-55) the sweep runs on parity4,
where a run takes minutes: 3 thoughts are the league's own published-protocol rows (``coconut_published``,
``simcot_coconut``, ``codi_published``, ``simcot_codi``, 5 seeds), 6 and 12 are new rows of 3 seeds each (Coconut:
``c_thought`` 2 and 4 over the chain's 3 steps; CODI: ``num_latent`` 6 and 12), with a 48-position model (the 12
thoughts do not fit the quickstart's 32; a larger position table changes only which draw initialises the weights).
Claims (``claims.csv``, rules in ``rules.py``): T0 (the premise: the plain method falls by more than 5 points from 3
to 12 thoughts) and T1 (SIM-CoT gains at 12 thoughts where T0 holds), each for Coconut and for CODI.

parity4 showed no collapse (T0 disagrees for both, 2026-12-08), so the sweep also reads counter7, whose CoT is 8 steps
of 4 states: 8 thoughts are the league's counter7 rows (``coconut_published``, ``simcot_coconut``, ``codi_published``,
``simcot_codi``, 5 seeds; one thought per step), 16 are new rows of 3 seeds (Coconut ``c_thought`` 2; CODI
``num_latent`` 16), read by the same rules from 8 to 16 thoughts (T0-counter7-*, T1-counter7-*, registered 2026-12-08
before their runs; about 12 CPU hours at this machine's pace).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from hf_icot.studies.report import pyplot, save_figure
from hf_icot.studies.statistics import Summary, difference, summarize
from results.methods.rules import RULES

#: task -> family -> {number of thoughts: the league's method (runs.yaml: <task>_<method>)}
SWEEPS = {
    "parity4": {
        "coconut": {3: "coconut_published", 6: "coconut_t6", 12: "coconut_t12"},
        "simcot_coconut": {3: "simcot_coconut", 6: "simcot_coconut_t6", 12: "simcot_coconut_t12"},
        "codi": {3: "codi_published", 6: "codi_t6", 12: "codi_t12"},
        "simcot_codi": {3: "simcot_codi", 6: "simcot_codi_t6", 12: "simcot_codi_t12"},
    },
    "counter7": {
        "coconut": {8: "coconut_published", 16: "coconut_t16"},
        "simcot_coconut": {8: "simcot_coconut", 16: "simcot_coconut_t16"},
        "codi": {8: "codi_published", 16: "codi_t16"},
        "simcot_codi": {8: "simcot_codi", 16: "simcot_codi_t16"},
    },
}
NAMES = {"coconut": "Coconut", "simcot_coconut": "Coconut + SIM-CoT", "codi": "CODI", "simcot_codi": "CODI + SIM-CoT"}
#: the sweep's own rows (more thoughts than the league's): kept out of the league's curves, drawn in
#: thoughts_<task>.png
SWEEP_ONLY = {
    method
    for sweep in SWEEPS.values()
    for family in sweep.values()
    for thoughts, method in family.items()
    if thoughts != min(family)
}
#: claim -> (the plain family, the SIM-CoT family or None for T0); its task is the one league_tasks.TASKS files it under
CLAIMS = {"T0-coconut": ("coconut", None), "T1-coconut": ("coconut", "simcot_coconut"),
          "T0-codi": ("codi", None), "T1-codi": ("codi", "simcot_codi"),
          "T0-counter7-coconut": ("coconut", None), "T1-counter7-coconut": ("coconut", "simcot_coconut"),
          "T0-counter7-codi": ("codi", None), "T1-counter7-codi": ("codi", "simcot_codi")}  # fmt: skip


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


def verdict(rows: dict[str, dict], claim: str, task: str, missing: dict, waiting: Callable) -> dict:
    """T0 / T1 (``claim``) by its rule: ``drop`` = the plain method's final test scores at the task's most thoughts
    minus at its fewest (parity4: 12 and 3; counter7: 16 and 8), ``gain`` = SIM-CoT's at the most minus the plain
    method's there (Welch); pending while a row it reads is short (see ``make_results._waiting``, passed as
    ``waiting``). ``rows``: ``task``'s."""
    plain, simcot = CLAIMS[claim]
    sweep = SWEEPS[task]
    fewest, most = min(sweep[plain]), max(sweep[plain])
    needed = (sweep[plain][fewest], sweep[plain][most], *((sweep[simcot][most],) if simcot else ()))
    seeds, short = waiting(rows, task, needed, missing)
    if (waits := unrecorded(rows, needed, seeds, short)) is not None:
        return waits
    scores = {method: rows[method]["scores"] for method in needed}
    drop = difference(scores[needed[1]], scores[needed[0]])
    figures = {"drop": drop}
    ours = f"{NAMES[plain]} at {most} thoughts - at {fewest}: {signed(drop)}"
    if simcot:
        figures["gain"] = gain = difference(scores[needed[2]], scores[needed[1]])
        ours += f"; {NAMES[simcot]} - {NAMES[plain]} at {most} thoughts: {signed(gain)}"
    if short:
        return {"verdict": "pending", "flag": "", "seeds": seeds, "ours": ours + short}
    decision = RULES[claim](figures)
    return {"verdict": decision.verdict, "flag": decision.flag, "seeds": seeds, "ours": ours}


def plot(rows: dict[str, dict], task: str, out: Path) -> Path | None:
    """``thoughts_<task>.png``: final test accuracy against the number of thoughts per family, mean with its 95%
    t-interval and each seed as a dot (None, nothing written, before any of the sweep's own rows has a record)."""
    sweep = SWEEPS[task]
    if not any(method in rows for family in sweep.values() for method in family.values() if method in SWEEP_ONLY):
        return None
    plt = pyplot()
    figure, axis = plt.subplots(figsize=(7, 5))
    for index, (family, points) in enumerate(sweep.items()):
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
    axis.set_xticks(sorted({t for points in sweep.values() for t in points}))
    axis.set_ylim(-0.02, 1.02)
    axis.set_xlabel("continuous thoughts per answer")
    axis.set_ylabel("final test exact match (latent)")
    axis.set_title(f"{task}: accuracy as the number of continuous thoughts grows")
    axis.legend(fontsize=7, loc="lower left")
    return save_figure(figure, out / f"thoughts_{task}.png")
