"""A league: runs of one recipe at one budget named ``<task>_<curriculum>_s<seed>`` (results/curricula/, and
results/mult_cpu/ on its own tasks), read from the harness's records into one row per (task, curriculum) over its
seeds, the league's table and its curves. A study's ``make_results.py`` adds its own claims and rules.

* records: :func:`load_runs` (``sweep.json``, ``training_log.json``, ``eval_results.json`` of each run, read by
  :func:`read_record`, which results/methods/ reads its records with too), what the table calls a curriculum named by
  the league's rules (:func:`label`: ``stepwise<P>`` a fixed pace of P steps per token, ``e2e`` end to end; a study
  passes its own words for its other names to :func:`table_rows` and :func:`plot`) and its kind (:func:`family`);
* per run: :func:`curve` (exact match without CoT against training examples seen), :func:`examples_to` (the examples
  seen at the first measurement >= :data:`BAR`), :func:`cot_gone_at`, :func:`final_test`;
* per (task, curriculum): :func:`points`, :func:`table_rows` (the table's cells) and :func:`plot`
  (``curves_<task>.png``, each curriculum's :func:`mean_curve`: mean over seeds with 95% error bars; results/methods/
  draws its methods' curves with it too);
* :func:`arguments_and_runs`, the command line every league analysis shares (``--runs``, ``--out``, ``--ledger``,
  ``--readme``);
* the two rules every league asks (each study registers them for its own rows, :mod:`hf_icot.studies.rules`):
  :func:`premise_rule` (some curriculum or method internalizes the task while end to end stays far below) and
  :func:`pace_ratio_rule` (the best fixed pace against the best adaptive one), with made-up figures for each branch.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from hf_icot.publishing.run_files import EVAL_RESULTS_FILE, TRAINING_LOG_FILE
from hf_icot.studies.report import (
    RUN_NAME,
    error_bars,
    mark_steps,
    pyplot,
    read_json,
    record_folders,
    save_figure,
    section,
)
from hf_icot.studies.rules import Cut, Decision, Estimate, decided
from hf_icot.studies.statistics import Summary, difference, summarize
from hf_icot.studies.sweep import RECORD_FILE

#: the bar a curriculum's exact match without CoT is timed to
BAR = 0.9
#: what the table calls the end-to-end baseline (``e2e``, ``e2e_<variant>``)
END_TO_END = "end to end (no CoT ever)"
PACE = re.compile(r"^stepwise(?P<steps>\d+)(?:_(?P<variant>.+))?$")


def read_record(path: Path) -> dict:
    """What a run's record folder ``path`` holds: the harness's wall time (``wall_s``, None if it has none), the
    training log (``log``) and the final scores (``final``).

    Raises:
        ValueError: the record lacks one of its files.
    """
    missing = [name for name in (RECORD_FILE, TRAINING_LOG_FILE, EVAL_RESULTS_FILE) if not (path / name).is_file()]
    if missing:
        raise ValueError(f"run record {path} lacks {', '.join(missing)}; run it again through the harness.")
    return {
        "wall_s": read_json(path / RECORD_FILE).get("wall_s"),
        "log": read_json(path / TRAINING_LOG_FILE),
        "final": read_json(path / EVAL_RESULTS_FILE),
    }


def load_runs(folder: Path) -> list[dict]:
    """Every run record under ``folder`` (see the module docstring).

    Raises:
        ValueError: a folder whose name is not ``<task>_<curriculum>_s<seed>``, or a record missing one of its files.
    """
    runs = []
    for path in record_folders(folder):
        match = RUN_NAME.match(path.name)
        if match is None:
            raise ValueError(f"run record {path.name!r} is not named <task>_<curriculum>_s<seed>; see runs.yaml.")
        identity = {"run": path.name, "task": match["task"], "curriculum": match["what"], "seed": int(match["seed"])}
        runs.append({**identity, **read_record(path)})
    return runs


def mode(run: dict) -> str:
    """The generation mode that answers without CoT: ``hint=0`` for the mixture with hints, else ``implicit``."""
    return "hint=0" if run["curriculum"].startswith("mixture") else "implicit"


def label(curriculum: str) -> str:
    """What the table calls a curriculum by the league's naming rules: ``stepwise<P>[_<variant>]`` is a fixed pace of
    P steps per token (the variant, e.g. ``nodropout`` in results/mult_cpu/, in parentheses), ``e2e[_<variant>]`` the
    end-to-end baseline (e.g. ``e2e_budget16k``: at another budget); any other name is itself (a study gives its own
    words through ``label=`` of :func:`table_rows` and :func:`plot`)."""
    pace = PACE.match(curriculum)
    if pace:
        variant = f" ({pace['variant']})" if pace["variant"] else ""
        return f"stepwise, fixed pace of {int(pace['steps'])} steps / token{variant}"
    if curriculum == "e2e":
        return END_TO_END
    if curriculum.startswith("e2e_"):
        return f"{END_TO_END} ({curriculum[len('e2e_') :]})"
    return curriculum


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


def table_rows(rows: list[dict], label: Callable[[str], str] = label) -> list[dict]:
    """The table's cells, one row per (task, curriculum) of ``rows`` (:func:`points`), the curriculum named by
    ``label`` (the study's words; the league's rules by default)."""
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


def mean_curve(axis: Any, curves: list[list[tuple[float, float]]], index: int, linestyle: str, label: str) -> bool:
    """Draw on ``axis`` the mean over seeds of ``curves`` (one per seed: (training examples seen, score) at each
    measurement, cut to the shortest) with 95% error bars, in the colour ``C<index>``; False, drawing nothing, when
    a seed has no measurement."""
    length = min(len(points) for points in curves)
    if not length:
        return False
    xs = [curves[0][i][0] for i in range(length)]
    summaries = [summarize([points[i][1] for points in curves]) for i in range(length)]
    error_bars(axis, xs, summaries, color=f"C{index % 10}", linestyle=linestyle, markersize=2, linewidth=1.2,
               capsize=1.5, label=label)  # fmt: skip
    return True


def plot(rows: list[dict], out: Path, titles: Mapping[str, str], label: Callable[[str], str] = label) -> list[Path]:
    """``curves_<task>.png`` in ``out`` per task of ``rows``, titled by ``titles`` (task -> what it is), each
    curriculum named by ``label`` (as in :func:`table_rows`); returns their paths."""
    plt = pyplot()
    written = []
    for task in dict.fromkeys(row["task"] for row in rows):
        figure, axis = plt.subplots(figsize=(10, 6))
        gone_marked = False
        for index, row in enumerate(row for row in rows if row["task"] == task):
            style = "--" if family(row["curriculum"]) == "e2e" else "-"
            name = f"{label(row['curriculum'])} (n={len(row['runs'])})"
            if not mean_curve(axis, [curve(run) for run in row["runs"]], index, style, name):
                continue
            if row["cot_gone"] is not None:  # where the curriculum's CoT was gone, in the curve's colour
                mark_steps(axis, [row["cot_gone"].mean], color=f"C{index % 10}", linestyle=":", linewidth=0.9)
                gone_marked = True
        axis.axhline(BAR, color="grey", linestyle="-.", linewidth=0.9, label="90%")
        if gone_marked:
            axis.plot([], [], color="grey", linestyle=":", linewidth=0.9, label="CoT gone (mean; the curve's colour)")
        axis.set_ylim(-0.02, 1.02)
        axis.set_xlabel("training examples seen")
        axis.set_ylabel("exact match without CoT (held-out questions)")
        axis.set_title(f"{titles.get(task, task)}: every curriculum at one budget (mean over seeds, 95% intervals)")
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


# -- the rules every league asks -------------------------------------------------------------------------------------

#: the premise's cuts: the best one's mean (and its interval's lower bound), and the gap to end to end (and its low)
PREMISE_LOW, PREMISE_GAP, PREMISE_GAP_LOW = 0.85, 0.30, 0.15


def premise_rule(figures: Mapping[str, Any]) -> Decision:
    """The premise of a league on one task: ``best`` (Summary of the best internalizing curriculum or method's final
    scores; ``best_name`` names it), ``gap`` (Welch's Summary of best minus end to end, None without end to end) and,
    while seeds are still to come, ``highest_possible`` (the best mean any can still reach). Agree when the best
    mean is >= 0.90 with its interval's lower bound >= 0.85 and the gap's mean >= 0.30 with its interval above
    0.15; disagree when no mean can reach 0.90, or when end to end is shown within 0.30 of the best (the gap's
    interval below 0.30: the task needs no internalization at this budget); else inconclusive."""
    best, gap = figures["best"], figures.get("gap")
    on_best = Cut.of(f"{figures['best_name']}'s mean", best, BAR)
    if figures.get("highest_possible", best.mean) < BAR:
        return decided("disagree", on_best)
    on_gap = Cut.of("the gap to end to end", gap, PREMISE_GAP)
    if gap is not None and gap.high is not None and gap.high < PREMISE_GAP:
        return decided("disagree", on_gap)
    strong = best.low is not None and best.low >= PREMISE_LOW
    if strong and gap is not None and gap.mean >= PREMISE_GAP and gap.low is not None and gap.low > PREMISE_GAP_LOW:
        return decided("agree", on_best, on_gap)
    return decided("inconclusive", on_best, on_gap)


def _premise_case(best: list[float], e2e: list[float] | None, **more: float) -> dict[str, Any]:
    """Premise figures from made-up final scores per seed of the best one and of end to end."""
    gap = None if e2e is None else difference(best, e2e)
    return {"best": summarize(best), "best_name": "the best", "gap": gap, **more}


#: made-up figures that reach each branch of :func:`premise_rule`
PREMISE_CASES = {
    "agree": _premise_case([0.99, 1.0, 0.98], [0.5, 0.52, 0.48]),
    "disagree": [
        _premise_case([0.83, 0.99, 0.67], [0.5, 0.55, 0.48]),  # no mean >= 0.90
        _premise_case([0.15], None, highest_possible=0.72),  # seeds to come cannot lift a mean to 0.90
        _premise_case([0.999, 1.0, 0.998], [0.998, 1.0, 0.999]),  # end to end solves it too
    ],
    "inconclusive": [
        _premise_case([0.997, 1.0, 0.993], [0.543, 0.9, 0.177]),  # end to end too spread to say
        _premise_case([0.99, 1.0, 0.8], [0.5, 0.52, 0.48]),  # the best's interval below 0.85
    ],
}


def pace_ratio_rule(figures: Mapping[str, Any]) -> Decision:
    """The best fixed pace against the best adaptive one: ``ratio`` (an :class:`Estimate` of mean(best fixed) /
    mean(best adaptive) examples to 90%, its 95% interval over seeds; None when no fixed or no adaptive pace
    reached 90% on every seed). Agree if the ratio is >= 2 with its interval above 1; disagree if its interval lies
    below 2; else inconclusive (no ratio, or no interval: one seed a side)."""
    ratio = figures["ratio"]
    if ratio is None:
        return decided("inconclusive")
    cut = Cut.of("best fixed / best adaptive", ratio, 2)
    if ratio.low is None:
        return decided("inconclusive", cut)
    if ratio.mean >= 2 and ratio.low > 1:
        return decided("agree", cut)
    return decided("disagree" if ratio.high < 2 else "inconclusive", cut)


def ratio_estimate(ratio: Mapping[str, float] | None) -> Estimate | None:
    """A bootstrap ratio ``{"ratio", "low", "high"}`` as an :class:`Estimate` (its standard error a normal
    interval's: the width over 2 x 1.96)."""
    if ratio is None:
        return None
    return Estimate(ratio["ratio"], ratio["low"], ratio["high"], (ratio["high"] - ratio["low"]) / 3.92)


#: made-up figures that reach each branch of :func:`pace_ratio_rule`
PACE_RATIO_CASES = {
    "agree": {"ratio": Estimate(2.5, 1.8, 3.2, 0.36)},
    "disagree": {"ratio": Estimate(1.0, 0.94, 1.07, 0.03)},
    "inconclusive": [{"ratio": None}, {"ratio": Estimate(1.8, 0.9, 2.7, 0.46)}, {"ratio": Estimate(3.0)}],
}
