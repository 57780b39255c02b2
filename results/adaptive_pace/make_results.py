"""Tables and plots of results/adaptive_pace/ from the committed run records (no training).

python -m results.adaptive_pace.make_results [--runs results/adaptive_pace/runs] [--out results/adaptive_pace]
                                             [--ledger results/adaptive_pace/claims.csv]

Every run folder under ``--runs`` holds its command (``run.json`` for the first runs, the harness's ``sweep.json``
since), ``training_log.json``
(the trainer's log: the curriculum every 50 steps, the implicit exact match of the 500 validation questions every
100 steps, with the training examples seen) and ``eval_results.json`` (the final scores on validation and test). It
writes

* ``table.md`` and ``summary.json``: per task and run, when the CoT was gone, the examples seen when the implicit exact
  match first reached 90% and 99%, the best and final scores, and the ratio best fixed pace / adaptive;
* ``curves_<task>.png``: implicit exact match and CoT tokens kept against training examples seen, one line per run;
* with ``--ledger``, the verdicts of P1 and P2 in ``claims.csv`` by their rules (``rules.py``; the figures and the
  why stay as written by hand).
"""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

from hf_icot.publishing.run_files import EVAL_RESULTS_FILE, TRAINING_LOG_FILE
from hf_icot.studies.claims import update_ledger
from hf_icot.studies.report import markdown_table, pyplot, read_json, record_folders
from hf_icot.studies.rules import Estimate
from hf_icot.studies.sweep import RECORD_FILE
from results.adaptive_pace.rules import RULES

HERE = Path(__file__).resolve().parent
BARS = (0.9, 0.99)
EM_KEY = "eval_implicit/answer_em"
DEFAULT_MAX_STEPS_PER_REMOVAL = 2000  # the configs' max_steps_per_removal
TASKS = {"mult": "3x3 multiplication (24 CoT tokens)", "parity": "8-sparse parity over 20 bits (7 CoT tokens)"}


def load_runs(folder: Path) -> list[dict]:
    """Every run record under ``folder``, sorted by task and then adaptive, fixed paces (fastest first), end to end.

    Raises:
        ValueError: a folder without records, or a record missing one of its three files.
    """
    runs = []
    for path in record_folders(folder):
        missing = [name for name in (TRAINING_LOG_FILE, EVAL_RESULTS_FILE) if not (path / name).is_file()]
        if missing:
            raise ValueError(f"run record {path} lacks {', '.join(missing)}; run it again through the harness.")
        # the first runs' own record (run.json), or the harness's (sweep.json: its command as a list)
        run = read_json(path / "run.json") or read_json(path / RECORD_FILE)
        run["command"] = run["command"] if isinstance(run["command"], str) else shlex.join(run["command"])
        run["log"] = read_json(path / TRAINING_LOG_FILE)
        run["final"] = read_json(path / EVAL_RESULTS_FILE)
        run["task"], run["kind"] = path.name.split("_", 1)
        runs.append(run)
    if not runs:
        raise ValueError(
            f"no run records under {folder}; run `python -m hf_icot.studies run results/adaptive_pace` first."
        )
    order = {"adaptive": 0, "fixed": 1, "e2e": 2}
    return sorted(runs, key=lambda r: (r["task"], order[family(r)], pace_steps(r) or 0, r["kind"]))


def family(run: dict) -> str:
    """``adaptive``, ``fixed`` or ``e2e``."""
    return next(name for name in ("adaptive", "fixed", "e2e") if run["kind"].startswith(name))


def pace_steps(run: dict) -> int | None:
    """A fixed pace's steps per removed token (from its name, ``fixed<P>``); None for the other runs."""
    return int(run["kind"][len("fixed") :]) if run["kind"].startswith("fixed") else None


def label(run: dict) -> str:
    if run["kind"].startswith("adaptive"):  # adaptive[_max<N>][_sequence]: at most N steps per removal, the metric
        parts = run["kind"].split("_")[1:]
        cap = next((int(part[3:]) for part in parts if part.startswith("max")), DEFAULT_MAX_STEPS_PER_REMOVAL)
        metric = "whole-sequence" if "sequence" in parts else "answer-token"
        return f"adaptive pace ({metric} accuracy), at most {cap:,} steps / token"
    if run["kind"] == "e2e":
        return "end to end (no CoT ever)"
    return f"fixed pace, 1 token / {pace_steps(run)} steps"


def curve(run: dict) -> list[tuple[float, float]]:
    """(training examples seen, implicit exact match) at every measurement."""
    return [(row["train_examples"], row[EM_KEY]) for row in run["log"] if EM_KEY in row]


