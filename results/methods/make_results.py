"""The methods league of results/methods/ from the committed run records (no training).

python -m results.methods.make_results [--runs results/methods/runs] [--out results/methods]
                                       [--ledger results/methods/claims.csv] [--readme results/methods/README.md]

The league has two tasks (:data:`TASKS`). Every run folder under ``--runs`` is one (task, method, seed) of
``runs.yaml``, named ``<task>_<method>_s<seed>``, holding the harness's ``sweep.json`` (its wall time; a run it
recorded as failed has nothing else and is listed apart), ``training_log.json`` (at the task's interval, the exact
match of held-out questions in the method's own answering mode, with the training examples seen) and
``eval_results.json`` (the final scores and speeds). A task may take some methods from another study's records
(``Task.borrowed``: counter7's stepwise, mixture and full CoT are the semiautomata study's runs of the same rows,
model and optimizer, read under ``--studies``); those evaluated only at the end, so they have no curve. Each method
answers in its own mode (:data:`METHODS`; a borrowed run may name another): implicit for token removal and end to
end, latent for Coconut and CODI, explicit for full CoT, length hint 0 for counter7's mixture. It writes

* ``table.md`` / ``table.csv``: per task and method with all its :data:`SEEDS` seeds, the final test exact match (mean ± 95%
  t-interval), the examples and optimizer steps at the first measurement >= 90% (mean ± interval when every seed got
  there, else how many did), the wall time per run (of the runs trained in one go: a run the harness resumed from a
  checkpoint is timed from its resumption only, so it is left out and counted), and the inference cost per test
  answer: decoder forward passes (a latent thought costs one, as a generated token does: Coconut's and CODI's
  ``forward_passes``, a token method's generated tokens, tokens/s ÷ examples/s), tokens/s and examples/s; a method
  short of its seeds goes to ``partial.md`` / ``partial.csv`` instead (its runs still landing);
* ``curves_<task>.png``: exact match in each method's own mode against training examples, mean over seeds with 95%
  error bars;
* with ``--ledger``, the verdicts of ``claims.csv`` by its rules (``rules.py``), per task: M0, M1-M3, S1, S2, P1 (d =
  one method's mean minus another's), M4 (stability), P2 (:mod:`results.methods.step_cost`), each ``pending`` while a
  run it reads has no record (checked against ``runs.yaml`` beside ``--runs``) or its method is short of its seeds;
* with ``--readme``, the tables and the curves into that README's generated section (between ``<!-- begin table -->``
  and ``<!-- end table -->``; the prose around it is written by hand).

"""

from __future__ import annotations

import argparse
from pathlib import Path

from hf_icot.studies import league
from hf_icot.studies.claims import update_ledger
from hf_icot.studies.report import (
    RUN_NAME,
    fill_section,
    mark_steps,
    pyplot,
    read_json,
    record_folders,
    save_figure,
    section,
    unrecorded_runs,
)
from hf_icot.studies.statistics import Summary, difference, summarize
from hf_icot.studies.sweep import RECORD_FILE
from results.methods import stability as stability_of
from results.methods import step_cost, step_seconds, thoughts
from results.methods.league_table import NOTES, STEP_MS, label, write_or_clear  # noqa: F401 - STEP_MS for readers
from results.methods.league_tasks import INTERNALIZING, METHODS, PREMISE, SEEDS_OF, STABLE, STEP_COST, TASKS, THOUGHTS
from results.methods.records import resumed, training_passes
from results.methods.rules import PLATEAU_SHARE, RULES
from results.methods.thoughts import signed

HERE = Path(__file__).resolve().parent

BAR = 0.9
SEEDS = 3  # seeds per method and task in runs.yaml


def _load(path: Path, task: str, method: str, seed: int, answered: str, source: str) -> dict | str:
    """One run record as a run dict, or for a run the harness recorded as failed ``<name>: <last log line>``.

    Raises:
        ValueError: a record of a finished run missing one of its files.
    """
    record = read_json(path / RECORD_FILE, {})
    if record.get("status", "ok") != "ok":
        return f"{path.name}: {(record.get('log_tail') or ['(no log)'])[-1].strip()}"
    identity = {"run": path.name, "task": task, "method": method, "seed": seed, "mode": answered, "source": source}
    cpu = (record.get("machine") or {}).get("cpu") or "not recorded"  # records before 2026-12-07 name no machine
    return {**identity, **league.read_record(path), "cpu": cpu}


