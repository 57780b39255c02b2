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