def examples_to(run: dict, bar: float) -> float | None:
    """Training examples seen at the first measurement with implicit exact match >= ``bar``; None if never."""
    return next((examples for examples, em in curve(run) if em >= bar), None)


def batch_size(run: dict) -> float:
    row = next(row for row in run["log"] if "train_examples" in row)
    return row["train_examples"] / row["step"]


def cot_gone_at(run: dict) -> float | None:
    """Training examples seen at the first logged step training without any CoT token (None: never)."""
    rows = [row for row in run["log"] if "cot/kept_tokens_mean" in row]
    step = next((row["step"] for row in rows if row["cot/kept_tokens_mean"] == 0), None)
    return None if step is None else step * batch_size(run)


def trained_examples(run: dict) -> float:
    return curve(run)[-1][0]


def summarize(runs: list[dict]) -> dict:
    """Per task: each run's figures, and the best fixed pace against the adaptive one at each bar."""
    summary: dict = {}
    for task in dict.fromkeys(run["task"] for run in runs):
        rows = []
        for run in (r for r in runs if r["task"] == task):
            best = max(em for _, em in curve(run))
            rows.append(
                {
                    "run": run["run"],
                    "label": label(run),
                    "command": run["command"],
                    "cot_gone_at": None if family(run) == "e2e" else cot_gone_at(run),
                    **{f"examples_to_{bar:g}": examples_to(run, bar) for bar in BARS},
                    "best_validation_em": best,
                    "trained_examples": trained_examples(run),
                    "test_implicit_em": run["final"]["test/implicit/answer_em"],
                    "validation_implicit_em": run["final"]["validation/implicit/answer_em"],
                }
            )
        comparison = {}
        kinds = {run["run"]: family(run) for run in runs}
        adaptives = [row for row in rows if kinds[row["run"]] == "adaptive"]
        fixed = [row for row in rows if kinds[row["run"]] == "fixed"]
        for bar in BARS:
            key = f"examples_to_{bar:g}"
            reached = [row for row in fixed if row[key] is not None]
            best_fixed = min(reached, key=lambda row: row[key]) if reached else None
            made_it = [row for row in adaptives if row[key] is not None]
            adaptive = min(made_it, key=lambda row: row[key]) if made_it else None
            entry = {
                "best_fixed": best_fixed["run"] if best_fixed else None,
                "best_adaptive": adaptive["run"] if adaptive else None,
                "ratio": None,
                "ratio_at_least": None,
            }
            if adaptive is not None:
                if best_fixed is not None:
                    entry["ratio"] = best_fixed[key] / adaptive[key]
                elif fixed:  # no fixed pace reached the bar: the ratio is at least what they trained, over adaptive's
                    entry["ratio_at_least"] = min(row["trained_examples"] for row in fixed) / adaptive[key]
            comparison[f"{bar:g}"] = entry
        summary[task] = {"title": TASKS.get(task, task), "runs": rows, "adaptive_vs_best_fixed": comparison}
    return summary


def _count(value: float | None, trained: float) -> str:
    return f"{value:,.0f}" if value is not None else f"not in {trained:,.0f}"


def table(summary: dict) -> str:
    lines = []
    for task in summary.values():
        rows = []
        for row in task["runs"]:
            trained = row["trained_examples"]
            gone = f"{row['cot_gone_at']:,.0f}" if row["cot_gone_at"] is not None else "never"
            rows.append(
                {
                    "run": row["label"],
                    "CoT gone at (examples)": "— (no CoT)" if row["run"].endswith("_e2e") else gone,
                    "examples to ≥ 90%": _count(row["examples_to_0.9"], trained),
                    "examples to ≥ 99%": _count(row["examples_to_0.99"], trained),
                    "best validation EM": f"{row['best_validation_em']:.3f}",
                    "test implicit EM (end)": f"{row['test_implicit_em']:.3f}",
                    "examples trained": f"{trained:,.0f}",
                }
            )
        lines += [f"### {task['title']}", "", markdown_table(rows)]
        for bar, entry in task["adaptive_vs_best_fixed"].items():
            lines.append(_ratio_line(f"{float(bar):.0%}", entry))
        lines.append("")
    return "\n".join(lines)


