"""The curriculum league table of results/curricula/ from the committed run records (no training).

python -m results.curricula.make_results [--runs results/curricula/runs] [--out results/curricula]
                                         [--ledger results/curricula/claims.csv] [--readme results/curricula/README.md]

Every run folder under ``--runs`` is one (task, curriculum, seed) of ``runs.yaml``, named ``<task>_<curriculum>_s<seed>``,
holding the harness's ``sweep.json`` (its wall time), ``training_log.json`` (the curriculum every 50 steps and, every
100 steps, the implicit exact match of the held-out questions with the training examples seen) and
``eval_results.json`` (the final scores). The mixture with length hints answers without CoT when prompted with the
hint 0, so its "implicit" figures are those of the ``hint=0`` mode. It writes

* ``table.md`` / ``table.csv``: per task and curriculum over its seeds, the final test implicit exact match (mean ±
  95% t-interval), the examples seen at the first measurement >= 90% (mean ± interval when every seed got there, else
  how many did), when the CoT was gone, and the wall time per run; a task with a curriculum short of 3 seeds goes to
  ``screen.md`` / ``screen.csv`` instead (still running, or screened out: its first seed settled its verdicts);
* ``ratios.md``: per task, the best fixed pace against the best adaptive one (examples to 90%, a percentile bootstrap
  interval over the seeds);
* ``curves_<task>.png``: implicit exact match against training examples, mean over seeds with 95% error bars;
* the verdicts of ``claims.csv`` by the rules of ``rules.py`` (L1: the ratio; L2: the table's premise), with
  ``--ledger``: ``pending`` while a run that ``runs.yaml`` beside ``--runs`` defines for the task has no record;
* with ``--readme``, the table, the ratios and the curves into that README's generated section (between
  ``<!-- begin table -->`` and ``<!-- end table -->``; the prose around it is written by hand).

The league's reading of the records, its table and its curves are :mod:`hf_icot.studies.league` (results/mult_cpu/
reads its own runs with it); this script adds what its table calls each curriculum (:data:`LABELS`), the screen, the
ratios and the rules of L1 and L2.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hf_icot.studies.claims import update_ledger
from hf_icot.studies.league import (
    BAR,
    arguments_and_runs,
    family,
    final_test,
    plot,
    points,
    ratio_estimate,
    table_rows,
)
from hf_icot.studies.league import label as league_label
from hf_icot.studies.report import RUN_NAME, fill_section, unrecorded_runs, write_table
from hf_icot.studies.statistics import difference
from results.curricula.rules import RULES

HERE = Path(__file__).resolve().parent
SEEDS = 3  # seeds per curriculum in runs.yaml
TASKS = {
    "parity4": "4-sparse parity over 20 bits, tree CoT (3 tokens)",
    "counter7": "the counter C_7 over T = 16 (16 CoT states)",
    "cyclic7": "C_7 acting on itself over T = 16 (16 CoT states)",
    "mult3x3": "3x3 multiplication",
    "mult4x4": "4x4 multiplication",
}
#: curriculum name (runs.yaml) -> what this study's table calls it; the league names stepwise<P> and e2e itself
LABELS = {
    "staged_left": "staged, from the left",
    "staged_right": "staged, from the right",
    "staged_inductive": "staged, inductive (keep every s-th state)",
    "log_icot": "Log-ICoT (one level per stage)",
    "mixture_hints": "mixture with length hints (hint 0)",
    "adaptive_answer": "adaptive pace (answer-token accuracy)",
    "adaptive_sequence": "adaptive pace (whole-sequence accuracy)",
}


def label(curriculum: str) -> str:
    """What the table calls a curriculum: its :data:`LABELS` entry, else the league's name for it."""
    return LABELS.get(curriculum) or league_label(curriculum)


