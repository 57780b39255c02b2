"""bench/latent_vs_public/loops.py and device_slices.py without the public checkouts (CI has none): their help, a
missing checkout named in one line before any work, and the device script's CPU dry run writing our curves alone.
The comparisons themselves need the checkouts (bench/README.md has their figures)."""

import csv
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FOLDER = REPO / "bench" / "latent_vs_public"


def run(*argv, timeout=120):
    return subprocess.run([sys.executable, *map(str, argv)], capture_output=True, text=True, timeout=timeout)


def test_loops_answers_help_and_names_a_missing_checkout(tmp_path):
    shown = run(FOLDER / "loops.py", "--help")
    assert shown.returncode == 0, shown.stderr[-2000:]
    for flag in ("--coconut", "--codi", "--settings", "--variants", "--cost", "--tiny"):
        assert flag in shown.stdout
    (tmp_path / "coconut").mkdir()
    (tmp_path / "coconut" / "run.py").write_text("")
    missing = run(FOLDER / "loops.py", "--coconut", tmp_path / "coconut", "--codi", tmp_path / "nothing")
    assert missing.returncode == 1
    assert missing.stderr.strip() == (
        f"error: --codi '{tmp_path / 'nothing'}' has no train.py; give a checkout of the repository."
    )


def test_device_slices_answers_help_and_refuses_a_bad_checkout_or_setting(tmp_path):
    script = FOLDER / "device_slices.py"
    shown = run(script, "--help")
    assert shown.returncode == 0, shown.stderr[-2000:]
    for flag in ("--dry-run", "--steps", "--budget-s", "--out", "--settings"):
        assert flag in shown.stdout
    missing = run(script, "--coconut", tmp_path / "nothing", "--out", tmp_path / "out", "--dry-run")
    assert missing.returncode == 1
    assert missing.stderr.strip() == (
        f"error: --coconut '{tmp_path / 'nothing'}' has no run.py; give a checkout of the repository."
    )
    unknown = run(script, "--settings", "coconut_gsm9k", "--out", tmp_path / "out", "--dry-run")
    assert unknown.returncode == 1 and "coconut_gsm9k is not a setting" in unknown.stderr
    assert not (tmp_path / "out").exists()


def test_device_slices_dry_run_without_checkouts_writes_our_curves(tmp_path):
    out = tmp_path / "slices"
    done = run(
        FOLDER / "device_slices.py", "--dry-run", "--settings", "coconut_prontoqa,codi_gsm8k_aug_gpt2", "--out", out,
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "ours only" in done.stdout
    with (out / "curves.csv").open() as stream:
        rows = list(csv.DictReader(stream))
    assert {(row["setting"], row["side"]) for row in rows} == {
        ("coconut_prontoqa", "ours"),
        ("codi_gsm8k_aug_gpt2", "ours"),
    }
    assert len(rows) == 4 and all(float(row["loss"]) > 0 for row in rows)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["coconut_prontoqa"]["ours"]["steps"] == 2 and "theirs" not in summary["coconut_prontoqa"]
    assert (out / "curves.png").stat().st_size > 10_000


def test_loops_reprints_and_merges_its_results_without_checkouts(tmp_path):
    result = {"setting": "Coconut GSM8K", "variant": "exact", "steps": 3, "theirs": [2.0, 1.5, 1.0],
              "ours": [2.0, 1.5 + 4e-6, 1.0 + 1e-6], "same_batches": True}  # fmt: skip
    for name in ("a.json", "b.json"):
        (tmp_path / name).write_text(json.dumps([result]))
    shown = run(FOLDER / "loops.py", "--from-json", tmp_path / "a.json", tmp_path / "b.json", "--out", tmp_path / "c")
    assert shown.returncode == 0, shown.stderr[-2000:]
    row = "| Coconut GSM8K | exact | 3 | 0.0e+00 | 4.0e-06 (2) | True | 2.000000 / 2.000000 | 1.000000 / 1.000001 |"
    assert shown.stdout.count(row) == 2
    assert len(json.loads((tmp_path / "c").read_text())) == 2
