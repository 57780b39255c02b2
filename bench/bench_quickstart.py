"""The quickstart as shipped against the same with other settings, side by side in one run: wall time and accuracy.

Run from the repository root, on a machine nothing else is loading::

    nice -n 10 python bench/bench_quickstart.py          # both whole quickstarts, one after the other
    python bench/bench_quickstart.py --questions 6400    # speed only: both stop after the same 6,400 questions
    python bench/bench_quickstart.py --threads 1         # both on one thread
    python bench/bench_quickstart.py --previous          # against the settings of 2026-12-02 to 2026-12-04
    python bench/bench_quickstart.py --tiny              # a few steps on a few examples: checks the bench

Each form is ``python recipes/icot_gpt2.py --config CONFIG`` (as fast as the README's ``accelerate launch`` form,
``bench/bench_entry_points.py``) in its own output folder, run to the end: data built, trained, evaluated, saved,
carded. ``new`` is the config as shipped; ``old`` is the same config with the ``--old`` flags, by default the
settings it shipped with until 2026-12-02: GPT-2's dropout of 0.1 and init std of 0.02, 38,400 training questions per
epoch (600 steps per CoT token), two pretraining epochs and 8 epochs, where the shipped config has no dropout, init
std 0.1, 19,200 questions per epoch (300 steps per token), one pretraining epoch and 6 epochs. ``--previous`` makes
``old`` the settings shipped from 2026-12-02 to 2026-12-04 (the shipped ones with GPT-2's init std of 0.02 and two
pretraining epochs): the same steps, so the same time, and the accuracy the change bought. ``--questions N`` stops
each form after N training questions (``--max_steps`` N / its batch): a speed comparison without the end of the
curriculum, whose accuracies mean little.
``--both FLAGS`` go to both forms (e.g. ``--both "--max_eval_examples 100"``); ``--threads N`` sets
``OMP_NUM_THREADS`` for both. Printed per form: the wall time of the whole process, the training time, steps and
steps/s the Trainer measured (``training_log.json``), the implicit exact match on test and validation and the
explicit one on test (``eval_results.json``); then the ratios old / new.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
from pathlib import Path

import bench_entry_points as entry_points  # the same runner; bench/ is on the path when this runs
import yaml

REPO = Path(__file__).resolve().parents[1]
RECIPE = "recipes/icot_gpt2.py"
#: The quickstart's settings before 2026-12-02, as flags over the shipped config (mappings update key by key).
OLD = (
    """--scratch_model '{"resid_pdrop": 0.1, "embd_pdrop": 0.1, "attn_pdrop": 0.1, "initializer_range": 0.02}'"""
    """ --task_args '{"train_size": 38400}' --num_train_epochs 8 --pretrain_epochs 2"""
)
#: --previous: the settings shipped from 2026-12-02 to 2026-12-04 (GPT-2's init std 0.02, two pretraining epochs).
PREVIOUS = """--scratch_model '{"initializer_range": 0.02}' --pretrain_epochs 2"""
#: --tiny: a few steps on a few examples, so that the bench itself is checked in seconds (its figures mean nothing).
TINY_ARGS = ["--task_args", '{"train_size": 512, "validation_size": 8, "test_size": 8}']
TINY_ARGS += ["--per_device_eval_batch_size", "8"]
TINY_STEPS = 2
METRICS = ("test/implicit/answer_em", "validation/implicit/answer_em", "test/explicit/answer_em")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument(
        "--config", default="recipes/configs/quickstart.yaml", help="the recipe config (new: as it is)"
    )
    parser.add_argument("--old", default=OLD, help="recipe flags that turn the config into the old settings")
    parser.add_argument(
        "--previous", action="store_true", help=f"old = the settings of 2026-12-02 to 2026-12-04: --old {PREVIOUS!r}"
    )
    parser.add_argument("--both", default="", help="recipe flags for both forms, e.g. '--max_eval_examples 100'")
    parser.add_argument("--questions", type=int, default=None, help="stop each form after this many questions")
    parser.add_argument("--threads", type=int, default=None, help="OMP_NUM_THREADS of both runs (None: as set)")
    parser.add_argument("--tiny", action="store_true", help=f"512 train, 8 eval examples, {TINY_STEPS} steps")
    parser.add_argument(
        "--output_root", default=None, help="folder for the run folders and logs, kept (None: a temporary one)"
    )
    args = parser.parse_args(argv)
    if args.previous:
        args.old = PREVIOUS
    for name in ("threads", "questions"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            parser.error(f"--{name} {getattr(args, name)} is not allowed; it must be >= 1.")
    if not (REPO / args.config).is_file() and not Path(args.config).is_file():
        parser.error(
            f"--config {args.config} does not exist; give a YAML file (paths are relative to the repository)."
        )
    return args


def commands(args: argparse.Namespace, output_root: Path) -> dict[str, list[str]]:
    """The command line of each form: the same config, the old one with the ``--old`` flags after it (then --tiny's
    and --both's flags, which win)."""
    after = [*TINY_ARGS, "--max_steps", str(TINY_STEPS)] if args.tiny else []
    after += shlex.split(args.both)
    forms = {"old": shlex.split(args.old), "new": []}
    if args.questions is not None:
        shipped = yaml.safe_load((REPO / args.config).read_text())["per_device_train_batch_size"]
        for flags in forms.values():
            batch = (
                int(flags[flags.index("--per_device_train_batch_size") + 1])
                if "--per_device_train_batch_size" in flags
                else shipped
            )
            flags += ["--max_steps", str(max(args.questions // batch, 1))]
    common = [sys.executable, RECIPE, "--config", args.config, "--overwrite_output_dir", "--disable_tqdm", "true"]
    return {form: [*common, *flags, *after, "--output_dir", str(output_root / form)] for form, flags in forms.items()}


def run_form(form: str, command: list[str], log_path: Path, threads: int | None) -> dict[str, float]:
    """Run one form to the end, its output in ``log_path``; its wall time, the Trainer's speed and the accuracies."""
    speed = entry_points.run_form(form, command, log_path, threads)
    output_dir = Path(command[command.index("--output_dir") + 1])
    metrics = json.loads((output_dir / "eval_results.json").read_text())
    return {**speed, **{name: metrics[name] for name in METRICS}}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench_quickstart_") as scratch:
        output_root = Path(args.output_root or scratch).resolve()
        output_root.mkdir(parents=True, exist_ok=True)
        forms = commands(args, output_root)
        print(f"{args.config}{' (tiny)' if args.tiny else ''}, {os.cpu_count()} CPUs, OMP_NUM_THREADS {args.threads}")
        for form, command in forms.items():
            print(f"  {form:<4} {' '.join(command)}")
        results = {
            form: run_form(form, command, output_root / f"{form}.log", args.threads) for form, command in forms.items()
        }
    print(
        f"{'form':<6}{'wall s':>9}{'train s':>9}{'steps':>7}{'steps/s':>9}{'test EM':>9}{'val EM':>8}{'explicit':>9}"
    )
    for form, r in results.items():
        accuracies = "".join(f"{r[name]:>{width}.3f}" for name, width in zip(METRICS, (9, 8, 9)))
        print(f"{form:<6}{r['wall_s']:>9.1f}{r['train_s']:>9.1f}{r['steps']:>7}{r['steps_per_s']:>9.2f}{accuracies}")
    old, new = results["old"], results["new"]
    wall, train = old["wall_s"] / new["wall_s"], old["train_s"] / new["train_s"]
    print(f"old / new: wall time {wall:.2f}x, training time {train:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
