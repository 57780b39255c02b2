"""Push a tiny private dataset to the real Hugging Face Hub, read it back, delete it.

Runs only with ``python -m pytest -m live_hub`` and a write token in ``HF_TOKEN``; the default run deselects it.
"""

import os
import uuid

import pytest

from datasets_builder import publish
from datasets_builder.tasks import ambiguity

pytestmark = [
    pytest.mark.live_hub,
    pytest.mark.skipif(not os.environ.get("HF_TOKEN"), reason="needs HF_TOKEN with write access"),
]


@pytest.fixture
def real_hub(monkeypatch):
    """Undo the test-wide offline switches for this test only (conftest sets them before any import)."""
    import datasets
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", False)


def test_push_private_dataset_then_delete(tmp_path, real_hub):
    from huggingface_hub import HfApi

    api = HfApi()
    repo_id = f"{api.whoami()['name']}/hf-icot-live-test-{uuid.uuid4().hex[:8]}"
    params = ambiguity.Params(n_bases=4, k=2)
    publish.build_config(tmp_path / "data", "ambiguity", params, progress=False)
    try:
        publish.push(tmp_path / "data", repo_id, private=True)
        info = api.dataset_info(repo_id)
        assert info.private is True
        remote = sorted(api.list_repo_files(repo_id, repo_type="dataset"))
        local = sorted(str(p.relative_to(tmp_path / "data")) for p in (tmp_path / "data").rglob("*") if p.is_file())
        assert set(local) <= set(remote)
    finally:
        api.delete_repo(repo_id, repo_type="dataset", missing_ok=True)
