"""A run killed with SIGKILL mid-epoch and resumed from its last checkpoint ends where an uninterrupted run ends."""

import json
import signal
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests import forked
from tests.hf_icot.train_tiny_icot import COMMAND, build_trainer

REPO = Path(__file__).resolve().parents[2]


def launch(out: Path, *flags: str) -> forked.Started:
    """``python -m tests.hf_icot.train_tiny_icot OUT FLAGS`` in a process of its own (forked from the session's
    pre-imported server: ``tests.forked``), its output and errors in ``OUT/stdout.txt``."""
    out.mkdir(parents=True, exist_ok=True)
    return forked.start([*COMMAND, str(out), *flags], log=out / "stdout.txt")


def schedule_log(out: Path) -> dict[int, dict]:
    records = [json.loads(line) for line in (out / "schedule-rank0.jsonl").read_text().splitlines()]
    return {record["step"]: record for record in records}  # a resumed run rewrites the steps it redoes


def test_resume_after_sigkill_equals_the_uninterrupted_run(tmp_path):
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    # Stepwise with smoothing and optimizer resets, 7 steps per epoch, checkpoints every 4 steps; killed as step 10
    # begins, so the last checkpoint (8) is mid-epoch, and step 8 is a reset the curriculum state says to skip
    # (smoothing had already removed the whole CoT of every example of step 7).
    runs = [launch(whole), launch(killed, "--kill_at_step", "10")]
    assert [run.wait(timeout=300) for run in runs] == [0, -signal.SIGKILL]
    checkpoint = killed / "run" / "checkpoint-8"
    assert sorted(p.name for p in (killed / "run").iterdir()) == [f"checkpoint-{s}" for s in (4, 8)]
    state = json.loads((checkpoint / "trainer_state.json").read_text())["stateful_callbacks"]["ICoTStateCallback"]
    assert state["attributes"]["previous_step_without_cot"] is True
    assert state["attributes"]["schedule"]["name"] == "stepwise"

    resumed = launch(killed, "--resume", str(checkpoint))
    assert resumed.wait(timeout=300) == 0, (killed / "stdout.txt").read_text()[-3000:]
    expected, got = load_file(whole / "final-rank0.safetensors"), load_file(killed / "final-rank0.safetensors")
    assert expected.keys() == got.keys()
    for name in expected:
        assert torch.allclose(expected[name], got[name], atol=1e-6), name
    initial = load_file(next((whole / "init-rank0").glob("*.safetensors")))
    assert not torch.allclose(initial["transformer.h.0.mlp.c_fc.weight"], got["transformer.h.0.mlp.c_fc.weight"])
    assert schedule_log(killed) == schedule_log(whole)  # same stages, counts, resets and per-example draws
    # Increments at steps 2, 4, …, 12 (the 6-token CoT is gone from 12 on); the one at step 8 is skipped.
    assert [schedule_log(whole)[step]["resets"] for step in (7, 8, 9, 10, 23)] == [3, 3, 3, 4, 5]

    # The checkpoint records its curriculum: resuming it with another one is refused.
    other = build_trainer(tmp_path / "other", remove_per_epoch=2)
    with pytest.raises(ValueError, match="the checkpoint was trained with the schedule"):
        other.train(resume_from_checkpoint=str(checkpoint))
    # True takes the last complete checkpoint; none there is one sentence, not transformers' own lookup's error.
    with pytest.raises(ValueError, match=r"^no complete checkpoint-<step> folder in '.*other/run' to resume from\.$"):
        other.train(resume_from_checkpoint=True)
