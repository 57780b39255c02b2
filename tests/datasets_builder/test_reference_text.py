"""The reference text task: anchor files round-trip byte for byte; malformed lines are reported, never dropped."""

import datasets
import pytest

from datasets_builder import publish
from datasets_builder.tasks import reference_text
from hf_icot.cot import render_line
from tests.anchor_data import ANCHOR, missing_anchor_message

ANCHOR_FOLDERS = sorted(path.name for path in ANCHOR.iterdir() if path.is_dir()) if ANCHOR.is_dir() else []

LINES = [
    "5 6 3 2 * 7 4 3 4||5 5 5 6 1 + 0 0 6 4 9 0 ( 5 5 1 1 1 1 ) #### 5 5 6 0 8 2 0 1",
    "How much is 2 + 3?||<<2+3=5>> #### 5",
]


def test_anchor_folders_are_present():
    assert ANCHOR_FOLDERS == ["4_by_4_mult", "5_by_5_mult", "7_by_7_mult", "9_by_9_mult", "gsm8k"], (
        missing_anchor_message()
    )


@pytest.mark.parametrize("folder", ANCHOR_FOLDERS)
def test_every_anchor_file_round_trips_byte_for_byte(folder, tmp_path):
    """Text -> Parquet in Hub format -> load_dataset -> render_line gives every anchor file back exactly."""
    params = reference_text.Params(path=[str(ANCHOR / folder)])
    publish.build_config(tmp_path, "reference_text", params, progress=False)
    dataset = datasets.load_dataset(str(tmp_path), folder)
    assert params.config_name() == folder
    for split, file in params.split_files().items():
        rendered = "".join(render_line(row) + "\n" for row in dataset[split])
        assert rendered.encode("utf-8") == file.read_bytes()
    expected_splits = {"validation", "test"}
    assert set(dataset) == expected_splits
    if folder == "gsm8k":
        first = dataset["validation"][0]
        assert first["cot"] == ["<<4-2=2>>", "<<2/.5=4>>", "<<12/4=3>>", "<<100*3=300>>"]
        assert first["answer"] == "300"


def test_split_names_config_name_and_card(tmp_path):
    folder = tmp_path / "my-data"
    folder.mkdir()
    (folder / "valid.txt").write_text(LINES[0] + "\n")
    (folder / "test_bigbench.txt").write_text(LINES[1] + "\n")
    (folder / "train.txt").write_text("\n".join(LINES) + "\n")
    (tmp_path / "LICENSE").write_text("MIT License\n\nCopyright ...\n")
    params = reference_text.Params(path=[str(folder)])
    assert list(params.split_files()) == ["test", "train", "validation"]
    assert params.config_name() == "my_data"
    assert reference_text.Params(path=[str(folder)], config="mine").config_name() == "mine"
    dataset = reference_text.build(params)
    assert [render_line(row) for row in dataset["train"]] == LINES
    details = reference_text.card_details(params)
    assert details["source license"].startswith("MIT License")
    assert details["source of train"].startswith("my-data/train.txt (sha256 ")


def test_malformed_lines_are_reported_with_file_and_line(tmp_path):
    good, bad = LINES[0], "no separators here"
    lines = [good, bad, good, "", good, "a||b #### c #### d"]
    (tmp_path / "valid.txt").write_text("\n".join(lines) + "\n")
    params = reference_text.Params(path=[str(tmp_path / "valid.txt")])
    with pytest.raises(
        ValueError, match=r"^3 malformed line\(s\) at valid\.txt:2, valid\.txt:4, valid\.txt:6; "
    ) as info:
        reference_text.build(params)
    assert "line 2 has 0 '||' separators" in str(info.value)


def test_many_malformed_lines_are_counted(tmp_path):
    (tmp_path / "test.txt").write_text("bad\n" * 9)
    with pytest.raises(ValueError, match=r"^9 malformed line\(s\) at test\.txt:1, .*test\.txt:5 and 4 more; "):
        reference_text.build(reference_text.Params(path=[str(tmp_path)]))


def test_bad_paths_raise_one_sentence(tmp_path):
    with pytest.raises(ValueError, match=r"^path is empty; give at least one file or folder"):
        reference_text.Params()
    with pytest.raises(ValueError, match=r"^path '.*nowhere' does not exist; give an existing file or folder\.$"):
        reference_text.Params(path=[str(tmp_path / "nowhere")])
    with pytest.raises(ValueError, match=r"^folder '.*' holds no \.txt files"):
        reference_text.Params(path=[str(tmp_path)])
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "test.txt").write_text(LINES[0] + "\n")
    (tmp_path / "b" / "test.txt").write_text(LINES[0] + "\n")
    with pytest.raises(ValueError, match=r"^files '.*a/test\.txt' and '.*b/test\.txt' both give split 'test'\.$"):
        reference_text.Params(path=[str(tmp_path / "a"), str(tmp_path / "b")])
    with pytest.raises(ValueError, match=r"^config 'a-b' is not a valid config name"):
        reference_text.Params(path=[str(tmp_path / "a")], config="a-b")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9||x #### y\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"^file '.*latin1\.txt' is not UTF-8 text \(byte 3\)"):
        reference_text.build(reference_text.Params(path=[str(tmp_path / "latin1.txt")]))
