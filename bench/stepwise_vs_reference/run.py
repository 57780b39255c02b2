"""The stepwise-ICoT reference's own ``src/train.py`` beside ``recipes/icot_gpt2.py`` on the same assets: wall time of
the training loop, removal counts, loss curves.

    git --git-dir=/work/.mirror/da03+Internalize_CoT_Step_by_Step/repo worktree add /tmp/ref HEAD   # or git clone
    nice -n 10 python bench/stepwise_vs_reference/run.py --reference-repo /tmp/ref                  # both vocabularies
    python bench/stepwise_vs_reference/run.py --reference-repo /tmp/ref --vocab small --train-size 2000 --rounds 1

Nothing of the reference is copied here: ``--reference-repo`` is a checkout of
https://github.com/da03/Internalize_CoT_Step_by_Step. The script builds, in ``--work-dir``, ``--train-size`` 4x4
multiplication lines (``datasets_builder``, seed 0; the reference reads them as ``train.txt``, our recipe builds the
same rows with ``--task multiplication``), a byte-level BPE trained on them (a few hundred ids), and a GPT-2 of 4
layers, 128 wide, with that vocabulary (``small``) or with GPT-2's 50,257 rows (``gpt2``), saved with its tokenizer so
that both sides load the same weights. Then, per round and vocabulary, one after the other (interleaved, so a load
change on the machine touches every side alike; each round starts one side later than the last, so that no side
always runs first or last): the reference with its README's multiplication flags (1 epoch, batch
32, lr 5e-5, 8 tokens per epoch, λ = 4, left, ``--reset_optimizer``), our recipe with ``--sequence_format reference``
and the same flags with its per-stage evaluation on (what a user gets by default: a loss evaluation on the first 64
validation examples at every stage end; no generation, ``eval_modes`` being empty) and off; both save the stage
checkpoints (``keep_stage_checkpoints``, on by default). A lever that is off by default is measured by naming it:
``--lever draw_dropout_ahead=true`` sets it on every side of ours, and ``--lever-off draw_dropout_ahead=false`` adds a
side without it.

Run-time adaptations of the reference, none written to its files (``launch_reference`` below):

* ``from transformers import AdamW`` fails on transformers 5; the name is set to ``torch.optim.AdamW`` before its
  import (the script never calls it: it builds ``torch.optim.AdamW`` itself);
* its end-of-epoch ``evaluate`` (sampled generation on the validation file) is replaced by a stub: it comes after the
  timed loop, and our side's final evaluation is not timed either;
* its ``tqdm`` over the training batches and its ``compute_loss`` are wrapped to record when each step starts and its
  loss (no change to what they compute); ``torch.set_num_threads(--threads)`` on both sides.
  It runs on the CPU as it is (``torch.amp.autocast('cuda')`` is a no-op there, with a warning).

Timed: the reference's loop from the end of step 0 to the end of its last step; ours, the Trainer's ``train_runtime``
(the whole loop, step 0 and the set-up inside ``train()`` included: counted against us). Ratio = reference seconds /
our seconds (> 1: ours faster). A second ratio, "same clock", times ours as the reference is timed: from the end of
step 0 to the end of the last step, read by a ``TrainerCallback`` added at run time (``OURS_LAUNCHER``; the recipe
runs as it is, as its own ``__main__``).
Checked: the number of CoT tokens scheduled for removal at every step is the same on both sides (the reference
prints each increment; our log has ``cot/removed_tokens`` at every step), and the mean loss per 25-step window
(the two sides shuffle and draw removal offsets with their own generators, so only the windows compare).
Printed after them: where a step's time goes — each side's median step, and for ours its forward and backward (the
base Trainer's ``training_step``, wrapped by the launcher), clipping and optimizer step, and the rest (callbacks,
logging, the next batch).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VOCABS = {"small": None, "gpt2": 50257}
FLAGS = {"lr": 5e-5, "batch_size": 32, "remove_per_epoch": 8, "removal_smoothing_lambda": 4, "side": "left"}
WINDOW = 25

LAUNCHER = r"""
import json, sys, time
import torch, transformers, tqdm
transformers.AdamW = torch.optim.AdamW  # removed from transformers 5; train.py imports it, never calls it
torch.set_num_threads(int(sys.argv[1]))
out_path, src = sys.argv[2], sys.argv[3]
sys.path.insert(0, src)  # the reference's checkout: not ours, not installable, so its modules load from where they lie
record = {"step_starts": [], "losses": []}
real_tqdm = tqdm.tqdm
def timed_tqdm(iterable, *args, **kwargs):
    for item in real_tqdm(iterable, *args, **kwargs):
        record["step_starts"].append(time.perf_counter())
        yield item
    record["end"] = time.perf_counter()
