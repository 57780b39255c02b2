"""The curriculum league table of results/curricula/ from the committed run records (no training).

python results/curricula/make_results.py [--runs results/curricula/runs] [--out results/curricula]
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
* the verdicts of ``claims.csv`` (L1: the ratio; L2: the table's premise), with ``--ledger``: ``pending`` while a
  run that ``runs.yaml`` beside ``--runs`` defines for the task has no record;
* with ``--readme``, the table, the ratios and the curves into that README's generated section (between
  ``<!-- begin table -->`` and ``<!-- end table -->``; the prose around it is written by hand).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import numpy as np

from hf_icot.publishing.run_files import EVAL_RESULTS_FILE, TRAINING_LOG_FILE
from hf_icot.studies.claims import update_ledger
from hf_icot.studies.report import (
    error_bars,
    fill_section,
    mark_steps,
    pyplot,
    read_json,
    record_folders,
    save_figure,
    section,
    unrecorded_runs,
    write_table,
)
from hf_icot.studies.statistics import Summary, difference, summarize
from hf_icot.studies.sweep import RECORD_FILE

HERE = Path(__file__).resolve().parent
BAR = 0.9
SEEDS = 3  # seeds per curriculum in runs.yaml
TASKS = {
    "parity4": "4-sparse parity over 20 bits, tree CoT (3 tokens)",
    "counter7": "the counter C_7 over T = 16 (16 CoT states)",
    "cyclic7": "C_7 acting on itself over T = 16 (16 CoT states)",
    "mult3x3": "3x3 multiplication",
    "mult4x4": "4x4 multiplication",
}
LABELS = {  # curriculum name (runs.yaml) -> what the table calls it; stepwise<P> is a fixed pace of P steps per token
    "staged_left": "staged, from the left",
    "staged_right": "staged, from the right",
    "staged_inductive": "staged, inductive (keep every s-th state)",
    "log_icot": "Log-ICoT (one level per stage)",
    "mixture_hints": "mixture with length hints (hint 0)",
    "adaptive_answer": "adaptive pace (answer-token accuracy)",
    "adaptive_sequence": "adaptive pace (whole-sequence accuracy)",
    "e2e": "end to end (no CoT ever)",
}
NAME = re.compile(r"^(?P<task>[a-z0-9]+)_(?P<curriculum>.+)_s(?P<seed>\d+)$")
PACE = re.compile(r"^stepwise(?P<steps>\d+)(?:_(?P<variant>.+))?$")


def load_runs(folder: Path) -> list[dict]:
    """Every run record under ``folder`` (see the module docstring).

    Raises:
        ValueError: a folder whose name is not ``<task>_<curriculum>_s<seed>``, or a record missing one of its files.
    """
    runs = []
    for path in record_folders(folder):
        match = NAME.match(path.name)
        if match is None:
            raise ValueError(f"run record {path.name!r} is not named <task>_<curriculum>_s<seed>; see runs.yaml.")
        missing = [name for name in (RECORD_FILE, TRAINING_LOG_FILE, EVAL_RESULTS_FILE) if not (path / name).is_file()]
        if missing:
            raise ValueError(f"run record {path} lacks {', '.join(missing)}; run it again through the harness.")
        runs.append(
            {
                "run": path.name,
                "task": match["task"],
                "curriculum": match["curriculum"],
                "seed": int(match["seed"]),
                "wall_s": read_json(path / RECORD_FILE).get("wall_s"),
                "log": read_json(path / TRAINING_LOG_FILE),
                "final": read_json(path / EVAL_RESULTS_FILE),
            }
        )
    return runs


def mode(run: dict) -> str:
    """The generation mode that answers without CoT: ``hint=0`` for the mixture with hints, else ``implicit``."""
    return "hint=0" if run["curriculum"].startswith("mixture") else "implicit"


def label(curriculum: str) -> str:
    """What the table calls a curriculum: ``stepwise<P>[_<variant>]`` is a fixed pace of P steps per token (the
    variant, e.g. ``nodropout`` in results/mult_cpu/, in parentheses)."""
    pace = PACE.match(curriculum)
    if pace:
        variant = f" ({pace['variant']})" if pace["variant"] else ""
        return f"stepwise, fixed pace of {int(pace['steps'])} steps / token{variant}"
    if curriculum.startswith("e2e_"):  # end to end at another budget, e.g. e2e_budget16k in results/mult_cpu/
        return f"{LABELS['e2e']} ({curriculum[len('e2e_') :]})"
    return LABELS.get(curriculum, curriculum)


def family(curriculum: str) -> str:
    """``fixed`` (stepwise paces), ``adaptive``, ``e2e`` or ``other``."""
    if curriculum.startswith("stepwise"):
        return "fixed"
    return next((name for name in ("adaptive", "e2e") if curriculum.startswith(name)), "other")


def curve(run: dict) -> list[tuple[float, float]]:
    """(training examples seen, exact match without CoT) at every generation measurement."""
    key = f"eval_{mode(run)}/answer_em"
    return [(row["train_examples"], row[key]) for row in run["log"] if key in row]


def examples_to(run: dict, bar: float = BAR) -> float | None:
    """Training examples seen at the first measurement >= ``bar``; None if never."""
    return next((examples for examples, em in curve(run) if em >= bar), None)


def trained_examples(run: dict) -> float:
    points = curve(run)
    return points[-1][0] if points else 0.0


def cot_gone_at(run: dict) -> float | None:
    """Training examples seen at the first logged step without any CoT token (None: never, or no CoT to remove)."""
    points = curve(run)
    if not points or family(run["curriculum"]) == "e2e" or run["curriculum"].startswith("mixture"):
        return None
    batch = next(row["train_examples"] / row["step"] for row in run["log"] if "train_examples" in row)
    step = next((row["step"] for row in run["log"] if row.get("cot/kept_tokens_mean") == 0), None)
    return None if step is None else step * batch


def final_test(run: dict) -> float:
    return run["final"][f"test/{mode(run)}/answer_em"]


def points(runs: list[dict]) -> list[dict]:
    """One row per (task, curriculum): its runs and figures over seeds, in runs.yaml's order."""
    rows: dict[tuple[str, str], dict] = {}
    for run in sorted(runs, key=lambda r: r["seed"]):
        row = rows.setdefault((run["task"], run["curriculum"]), {"task": run["task"], "curriculum": run["curriculum"]})
        row.setdefault("runs", []).append(run)
    for row in rows.values():
        members = row["runs"]
        row["final"] = summarize([final_test(run) for run in members])
        reached = [examples_to(run) for run in members]
        row["reached"] = sum(value is not None for value in reached)
        row["to_bar"] = summarize(reached) if row["reached"] == len(members) else None
        row["to_bar_values"] = reached
        gone = [cot_gone_at(run) for run in members]
        row["cot_gone"] = summarize(gone) if all(value is not None for value in gone) else None
        row["trained"] = max(trained_examples(run) for run in members)
        row["wall"] = [run["wall_s"] for run in members if run["wall_s"] is not None]
    return list(rows.values())