def load_runs(folder: Path, studies: Path | None = None) -> tuple[list[dict], list[str]]:
    """The league's run records under ``folder``, each with its ``task``, ``method`` and answering ``mode``, plus
    the borrowed methods' records under ``studies`` (None: none), and the runs the harness recorded as failed
    (``<name>: <last line of its log>``; they have no scores, and count as not recorded).

    Raises:
        ValueError: a folder not named ``<task>_<method>_s<seed>`` with a task of :data:`TASKS` and a method of
            :data:`METHODS`, a league record of a method its task borrows, or a record of a finished run missing
            one of its files.
    """
    runs, failed = [], []
    for path in record_folders(folder):
        match = RUN_NAME.match(path.name)
        if match is None or match["task"] not in TASKS or match["what"] not in METHODS:
            raise ValueError(
                f"run record {path.name!r} is not <task>_<method>_s<seed> with a task of {', '.join(TASKS)} and a "
                f"method of {', '.join(METHODS)}."
            )
        task, method = match["task"], match["what"]
        if method in TASKS[task].borrowed:
            raise ValueError(f"run record {path.name!r}: {task} reads {method} from another study's records.")
        loaded = _load(path, task, method, int(match["seed"]), METHODS[method][1], "")
        (failed.append if isinstance(loaded, str) else runs.append)(loaded)
    for task in TASKS.values():
        for method, source in task.borrowed.items():
            for seed in range(SEEDS):
                path = (studies or Path("/nonexistent")) / source.study / "runs" / f"{source.run}_s{seed}"
                if studies is not None and path.is_dir():
                    loaded = _load(path, task.name, method, seed, source.mode, f"{source.study}/{path.name}")
                    (failed.append if isinstance(loaded, str) else runs.append)(loaded)
    return runs, failed


def curve(run: dict) -> list[tuple[float, int, float]]:
    """(training examples seen, optimizer step, exact match in the run's mode) at every held-out measurement."""
    key = f"eval_{run['mode']}/answer_em"
    return [(row["train_examples"], row["step"], row[key]) for row in run["log"] if key in row]


def first_at(run: dict, bar: float = BAR) -> tuple[float, int] | None:
    """(examples, step) at the first measurement >= ``bar``; None if never."""
    return next(((examples, step) for examples, step, em in curve(run) if em >= bar), None)


def final_figure(run: dict, name: str) -> float | None:
    """``test/<mode>/<name>`` of the run's final scores (speeds of a mode that answered nothing are not reported)."""
    return run["final"].get(f"test/{run['mode']}/{name}")


def late_share(run: dict) -> float | None:
    """The share of the run's late evaluations at or above the bar (:func:`results.methods.stability.late_share`)."""
    return stability_of.late_share([em for _, _, em in curve(run)], BAR)


def stays_at_plateau(run: dict) -> bool:
    """M4's reading of one seed (:func:`results.methods.stability.at_plateau`)."""
    return stability_of.at_plateau(final_figure(run, "answer_em"), late_share(run), BAR, PLATEAU_SHARE)


def cost(run: dict) -> float | None:
    """Decoder forward passes per test answer: a latent run's reported count (its thoughts and generated tokens),
    else the tokens it generated per answer (tokens/s ÷ examples/s)."""
    if run["mode"] == "latent":
        return final_figure(run, "forward_passes")
    tokens, examples = final_figure(run, "tokens_per_s"), final_figure(run, "examples_per_s")
    return None if tokens is None or not examples else tokens / examples


def _summary(values: list[float | None]) -> Summary | None:
    present = [value for value in values if value is not None]
    return summarize(present) if present else None


