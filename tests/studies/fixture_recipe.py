"""A stand-in recipe for the harness tests: writes ``result.json`` into ``--output_dir`` after logging its call.

    python tests/studies/fixture_recipe.py --output_dir DIR --seed N [--value X] [--fail] [--preempted [sigterm]]
        [--sleep S] [--resume_from_checkpoint true] [--overwrite_output_dir true]

Every call appends ``<run folder name> <seed> <extra flags>`` to ``calls.log`` beside the run folder, so a test sees
which runs ran and how. ``--fail`` exits with status 3 after printing a few lines; ``--preempted`` (unless resumed) leaves a complete
``checkpoint-1`` and exits with status 75, as a recipe does on SIGTERM (``--preempted sigterm``: dies of SIGTERM
instead, as a command that does not catch it); ``--sleep`` waits before writing
while a file ``hold`` lies beside the run folder (so a test can hold a run, then let the same command finish).
"""

import argparse
import json
import os
import signal
import struct
import sys
import time
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("--output_dir", required=True)
parser.add_argument("--seed", type=int, required=True)
parser.add_argument("--value", type=float, default=1.0)
parser.add_argument("--fail", action="store_true")
parser.add_argument("--preempted", nargs="?", const="exit", choices=["exit", "sigterm"])
parser.add_argument("--sleep", type=float, default=0.0)
parser.add_argument("--resume_from_checkpoint", default=None)
parser.add_argument("--overwrite_output_dir", default=None)
args = parser.parse_args()
out = Path(args.output_dir)
out.mkdir(parents=True, exist_ok=True)
flags = [f"resume={args.resume_from_checkpoint}"] if args.resume_from_checkpoint else []
flags += [f"overwrite={args.overwrite_output_dir}"] if args.overwrite_output_dir else []
with open(out.parent / "calls.log", "a", encoding="utf-8") as log:
    log.write(" ".join([out.name, str(args.seed), *flags]) + "\n")
(out / "started").write_text("yes\n")
if args.fail:
    for line in range(30):
        print(f"line {line} of a failing run")
    print("ValueError: the fixture was told to fail", file=sys.stderr)
    sys.exit(3)
if args.preempted and not args.resume_from_checkpoint:
    checkpoint = out / "checkpoint-1"
    checkpoint.mkdir()
    (checkpoint / "trainer_state.json").write_text(json.dumps({"global_step": 1}) + "\n")
    (checkpoint / "model.safetensors").write_bytes(struct.pack("<Q", 2) + b"{}")  # a header and no tensor
    print(f"preempted by SIGTERM after step 1 of 2: saved {checkpoint}; continue with the same command and "
          "--resume_from_checkpoint true.", file=sys.stderr)  # fmt: skip
    if args.preempted == "sigterm":
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGTERM)
    sys.exit(75)
deadline = time.monotonic() + args.sleep
while (out.parent / "hold").exists() and time.monotonic() < deadline:
    time.sleep(0.1)
(out / "result.json").write_text(json.dumps({"seed": args.seed, "value": args.value * (1 + args.seed)}) + "\n")