def _cell(summary: Summary | None, digits: int) -> str:
    return "" if summary is None else summary.text(digits)


def table_rows(rows: list[dict]) -> list[dict]:
    out = []
    for row in rows:
        n = len(row["runs"])
        if row["to_bar"] is not None:
            to_bar = _cell(row["to_bar"], 0)
        elif row["reached"]:
            to_bar = (
                f"{row['reached']}/{n} seeds reached it ({', '.join(f'{v:,.0f}' for v in row['to_bar_values'] if v)})"
            )
        else:
            to_bar = f"not reached in {row['trained']:,.0f}"
        wall = f"{min(row['wall']):,.0f}–{max(row['wall']):,.0f} s" if row["wall"] else ""
        out.append(
            {
                "task": row["task"],
                "curriculum": label(row["curriculum"]),
                "seeds": n,
                "test implicit EM (end)": _cell(row["final"], 3),
                "examples to ≥ 90%": to_bar,
                "CoT gone at (examples)": _cell(row["cot_gone"], 0) or "—",
                "wall time per run": wall,
            }
        )
    return out


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
        match = NAME.match(name)
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
    """L1 (the ratio) and L2 (the premise) per task, by the rules of claims.csv; ``pending`` while a curriculum has
    fewer than 3 seeds or ``missing`` (:func:`unrecorded`) names a run of the task's sweep not recorded yet, unless
    the runs still to come cannot change the verdict (:func:`_settled`; the ledger then says so)."""
    results = {}
    missing = missing or {}
    for task, entry in compared.items():
        task_rows = [row for row in rows if row["task"] == task]
        seeds = min(len(row["runs"]) for row in task_rows)
        short = f"; {len(missing[task])} run(s) of runs.yaml not recorded yet" if missing.get(task) else ""
        unrun = {NAME.match(name)["curriculum"] for name in missing.get(task, [])} - {
            r["curriculum"] for r in task_rows
        }
        curricula = [row for row in task_rows if family(row["curriculum"]) != "e2e"]
        settled = _settled(curricula, unrun)
        early = "; settled before every seed: the runs still to come cannot change it"
        waiting = seeds < SEEDS or bool(short)
        r = entry["ratio"]
        if r is None:
            verdict, ours = "inconclusive", ratio_line(task, entry)[2:].rstrip(".")
        else:
            verdict = "agree" if r["ratio"] >= 2 and r["low"] > 1 else "disagree" if r["high"] < 2 else "inconclusive"
            ours = f"best fixed / best adaptive = {r['ratio']:.2f} [{r['low']:.2f}, {r['high']:.2f}]"
        if waiting and not (r is None and settled["L1"]):
            verdict = "pending"
        elif waiting:
            ours += early
        results[f"L1-{task}"] = {"verdict": verdict, "seeds": seeds, "ours": ours + short}
        best = max(curricula, key=lambda row: row["final"].mean) if curricula else None
        e2e = next((row for row in task_rows if family(row["curriculum"]) == "e2e"), None)
        if waiting and settled["L2"]:
            results[f"L2-{task}"] = {
                "verdict": "disagree",
                "seeds": seeds,
                "ours": f"best: {label(best['curriculum'])} {best['final'].text(3)}; no curriculum can reach a mean "
                f"of 0.90 over {SEEDS} seeds (the highest still possible: "
                f"{max(_best_possible(row) for row in curricula):.3f}){early}{short}",
            }
            continue
        if best is None or e2e is None:
            results[f"L2-{task}"] = {
                "verdict": "pending",
                "seeds": seeds,
                "ours": "no curriculum or no end-to-end run" + short,
            }
            continue
        gap = difference([final_test(r) for r in best["runs"]], [final_test(r) for r in e2e["runs"]])
        strong = best["final"].mean >= 0.9 and (best["final"].low or 0) >= 0.85
        if best["final"].mean < 0.9:
            verdict = "disagree"
        elif strong and gap.mean >= 0.3 and gap.low is not None and gap.low > 0.15:
            verdict = "agree"
        else:
            verdict = "inconclusive"
        gap_text = f"{gap.mean:.3f}" + ("" if gap.low is None else f" [{gap.low:.3f}, {gap.high:.3f}]")
        results[f"L2-{task}"] = {
            "verdict": "pending" if waiting else verdict,
            "seeds": seeds,
            "ours": f"best: {label(best['curriculum'])} {best['final'].text(3)}; end to end {e2e['final'].text(3)}; "
            f"gap {gap_text}{short}",
        }
    return results