def points(runs: list[dict], task: str) -> dict[str, dict]:
    """Per method of ``task`` (in :data:`METHODS`' order) with at least one record: its runs, by seed, and figures
    over them."""
    rows = {}
    for method in METHODS:
        members = sorted((r for r in runs if r["task"] == task and r["method"] == method), key=lambda r: r["seed"])
        if not members:
            continue
        reached = [first_at(run) for run in members]
        every = all(value is not None for value in reached)
        rows[method] = row = {
            "task": task,
            "method": method,
            "runs": members,
            "scores": [final_figure(run, "answer_em") for run in members],
            "reached": [value for value in reached if value is not None],
            "to_bar": summarize([value[0] for value in reached]) if every else None,
            "steps_to_bar": summarize([value[1] for value in reached]) if every else None,
            "measured": any(curve(run) for run in members),
            "trained": max((curve(run)[-1][0] for run in members if curve(run)), default=0.0),
            "wall": [run["wall_s"] for run in members if run["wall_s"] is not None and not resumed(run)],
            "resumed": sum(resumed(run) for run in members),
            "cost": _summary([cost(run) for run in members]),
            "train_passes": _summary([training_passes(run) for run in members]),
            "tokens_per_s": _summary([final_figure(run, "tokens_per_s") for run in members]),
            "examples_per_s": _summary([final_figure(run, "examples_per_s") for run in members]),
            "late": [late_share(run) for run in members],
            "cpus": sorted({run["cpu"] for run in members}),
        }
        row["final"] = summarize(row["scores"])
    return rows


def unrecorded(sweep_folder: Path) -> dict[tuple[str, str], list[str]]:
    """Per (task, method), the runs ``sweep_folder/runs.yaml`` defines that the harness has not recorded (none: no
    sweep file there, as for records gathered elsewhere)."""
    missing: dict[tuple[str, str], list[str]] = {}
    for name in unrecorded_runs(sweep_folder):
        match = RUN_NAME.match(name)
        if match is not None and match["task"] in TASKS:
            missing.setdefault((match["task"], match["what"]), []).append(name)
    return missing


def _waiting(
    rows: dict[str, dict], task: str, methods: tuple[str, ...], missing: dict[tuple[str, str], list[str]]
) -> tuple[int, str]:
    """The seeds behind a verdict on ``methods`` (the fewest any has) and why it must wait (``""``: it need not)."""
    seeds = min(len(rows[m]["runs"]) if m in rows else 0 for m in methods)
    unrun = sum(len(missing.get((task, m), [])) for m in methods)
    if unrun:
        return seeds, f"; {unrun} run(s) of runs.yaml not recorded yet"
    short = [
        SEEDS_OF.get(m, SEEDS) for m in methods if (len(rows[m]["runs"]) if m in rows else 0) < SEEDS_OF.get(m, SEEDS)
    ]
    return seeds, f"; fewer than {max(short)} seeds" if short else ""


def compare(
    rows: dict[str, dict], claim: str, task: str, first: str, second: str, missing: dict[tuple[str, str], list[str]]
) -> dict:
    """M1-M3 (``claim``): d = ``first``'s mean final test score minus ``second``'s with Welch's 95% interval, read by
    the claim's rule (``rules.py``: agree if its lower bound >= -0.05, disagree if its upper bound < -0.05, else
    inconclusive; pending: see :func:`_waiting`)."""
    seeds, short = _waiting(rows, task, (first, second), missing)
    if (waits := thoughts.unrecorded(rows, (first, second), seeds, short)) is not None:
        return waits
    a, b = rows[first], rows[second]
    d = difference(a["scores"], b["scores"])
    ours = f"d = {first} - {second} = {signed(d)}; {first} {a['final'].text(3)}, {second} {b['final'].text(3)}{short}"
    if short or d.low is None:
        return {"verdict": "pending", "flag": "", "seeds": seeds, "ours": ours}
    decision = RULES[claim]({"d": d, "what": f"d = {first} - {second}"})
    return {"verdict": decision.verdict, "flag": decision.flag, "seeds": seeds, "ours": ours}