def _ratio_line(percent: str, entry: dict) -> str:
    if entry["ratio"] is not None:
        return (
            f"* ≥ {percent}: the best fixed pace ({entry['best_fixed']}) needed {entry['ratio']:.2f}× the examples of "
            f"the best adaptive one ({entry['best_adaptive']})."
        )
    if entry["ratio_at_least"] is not None:
        return (
            f"* ≥ {percent}: no fixed pace reached it; their budget was {entry['ratio_at_least']:.2f}× the examples "
            f"{entry['best_adaptive']} needed (a lower bound on the ratio)."
        )
    if entry["best_fixed"] is not None:
        return f"* ≥ {percent}: no adaptive pace reached it; {entry['best_fixed']} did."
    return f"* ≥ {percent}: neither an adaptive nor a fixed pace reached it, so there is no ratio."


def verdicts(summary: dict) -> dict[str, dict]:
    """P1 (the ratio at 90% on each task; one seed a side: no interval) and P2 (3x3 multiplication internalized while
    end to end stays near 0), each by its rule; ``seeds`` the fewest any run of the rule has (one here)."""
    ratios = {}
    for task, entry in summary.items():
        ratio = entry["adaptive_vs_best_fixed"]["0.9"]["ratio"]
        ratios[task] = None if ratio is None else Estimate(ratio)  # one seed a side: no interval
    p1 = RULES["P1"]({"ratios": ratios})
    rows = summary["mult"]["runs"]
    settings = {row["run"]: [row["test_implicit_em"]] for row in rows if not row["run"].endswith("_e2e")}
    e2e = [row["test_implicit_em"] for row in rows if row["run"].endswith("_e2e")]
    p2 = RULES["P2"]({"settings": settings, "e2e": e2e})
    seeds = min(len(scores) for scores in settings.values())
    return {"P1": {"verdict": p1.verdict, "flag": p1.flag, "seeds": seeds},
            "P2": {"verdict": p2.verdict, "flag": p2.flag, "seeds": seeds}}  # fmt: skip


def plot(summary: dict, runs: list[dict], out: Path) -> list[Path]:
    plt = pyplot()
    written = []
    for task_name, task in summary.items():
        task_runs = [run for run in runs if run["task"] == task_name]
        figure, (top, bottom) = plt.subplots(2, 1, figsize=(9, 7.5), sharex=True, height_ratios=(3, 2))
        for index, run in enumerate(task_runs):
            color = f"C{index}"
            points = curve(run)
            top.plot([x for x, _ in points], [y for _, y in points], color=color, label=label(run), linewidth=1.6)
            rows = [row for row in run["log"] if "cot/kept_tokens_mean" in row]
            xs = [row["step"] * batch_size(run) for row in rows]
            bottom.plot(xs, [row["cot/kept_tokens_mean"] for row in rows], color=color, linewidth=1.4)
            gone = cot_gone_at(run)
            if gone is not None and family(run) != "e2e":
                for axis in (top, bottom):
                    axis.axvline(gone, color=color, linestyle=":", linewidth=1)
        for bar in BARS:
            top.axhline(bar, color="grey", linestyle="--", linewidth=0.8)
            top.text(top.get_xlim()[0], bar, f" {bar:.0%}", va="bottom", fontsize=8, color="grey")
        top.set_ylabel("implicit exact match\n(500 validation questions)")
        top.set_ylim(-0.02, 1.02)
        top.set_title(f"{task['title']}\nadaptive vs fixed pace: implicit exact match against training examples seen")
        top.legend(loc="best", fontsize=8)
        bottom.set_ylabel("CoT tokens kept\n(training batch mean)")
        bottom.set_xlabel("training examples seen (dotted: the step the whole CoT is gone)")
        bottom.set_ylim(bottom=-0.5)
        figure.tight_layout()
        path = out / f"curves_{task_name}.png"
        figure.savefig(path, dpi=110)
        plt.close(figure)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=Path, default=HERE / "runs", help="folder of run records (the harness's)")
    parser.add_argument("--out", type=Path, default=HERE, help="where table.md, summary.json and the PNGs go")
    parser.add_argument("--ledger", type=Path, default=None, help="claims.csv whose P1 and P2 verdicts to fill")
    args = parser.parse_args(argv)
    runs = load_runs(args.runs)
    summary = summarize(runs)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2, default=lambda v: None) + "\n")
    (args.out / "table.md").write_text(table(summary))
    written = plot(summary, runs, args.out)
    if args.ledger is not None:
        update_ledger(args.ledger, verdicts(summary))
    print(table(summary))
    print("wrote", ", ".join(str(p) for p in [args.out / "table.md", args.out / "summary.json", *written]))
    return summary


if __name__ == "__main__":
    try:
        main()
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None