def plot(rows: list[dict], out: Path) -> list[Path]:
    plt = pyplot()
    written = []
    for task in dict.fromkeys(row["task"] for row in rows):
        figure, axis = plt.subplots(figsize=(10, 6))
        gone_marked = False
        for index, row in enumerate(row for row in rows if row["task"] == task):
            curves = [curve(run) for run in row["runs"]]
            length = min(len(points) for points in curves)
            if not length:
                continue
            xs = [curves[0][i][0] for i in range(length)]
            summaries = [summarize([points[i][1] for points in curves]) for i in range(length)]
            style = "--" if family(row["curriculum"]) == "e2e" else "-"
            error_bars(axis, xs, summaries, color=f"C{index % 10}", linestyle=style, markersize=2, linewidth=1.2,
                       capsize=1.5, label=f"{label(row['curriculum'])} (n={len(row['runs'])})")  # fmt: skip
            if row["cot_gone"] is not None:  # where the curriculum's CoT was gone, in the curve's colour
                mark_steps(axis, [row["cot_gone"].mean], color=f"C{index % 10}", linestyle=":", linewidth=0.9)
                gone_marked = True
        axis.axhline(BAR, color="grey", linestyle="-.", linewidth=0.9, label="90%")
        if gone_marked:
            axis.plot([], [], color="grey", linestyle=":", linewidth=0.9, label="CoT gone (mean; the curve's colour)")
        axis.set_ylim(-0.02, 1.02)
        axis.set_xlabel("training examples seen")
        axis.set_ylabel("exact match without CoT (held-out questions)")
        axis.set_title(f"{TASKS.get(task, task)}: every curriculum at one budget (mean over seeds, 95% intervals)")
        axis.legend(fontsize=7, loc="lower right")
        written.append(save_figure(figure, out / f"curves_{task}.png"))
    return written