tqdm.tqdm = timed_tqdm
import model as reference_model
real_compute_loss = reference_model.ImplicitModel.compute_loss
def recorded_compute_loss(self, *args, **kwargs):
    outputs = real_compute_loss(self, *args, **kwargs)
    record["losses"].append(outputs.loss.item())
    return outputs
reference_model.ImplicitModel.compute_loss = recorded_compute_loss
import train
train.evaluate = lambda *args, **kwargs: (0.0, 0.0, 1.0)  # its end-of-epoch generation: after the timed loop
sys.argv = ["train.py", *sys.argv[4:]]
train.main()
json.dump(record, open(out_path, "w"))
"""


OURS_LAUNCHER = r"""
import json, runpy, sys, time
import transformers
out_path, recipe = sys.argv[1], sys.argv[2]
record = {"step_ends": [], "forward_backward": [], "optimizer": []}
marks = {}
class StepClock(transformers.TrainerCallback):
    def on_optimizer_step(self, args, state, control, **kwargs):
        record["optimizer"].append(time.perf_counter() - marks["training_step_end"])  # clipping included
    def on_step_end(self, args, state, control, **kwargs):
        record["step_ends"].append(time.perf_counter())
real_init, real_training_step = transformers.Trainer.__init__, transformers.Trainer.training_step
def init(self, *args, **kwargs):
    real_init(self, *args, **kwargs)
    self.add_callback(StepClock())
def training_step(self, *args, **kwargs):  # the base class's: forward and backward, under ICoTTrainer's own
    start = time.perf_counter()
    loss = real_training_step(self, *args, **kwargs)
    marks["training_step_end"] = time.perf_counter()
    record["forward_backward"].append(marks["training_step_end"] - start)
    return loss
transformers.Trainer.__init__, transformers.Trainer.training_step = init, training_step
sys.argv = [recipe, *sys.argv[3:]]
try:
    runpy.run_path(recipe, run_name="__main__")
finally:
    json.dump(record, open(out_path, "w"))
"""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference-repo", type=Path, required=True, help="Checkout of the reference (has src/).")
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/stepwise_vs_reference"), help="Assets and runs.")
    parser.add_argument("--train-size", type=int, default=5000, help="4x4 training lines (default: 5000).")
    parser.add_argument("--vocab", choices=["small", "gpt2", "both"], default="both", help="Output layer size(s).")
    parser.add_argument("--rounds", type=int, default=1, help="Interleaved rounds; medians are printed (default 1).")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of each side (default: 1).")
    parser.add_argument(
        "--lever", action="append", default=[], metavar="FLAG=VALUE",
        help="A recipe flag set on every side of ours (e.g. draw_dropout_ahead=true, a lever that is off by default); "
        "a --lever-off of the same flag overrides it on its own side.",
    )  # fmt: skip
    parser.add_argument(
        "--lever-off", action="append", default=[], metavar="FLAG=VALUE",
        help="One more side of ours per use: stage evaluation off and this recipe flag set (e.g. fused_gelu=false), "
        "so a lever is measured alone against the side that has it.",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if not (args.reference_repo / "src" / "train.py").is_file():
        parser.error(f"--reference-repo {args.reference_repo} has no src/train.py; give a checkout of the reference.")
    if args.train_size < 64 or args.rounds < 1 or args.threads < 1:
        parser.error("--train-size must be >= 64, --rounds and --threads >= 1.")
    for option, levers in (("--lever", args.lever), ("--lever-off", args.lever_off)):
        for lever in levers:
            if "=" not in lever or not lever.split("=", 1)[0]:
                parser.error(f"{option} {lever!r} is not FLAG=VALUE (a recipe flag, no dashes: fused_gelu=false).")
    return args


def flag_pair(lever: str) -> list[str]:
    """``name=value`` as the recipe's flag and value."""
    name, _, value = lever.partition("=")
    return [f"--{name}", value]


