"""Two processes under ``accelerate launch`` (CPU, gloo) train with the same curriculum, step for step."""

import json
import subprocess
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file

from tests.hf_icot.train_tiny_icot import COMMAND

REPO = Path(__file__).resolve().parents[2]


def launch_two_processes(out, *flags):
    # `--cpu --num_processes 2` would start a single process; `--multi_gpu` with use_cpu=True starts two on gloo.
    command = [
        sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
        "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", *COMMAND, str(out), *flags,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]


def test_two_process_accelerate_launch_advances_the_schedule_identically(tmp_path):
    launch_two_processes(tmp_path, "--max_steps", "16", "--save_steps", "100")
    logs = [
        [json.loads(line) for line in (tmp_path / f"schedule-rank{rank}.jsonl").read_text().splitlines()]
        for rank in (0, 1)
    ]
    assert logs[0] == logs[1]
    assert [record["step"] for record in logs[0]] == list(range(16))
    # 56 examples, 8 per process and step, 2 processes: 4 steps per epoch (7 on one process).
    assert {record["steps_per_epoch"] for record in logs[0]} == {4}
    assert logs[0][-1]["stage"] > 5 and logs[0][-1]["resets"] >= 3
    weights = [load_file(tmp_path / f"final-rank{rank}.safetensors") for rank in (0, 1)]
    assert all(torch.equal(weights[0][name], weights[1][name]) for name in weights[0])
    history = json.loads((tmp_path / "log-rank0.json").read_text())
    assert any("cot/stage" in entry and "loss" in entry for entry in history)
    # The DDP wrapper (which holds the gloo group) is gone before interpreter shutdown, where it could abort a rank.
    assert [json.loads((tmp_path / f"teardown-rank{rank}.json").read_text()) for rank in (0, 1)] == [
        {"wrapper": None}
    ] * 2


def test_a_script_that_never_calls_end_processes_is_torn_down_at_exit(tmp_path):
    launch_two_processes(tmp_path, "--max_steps", "4", "--save_steps", "100", "--leave_teardown_to_exit")
    teardowns = [json.loads((tmp_path / f"teardown-rank{rank}.json").read_text()) for rank in (0, 1)]
    assert teardowns == [{"wrapper": None, "group_initialized": False}] * 2