def arguments_and_runs(argv: list[str] | None, description: str, here: Path, verdicts: str, outputs: str):
    """The command line of a league-style analysis whose folder is ``here`` (``--runs``, ``--out``, ``--ledger``
    filled with ``verdicts``, ``--readme`` given ``outputs``) and the run records it names.

    Raises:
        ValueError: ``--readme`` has no generated section (checked before anything is written), or no run is recorded.
    """
    parser = argparse.ArgumentParser(description=description.split("\n\n")[0])
    parser.add_argument("--runs", type=Path, default=here / "runs", help="folder of run records (the harness's)")
    parser.add_argument("--out", type=Path, default=here, help="where the tables and PNGs go")
    parser.add_argument("--ledger", type=Path, default=None, help=f"claims.csv to fill with {verdicts}")
    parser.add_argument("--readme", type=Path, default=None,
                        help=f"a README whose section between <!-- begin table --> and <!-- end table --> gets {outputs}")  # fmt: skip
    args = parser.parse_args(argv)
    if args.readme is not None:
        section(args.readme, "table")  # before anything is written
    runs = load_runs(args.runs)
    if not runs:
        raise ValueError(f"no run records under {args.runs}; run `python -m hf_icot.studies run results/{here.name}`.")
    return args, runs


def main(argv: list[str] | None = None) -> list[dict]:
    args, runs = arguments_and_runs(argv, __doc__, HERE, "the verdicts", "the table, the ratios and the curves")
    rows = points(runs)
    args.out.mkdir(parents=True, exist_ok=True)
    league, screened = split_screened(rows)
    table = write_table(table_rows(league), args.out, "table")
    compared = comparisons(rows)
    lines = ["Best fixed pace against the best adaptive one, examples to 90% (95% bootstrap interval over seeds):", ""]
    ratios = "\n".join(lines + [ratio_line(t, e) for t, e in compared.items()]) + "\n"
    (args.out / "ratios.md").write_text(ratios)
    screen = ""
    if screened:
        tasks = ", ".join(dict.fromkeys(row["task"] for row in screened))
        screen = (
            f"\nShort of {SEEDS} seeds, so not in the league table ({tasks}; the ledger says whether the seeds "
            "run already settle the task's verdicts):\n\n" + write_table(table_rows(screened), args.out, "screen")
        )
    elif (args.out / "screen.md").exists():
        (args.out / "screen.md").unlink()
        (args.out / "screen.csv").unlink(missing_ok=True)
    written = plot(rows, args.out)
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
