"""The study harness on a designed fixture sweep of tiny runs: every run recorded (and committed) as it lands, a
killed sweep resumes without redoing finished runs, failures are recorded once and the sweep goes on, a record from
another definition is refused, the commands print for a scheduler, finished folders are collected, stopped runs resume
or restart."""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from hf_icot.studies.runner import SweepRunner, adopt_records
from hf_icot.studies.sweep import RECORD_FILE, SweepError, load_sweep

REPO = Path(__file__).resolve().parents[2]
FIXTURE = "tests/studies/fixture_recipe.py"


def write_sweep(study: Path, runs: list[dict], **settings) -> Path:
    """A sweep file in ``study`` whose runs call the fixture recipe into ``<study>/outputs``."""
    study.mkdir(parents=True, exist_ok=True)
    spec = {
        "study": "fixture",
        "command": ["python", str(REPO / FIXTURE), "--value", "2"],
        "output_root": str(study / "outputs"),
        "done_file": "result.json",
        "records": ["result.json"],
        **settings,
        "runs": runs,
    }
    (study / "runs.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return study


def calls(study: Path) -> list[str]:
    log = study / "outputs" / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def record(study: Path, name: str) -> dict:
    return json.loads((study / "runs" / name / RECORD_FILE).read_text())


def harness(*args: str, cwd: Path = REPO, **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "hf_icot.studies", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=120, **kwargs)  # fmt: skip


def test_a_sweep_runs_every_seed_once_and_records_each_run(tmp_path: Path) -> None:
    study = write_sweep(tmp_path / "study", [{"name": "point", "seeds": [0, 1, 2]}, {"name": "single", "seed": 5}])
    sweep = load_sweep(study)
    assert [run.name for run in sweep.runs] == ["point_s0", "point_s1", "point_s2", "single"]
    lines = []
    outcomes = SweepRunner(sweep, jobs=2, threads_per_run=1, echo=lines.append).run(sweep.runs)
    assert outcomes == {name: "ok" for name in ("point_s0", "point_s1", "point_s2", "single")}
    assert sorted(line.split()[0] for line in calls(study)) == ["point_s0", "point_s1", "point_s2", "single"]
    for name, seed in (("point_s1", 1), ("single", 5)):
        kept = record(study, name)
        assert kept["status"] == "ok" and kept["seed"] == seed and kept["exit_code"] == 0
        assert kept["machine"]["cpu"] and kept["machine"]["cores"] >= 1  # where it ran: the CPU can decide a result
        assert kept["command"][-4:] == ["--seed", str(seed), "--output_dir", str(study / "outputs" / name)]
        assert json.loads((study / "runs" / name / "result.json").read_text())["value"] == 2 * (1 + seed)
    assert lines[-1].startswith("[4/4] ok ")
    # Again: everything is recorded, nothing runs.
    assert SweepRunner(load_sweep(study), echo=lines.append).run(load_sweep(study).runs) == {}
    assert len(calls(study)) == 4


def test_each_record_is_committed_as_it_lands_and_only_its_own_files(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for key, value in (("user.email", "t@example.com"), ("user.name", "tester")):
        subprocess.run(["git", "-C", str(repo), "config", key, value], check=True)
    study = write_sweep(repo / "results" / "study", [{"name": "point", "seeds": [0, 1]}])
    (repo / "notes.txt").write_text("staged, not the harness's\n")
    subprocess.run(["git", "-C", str(repo), "add", "notes.txt"], check=True)
    SweepRunner(load_sweep(study), commit=True, echo=lambda line: None).run(load_sweep(study).runs)
    log = subprocess.run(["git", "-C", str(repo), "log", "--format=%s", "--name-only"], capture_output=True,
                         text=True).stdout  # fmt: skip
    assert log.count("(harness record)") == 2
    assert "results/study/runs/point_s0/sweep.json" in log and "notes.txt" not in log
    staged = subprocess.run(["git", "-C", str(repo), "diff", "--cached", "--name-only"], capture_output=True,
                            text=True).stdout  # fmt: skip
    assert staged.split() == ["notes.txt"], "the user's staged file stays staged, uncommitted"


def test_a_killed_sweep_resumes_without_redoing_finished_runs_and_leaves_no_run_behind(tmp_path: Path) -> None:
    study = write_sweep(tmp_path / "study", [
        {"name": "fast", "seed": 0},
        {"name": "slow", "seed": 1, "args": ["--sleep", "60"]},
    ])  # fmt: skip
    (study / "outputs").mkdir(parents=True)
    (study / "outputs" / "hold").write_text("hold the slow run\n")
    sweep = subprocess.Popen(
        [sys.executable, "-m", "hf_icot.studies", "run", str(study)], cwd=REPO, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not (study / "outputs" / "slow" / "started").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert (study / "runs" / "fast" / RECORD_FILE).exists(), "the first run was recorded before the second began"
    sweep.send_signal(signal.SIGKILL)
    sweep.wait(timeout=30)
    time.sleep(1.0)
    processes = subprocess.run(["pgrep", "-f", str(study / "outputs" / "slow")], capture_output=True, text=True)
    assert processes.stdout.strip() == "", "the run the killed sweep had started was stopped with it"
    assert not (study / "outputs" / "slow" / "result.json").exists()
    first = record(study, "fast")

    (study / "outputs" / "hold").unlink()
    result = harness("run", str(study))
    assert result.returncode == 0, result.stderr
    assert "fixture: 1 of 2 runs to do" in result.stdout
    assert calls(study) == ["fast 0", "slow 1", "slow 1 overwrite=true"], "fast ran once; slow started over"
    assert record(study, "fast") == first and record(study, "slow")["status"] == "ok"


def test_two_harnesses_on_one_sweep_run_each_run_once(tmp_path: Path) -> None:
    study = write_sweep(tmp_path / "study", [
        {"name": "slow", "seed": 0, "args": ["--sleep", "60"]},
        {"name": "fast", "seed": 1},
    ])  # fmt: skip
    (study / "outputs").mkdir(parents=True)
    (study / "outputs" / "hold").write_text("hold the slow run\n")
    first = subprocess.Popen(
        [sys.executable, "-m", "hf_icot.studies", "run", str(study)], cwd=REPO, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not (study / "outputs" / "slow" / "started").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    second = harness("run", str(study))  # while the first holds "slow"
    assert second.returncode == 0, second.stderr
    assert f"skip slow: process {first.pid} is running it (another harness)" in second.stdout
    assert record(study, "fast")["status"] == "ok" and not (study / "runs" / "slow").exists()

    (study / "outputs" / "hold").unlink()
    out, _ = first.communicate(timeout=60)
    assert first.returncode == 0, out
    assert "skip fast: recorded meanwhile (by another harness)" in out
    assert sorted(calls(study)) == ["fast 1", "slow 0"], "each run ran once, in one of the two harnesses"
    assert record(study, "slow")["status"] == "ok"
    assert not (study / "outputs" / "slow" / ".sweep-running").exists(), "the marker goes when the run ends"


def test_a_run_is_held_by_the_lock_on_its_marker_not_by_the_process_id_written_in_it(tmp_path: Path) -> None:
    study = write_sweep(tmp_path / "study", [{"name": "point", "seed": 0}])
    folder = study / "outputs" / "point"
    folder.mkdir(parents=True)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    with open(folder / ".sweep-running", "w") as marker:  # held by a live process (this one) under another id
        marker.write("4242\n")
        marker.flush()
        fcntl.flock(marker, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held = harness("run", str(study))
    assert held.returncode == 0, held.stderr
    assert "skip point: process 4242 is running it (another harness)" in held.stdout and calls(study) == []

    (folder / ".sweep-running").write_text(gone.stdout)  # a killed harness's marker: its process is gone, no lock
    taken = harness("run", str(study))
    assert taken.returncode == 0, taken.stderr
    assert calls(study) == ["point 0"] and record(study, "point")["status"] == "ok"
    assert not (folder / ".sweep-running").exists()


def test_a_failing_run_is_recorded_once_with_its_status_and_log_and_the_sweep_goes_on(tmp_path: Path) -> None:
    study = write_sweep(tmp_path / "study", [
        {"name": "broken", "seed": 0, "args": ["--fail"]},
        {"name": "fine", "seeds": [0, 1]},
    ])  # fmt: skip
    result = harness("run", str(study), "--jobs", "2")
    assert result.returncode == 1
    assert "failed: broken (see their sweep.json); --retry-failed runs them again" in result.stdout
    failed = record(study, "broken")
    assert failed["status"] == "failed" and failed["exit_code"] == 3
    assert failed["log_tail"][-1] == "ValueError: the fixture was told to fail" and len(failed["log_tail"]) == 20
    assert record(study, "fine_s1")["status"] == "ok"
    assert harness("run", str(study)).returncode == 0, "a recorded failure is not tried again"
    assert [line.split()[0] for line in calls(study)].count("broken") == 1
    assert harness("run", str(study), "--retry-failed").returncode == 1
    assert [line.split()[0] for line in calls(study)].count("broken") == 2


@pytest.mark.parametrize("how", ["exit", "sigterm"])  # exit status 75, or death by SIGTERM after a checkpoint
def test_a_preempted_run_is_not_recorded_as_failed_and_the_next_sweep_resumes_it(how: str, tmp_path: Path) -> None:
    study = write_sweep(tmp_path / "study", [
        {"name": "preempted", "seed": 0, "args": ["--preempted", how]},
        {"name": "fine", "seed": 1},
    ])  # fmt: skip
    result = harness("run", str(study))
    assert result.returncode == 75, result.stderr
    assert "preempted: preempted (checkpoints kept); run the sweep again to resume them" in result.stdout
    assert not (study / "runs" / "preempted").exists() and record(study, "fine")["status"] == "ok"
    again = harness("run", str(study))
    assert again.returncode == 0, again.stderr
    assert calls(study) == ["preempted 0", "fine 1", "preempted 0 resume=true"], "resumed once, fine not redone"
    assert record(study, "preempted")["status"] == "ok"


def test_records_of_another_sweep_definition_are_refused(tmp_path: Path) -> None:
    study = write_sweep(tmp_path / "study", [{"name": "point", "seeds": [0]}])
    assert harness("run", str(study)).returncode == 0
    write_sweep(study, [{"name": "point", "seeds": [0], "args": ["--value", "3"]}])
    result = harness("run", str(study))
    assert result.returncode == 2 and not result.stdout.strip().endswith("to do")
    message = result.stderr.strip()
    assert message.startswith(f"python -m hf_icot.studies: error: the record {study / 'runs' / 'point_s0'} was made "
                              "by another definition of point_s0")  # fmt: skip
    assert message.endswith("give the changed run a new name, or delete the old record to rerun it.")
    write_sweep(study, [{"name": "other", "seed": 0}])
    result = harness("status", str(study))
    assert result.returncode == 2 and "is the record of a run that" in result.stderr


def test_a_moved_script_named_in_moved_from_keeps_its_records_and_runs_from_its_new_path(tmp_path: Path) -> None:
    """The recipe moves after a run was recorded: with ``moved_from`` the record is still the run's and only the
    missing run runs, from the new path; without it the old record is refused."""
    study = write_sweep(tmp_path / "study", [{"name": "point", "seeds": [0]}])
    assert harness("run", str(study)).returncode == 0
    moved = tmp_path / "moved" / "recipe.py"
    moved.parent.mkdir()
    moved.write_text((REPO / FIXTURE).read_text())
    command = ["python", str(moved), "--value", "2"]
    write_sweep(study, [{"name": "point", "seeds": [0, 1]}], command=command)
    assert harness("status", str(study)).returncode == 2, "a move without moved_from is another definition"
    write_sweep(study, [{"name": "point", "seeds": [0, 1]}], command=command,
                moved_from={str(moved): str(REPO / FIXTURE)})  # fmt: skip
    sweep = load_sweep(study)
    sweep.check_records()
    assert [run.state() for run in sweep.runs] == ["recorded", "missing"]
    assert harness("commands", str(study)).stdout.split()[1] == str(moved)
    assert harness("run", str(study)).returncode == 0
    assert calls(study) == ["point_s0 0", "point_s1 1"], "the recorded run is not redone"
    assert record(study, "point_s1")["command"][1] == str(moved)
    assert record(study, "point_s0")["definition"] == sweep.runs[0].definition


def test_commands_print_one_shell_line_per_run_still_to_do(tmp_path: Path) -> None:
    study = write_sweep(tmp_path / "study", [{"name": "point", "seeds": [0, 1]}], env={"OMP_NUM_THREADS": "1"})
    assert harness("run", str(study), "--only", "point_s0").returncode == 0
    lines = harness("commands", str(study)).stdout.splitlines()
    assert lines == [
        f"OMP_NUM_THREADS=1 python {REPO / FIXTURE} --value 2 --seed 1 --output_dir {study / 'outputs' / 'point_s1'}"
    ]
    assert len(harness("commands", str(study), "--all").stdout.splitlines()) == 2
    # A scheduler ran it: the next `run` records the finished folder without training it again.
    subprocess.run(lines[0], shell=True, check=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    status = harness("status", str(study)).stdout
    assert "finished  point_s1" in status and "1 recorded, 1 finished" in status
    assert harness("run", str(study)).returncode == 0
    assert record(study, "point_s1")["collected"] is True and len(calls(study)) == 2
    assert (
        harness("run", str(study), "--only", "nothing*")
        .stderr.strip()
        .endswith("matches no run of fixture; see `status` for the names.")
    )
    assert (
        harness("run", str(study), "--only", "point")
        .stderr.strip()
        .endswith(
            "--only 'point' matches no run of fixture; run names end in their seed (_s0, _s1, ...): 'point_s*' matches "
            "every seed."
        )
    )


def test_a_stopped_run_resumes_from_its_checkpoint_or_starts_over(tmp_path: Path) -> None:
    study = write_sweep(tmp_path / "study", [{"name": "kept", "seed": 0}, {"name": "lost", "seed": 0}])
    checkpoint = study / "outputs" / "kept" / "checkpoint-2"
    checkpoint.mkdir(parents=True)
    (checkpoint / "trainer_state.json").write_text('{"global_step": 2}')
    (checkpoint / "model.safetensors").write_bytes(struct.pack("<Q", 2) + b"{}")  # whole: a header, no tensor
    (study / "outputs" / "lost").mkdir(parents=True)
    (study / "outputs" / "lost" / "debris.txt").write_text("a run stopped before its first checkpoint\n")
    assert harness("run", str(study)).returncode == 0
    assert sorted(calls(study)) == ["kept 0 resume=true", "lost 0 overwrite=true"]


def test_a_folder_finished_under_another_definition_runs_again_instead_of_being_collected(tmp_path: Path) -> None:
    """A run's arguments changed after it finished and its record was deleted: its folder still holds the done file
    of the old arguments, which must not be recorded under the new definition; a folder the harness never started
    (a cluster job's) is still collected."""
    study = write_sweep(tmp_path / "study", [{"name": "point", "seeds": [0]}, {"name": "outside", "seed": 0}])
    (study / "outputs" / "outside").mkdir(parents=True)
    (study / "outputs" / "outside" / "result.json").write_text('{"value": 7.0}')
    assert harness("run", str(study), "--only", "point_s0").returncode == 0
    assert json.loads((study / "runs/point_s0/result.json").read_text())["value"] == 2.0
    write_sweep(study, [{"name": "point", "seeds": [0], "args": ["--value", "5"]}, {"name": "outside", "seed": 0}])
    for path in sorted((study / "runs" / "point_s0").iterdir()):
        path.unlink()
    (study / "runs" / "point_s0").rmdir()
    assert [run.state() for run in load_sweep(study).runs] == ["stale", "finished"]
    assert harness("run", str(study)).returncode == 0
    assert calls(study) == ["point_s0 0", "point_s0 0 overwrite=true"]  # run again, from scratch; outside collected
    assert json.loads((study / "runs/point_s0/result.json").read_text())["value"] == 5.0
    assert record(study, "point_s0")["definition"] == load_sweep(study).runs[0].definition
    assert record(study, "outside")["collected"] is True


def test_runs_kept_before_the_harness_are_adopted_under_the_sweep_definition(tmp_path: Path) -> None:
    study = write_sweep(tmp_path / "study", [{"name": "old", "seeds": [0]}, {"name": "new", "seeds": [0]}])
    (study / "runs" / "old_s0").mkdir(parents=True)
    (study / "runs" / "old_s0" / "result.json").write_text('{"value": 2.0}')
    (study / "runs" / "old_s0" / "wall_time.json").write_text('{"wall_s": 12}')
    assert adopt_records(load_sweep(study)) == ["old_s0"]
    adopted = record(study, "old_s0")
    assert adopted["status"] == "ok" and adopted["wall_s"] == 12 and "adopted" in adopted
    assert adopted["definition"] == load_sweep(study).runs[0].definition
    assert harness("run", str(study)).returncode == 0
    assert calls(study) == ["new_s0 0"]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"study": "x"}, "lacks 'command'"),
        ({"study": "x", "command": ["python"], "output_root": "o", "done_file": "d", "runs": [], "colour": 1},
         "unknown key(s) colour"),
        ({"study": "x", "command": ["python"], "output_root": "o", "done_file": "d", "runs": [{"name": "a", "seed": 1,
          "seeds": [2]}]}, "run 'a' gives seed and seeds; give one."),
        ({"study": "x", "command": ["python"], "output_root": "o", "done_file": "d",
          "runs": [{"name": "a", "seed": 1}, {"name": "a", "seed": 2}]}, "defines the run 'a' twice"),
        ({"study": "x", "command": ["python"], "output_root": "o", "done_file": "d", "runs": [],
          "moved_from": ["recipes/a.py"]}, "moved_from is ['recipes/a.py']; give a mapping of new path -> old path."),
    ],
)  # fmt: skip
def test_a_bad_sweep_file_is_one_sentence(tmp_path: Path, spec: dict, message: str) -> None:
    (tmp_path / "runs.yaml").write_text(yaml.safe_dump(spec))
    with pytest.raises(SweepError, match=re.escape(message)):
        load_sweep(tmp_path)
    with pytest.raises(SweepError, match=r"has no runs\.yaml"):
        load_sweep(tmp_path / "nowhere")
