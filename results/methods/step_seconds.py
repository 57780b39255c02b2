"""The league's training-seconds-per-step column (issue 51): each method's own recipe command, run quietly for a short
window at its last stage, the Trainer's steps timed.

    python -m results.methods.step_seconds                    # parity4's rows, 3 quiet rounds (~13 min)
    python -m results.methods.step_seconds --task counter7    # counter7's
    python -m results.methods.make_results ...                # reads step_seconds.json into the table

For each row of :data:`ROWS` the script takes the league's command for seed 0 from ``runs.yaml`` (the row's config,
model and batch, ``OMP_NUM_THREADS=1`` as the harness runs it) and changes only what does not touch a step's
arithmetic: ``--max_steps`` (:data:`STEPS`), no generation during training, no stage evaluation or checkpoints, a
small final evaluation, a scratch output folder; a staged continuous-thought method (Coconut, and SIM-CoT on it)
starts at its last stage (``--start_stage`` = its ``max_latent_stage``, else the task's CoT steps), so every timed
step is the method's steady form (every CoT step a thought). The step clock is the Trainer's own ``on_step_end`` (a
callback added by ``bench/stepwise_vs_reference``'s launcher, which times our recipe there): the figure is the median
interval between optimizer steps after the first :data:`WARM_UP`, and a row's figure the median of its ``--rounds``
runs (3; each round starts one row later). The token-removal rows whose CoT shrinks over the run (stepwise, adaptive,
mixture) have no single steady form: their steps cost between the end-to-end row's (no CoT) and the full-CoT row's,
which the table says instead of a figure. One process at a time; run it with nothing else running (the file records
the machine and the load average before each row).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from bench.stepwise_vs_reference.run import OURS_LAUNCHER
from hf_icot.studies.runner import machine
from hf_icot.studies.sweep import load_sweep

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
RESULT = HERE / "step_seconds.json"
#: Steps each row runs, and how many of the first are left out of the median.
STEPS, WARM_UP = 60, 10
#: task -> the league's methods timed there (``runs.yaml``: ``<task>_<method>``).
ROWS = {
    "parity4": ("full_cot", "e2e", "coconut", "coconut_published", "codi", "codi_published", "pccot",
                "simcot_coconut", "simcot_codi"),
    "counter7": ("e2e", "coconut", "coconut_published", "codi", "codi_published"),  # its others are borrowed
}  # fmt: skip
#: task -> its CoT steps (parity4's chain: 3 one-token steps; counter7: 32 states as 8 steps of 4), Coconut's last
#: stage where a command leaves ``max_latent_stage`` unset
COT_STEPS = {"parity4": 3, "counter7": 8}
#: The removal family's rows, whose steps cost between these two rows' (their CoT shrinks over the run).
BETWEEN = ("e2e", "full_cot")
#: Flags (with their value) of the league's commands that only evaluate or save: dropped before the overrides.
DROPPED = {"--generation_eval_steps", "--generation_eval_examples", "--stop_at_implicit_em", "--resume_from_checkpoint",
           "--max_steps"}  # fmt: skip


def last_stage(argv: list[str], task: str = "parity4") -> int:
    """The last stage of a staged continuous-thought command, where every CoT step is a thought: its
    ``max_latent_stage`` (the flag, else its ``--config`` file's), else the task's longest CoT (:data:`COT_STEPS`); 0
    for a command without stages."""
    flags = dict(zip(argv, argv[1:]))
    config = yaml.safe_load((REPO / flags["--config"]).read_text()) if "--config" in flags else {}
    if flags.get("--schedule", config.get("schedule")) != "coconut":
        return 0
    stage = flags.get("--max_latent_stage", config.get("max_latent_stage"))
    return COT_STEPS[task] if stage is None else int(stage)


def timed_command(argv: list[str], stage: int, output: Path, clock: Path) -> list[str]:
    """The league's ``argv`` under the stepwise bench's launcher (it adds the step clock and writes ``clock``), its
    evaluation and saving off, :data:`STEPS` steps from ``stage``."""
    kept, skip = [], False
    for part in argv[1:]:  # argv[0] is the interpreter
        if skip:
            skip = False
        elif part in DROPPED:
            skip = True
        else:
            kept.append(part)
    recipe, flags = kept[0], kept[1:]
    overrides = ["--max_steps", str(STEPS), "--generation_eval_steps", str(10 * STEPS), "--evaluate_each_stage",
                 "false", "--keep_stage_checkpoints", "false", "--save_strategy", "no", "--max_eval_examples", "8",
                 "--output_dir", str(output)]  # fmt: skip
    if stage:
        overrides += ["--start_stage", str(stage)]
    return [sys.executable, "-c", OURS_LAUNCHER, str(clock), recipe, *flags, *overrides]


def time_row(run: Any, stage: int) -> tuple[float, int, list[str]]:
    """One quiet run of ``run`` (a league run, seed 0) from ``stage``: its median seconds per step after
    :data:`WARM_UP`, the steps timed, and the command."""
    with tempfile.TemporaryDirectory(prefix="step_seconds_") as scratch:
        clock = Path(scratch) / "clock.json"
        command = timed_command(list(run.argv), stage, Path(scratch) / "out", clock)
        done = subprocess.run(command, cwd=REPO, env={**os.environ, **run.env}, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"{run.name} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
        ends = json.loads(clock.read_text())["step_ends"]
    steps = [later - earlier for earlier, later in zip(ends[WARM_UP:], ends[WARM_UP + 1 :])]
    return statistics.median(steps), len(steps), command[3:]


def measure(task: str, methods: tuple[str, ...], rounds: int) -> dict:
    """``rounds`` quiet runs of each of ``methods`` on ``task``, one process at a time, each round starting one row
    later (a slow spell of the machine falls on different rows); each row's figure is the median of its rounds."""
    runs = {run.name: run for run in load_sweep(HERE).runs if run.seed == 0}
    missing = [f"{task}_{method}_s0" for method in methods if f"{task}_{method}_s0" not in runs]
    if missing:
        raise SystemExit(f"runs.yaml has no run {', '.join(missing)}; --task {task} times {', '.join(ROWS[task])}.")
    stages = {method: last_stage(list(runs[f"{task}_{method}_s0"].argv), task) for method in methods}
    rows: dict[str, dict] = {}
    for round_index in range(rounds):
        shift = round_index % len(methods)
        for method in methods[shift:] + methods[:shift]:
            run, stage, load = runs[f"{task}_{method}_s0"], stages[method], os.getloadavg()[0]
            seconds, timed, command = time_row(run, stage)
            row = rows.setdefault(method, {"rounds_s": [], "load_before": [], "stage": stage, "command": command})
            row["rounds_s"].append(seconds)
            row["load_before"].append(round(load, 2))
            row["steps_timed"] = timed
            print(f"round {round_index + 1}/{rounds} {run.name}: {seconds * 1000:.1f} ms per step (stage {stage}, "
                  f"load before {load:.2f})", flush=True)  # fmt: skip
    for row in rows.values():
        row["seconds_per_step"] = statistics.median(row["rounds_s"])
    return rows


def read(path: Path = RESULT) -> dict[str, dict[str, dict]]:
    """task -> method -> its measurement; empty where the file is absent."""
    return json.loads(path.read_text())["tasks"] if path.exists() else {}


def cell(measured: dict[str, dict[str, dict]], task: str, method: str) -> str:
    """The table's cell for a league row: milliseconds per step, a range for the removal family, or blank."""
    rows = measured.get(task, {})
    if method in rows:
        return f"{rows[method]['seconds_per_step'] * 1000:.1f}"
    if method in ("stepwise", "adaptive", "mixture") and all(row in rows for row in BETWEEN):
        low, high = (rows[row]["seconds_per_step"] * 1000 for row in BETWEEN)
        return f"{low:.1f}–{high:.1f} (e2e to full CoT as its CoT shrinks)"
    return ""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", choices=sorted(ROWS), default="parity4", help="the league's task (default parity4)")
    parser.add_argument("--only", nargs="+", default=None, help="these methods of the task only (default: all)")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each row, rotated (default 3; the median)")
    parser.add_argument("--out", type=Path, default=RESULT, help=f"where to write (default: {RESULT.name} here)")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds {args.rounds} must be at least 1.")
    methods = tuple(args.only or ROWS[args.task])
    unknown = sorted(set(methods) - set(ROWS[args.task]))
    if unknown:
        parser.error(f"--only {' '.join(unknown)}: {args.task}'s rows are {', '.join(ROWS[args.task])}.")
    record = json.loads(args.out.read_text()) if args.out.exists() else {"tasks": {}}
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    record["tasks"].setdefault(args.task, {}).update(measure(args.task, methods, args.rounds))
    record.setdefault("measured", {})[args.task] = {"git_commit": commit, "machine": machine()}
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