def task_args(args: argparse.Namespace) -> dict:
    return {"a_digits": 4, "b_digits": 4, "train_size": args.train_size, "validation_size": 200, "test_size": 32,
            "seed": 0}  # fmt: skip


def build_assets(args: argparse.Namespace) -> dict[str, Path]:
    """train.txt / valid.txt for the reference, and one model folder (GPT-2 + the BPE) per vocabulary."""
    import torch
    from tokenizers import ByteLevelBPETokenizer
    from transformers import GPT2Config, GPT2LMHeadModel, GPT2TokenizerFast

    from datasets_builder.registry import build_dataset
    from hf_icot.cot import render_line

    args.work_dir.mkdir(parents=True, exist_ok=True)
    splits, _ = build_dataset("multiplication", task_args(args))
    for split, name in (("train", "train.txt"), ("validation", "valid.txt")):
        lines = [render_line(example) for example in splits[split]]
        (args.work_dir / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    folders = {}
    for vocab in ("small", "gpt2") if args.vocab == "both" else (args.vocab,):
        folder = args.work_dir / f"model_{vocab}"
        folders[vocab] = folder
        if (folder / "config.json").exists():
            continue
        bpe = ByteLevelBPETokenizer()
        lines = (args.work_dir / "train.txt").read_text(encoding="utf-8").splitlines()
        bpe.train_from_iterator(lines, vocab_size=400, min_frequency=1, special_tokens=["<|endoftext|>"],
                                show_progress=False)  # fmt: skip
        folder.mkdir(parents=True, exist_ok=True)
        bpe.save_model(str(folder))
        eos = "<|endoftext|>"
        tokenizer = GPT2TokenizerFast(vocab=str(folder / "vocab.json"), merges=str(folder / "merges.txt"),
                                      eos_token=eos, bos_token=eos, unk_token=eos)  # fmt: skip
        tokenizer.save_pretrained(folder)
        torch.manual_seed(0)
        eos_id = tokenizer.eos_token_id
        config = GPT2Config(vocab_size=VOCABS[vocab] or len(tokenizer), n_positions=256, n_embd=128, n_layer=4,
                            n_head=4, bos_token_id=eos_id, eos_token_id=eos_id)  # fmt: skip
        GPT2LMHeadModel(config).save_pretrained(folder)
    return folders


def launch_reference(args: argparse.Namespace, folder: Path, run_dir: Path) -> dict:
    record = run_dir / "reference.json"
    command = [
        sys.executable, "-c", LAUNCHER, str(args.threads), str(record), str(args.reference_repo / "src"),
        "--model", str(folder), "--train_path", str(args.work_dir / "train.txt"),
        "--val_path", str(args.work_dir / "valid.txt"), "--epochs", "1", "--lr", str(FLAGS["lr"]),
        "--batch_size", str(FLAGS["batch_size"]), "--remove_per_epoch", str(FLAGS["remove_per_epoch"]),
        "--removal_smoothing_lambda", str(FLAGS["removal_smoothing_lambda"]), "--removal_side", FLAGS["side"],
        "--reset_optimizer", "--save_model", str(run_dir / "reference_model"), "--max_new_tokens", "4",
    ]  # fmt: skip
    out = run(command, run_dir / "reference.log")
    data = json.loads(record.read_text())
    removed = scheduled_removals(out, len(data["losses"]))
    starts = data["step_starts"]
    seconds = data["end"] - starts[1]
    return {"seconds": seconds, "same_clock_seconds": seconds, "losses": data["losses"], "removed": removed,
            "step_ms": milliseconds(differences([*starts[1:], data["end"]])), "phases_ms": {}}  # fmt: skip


def scheduled_removals(stdout: str, steps: int) -> list[int]:
    """The CoT tokens the reference schedules at each of ``steps`` steps, from the increments it prints
    (`` -epoch 0. step 20. removing: 1``): 0 until the first, then each printed count from its step on."""
    increments = {int(m.group(1)): int(m.group(2)) for m in re.finditer(r"step (\d+)\. removing: (\d+)", stdout)}
    removed, current = [], 0
    for step in range(steps):
        current = increments.get(step, current)
        removed.append(current)
    return removed


def ours_command(
    args: argparse.Namespace, folder: Path, output: Path, clock: Path, stage_eval: bool, lever: str = ""
) -> list[str]:
    """Our side's command: the recipe under ``OURS_LAUNCHER`` with the reference's flags, every ``--lever``, and the
    side's ``--lever-off`` flag last (the last of a flag given twice wins)."""
    return [
        sys.executable, "-c", OURS_LAUNCHER, str(clock), str(REPO / "recipes" / "icot_gpt2.py"), "--task", "multiplication",
        "--task_args", json.dumps(task_args(args)), "--model_name_or_path", str(folder),
        "--sequence_format", "reference", "--schedule", "stepwise",
        "--remove_per_epoch", str(FLAGS["remove_per_epoch"]),
        "--removal_smoothing_lambda", str(FLAGS["removal_smoothing_lambda"]), "--removal_side", FLAGS["side"],
        "--reset_optimizer", "true", "--num_train_epochs", "1", "--learning_rate", str(FLAGS["lr"]),
        "--per_device_train_batch_size", str(FLAGS["batch_size"]), "--optim", "adamw_torch_fused",
        "--weight_decay", "0.01", "--decay_all_parameters", "true", "--lr_scheduler_type", "constant",
        "--max_grad_norm", "1.0", "--logging_steps", "1", "--save_strategy", "no", "--report_to", "none",
        "--evaluate_each_stage", str(stage_eval).lower(), "--output_dir", str(output), "--overwrite_output_dir",
        "true", "--max_eval_examples", "64", *[part for on in args.lever for part in flag_pair(on)],
        *(flag_pair(lever) if lever else []),
    ]  # fmt: skip


def launch_ours(args: argparse.Namespace, folder: Path, run_dir: Path, stage_eval: bool, lever: str = "") -> dict:
    name, _, value = lever.partition("=")
    output = run_dir / (f"ours_{name}_{value}" if lever else f"ours_eval_{'on' if stage_eval else 'off'}")
    clock = run_dir / f"{output.name}_clock.json"
    command = ours_command(args, folder, output, clock, stage_eval, lever)
    env_threads = {"OMP_NUM_THREADS": str(args.threads)}
    run(command, run_dir / f"{output.name}.log", env_threads)
    log = json.loads((output / "training_log.json").read_text())
    history = log.get("log_history", log) if isinstance(log, dict) else log
    steps = [entry for entry in history if "loss" in entry and "cot/removed_tokens" in entry]
    runtime = next(entry["train_runtime"] for entry in history if "train_runtime" in entry)
    record = json.loads(clock.read_text())
    step_ends = record["step_ends"]
    forward_backward, optimizer = record["forward_backward"][1:], record["optimizer"][1:]  # from step 1, as the clock
    return {
        "seconds": runtime,
        "same_clock_seconds": step_ends[-1] - step_ends[0],
        "losses": [entry["loss"] for entry in steps],
        "removed": [int(entry["cot/removed_tokens"]) for entry in steps],
        "step_ms": milliseconds(differences(step_ends)),
        "phases_ms": {"forward and backward": milliseconds(forward_backward), "clipping and optimizer":
                      milliseconds(optimizer)},
    }  # fmt: skip


def differences(times: list[float]) -> list[float]:
    return [later - earlier for earlier, later in zip(times, times[1:])]


def milliseconds(seconds: list[float]) -> float:
    """The median of ``seconds``, in milliseconds."""
    return 1000 * statistics.median(seconds)


def run(command: list[str], log: Path, env: dict | None = None) -> str:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})  # fmt: skip
    log.write_text(done.stdout + "\n--- stderr ---\n" + done.stderr, encoding="utf-8")
    if done.returncode != 0:
        # both sides start as `python -c LAUNCHER`: the log's name says which one failed
        raise SystemExit(f"{log.stem} failed; see {log}")
    print(f"  {log.stem}: {time.perf_counter() - start:.0f} s wall", flush=True)
    return done.stdout