def premise(rows: dict[str, dict], claim: str, task: str, missing: dict[tuple[str, str], list[str]]) -> dict:
    """M0 (``claim``) by its rule (``rules.py``, the league's premise): the best internalizing method's final scores
    against end to end's (pending: see :func:`_waiting`; a method ``runs.yaml`` does not run on ``task`` is not waited
    for)."""
    expected = [m for m in (*INTERNALIZING, "e2e") if m in rows or (task, m) in missing]
    seeds, short = _waiting(rows, task, tuple(expected) or ("e2e",), missing)
    candidates = [rows[method] for method in INTERNALIZING if method in rows]
    if not candidates or "e2e" not in rows:
        ours = f"no internalizing method or no end to end recorded yet{short}"
        return {"verdict": "pending", "flag": "", "seeds": seeds, "ours": ours}
    best, e2e = max(candidates, key=lambda row: row["final"].mean), rows["e2e"]
    final = best["final"]
    gap = difference(best["scores"], e2e["scores"])
    ours = f"best: {best['method']} {final.text(3)}; end to end {e2e['final'].text(3)}; gap {signed(gap)}{short}"
    if short:
        return {"verdict": "pending", "flag": "", "seeds": seeds, "ours": ours}
    decision = RULES[claim]({"best": final, "best_name": best["method"], "gap": gap})
    return {"verdict": decision.verdict, "flag": decision.flag, "seeds": seeds, "ours": ours}


def stability(rows: dict[str, dict], claim: str, task: str, method: str, missing) -> dict:
    """M4 (``claim``) by its rule (``rules.py``): how many of ``method``'s seeds stay at the plateau
    (:func:`stays_at_plateau`; pending: see :func:`_waiting`)."""
    seeds, short = _waiting(rows, task, (method,), missing)
    if (waits := thoughts.unrecorded(rows, (method,), seeds, short)) is not None:
        return waits
    runs = rows[method]["runs"]
    stable = sum(stays_at_plateau(run) for run in runs)
    shares = ", ".join("—" if v is None else f"{v:.2f}" for v in rows[method]["late"])
    ours = f"{stable}/{len(runs)} seeds stay at the plateau; late evaluations >= 0.9 per seed: {shares}{short}"
    if short:
        return {"verdict": "pending", "flag": "", "seeds": seeds, "ours": ours}
    decision = RULES[claim]({"stable": stable, "seeds": len(runs)})
    return {"verdict": decision.verdict, "flag": decision.flag, "seeds": seeds, "ours": ours}


def verdicts(by_task: dict[str, dict], missing: dict | None = None, cost: Path | None = None) -> dict[str, dict]:
    """Every row of claims.csv by its rule (``by_task``: :func:`points` per task; ``missing``: :func:`unrecorded`;
    ``cost``: the ``step_cost.json`` P2 reads, None or absent: pending)."""
    missing = missing or {}
    results = {}
    for name, task in TASKS.items():
        rows = by_task.get(name, {})
        for claim, rule in task.claims.items():
            if rule == PREMISE:
                results[claim] = premise(rows, claim, name, missing)
            elif rule == STEP_COST:
                results[claim] = step_cost.verdict(cost)
            elif rule == THOUGHTS:
                results[claim] = thoughts.verdict(rows, claim, name, missing, _waiting)
            elif rule[0] == STABLE:
                results[claim] = stability(rows, claim, name, rule[1], missing)
            else:
                results[claim] = compare(rows, claim, name, *rule, missing)
    return results


def stage_starts(run: dict) -> list[float]:
    """The training examples seen at the first logged step of each of the run's curriculum stages after the first."""
    first: dict[int, int] = {}
    for row in run["log"]:
        if "cot/stage" in row:
            first[row["cot/stage"]] = min(first.get(row["cot/stage"], row["step"]), row["step"])
    batch = next((row["train_examples"] / row["step"] for row in run["log"] if row.get("train_examples")), 0.0)
    return [step * batch for stage, step in sorted(first.items()) if stage > min(first)]


