"""hf_icot.runs.run_folder on folders laid out as a killed run leaves them: which checkpoint is complete, which one
``resume_from_checkpoint=True`` takes, and what a resumed run must share with its checkpoint."""

from __future__ import annotations

import json
import logging
import struct
from pathlib import Path
from types import SimpleNamespace

import pytest

from hf_icot.runs.run_folder import (
    CHECKPOINT_WRITING,
    checkpoint_problem,
    earlier_run,
    last_complete_checkpoint,
    resume_mismatch,
)

#: A safetensors file as its header describes it: 8 bytes of header length, the header, no tensor.
WHOLE_SAFETENSORS = struct.pack("<Q", 2) + b"{}"


def checkpoint(folder: Path, step: int, weights: str | None = "model.safetensors", state: str | None = None) -> Path:
    """A ``checkpoint-<step>`` folder with a weights file and a trainer state (None: left out)."""
    path = folder / f"checkpoint-{step}"
    path.mkdir(parents=True)
    if weights:
        (path / weights).write_bytes(WHOLE_SAFETENSORS)
    if state is None:
        state = json.dumps({"global_step": step, "train_batch_size": 8})
    if state:
        (path / "trainer_state.json").write_text(state)
    return path


def test_checkpoint_problem_names_what_is_missing(tmp_path: Path) -> None:
    assert checkpoint_problem(checkpoint(tmp_path, 1)) is None
    assert checkpoint_problem(checkpoint(tmp_path, 2, weights="adapter_model.safetensors")) is None
    assert checkpoint_problem(checkpoint(tmp_path, 3, state="")) == "it has no trainer_state.json"
    cut = checkpoint(tmp_path, 4, state='{"global_step": 4, "log_hi')
    assert checkpoint_problem(cut) == "its trainer_state.json is cut short or unreadable"
    assert checkpoint_problem(checkpoint(tmp_path, 5, state="[]")) == "its trainer_state.json holds no global_step"
    assert checkpoint_problem(checkpoint(tmp_path, 6, weights=None)) == "it holds no model weights"
    writing = checkpoint(tmp_path, 7)
    (writing / CHECKPOINT_WRITING).touch()
    assert checkpoint_problem(writing) == "it was being written when its run stopped"
    assert checkpoint_problem(tmp_path / "checkpoint-8") == "it does not exist"
    cut_weights = checkpoint(tmp_path, 9)
    (cut_weights / "model.safetensors").write_bytes(b"weights")
    assert (
        checkpoint_problem(cut_weights) == "its model.safetensors is cut short or corrupt (its header is unreadable)"
    )
    cut_optimizer = checkpoint(tmp_path, 10)
    (cut_optimizer / "optimizer.pt").write_bytes(b"PK\x03\x04 half of a zip")
    assert checkpoint_problem(cut_optimizer) == (
        "its optimizer.pt is cut short or corrupt (its zip directory is unreadable, so torch.load cannot read it)"
    )


def test_last_complete_checkpoint_skips_later_incomplete_ones_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert last_complete_checkpoint(tmp_path / "missing") is None
    checkpoint(tmp_path, 2)
    good = checkpoint(tmp_path, 10)  # by step, not by name: 10 after 2 and 9
    checkpoint(tmp_path, 9)
    (checkpoint(tmp_path, 12) / CHECKPOINT_WRITING).touch()
    checkpoint(tmp_path, 14, state="")
    (tmp_path / "checkpoint-20").write_text("a file, not a checkpoint")
    with caplog.at_level(logging.WARNING, logger="hf_icot.runs.run_folder"):
        assert last_complete_checkpoint(tmp_path) == str(good)
    skipped = [record.getMessage() for record in caplog.records]
    assert skipped == [
        f"skipping {tmp_path / 'checkpoint-14'}: it has no trainer_state.json, so it cannot be resumed from",
        f"skipping {tmp_path / 'checkpoint-12'}: it was being written when its run stopped, so it cannot be resumed "
        "from",
    ]


def test_earlier_run_lists_a_runs_files_then_its_folders_by_step(tmp_path: Path) -> None:
    assert earlier_run(tmp_path) == []
    for name in ("stage-1", "checkpoint-10", "checkpoint-2", "runs", "checkpoint-x"):
        (tmp_path / name).mkdir()
    for name in ("model.safetensors", "notes.txt", "config.json"):
        (tmp_path / name).write_text("")
    assert earlier_run(tmp_path) == ["model.safetensors", "checkpoint-2", "checkpoint-10", "stage-1"]


def _args(seed: int = 0, per_device: int = 8, accumulation: int = 1, processes: int = 1) -> SimpleNamespace:
    return SimpleNamespace(
        seed=seed, train_batch_size=per_device, gradient_accumulation_steps=accumulation, world_size=processes
    )


def test_resume_mismatch_compares_seed_and_the_batch_of_one_optimizer_step() -> None:
    saved = {"run": {"seed": 0, "total_train_batch_size": 16}, "schedule": {"seed": 0}}
    assert resume_mismatch(saved, 16, _args(per_device=16)) is None
    assert resume_mismatch(saved, 16, _args(per_device=8, processes=2)) is None, "any number of processes"
    assert resume_mismatch(saved, 16, _args(seed=3, per_device=16)) == (
        "the checkpoint was trained with seed 0, but this run has seed 3; resume with --seed 0, or start a new run."
    )
    assert resume_mismatch(saved, 16, _args(per_device=8), "checkpoint 'c'") == (
        "checkpoint 'c' was trained with 16 examples per optimizer step (per device × processes × accumulation), "
        "but this run has 8; resume with the same batch size, or start a new run."
    )


def test_resume_mismatch_of_a_checkpoint_without_the_run_record_uses_trainer_state() -> None:
    """Checkpoints written before the record: the schedule's seed and trainer_state.json's per-device batch."""
    saved = {"schedule": {"seed": 0}}
    assert resume_mismatch(saved, 8, _args(accumulation=4)) is None, "accumulation was not recorded"
    assert resume_mismatch(saved, 8, _args(seed=1)).startswith("the checkpoint was trained with seed 0, but")
    assert resume_mismatch(saved, 8, _args(per_device=4)) == (
        "the checkpoint was trained with a batch size of 8 per device, but this run has 4; resume with the same "
        "batch size, or start a new run."
    )