def windows(losses: list[float]) -> list[float]:
    return [statistics.mean(losses[i : i + WINDOW]) for i in range(0, len(losses) - WINDOW + 1, WINDOW)]


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    folders = build_assets(args)
    levers = {f"ours, off, {lever}": lever for lever in args.lever_off}
    sides = ("reference", "ours, stage eval on", "ours, stage eval off", *levers)
    results: dict[str, dict[str, list[dict]]] = {vocab: {side: [] for side in sides} for vocab in folders}
    for round_index in range(args.rounds):
        for vocab, folder in folders.items():
            run_dir = args.work_dir / f"round{round_index}_{vocab}"
            run_dir.mkdir(parents=True, exist_ok=True)
            print(f"round {round_index + 1}, vocabulary {vocab}:", flush=True)
            launches = {
                "reference": partial(launch_reference, args, folder, run_dir),
                "ours, stage eval on": partial(launch_ours, args, folder, run_dir, True),
                "ours, stage eval off": partial(launch_ours, args, folder, run_dir, False),
                **{side: partial(launch_ours, args, folder, run_dir, False, lever) for side, lever in levers.items()},
            }
            # Each round starts one side later, so no side always runs first or last (an order effect was seen).
            for side in sides[round_index % len(sides) :] + sides[: round_index % len(sides)]:
                results[vocab][side].append(launches[side]())
    print(f"\n4x4 lines: {args.train_size}, 1 epoch, batch 32; {args.threads} torch thread(s) per side; "
          f"median of {args.rounds} interleaved round(s)")  # fmt: skip
    print(f"{'vocabulary':12s} {'side':34s} {'loop s':>8s} {'ratio':>6s} {'same clock s':>12s} {'ratio':>6s}  "
          "same removal counts  loss windows")  # fmt: skip
    summary = {}
    for vocab, by_side in results.items():
        reference_s = statistics.median(run["seconds"] for run in by_side["reference"])
        reference = by_side["reference"][0]
        for side, runs in by_side.items():
            seconds = statistics.median(run["seconds"] for run in runs)
            clock = statistics.median(run["same_clock_seconds"] for run in runs)
            same = all(run["removed"] == reference["removed"] for run in runs)
            curve = " ".join(f"{value:.2f}" for value in windows(runs[0]["losses"]))
            print(f"{vocab:12s} {side:34s} {seconds:8.1f} {reference_s / seconds:5.2f}x {clock:12.1f} "
                  f"{reference_s / clock:5.2f}x  {str(same):19s}  {curve}")  # fmt: skip
            summary[f"{vocab}/{side}"] = {"seconds": [run["seconds"] for run in runs],
                                          "same_clock_seconds": [run["same_clock_seconds"] for run in runs],
                                          "same_removal_counts": same, "step_ms": [run["step_ms"] for run in runs],
                                          "phases_ms": [run["phases_ms"] for run in runs]}  # fmt: skip
    print_steps(results)
    (args.work_dir / "summary.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")


def print_steps(results: dict[str, dict[str, list[dict]]]) -> None:
    """Where a step's time goes: the median step of each run (from the end of step 0), and for ours the median
    forward and backward (the Trainer's ``training_step``) and clipping and optimizer step; the rest is the Trainer's
    callbacks, logging and the next batch. Medians over the rounds."""
    print("\nper step, ms (median over steps, then over rounds)")
    print(f"{'vocabulary':12s} {'side':34s} {'step':>7s} {'forward and backward':>21s} {'clipping and optimizer':>23s} "
          f"{'the rest':>9s}")  # fmt: skip
    for vocab, by_side in results.items():
        for side, runs in by_side.items():
            step = statistics.median(run["step_ms"] for run in runs)
            line = f"{vocab:12s} {side:34s} {step:7.1f}"
            if runs[0]["phases_ms"]:  # ours
                phases = [statistics.median(run["phases_ms"][name] for run in runs)
                          for name in ("forward and backward", "clipping and optimizer")]  # fmt: skip
                line += f" {phases[0]:21.1f} {phases[1]:23.1f} {step - sum(phases):9.1f}"
            print(line)


if __name__ == "__main__":
    main()
