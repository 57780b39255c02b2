"""`python -m hf_icot.studies slurm`: a job-array script and a manifest of the missing runs; the script's task body,
run here with SLURM_ARRAY_TASK_ID set, records its run as the workstation harness does, and a preempted task requeues
itself and resumes."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from hf_icot.studies.runner import SweepRunner
from hf_icot.studies.sweep import load_sweep
from tests.studies.test_harness import calls, harness, record, write_sweep


def _task(script: Path, index: int, **env: str) -> subprocess.CompletedProcess:
    outside = {key: value for key, value in os.environ.items() if not key.startswith("SLURM_")}
    environment = {**outside, "SLURM_ARRAY_TASK_ID": str(index), **env}
    return subprocess.run(["bash", str(script)], capture_output=True, text=True, env=environment, timeout=120)


def test_the_job_array_runs_each_missing_run_through_the_harness_and_requeues_a_preempted_one(tmp_path: Path) -> None:
    study = write_sweep(
        tmp_path / "study",
        [{"name": "point", "seeds": [0, 1, 2]}, {"name": "stopped", "args": ["--preempted"], "seed": 7}],
    )
    sweep = load_sweep(study)
    SweepRunner(sweep, echo=lambda line: None).run(sweep.select(["point_s0"]))  # recorded before the export
    out = tmp_path / "slurm"
    exported = harness(
        "slurm", str(study), "--partition", "short", "--time", "01:30:00", "--cpus-per-task", "2", "--max-parallel",
        "2", "--out", str(out),
    )  # fmt: skip
    assert exported.returncode == 0, exported.stderr
    assert (out / "manifest.txt").read_text().splitlines() == ["point_s1", "point_s2", "stopped"]
    script = (out / "job.sh").read_text()
    for option in ("--array=1-3%2", "--partition=short", "--time=01:30:00", "--cpus-per-task=2", "--requeue"):
        assert f"#SBATCH {option}\n" in script, option

    # Two tasks of the array, run here: each records its run as a workstation sweep does.
    for index in (1, 2):
        assert _task(out / "job.sh", index).returncode == 0
    for name, seed in (("point_s1", 1), ("point_s2", 2)):
        kept = record(study, name)
        assert kept["status"] == "ok" and kept["seed"] == seed and kept["definition"] == sweep.runs[seed].definition
        assert (study / "runs" / name / "result.json").is_file()
    assert sorted(line.split()[0] for line in calls(study)) == ["point_s0", "point_s1", "point_s2"]

    # The third is preempted (exit 75): not recorded, the task asks Slurm to requeue it; run again, it resumes.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text(f'#!/usr/bin/env bash\necho "$@" >> {tmp_path / "scontrol.log"}\n')
    (bin_dir / "scontrol").chmod(0o755)
    slurm_env = {"SLURM_JOB_ID": "43", "SLURM_ARRAY_JOB_ID": "40", "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    preempted = _task(out / "job.sh", 3, **slurm_env)
    assert preempted.returncode == 75, preempted.stderr
    assert (tmp_path / "scontrol.log").read_text() == "requeue 40_3\n"
    assert not (study / "runs" / "stopped").exists()
    assert _task(out / "job.sh", 3, **slurm_env).returncode == 0
    assert record(study, "stopped")["status"] == "ok"
    assert calls(study)[-2:] == ["stopped 7", "stopped 7 resume=true"]

    # Everything recorded: nothing to submit; a line past the manifest is refused.
    again = harness("slurm", str(study), "--out", str(tmp_path / "again"))
    assert again.returncode == 0 and "nothing to submit" in again.stdout and not (tmp_path / "again").exists()
    past = _task(out / "job.sh", 4)
    assert past.returncode == 2 and "no line 4" in past.stderr


def test_bad_slurm_options_are_refused_in_one_sentence(tmp_path: Path) -> None:
    study = write_sweep(tmp_path / "study", [{"name": "point", "seed": 0}])
    for flags, message in (
        (["--time", "two hours"], "--time 'two hours' is not a Slurm time"),
        (["--cpus-per-task", "0"], "--cpus-per-task 0 is not allowed"),
        (["--max-parallel", "0"], "--max-parallel 0 is not allowed"),
    ):
        result = harness("slurm", str(study), "--out", str(tmp_path / "out"), *flags)
        assert result.returncode == 2 and message in result.stderr, result.stderr