def split_screened(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """The league's rows (tasks whose every curriculum has its :data:`SEEDS` seeds) and the others (a task still
    running, or screened out: one whose first seed settled that no curriculum internalizes it)."""
    short = {row["task"] for row in rows if len(row["runs"]) < SEEDS}
    return [row for row in rows if row["task"] not in short], [row for row in rows if row["task"] in short]


def ratio(fixed: list[float], adaptive: list[float], n_boot: int = 10_000, seed: int = 0) -> dict:
    """mean(fixed) / mean(adaptive) with a 95% percentile bootstrap interval (each side resampled over its seeds)."""
    rng = np.random.default_rng(seed)
    a, b = np.asarray(fixed, dtype=float), np.asarray(adaptive, dtype=float)
    boot = a[rng.integers(0, len(a), (n_boot, len(a)))].mean(1) / b[rng.integers(0, len(b), (n_boot, len(b)))].mean(1)
    low, high = (float(q) for q in np.quantile(boot, [0.025, 0.975]))
    return {"ratio": float(a.mean() / b.mean()), "low": low, "high": high}


def _best(rows: list[dict], kind: str) -> dict | None:
    done = [row for row in rows if family(row["curriculum"]) == kind and row["to_bar"] is not None]
    return min(done, key=lambda row: row["to_bar"].mean) if done else None


def comparisons(rows: list[dict]) -> dict[str, dict]:
    """Per task: the best fixed and adaptive paces at 90% and their ratio (None where one side has none)."""
    out = {}
    for task in dict.fromkeys(row["task"] for row in rows):
        task_rows = [row for row in rows if row["task"] == task]
        fixed, adaptive = _best(task_rows, "fixed"), _best(task_rows, "adaptive")
        entry = {"fixed": fixed, "adaptive": adaptive, "ratio": None}
        if fixed is not None and adaptive is not None:  # every seed of both reached the bar
            entry["ratio"] = ratio(fixed["to_bar_values"], adaptive["to_bar_values"])
        out[task] = entry
    return out


def ratio_line(task: str, entry: dict) -> str:
    fixed, adaptive, r = entry["fixed"], entry["adaptive"], entry["ratio"]
    if r is not None:
        return (
            f"* {task}: the best fixed pace ({label(fixed['curriculum'])}, {fixed['to_bar'].mean:,.0f} examples) needed "
            f"**{r['ratio']:.2f}×** [{r['low']:.2f}, {r['high']:.2f}] the examples of the best adaptive one "
            f"({label(adaptive['curriculum'])}, {adaptive['to_bar'].mean:,.0f})."
        )
    missing = [name for name, row in (("fixed", fixed), ("adaptive", adaptive)) if row is None]
    return f"* {task}: no ratio: no {' and no '.join(missing)} pace reached 90% on every seed."


def unrecorded(sweep_folder: Path) -> dict[str, list[str]]:
    """Per task, the runs ``sweep_folder/runs.yaml`` defines that the harness has not recorded as done (none: no sweep
    file there, as for records gathered elsewhere)."""
    missing: dict[str, list[str]] = {}
    for name in unrecorded_runs(sweep_folder):
        match = RUN_NAME.match(name)
        if match is not None:
            missing.setdefault(match["task"], []).append(name)
    return missing


def _best_possible(row: dict) -> float:
    """The highest mean final score ``row`` can still reach over :data:`SEEDS` seeds: its missing seeds at 1.0."""
    scores = [final_test(run) for run in row["runs"]]
    return (sum(scores) + max(SEEDS - len(scores), 0)) / max(SEEDS, len(scores))


def _settled(curricula: list[dict], unrun: set[str]) -> dict[str, bool]:
    """Which verdicts the missing seeds can no longer change (``unrun``: curricula of the sweep with no record yet,
    which could still score anything): ``L1`` when the fixed or the adaptive side has no pace left that can reach
    90% on every seed (each has a recorded seed that never did), ``L2`` when no curriculum can reach a mean of
    0.90 even if its missing seeds score 1.0. ``curricula``: the task's rows but end to end's."""
    side_out = {
        kind: not any(family(name) == kind for name in unrun)
        and all(row["reached"] < len(row["runs"]) for row in curricula if family(row["curriculum"]) == kind)
        for kind in ("fixed", "adaptive")
    }
    no_bar = not any(family(name) != "e2e" for name in unrun) and all(_best_possible(r) < BAR for r in curricula)
    return {"L1": any(side_out.values()), "L2": bool(curricula) and no_bar}


def verdicts(
    rows: list[dict], compared: dict[str, dict], missing: dict[str, list[str]] | None = None
) -> dict[str, dict]:
    """L1 (the ratio) and L2 (the premise) per task, by the registered rules (``rules.py``); ``pending`` while a curriculum has
    fewer than 3 seeds or ``missing`` (:func:`unrecorded`) names a run of the task's sweep not recorded yet, unless
    the runs still to come cannot change the verdict (:func:`_settled`; the ledger then says so)."""
    results = {}
    missing = missing or {}
    for task, entry in compared.items():
        task_rows = [row for row in rows if row["task"] == task]
        seeds = min(len(row["runs"]) for row in task_rows)
        short = f"; {len(missing[task])} run(s) of runs.yaml not recorded yet" if missing.get(task) else ""
        unrun = {RUN_NAME.match(name)["what"] for name in missing.get(task, [])} - {r["curriculum"] for r in task_rows}
        curricula = [row for row in task_rows if family(row["curriculum"]) != "e2e"]
        settled = _settled(curricula, unrun)
        early = "; settled before every seed: the runs still to come cannot change it"
        waiting = seeds < SEEDS or bool(short)
        r = entry["ratio"]
        decision = RULES[f"L1-{task}"]({"ratio": ratio_estimate(r)})
        verdict, flag = decision.verdict, decision.flag
        if r is None:
            ours = ratio_line(task, entry)[2:].rstrip(".")
        else:
            ours = f"best fixed / best adaptive = {r['ratio']:.2f} [{r['low']:.2f}, {r['high']:.2f}]"
        if waiting and not (r is None and settled["L1"]):
            verdict, flag = "pending", ""
        elif waiting:
            ours += early
        results[f"L1-{task}"] = {"verdict": verdict, "flag": flag, "seeds": seeds, "ours": ours + short}
        best = max(curricula, key=lambda row: row["final"].mean) if curricula else None
        e2e = next((row for row in task_rows if family(row["curriculum"]) == "e2e"), None)
        if waiting and settled["L2"]:
            highest = max(_best_possible(row) for row in curricula)
            figures = {"best": best["final"], "best_name": label(best["curriculum"]), "highest_possible": highest}
            decision = RULES[f"L2-{task}"](figures)
            results[f"L2-{task}"] = {
                "verdict": decision.verdict,
                "flag": decision.flag,
                "seeds": seeds,
                "ours": f"best: {label(best['curriculum'])} {best['final'].text(3)}; no curriculum can reach a mean "
                f"of 0.90 over {SEEDS} seeds (the highest still possible: "
                f"{max(_best_possible(row) for row in curricula):.3f}){early}{short}",
            }
            continue
        if best is None or e2e is None:
            results[f"L2-{task}"] = {
                "verdict": "pending",
                "flag": "",
                "seeds": seeds,
                "ours": "no curriculum or no end-to-end run" + short,
            }
            continue
        gap = difference([final_test(r) for r in best["runs"]], [final_test(r) for r in e2e["runs"]])
        decision = RULES[f"L2-{task}"]({"best": best["final"], "best_name": label(best["curriculum"]), "gap": gap})
        gap_text = f"{gap.mean:.3f}" + ("" if gap.low is None else f" [{gap.low:.3f}, {gap.high:.3f}]")
        results[f"L2-{task}"] = {
            "verdict": "pending" if waiting else decision.verdict,
            "flag": "" if waiting else decision.flag,
            "seeds": seeds,
            "ours": f"best: {label(best['curriculum'])} {best['final'].text(3)}; end to end {e2e['final'].text(3)}; "
            f"gap {gap_text}{short}",
        }
    return results


def main(argv: list[str] | None = None) -> list[dict]:
    args, runs = arguments_and_runs(argv, __doc__, HERE, "the verdicts", "the table, the ratios and the curves")
    rows = points(runs)
    args.out.mkdir(parents=True, exist_ok=True)
    league, screened = split_screened(rows)
    table = write_table(table_rows(league, label), args.out, "table")
    compared = comparisons(rows)
    lines = ["Best fixed pace against the best adaptive one, examples to 90% (95% bootstrap interval over seeds):", ""]
    ratios = "\n".join(lines + [ratio_line(t, e) for t, e in compared.items()]) + "\n"
    (args.out / "ratios.md").write_text(ratios)
    screen = ""
    if screened:
        tasks = ", ".join(dict.fromkeys(row["task"] for row in screened))
        screen = (
            f"\nShort of {SEEDS} seeds, so not in the league table ({tasks}; the ledger says whether the seeds "
            "run already settle the task's verdicts):\n\n"
            + write_table(table_rows(screened, label), args.out, "screen")
        )
    elif (args.out / "screen.md").exists():
        (args.out / "screen.md").unlink()
        (args.out / "screen.csv").unlink(missing_ok=True)
    written = plot(rows, args.out, TASKS, label)
    if args.readme is not None:
        curves = "\n\n".join(f"![implicit accuracy against examples, {path.stem.removeprefix('curves_')}]({path.name})"
                               for path in written)  # fmt: skip
        fill_section(args.readme, "table", f"{table}{screen}\n{ratios}\n{curves}\n")
    if args.ledger is not None:
        update_ledger(args.ledger, verdicts(rows, compared, unrecorded(args.runs.parent)))
    print(table)
    print(ratios)
    print("wrote", ", ".join(str(p) for p in [args.out / "table.md", args.out / "ratios.md", *written]))
    return rows


if __name__ == "__main__":
    try:
        main()
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None
