"""Test-wide settings: nothing reaches a hub, and every cache lives in a temporary folder."""

import os
import tempfile

# Set before any Hugging Face library is imported by a test module.
_CACHE = tempfile.mkdtemp(prefix="hf_icot_test_cache_")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_XET", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("HF_HOME", os.path.join(_CACHE, "hf_home"))
os.environ.setdefault("HF_DATASETS_CACHE", os.path.join(_CACHE, "datasets"))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("WANDB_DISABLED", "true")
# One torch thread per test process and per process a test starts: two xdist workers on two cores, each with as many
# threads as cores, oversubscribe the machine (OpenMP threads spin while they wait), and a test's figures never depend
# on its thread count. Tests of the thread handling itself build their environment explicitly.
os.environ.setdefault("OMP_NUM_THREADS", "1")


def pytest_configure(config) -> None:
    """Compile the repository's modules to bytecode once, before the workers start. Many tests run a recipe or a
    bench in a fresh interpreter; where ``PYTHONDONTWRITEBYTECODE`` is set (as on the CI machines) no interpreter
    writes what it compiles, so each of them would compile every module it imports from source again. Compiled
    files are read even under that variable (``__pycache__/`` is ignored by git)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    import compileall
    from pathlib import Path

    repository = Path(__file__).resolve().parents[1]
    # Not results/: a study folder holds its records and README only, and its scripts run as scripts.
    for folder in ("hf_icot", "datasets_builder", "recipes", "bench", "tests"):
        compileall.compile_dir(repository / folder, quiet=1)
