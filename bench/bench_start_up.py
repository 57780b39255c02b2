"""Time a recipe's first answers: ``--help`` and a bad-input sentence, with no kept flags and with them.

Run from the repository root::

    python bench/bench_start_up.py                        # recipes/icot_gpt2.py, 3 runs of each
    python bench/bench_start_up.py --recipe results/parity/train.py --repeat 5

Every run is a fresh ``python`` process; the wall time includes the interpreter's start. *Cold* is the first command
line after a change to hf_icot or transformers (no kept flags: the full parser imports transformers'
``TrainingArguments``, hence torch, accelerate and PEFT, before it can answer); *kept* is every later one, answered
from the flags the full parse keeps (:mod:`hf_icot.command_line.flag_cache`). The bad input is a command line without
data (``give exactly one of --dataset_name_or_path ... and --task``). The script prints the median seconds of each,
the ratio cold / kept, and whether the two answers are the same text (the goal: <= 2 s kept).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipe", default="recipes/icot_gpt2.py", help="Recipe script to time (default: icot_gpt2).")
    parser.add_argument("--repeat", type=int, default=3, help="Runs of each case; the median is kept (default: 3).")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error(f"--repeat {args.repeat} must be >= 1.")
    return args


def run(recipe: str, flags: list[str], cache: Path) -> tuple[float, str]:
    """Wall seconds of one ``python recipe flags`` with ``cache`` as its XDG cache, and what it printed."""
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "PYTHONPATH": str(REPO), "COLUMNS": "120"}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, recipe, *flags], capture_output=True, text=True, cwd=REPO, env=env)
    last_line = done.stderr.strip().splitlines()[-1:]  # a bad input's sentence (the log lines before it vary)
    return time.perf_counter() - start, done.stdout + "".join(last_line)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    cases = {"--help": ["--help"], "bad input (no data)": ["--num_train_epochs", "1"]}
    print(f"{args.recipe}; median of {args.repeat} fresh processes")
    print(f"{'command line':24s} {'cold':>8s} {'kept':>8s} {'ratio':>6s}  same answer")
    for name, flags in cases.items():
        cold, kept, same = [], [], True
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory(prefix="bench_start_up_") as folder:
                seconds, cold_answer = run(args.recipe, flags, Path(folder))  # keeps the flags
                cold.append(seconds)
                seconds, kept_answer = run(args.recipe, flags, Path(folder))
                kept.append(seconds)
                same = same and cold_answer == kept_answer
        cold_s, kept_s = statistics.median(cold), statistics.median(kept)
        print(f"{name:24s} {cold_s:7.2f}s {kept_s:7.2f}s {cold_s / kept_s:5.1f}x  {same}")


if __name__ == "__main__":
    main()
