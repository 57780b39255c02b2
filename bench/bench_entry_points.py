"""Plain ``python`` against ``accelerate launch`` on the quickstart, measured side by side in one run.

Run from the repository root, on a machine nothing else is loading::

    nice -n 10 python bench/bench_entry_points.py                   # the whole quickstart, twice (~12 min on 2 cores)
    python bench/bench_entry_points.py --max_steps 600              # a shorter run of each form
    python bench/bench_entry_points.py --accelerate_config recipes/accelerate/cpu.yaml
    python bench/bench_entry_points.py --tiny                       # a few steps on a few examples: checks the bench

The two forms are ``python recipes/icot_gpt2.py --config CONFIG`` and ``accelerate launch recipes/icot_gpt2.py
--config CONFIG`` (run as ``python -m accelerate.commands.launch``, the code behind the ``accelerate`` command, so both
use this interpreter; with ``--accelerate_config FILE`` the launcher gets ``--config_file FILE``, else it reads the
default config of ``accelerate config``, if any). Each runs to the end in its own output folder: data built, trained,
evaluated, saved, carded. For each form the bench prints the wall time of the whole process (launcher and start-up
included), the training time and steps/s the Trainer measured (``train_runtime`` and ``train_steps_per_second`` in
the run's ``training_log.json``), then the ratios accelerate / python: steps/s (1.00x is as fast) and wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hf_icot.publishing.run_files import TRAINING_LOG_FILE

REPO = Path(__file__).resolve().parents[1]
RECIPE = "recipes/icot_gpt2.py"
FORMS = ("python", "accelerate launch")
#: --tiny: a few steps on a few examples, so that the bench itself is checked in seconds (its figures mean nothing).
TINY_ARGS = ["--max_train_examples", "256", "--max_eval_examples", "8", "--per_device_eval_batch_size", "8"]
TINY_STEPS = 4


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument(
        "--config", default="recipes/configs/quickstart.yaml", help="recipe config both forms run (--config)"
    )
    parser.add_argument(
        "--max_steps", type=int, default=None, help="passed to the recipe: stop each run after N steps (a short run)"
    )
    parser.add_argument(
        "--accelerate_config", default=None, help="accelerate config file for the launcher (its --config_file)"
    )
    parser.add_argument(
        "--tiny",
        action="store_true",
        help=f"256 train and 8 eval examples, {TINY_STEPS} steps unless --max_steps: checks the bench in seconds",
    )
    parser.add_argument(
        "--output_root", default=None, help="folder for the two run folders and logs, kept (default: a temporary one)"
    )
    args = parser.parse_args(argv)
    if args.max_steps is not None and args.max_steps < 1:
        parser.error(f"--max_steps {args.max_steps} is not allowed; it must be >= 1.")
    for name in ("config", "accelerate_config"):
        path = getattr(args, name)
        if path is not None and not (REPO / path).is_file() and not Path(path).is_file():
            parser.error(f"--{name} {path} does not exist; give a YAML file (paths are relative to the repository).")
    if args.tiny and args.max_steps is None:
        args.max_steps = TINY_STEPS
    return args


def commands(args: argparse.Namespace, output_root: Path) -> dict[str, list[str]]:
    """The command line of each form; the recipe's arguments are the same but for the output folder."""
    # A bench run replaces its own earlier run folders (the recipe refuses to write over a run by accident).
    recipe_args = ["--config", args.config, *(TINY_ARGS if args.tiny else []), "--overwrite_output_dir"]
    if args.max_steps is not None:
        recipe_args += ["--max_steps", str(args.max_steps)]
    launcher = [sys.executable, "-m", "accelerate.commands.launch"]
    if args.accelerate_config:
        launcher += ["--config_file", args.accelerate_config]
    return {
        "python": [sys.executable, RECIPE, *recipe_args, "--output_dir", str(output_root / "python")],
        "accelerate launch": [*launcher, RECIPE, *recipe_args, "--output_dir", str(output_root / "accelerate")],
    }


def trainer_speed(output_dir: Path) -> tuple[float, int, float]:
    """(training seconds, steps, steps/s) of a finished run, from the last train summary of its log history."""
    log = json.loads((output_dir / TRAINING_LOG_FILE).read_text())
    summary = [entry for entry in log if "train_runtime" in entry][-1]
    return summary["train_runtime"], summary["step"], summary["train_steps_per_second"]


def run_form(form: str, command: list[str], log_path: Path, threads: int | None = None) -> dict[str, float]:
    """Run one form to the end with its output in ``log_path`` (``threads``: its OMP_NUM_THREADS, default as set);
    its wall time and the Trainer's speed figures."""
    # The checkout's packages come first, as for `python recipes/icot_gpt2.py` run from the repository root.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    with open(log_path, "w") as log:
        start = time.perf_counter()
        result = subprocess.run(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
        wall = time.perf_counter() - start
    if result.returncode != 0:
        tail = "".join(log_path.read_text().splitlines(keepends=True)[-30:])
        raise SystemExit(f"the {form} form failed (exit {result.returncode}); the end of {log_path}:\n{tail}")
    output_dir = Path(command[command.index("--output_dir") + 1])
    train_s, steps, steps_per_s = trainer_speed(output_dir)
    return {"wall_s": wall, "train_s": train_s, "steps": steps, "steps_per_s": steps_per_s}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench_entry_points_") as scratch:
        output_root = Path(args.output_root or scratch).resolve()
        output_root.mkdir(parents=True, exist_ok=True)
        forms = commands(args, output_root)
        print(f"{args.config}, {args.max_steps or 'all'} steps{' (tiny)' if args.tiny else ''}, {os.cpu_count()} CPUs")
        for form, command in forms.items():
            print(f"  {form:<18} {' '.join(command)}")
        results = {
            form: run_form(form, command, output_root / f"{form.split()[0]}.log") for form, command in forms.items()
        }
    print(f"{'form':<20}{'wall s':>10}{'train s':>10}{'steps':>8}{'steps/s':>10}")
    for form, r in results.items():
        print(f"{form:<20}{r['wall_s']:>10.2f}{r['train_s']:>10.2f}{r['steps']:>8}{r['steps_per_s']:>10.3f}")
    python, accelerate = results["python"], results["accelerate launch"]
    print(
        f"accelerate launch / python: steps/s {accelerate['steps_per_s'] / python['steps_per_s']:.3f}x, "
        f"wall time {accelerate['wall_s'] / python['wall_s']:.3f}x"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
