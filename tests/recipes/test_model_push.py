"""Pushing a run folder to a loopback Hub: what arrives, private repos and branches, and failures (the table of Hub
faults in :mod:`tests.push_faults`, a push from the recipe failing mid-upload, no token, offline, not a model folder)
that leave the folder intact, say one sentence, and are retried with ``python -m hf_icot.publishing.hub push``."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hf_icot.publishing import hub
from hf_icot.publishing.hub import PushError, push_output_dir
from hf_icot.runs.run_lock import LOCK_FILE
from tests.push_faults import FAULTS, TRANSIENT, PushFault, backoff_waits, file_hashes  # noqa: F401  (a fixture)
from tests.recipes.conftest import REPO, recipe_args, run_recipe

COMMIT = r"^POST /api/models/.*/commit/"


def _snapshot(folder: Path) -> dict[str, bytes]:
    """Relative path -> bytes of every file under ``folder`` (hidden files and subfolders included), but the run's
    lock, which is there while the run is (hf_icot.runs.run_lock)."""
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != LOCK_FILE
    }


def _published(folder: Path) -> dict[str, bytes]:
    """What a push of ``folder`` should upload: everything but checkpoints, stage folders and hidden files."""
    skipped = ("checkpoint-", "stage-", ".")
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.relative_to(folder).as_posix().startswith(skipped)
    }


@pytest.fixture
def run_folder(tiny_gpt2: Path, tmp_path: Path) -> Path:
    """A finished-run-like folder: model, tokenizer, card, plus a checkpoint and a stage folder not to publish."""
    folder = tmp_path / "run"
    shutil.copytree(tiny_gpt2, folder)
    (folder / "README.md").write_text("---\nlicense: mit\n---\n\n# tiny\n")
    for extra in ("checkpoint-3", "stage-1"):
        (folder / extra).mkdir()
        (folder / extra / "model.safetensors").write_bytes(b"not published")
    return folder


def test_push_uploads_the_run_folder_to_a_private_repo_and_a_branch(
    run_folder: Path, loopback_hub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", loopback_hub.token)
    url = push_output_dir(run_folder, "loopback-user/tiny-icot", private=True)
    assert url.startswith(loopback_hub.url) and "/commit/" in url
    files = loopback_hub.files("loopback-user/tiny-icot", repo_type="model")
    assert files == _published(run_folder) and "model.safetensors" in files
    assert loopback_hub.repos[("model", "loopback-user/tiny-icot")].private

    (run_folder / "README.md").write_text("---\nlicense: mit\n---\n\n# tiny, second version\n")
    push_output_dir(run_folder, "loopback-user/tiny-icot", revision="v2")
    assert loopback_hub.files("loopback-user/tiny-icot", "model", "v2")["README.md"].endswith(b"second version\n")
    assert loopback_hub.files("loopback-user/tiny-icot", "model")["README.md"].endswith(b"# tiny\n")


def test_recipe_push_failing_mid_upload_leaves_the_run_intact_and_the_cli_retries(
    tiny_gpt2: Path, tmp_path: Path, loopback_hub, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hf_icot.publishing.hub

    monkeypatch.setenv("HF_TOKEN", loopback_hub.token)
    loopback_hub.fail(500, COMMIT)  # the weights are uploaded (LFS), then the commit fails
    output = tmp_path / "run"
    # The folder as the push found it: the Hub calls start in upload_in_one_commit, whoever calls the push.
    before_push: list[dict[str, bytes]] = []
    upload = hf_icot.publishing.hub.upload_in_one_commit

    def snapshot_then_upload(api, folder, *args, **kwargs):
        before_push.append(_snapshot(Path(folder)))
        return upload(api, folder, *args, **kwargs)

    monkeypatch.setattr(hf_icot.publishing.hub, "upload_in_one_commit", snapshot_then_upload)
    argv = recipe_args(tiny_gpt2, output, "--push_to_hub", "--hub_model_id", "loopback-user/icot-run")
    with pytest.raises(PushError) as caught:
        run_recipe(argv)
    assert len(before_push) == 1, "the recipe pushed once, through hf_icot.publishing.hub"
    assert _snapshot(output) == before_push[0], "the failed push left every file of the run folder as it was"
    message = str(caught.value)
    assert "\n" not in message and loopback_hub.token not in message
    assert (
        f"failed: the Hub at {loopback_hub.url} answered HTTP 500" in message and "; the folder is intact" in message
    )
    retry = f"python -m hf_icot.publishing.hub push {output} --repo loopback-user/icot-run"
    assert message.endswith(f"retry with `{retry}`.")
    for name in ("model.safetensors", "tokenizer.json", "README.md", "training_curves.png", "eval_results.json"):
        assert (output / name).is_file(), name
    assert loopback_hub.files("loopback-user/icot-run", repo_type="model") == {}

    result = subprocess.run(
        [sys.executable, *retry.split()[1:]], capture_output=True, text=True, timeout=120, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert loopback_hub.token not in result.stdout + result.stderr
    assert loopback_hub.files("loopback-user/icot-run", repo_type="model") == _published(output)
    assert _snapshot(output) == before_push[0], "the retried push only read the folder too"


@pytest.mark.parametrize("fault", FAULTS, ids=lambda fault: fault.name)
def test_each_hub_fault_leaves_the_run_folder_intact_says_one_sentence_and_the_retry_command_uploads(
    fault: PushFault,
    run_folder: Path,
    loopback_hub,
    backoff_waits: list[float],  # noqa: F811
    capsys,
    monkeypatch,
) -> None:
    monkeypatch.setenv("HF_TOKEN", loopback_hub.token)
    repo = "loopback-user/faulty"
    before = file_hashes(run_folder)
    rule = fault.arm(loopback_hub, "models")
    with pytest.raises(PushError) as caught:
        push_output_dir(run_folder, repo)
    assert (rule.fired, backoff_waits) == (fault.tries, fault.waits), "what huggingface_hub retried, and its waits"
    message = str(caught.value)
    retry = f"python -m hf_icot.publishing.hub push {run_folder} --repo {repo}"
    assert re.fullmatch(
        f"pushing {re.escape(str(run_folder))} to {repo} failed: {fault.clause(loopback_hub.url)}; "
        f"the folder is intact, so retry with `{re.escape(retry)}`\\.",
        message,
    ), message
    assert "\n" not in message and loopback_hub.token not in message

    assert hub.main(["push", str(run_folder), "--repo", repo]) == 1  # the command line, while the fault lasts
    captured = capsys.readouterr()
    # stderr may first hold the client's upload progress bars; the error is its last line, exactly once
    assert captured.out == "" and captured.err.endswith(f"error: {message}\n") and captured.err.count("error:") == 1
    assert rule.fired == 2 * fault.tries
    assert file_hashes(run_folder) == before, "the failed pushes only read the folder"
    assert loopback_hub.files(repo, repo_type="model") == {}

    loopback_hub.recover()
    result = subprocess.run(
        [sys.executable, *shlex.split(retry)[1:]], capture_output=True, text=True, timeout=120, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith(f"pushed {run_folder} to {repo}: {loopback_hub.url}/loopback-user/faulty/commit/")
    assert loopback_hub.files(repo, repo_type="model") == _published(run_folder)
    assert file_hashes(run_folder) == before


@pytest.mark.parametrize("fault", TRANSIENT, ids=lambda fault: fault.name)
def test_a_fault_huggingface_hub_retries_is_absorbed_when_it_happens_once(
    fault: PushFault,
    run_folder: Path,
    loopback_hub,
    backoff_waits: list[float],  # noqa: F811
    monkeypatch,
) -> None:
    monkeypatch.setenv("HF_TOKEN", loopback_hub.token)
    rule = fault.arm(loopback_hub, "models", times=1)
    push_output_dir(run_folder, "loopback-user/flaky")
    assert rule.fired == 1 and backoff_waits == fault.waits[:1]
    assert loopback_hub.files("loopback-user/flaky", repo_type="model") == _published(run_folder)


def test_refused_or_missing_token_is_one_sentence(run_folder: Path, loopback_hub, monkeypatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_wrong_token")
    with pytest.raises(PushError, match=r"refused the token \(HTTP 401\); check with `hf auth whoami` that it may"):
        push_output_dir(run_folder, "loopback-user/tiny-icot")
    monkeypatch.delenv("HF_TOKEN")
    with pytest.raises(PushError, match="no Hugging Face token found; run `hf auth login` or set HF_TOKEN"):
        push_output_dir(run_folder, "loopback-user/tiny-icot")
    assert loopback_hub.repos == {}


def test_offline_push_fails_with_the_retry_command(run_folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_unused")
    before = _snapshot(run_folder)
    result = subprocess.run(
        [sys.executable, "-m", "hf_icot.publishing.hub", "push", str(run_folder), "--repo", "someone/icot", "--private"],
        capture_output=True, text=True, timeout=60, cwd=REPO, env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == (
        f"error: cannot push {run_folder} to someone/icot: HF_HUB_OFFLINE is set, so the Hub is unreachable; unset it, "
        f"then run `python -m hf_icot.publishing.hub push {run_folder} --repo someone/icot --private`.\n"
    )
    assert _snapshot(run_folder) == before


def test_folders_that_are_not_a_published_model_are_refused(tmp_path: Path, run_folder: Path) -> None:
    with pytest.raises(ValueError, match="does not exist; give the output_dir of a finished run"):
        push_output_dir(tmp_path / "missing", "someone/icot")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="holds neither config.json nor adapter_config.json"):
        push_output_dir(tmp_path / "empty", "someone/icot")
    (run_folder / "model.safetensors").unlink()
    with pytest.raises(ValueError, match="holds no .safetensors weights"):
        push_output_dir(run_folder, "someone/icot")
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": str(tmp_path / "base")}))
    (adapter / "adapter_model.safetensors").write_bytes(b"")
    with pytest.raises(ValueError, match="names the local base model .* set base_model_name_or_path"):
        push_output_dir(adapter, "someone/icot")
    result = subprocess.run(
        [sys.executable, "-m", "hf_icot.publishing.hub", "push", str(tmp_path / "empty"), "--repo", "someone/icot"],
        capture_output=True, text=True, timeout=60, cwd=REPO,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == (
        f"python -m hf_icot.publishing.hub push: error: '{tmp_path / 'empty'}' holds neither config.json nor "
        "adapter_config.json; give the output_dir of a finished run."
    )


def test_the_retry_command_printed_before_the_move_still_uploads(run_folder: Path, loopback_hub, monkeypatch) -> None:
    """``python -m hf_icot.hub push``, what failed pushes printed before 2026-12-01, is a thin alias of today's
    command, and ``hf_icot.hub`` is today's module itself."""
    import hf_icot.hub

    assert hf_icot.hub is hub
    monkeypatch.setenv("HF_TOKEN", loopback_hub.token)
    result = subprocess.run(
        [sys.executable, "-m", "hf_icot.hub", "push", str(run_folder), "--repo", "loopback-user/old-command"],
        capture_output=True, text=True, timeout=120, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith(f"pushed {run_folder} to loopback-user/old-command: {loopback_hub.url}/")
    assert loopback_hub.files("loopback-user/old-command", repo_type="model") == _published(run_folder)