def plot(rows: dict[str, dict], task: str, out: Path) -> Path | None:
    """``curves_<task>.png`` (None, and nothing written, for no curve)."""
    plt = pyplot()
    figure, axis = plt.subplots(figsize=(10, 6))
    drawn = False
    for index, (method, row) in enumerate((m, r) for m, r in rows.items() if m not in thoughts.SWEEP_ONLY):
        curves = [[(examples, em) for examples, _, em in curve(run)] for run in row["runs"]]
        style = {"e2e": "--", "full_cot": ":"}.get(method, "-")
        name = f"{label(task, method)}, {row['runs'][0]['mode']} (n={len(row['runs'])})"
        drawn = stability_of.median_curve(axis, curves, index, style, name) or drawn
    if not drawn:
        plt.close(figure)
        return None
    axis.axhline(BAR, color="grey", linestyle="-.", linewidth=0.9, label="90%")
    if "coconut" in rows:  # its stages, where its curve dips: the examples at which a run's stage changed
        mark_steps(axis, stage_starts(rows["coconut"]["runs"][0]), "Coconut's stage boundaries", linestyle=":")
    axis.set_ylim(-0.02, 1.02)
    axis.set_xlabel("training examples seen")
    axis.set_ylabel("exact match in the method's own mode")
    axis.set_title(f"{task}: every method at one budget (median over seeds, each seed thin)\n{TASKS[task].measured}")
    axis.legend(fontsize=7, loc="lower right")
    return save_figure(figure, out / f"curves_{task}.png")


def main(argv: list[str] | None = None) -> dict[str, dict[str, dict]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=Path, default=HERE / "runs", help="folder of run records (the harness's)")
    parser.add_argument("--studies", type=Path, default=HERE.parent,
                        help="the folder of the studies whose records a task borrows (default: results/)")  # fmt: skip
    parser.add_argument("--out", type=Path, default=HERE, help="where the tables and the PNGs go")
    parser.add_argument("--ledger", type=Path, default=None, help="claims.csv to fill with the verdicts")
    parser.add_argument("--readme", type=Path, default=None,
                        help="a README whose section between <!-- begin table --> and <!-- end table --> gets the "
                             "tables and the curves")  # fmt: skip
    args = parser.parse_args(argv)
    if args.readme is not None:
        section(args.readme, "table")  # before anything is written
    runs, failed = load_runs(args.runs, args.studies)
    by_task = {task: points(runs, task) for task in TASKS}
    args.out.mkdir(parents=True, exist_ok=True)
    rows = [row for task_rows in by_task.values() for row in task_rows.values()]
    complete = [row for row in rows if len(row["runs"]) >= SEEDS_OF.get(row["method"], SEEDS)]
    seconds = step_seconds.read(args.runs.parent / step_seconds.RESULT.name)  # beside runs.yaml
    table = write_or_clear(complete, args.out, "table", seconds)
    if not table:
        table = f"_no method has its {SEEDS} seeds recorded yet_\n"
        (args.out / "table.md").write_text(table, encoding="utf-8")
    partial = write_or_clear([row for row in rows if row not in complete], args.out, "partial", seconds)
    if partial:
        partial = f"\nShort of their seeds, so not in the league table (their runs are still landing):\n\n{partial}"
    if failed:  # no scores: their verdicts wait for a rerun through the harness
        partial += "\nFailed (no scores; rerun through the harness):\n\n" + "".join(f"* {line}\n" for line in failed)
    written = [path for task, task_rows in by_task.items() if (path := plot(task_rows, task, args.out))]
    written += [path for task in thoughts.SWEEPS if (path := thoughts.plot(by_task.get(task, {}), task, args.out))]
    if args.readme is not None:
        curves = "".join(f"\n![{path.stem}: exact match in each method's own mode]({path.name})\n" for path in written)
        fill_section(args.readme, "table", f"{table}{partial}\n{NOTES}\n{curves}")
    if args.ledger is not None:
        cost = args.runs.parent / step_cost.RESULT.name  # beside runs.yaml, as the sweep's records
        update_ledger(args.ledger, verdicts(by_task, unrecorded(args.runs.parent), cost))
    print(table + partial)
    print("wrote", ", ".join(str(p) for p in [args.out / "table.md", *written]))
    return by_task


if __name__ == "__main__":
    try:
        main()
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None
