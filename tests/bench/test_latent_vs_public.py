"""bench/latent_vs_public/run.py, data.py, generation.py and pccot.py without their checkouts (CI has none): their help, and a
missing checkout named in one line before any work. The comparisons themselves need the public repositories
(bench/README.md has their figures); tests/hf_icot/test_latent_formats.py tests the formats without them."""

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


def test_the_data_and_generation_comparisons_answer_help_and_name_a_missing_checkout(tmp_path):
    (tmp_path / "coconut").mkdir()
    for needed in ("dataset.py", "coconut.py"):
        (tmp_path / "coconut" / needed).write_text("")
    for script, flag, needed in (
        ("data.py", "--prosqa-rows", "train.py"),
        ("generation.py", "--train-steps", "test.py"),
    ):
        path = REPO / "bench" / "latent_vs_public" / script
        shown = subprocess.run([sys.executable, str(path), "--help"], capture_output=True, text=True, timeout=120)
        assert shown.returncode == 0 and "--codi" in shown.stdout and flag in shown.stdout, shown.stderr[-2000:]
        missing = subprocess.run(
            [sys.executable, str(path), "--coconut", str(tmp_path / "coconut"), "--codi", str(tmp_path / "nothing")],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert missing.returncode == 1
        assert missing.stderr.strip() == (
            f"error: --codi '{tmp_path / 'nothing'}' has no {needed}; give a checkout of the repository."
        )


def test_pccot_help_and_a_missing_checkout(tmp_path):
    """bench/latent_vs_public/pccot.py (PCCoT's model class against ours) answers --help and names a missing checkout
    in one line before any work."""
    script = REPO / "bench" / "latent_vs_public" / "pccot.py"
    shown = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0 and "--pccot" in shown.stdout and "--steps" in shown.stdout
    missing = subprocess.run(
        [sys.executable, str(script), "--pccot", str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert missing.returncode == 1
    assert missing.stderr.strip() == (
        f"error: --pccot '{tmp_path}' has no models/modeling_gpt2.py; give a checkout of whyNLP/PCCoT."
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
