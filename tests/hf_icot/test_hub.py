"""``is_hub_id``: the Hub client's repo-id rule decides, and an existing local path is never a Hub id."""

from __future__ import annotations

from pathlib import Path

import pytest

from hf_icot.publishing.hub import is_hub_id


@pytest.mark.parametrize("name", ["gpt2", "openai-community/gpt2", "Qwen/Qwen2.5-0.5B", "user/icot_4x4.v2", "a" * 96])
def test_repo_ids_the_hub_accepts_are_hub_ids(name: str) -> None:
    assert is_hub_id(name)


@pytest.mark.parametrize(
    "name",
    [
        None,
        "",
        "./gpt2",
        "/abs/model",
        "a/b/c",
        "datasets_builder:multiplication",
        "user/name with spaces",
        "a--b",  # from here on: names a character-class pattern accepts but the Hub refuses
        "user/model.git",
        "-leading-dash",
        "trailing.",
        "a" * 97,
    ],
)
def test_paths_labels_and_names_the_hub_refuses_are_not(name: str | None) -> None:
    assert not is_hub_id(name)


def test_an_existing_local_folder_spelled_like_an_id_is_not_a_hub_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert is_hub_id("gpt2") and is_hub_id("owner/gpt2")
    (tmp_path / "owner" / "gpt2").mkdir(parents=True)
    (tmp_path / "gpt2").mkdir()
    assert not is_hub_id("gpt2") and not is_hub_id("owner/gpt2")
