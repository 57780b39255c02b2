"""Freed CPU memory kept for the next step (hf_icot.training.freed_memory, ``reuse_freed_memory``): in a fresh
process, a training step faults thousands of pages in before and few after, ICoTTrainer sets it only when the
flag is on, and the losses are the same bits either way."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_a_run_keeps_freed_memory_only_when_asked_and_trains_the_same():
    result = subprocess.run(
        [sys.executable, "-m", "tests.hf_icot.freed_memory_probe"],
        cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    probe = json.loads(result.stdout.strip().splitlines()[-1])
    # A training step of the 4x4 shape frees blocks of 0.1-3 MiB that glibc, left alone, gives back to the kernel and
    # faults in afresh at the next step (~10,000 pages per step here); kept, the step reuses them.
    assert probe["faults_before"] >= 4_000, probe
    assert probe["faults_after"] <= probe["faults_before"] / 5, probe
    assert not probe["kept_after_off"] and probe["kept_after_on"], probe
    assert len(probe["losses_on"]) == 6 and probe["losses_on"] == probe["losses_off"], probe


def test_keep_freed_memory_is_idempotent():
    from hf_icot.training.freed_memory import keep_freed_memory

    first = keep_freed_memory()
    assert keep_freed_memory() == first == (platform.system() == "Linux" and platform.libc_ver()[0] == "glibc")
