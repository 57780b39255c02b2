"""Hub-format folders: load_dataset round trip, configs added side by side, all-or-nothing builds, determinism, card,
and pushes to the loopback Hub (arrival byte for byte, failures that leave the folder intact and can be retried)."""

import hashlib
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import datasets
import pytest
import yaml
from huggingface_hub import HfApi, hf_hub_download

from datasets_builder import publish
from datasets_builder.tasks import ambiguity, reference_text
from hf_icot.data import load_icot_dataset
from tests.hub_server import loopback_hub  # noqa: F401  (pytest fixture)
from tests.push_faults import FAULT_BY_NAME, PushFault, backoff_waits, file_hashes  # noqa: F401  (a fixture)

ROOT = Path(__file__).resolve().parents[2]

SMALL = ambiguity.Params(n_bases=12, k=3, seed=5)
OTHER = ambiguity.Params(n_bases=8, k=2, direction="b_to_a", seed=1)


def snapshot(folder: Path) -> dict[str, bytes]:
    """Relative path -> bytes of every file under ``folder``."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def card_yaml(folder: Path) -> dict:
    text = (folder / "README.md").read_text()
    return yaml.safe_load(text.split("---\n")[1])


@pytest.fixture
def built(tmp_path) -> Path:
    out = tmp_path / "data"
    publish.build_config(out, "ambiguity", SMALL, progress=False)
    return out


def test_load_dataset_gives_the_generator_rows(built):
    expected = ambiguity.build(SMALL)
    loaded = datasets.load_dataset(str(built), SMALL.config_name())
    assert list(loaded) == ["train", "test"]
    for split in expected:
        assert loaded[split].features == expected[split].features
        assert loaded[split].to_list() == expected[split].to_list()
    names = sorted(p.name for p in (built / SMALL.config_name()).iterdir())
    assert names == ["icot_config.json", "test-00000-of-00001.parquet", "train-00000-of-00001.parquet"]


def test_second_config_leaves_the_first_byte_identical(built):
    first = SMALL.config_name()
    before = snapshot(built / first)
    publish.build_config(built, "ambiguity", OTHER, progress=False)
    assert snapshot(built / first) == before
    metadata = card_yaml(built)
    assert [c["config_name"] for c in metadata["configs"]] == sorted([first, OTHER.config_name()])
    assert [c["config_name"] for c in metadata["dataset_info"]] == sorted([first, OTHER.config_name()])
    assert datasets.get_dataset_config_names(str(built)) == sorted([first, OTHER.config_name()])
    other_rows = datasets.load_dataset(str(built), OTHER.config_name(), split="train").to_list()
    assert other_rows == ambiguity.build(OTHER)["train"].to_list()


def test_same_params_same_bytes_and_fingerprint(tmp_path):
    records = [publish.build_config(tmp_path / name, "ambiguity", SMALL, progress=False) for name in ("a", "b")]
    assert snapshot(tmp_path / "a") == snapshot(tmp_path / "b")
    config = tmp_path / "a" / SMALL.config_name()
    concatenated = b"".join(p.read_bytes() for p in sorted(config.glob("*.parquet")))
    assert records[0]["fingerprint"] == records[1]["fingerprint"]
    assert records[0]["fingerprint"] == "sha256:" + hashlib.sha256(concatenated).hexdigest()
    # rebuilding a config in place replaces it with the same bytes
    before = snapshot(tmp_path / "a")
    publish.build_config(tmp_path / "a", "ambiguity", SMALL, progress=False)
    assert snapshot(tmp_path / "a") == before
    other = publish.build_config(tmp_path / "c", "ambiguity", ambiguity.Params(n_bases=12, k=3, seed=6))
    assert other["fingerprint"] != records[0]["fingerprint"]


@pytest.mark.parametrize("error", [RuntimeError("disk full"), KeyboardInterrupt()])
def test_failed_build_leaves_the_folder_as_it_was(built, monkeypatch, error):
    before, siblings = snapshot(built), sorted(p.name for p in built.parent.iterdir())
    calls = []
    real_writer = publish.write_parquet

    def failing_writer(table, path):
        calls.append(path)
        if len(calls) == 2:  # the first shard is written, the second fails
            raise error
        real_writer(table, path)

    monkeypatch.setattr(publish, "write_parquet", failing_writer)
    with pytest.raises(type(error)):
        publish.build_config(built, "ambiguity", OTHER, progress=False)
    assert len(calls) == 2
    assert snapshot(built) == before
    assert sorted(p.name for p in built.parent.iterdir()) == siblings, "no staging folder is left behind"
    calls.clear()
    with pytest.raises(type(error)):
        publish.build_config(built.parent / "new" / "fresh", "ambiguity", OTHER, progress=False)
    assert not (built.parent / "new").exists(), "folders made for the output are removed too"


def test_next_build_cleans_up_after_a_killed_one(built):
    before = snapshot(built)
    # Killed while writing: a half-built staging folder is left beside DIR.
    (built.parent / ".data.building-abc123").mkdir()
    (built.parent / ".data.building-abc123" / "half.parquet").write_bytes(b"PAR1")
    publish.build_config(built, "ambiguity", OTHER, progress=False)
    assert sorted(p.name for p in built.parent.iterdir()) == ["data"]
    assert {k: v for k, v in snapshot(built).items() if k.startswith(SMALL.config_name())} == {
        k: v for k, v in before.items() if k.startswith(SMALL.config_name())
    }
    # Killed between the two renames of a swap: DIR is gone, the previous folder waits under its retired name.
    complete = snapshot(built)
    built.rename(built.parent / ".data.replaced-def456")
    (built.parent / ".data.building-def456").mkdir()
    publish.build_config(built, "ambiguity", OTHER, progress=False)  # the same config again: same bytes
    assert sorted(p.name for p in built.parent.iterdir()) == ["data"]
    assert snapshot(built) == complete


def test_builds_into_one_folder_take_turns(built):
    import fcntl
    import os
    import threading

    holder = os.open(built.parent, os.O_RDONLY)
    fcntl.flock(holder, fcntl.LOCK_EX)  # as a build in another process would
    done = []
    builder = threading.Thread(
        target=lambda: done.append(publish.build_config(built, "ambiguity", OTHER, progress=False))
    )
    builder.start()
    builder.join(timeout=2.0)
    assert builder.is_alive() and not done and not (built / OTHER.config_name()).exists()
    os.close(holder)
    builder.join(timeout=120)
    assert done and (built / OTHER.config_name() / "icot_config.json").is_file()


def test_folder_with_foreign_files_is_refused(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match=r"holds 'notes\.txt', which is not part of an hf_icot dataset; build into"):
        publish.build_config(tmp_path, "ambiguity", SMALL, progress=False)
    assert snapshot(tmp_path) == {"notes.txt": b"mine"}


def test_large_splits_are_sharded_and_still_load(tmp_path):
    record = publish.build_config(tmp_path / "d", "ambiguity", SMALL, progress=False, max_shard_bytes=1000)
    shards = [shard["file"] for shard in record["splits"]["train"]["shards"]]
    assert len(shards) > 1
    assert shards[0] == f"train-00000-of-{len(shards):05d}.parquet"
    loaded = datasets.load_dataset(str(tmp_path / "d"), SMALL.config_name(), split="train")
    assert loaded.to_list() == ambiguity.build(SMALL)["train"].to_list()


def test_card_states_every_config(built):
    publish.build_config(built, "ambiguity", OTHER, progress=False, license="mit")
    card = (built / "README.md").read_text()
    records = publish.read_configs(built)
    for name, record in records.items():
        section = card.split(f"### `{name}`")[1].split("### `")[0]
        assert record["fingerprint"] in section
        assert f"generator version {ambiguity.GENERATOR_VERSION}" in section
        assert f"* seed: {record['params']['seed']}" in section
        assert f"| `n_bases` | `{record['params']['n_bases']}` |" in section
        assert "the `test` split is the training set itself" in section
        assert f"| `train` | {record['splits']['train']['num_examples']} |" in section
        assert f"--n_bases {record['params']['n_bases']}" in section  # the rebuild command
    assert "* license: mit" in card.split(f"### `{OTHER.config_name()}`")[1]
    assert "license" not in card_yaml(built), "configs with different licenses give no repo-wide license"
    assert publish.render_card(built) == card, "the card is a function of the configs' metadata files"


def test_push_arrives_byte_for_byte_and_loads_from_the_hub(built, loopback_hub, tmp_path):  # noqa: F811
    publish.build_config(built, "reference_text", reference_text.Params(path=[str(_reference_folder(tmp_path))]))
    url = publish.push(built, "tester/icot-data", token=loopback_hub.token)
    assert url.startswith(f"{loopback_hub.url}/datasets/tester/icot-data/commit/")
    local = snapshot(built)
    assert loopback_hub.files("tester/icot-data") == local
    api = HfApi(token=loopback_hub.token)
    assert sorted(api.list_repo_files("tester/icot-data", repo_type="dataset")) == sorted(local)
    readme = hf_hub_download("tester/icot-data", "README.md", repo_type="dataset", token=loopback_hub.token)
    assert Path(readme).read_bytes() == local["README.md"]
    loaded = load_icot_dataset("tester/icot-data", "ref", truncation="step:left:1", split="validation")
    assert loaded["cot"] == [["+ 0 0 6 4 9 0 ( 5 5 1 1 1 1 )"], []]
    assert any(line.startswith("PUT /lfs-upload/") for line in loopback_hub.requests), "Parquet goes through LFS"


def _reference_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "ref"
    folder.mkdir()
    (folder / "valid.txt").write_text(
        "5 6 3 2 * 7 4 3 4||5 5 5 6 1 + 0 0 6 4 9 0 ( 5 5 1 1 1 1 ) #### 5 5 6 0 8 2 0 1\nHow much?||<<2+3=5>> #### 5\n"
    )
    return folder


def test_failed_push_leaves_the_folder_intact_and_can_be_retried(built, loopback_hub):  # noqa: F811
    before = snapshot(built)
    loopback_hub.fail(500, r"^POST /api/datasets/.*/commit/")
    with pytest.raises(publish.PushError) as info:
        publish.push(built, "tester/retry", token=loopback_hub.token)
    message = str(info.value)
    assert message.startswith(
        f"pushing {built} to tester/retry failed: the Hub at {loopback_hub.url} answered HTTP 500"
    )
    retry = f"python -m datasets_builder push {built} --repo tester/retry"
    assert message.endswith(f"the local folder is unchanged, so retry with `{retry}`.") and "\n" not in message
    assert snapshot(built) == before
    assert loopback_hub.files("tester/retry") == {}
    publish.push(built, "tester/retry", token=loopback_hub.token)
    assert loopback_hub.files("tester/retry") == before


@pytest.mark.parametrize(
    "fault",
    [
        FAULT_BY_NAME[name]
        for name in ("500 at LFS upload", "connection dropped mid-upload", "429 at commit, Retry-After 3")
    ],
    ids=lambda fault: fault.name,
)
def test_hub_faults_leave_the_dataset_folder_intact_and_the_retry_command_pushes(
    fault: PushFault,
    built,
    loopback_hub,  # noqa: F811
    backoff_waits,  # noqa: F811
    capsys,
    monkeypatch,
):
    from datasets_builder import cli

    monkeypatch.setenv("HF_TOKEN", loopback_hub.token)
    before = file_hashes(built)
    rule = fault.arm(loopback_hub, "datasets")
    assert cli.main(["push", str(built), "--repo", "tester/faulty"]) == 1
    # each Parquet file is an LFS upload of its own, retried on its own (in parallel threads)
    uploads = len(list(built.rglob("*.parquet"))) if fault.endpoint == "lfs_upload" else 1
    assert (rule.fired, sorted(backoff_waits)) == (uploads * fault.tries, sorted(uploads * fault.waits))
    err = capsys.readouterr().err
    retry = f"python -m datasets_builder push {built} --repo tester/faulty"
    expected = (
        f"python -m datasets_builder push: error: pushing {re.escape(str(built))} to tester/faulty failed: "
        f"{fault.clause(loopback_hub.url)}; the local folder is unchanged, so retry with `{re.escape(retry)}`\\.\n"
    )
    assert re.search(expected, err) and err.count("error:") == 1 and loopback_hub.token not in err, err
    assert file_hashes(built) == before
    assert loopback_hub.files("tester/faulty") == {}

    loopback_hub.recover()
    result = subprocess.run(
        [sys.executable, *shlex.split(retry)[1:]], capture_output=True, text=True, timeout=120, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert loopback_hub.files("tester/faulty") == snapshot(built)
    assert file_hashes(built) == before


def test_push_errors_are_one_sentence_without_the_token(built, loopback_hub):  # noqa: F811
    with pytest.raises(
        publish.PushError,
        match=r"refused the token \(HTTP 401\); check with `hf auth whoami` that it may write to tester/x; the local",
    ):
        publish.push(built, "tester/x", token="hf_wrong_secret_value")
    loopback_hub.fail(507, r"^PUT /lfs-upload/", times=None)  # 507 is not retried by the client
    with pytest.raises(
        publish.PushError, match=r"^pushing .* to tester/y failed: the Hub at .* answered HTTP 507"
    ) as info:
        publish.push(built, "tester/y", token=loopback_hub.token)
    assert loopback_hub.token not in str(info.value)
    loopback_hub.stop()
    with pytest.raises(
        publish.PushError, match=r"failed: the Hub at http://127\.0\.0\.1:\d+ could not be reached \(ConnectError\)"
    ):
        publish.push(built, "tester/z", token=loopback_hub.token)
    with pytest.raises(ValueError, match=r"^repo id 'not a repo' is not valid"):
        publish.push(built, "not a repo", token=loopback_hub.token)
    with pytest.raises(ValueError, match=r"is not a built dataset folder"):
        publish.push(built / SMALL.config_name(), "tester/z", token=loopback_hub.token)


def test_push_to_a_branch(built, loopback_hub):  # noqa: F811
    publish.push(built, "tester/branchy", revision="v1", token=loopback_hub.token)
    assert loopback_hub.files("tester/branchy", revision="v1") == snapshot(built)
    assert loopback_hub.files("tester/branchy") == {}


def test_push_in_offline_mode_says_so_in_a_sentence_that_fits_an_ordinary_path(tmp_path):
    # conftest sets HF_HUB_OFFLINE=1 for every test that does not ask for the loopback Hub
    folder = tmp_path / "a-project-folder" / "datasets" / "multiplication-4x4-with-ood-splits"
    publish.build_config(folder, "ambiguity", SMALL, progress=False)
    with pytest.raises(publish.PushError) as caught:
        publish.push(folder, "a-user-name/multiplication-4x4-icot", token="hf_whatever")
    message = f"python -m datasets_builder push: error: {caught.value}"  # as the command line prints it
    assert str(caught.value) == (
        f"cannot push {folder} to a-user-name/multiplication-4x4-icot: HF_HUB_OFFLINE is set; unset it and run the "
        "same command."
    )
    assert len(message) < 300, (len(str(folder)), len(message))


def test_build_into_the_current_folder(built, monkeypatch):
    monkeypatch.chdir(built)
    publish.build_config(".", "ambiguity", OTHER, progress=False)
    assert sorted(publish.read_configs(built)) == sorted([SMALL.config_name(), OTHER.config_name()])
    assert not list(built.parent.glob(".data.*")), "no staging folder is left behind"


def test_loopback_hub_serves_model_repos_too(loopback_hub, tmp_path):  # noqa: F811
    from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError

    api = HfApi(token=loopback_hub.token)
    api.create_repo("tester/model", private=True)
    weights = bytes(range(256)) * 4
    (tmp_path / "model.safetensors").write_bytes(weights)
    (tmp_path / "config.json").write_text("{}")
    loopback_hub.fail(507, r"^PUT /lfs-upload/", after=1)  # the second LFS upload fails, once
    api.upload_folder(repo_id="tester/model", folder_path=tmp_path)
    with pytest.raises(RuntimeError, match="Error while uploading 'more.bin'") as info:
        api.upload_file(path_or_fileobj=b"x" * 10, path_in_repo="more.bin", repo_id="tester/model")
    assert isinstance(info.value.__cause__, HfHubHTTPError) and info.value.__cause__.response.status_code == 507
    api.upload_file(path_or_fileobj=b"x" * 10, path_in_repo="more.bin", repo_id="tester/model")
    assert loopback_hub.files("tester/model", repo_type="model") == {
        "model.safetensors": weights,
        "config.json": b"{}",
        "more.bin": b"x" * 10,
    }
    assert api.model_info("tester/model").private is True
    path = hf_hub_download("tester/model", "model.safetensors", token=loopback_hub.token)
    assert Path(path).read_bytes() == weights
    with pytest.raises(RepositoryNotFoundError):
        HfApi(token=False).model_info("tester/model")  # private: invisible without a token


def test_same_config_name_from_other_parameters_needs_overwrite_or_a_new_name(tmp_path):
    from datasets_builder.tasks import multiplication

    def params(seed):
        return multiplication.Params(a_digits=2, b_digits=2, train_size=40, validation_size=5, test_size=5, seed=seed)

    out, config = tmp_path / "data", params(0).config_name()
    assert params(1).config_name() == config  # the name leaves out the seed
    publish.build_config(out, "multiplication", params(0), progress=False)
    before = snapshot(out)
    publish.build_config(out, "multiplication", params(0), progress=False)  # same parameters: rebuilt in place
    assert snapshot(out) == before
    with pytest.raises(ValueError, match=f"config '{config}' in .* was built from other parameters; pass --overwrite"):
        publish.build_config(out, "multiplication", params(1), progress=False)
    assert snapshot(out) == before
    first = snapshot(out / config)
    publish.build_config(out, "multiplication", params(1), progress=False, config_name="seed1")
    assert snapshot(out / config) == first
    assert publish.read_configs(out)["seed1"]["seed"] == 1 and publish.read_configs(out)[config]["seed"] == 0
    publish.build_config(out, "multiplication", params(1), progress=False, overwrite=True)
    assert publish.read_configs(out)[config]["seed"] == 1
