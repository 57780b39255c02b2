"""bench/latent_vs_public/run.py without their checkouts (CI has none): its help, and a missing checkout named in one
line before any work. The comparison itself needs the public repositories (bench/README.md has its figures)."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "latent_vs_public" / "run.py"


def test_help_and_a_missing_checkout(tmp_path):
    shown = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0 and "--coconut" in shown.stdout and "--steps-per-stage" in shown.stdout
    (tmp_path / "coconut").mkdir()
    (tmp_path / "coconut" / "coconut.py").write_text("")
    missing = subprocess.run(
        [sys.executable, str(SCRIPT), "--coconut", str(tmp_path / "coconut"), "--codi", str(tmp_path / "nothing")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert missing.returncode == 1
    assert (
        missing.stderr.strip()
        == f"error: --codi '{tmp_path / 'nothing'}' has no src/model.py; give a checkout of the repository."
    )


def test_simcot_help_and_a_missing_checkout(tmp_path):
    """bench/latent_vs_public/simcot.py (SIM-CoT's model classes): its help, and a checkout without its files named in
    one line before any work."""
    command = [sys.executable, "-m", "bench.latent_vs_public.simcot"]
    shown = subprocess.run([*command, "--help"], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert shown.returncode == 0 and "--simcot" in shown.stdout and "--steps" in shown.stdout
    (tmp_path / "Coconut").mkdir()
    (tmp_path / "Coconut" / "coconut.py").write_text("")
    missing = subprocess.run(
        [*command, "--simcot", str(tmp_path)], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert missing.returncode == 1
    assert missing.stderr.strip() == (
        f"error: --simcot '{tmp_path}' has no Coconut/dataset.py; give a checkout of InternLM/SIM-CoT."
    )
