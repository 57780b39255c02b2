"""load_icot_dataset: loads a published folder, truncates CoT with the one truncation function, validates names."""

import re

import pytest

from datasets_builder import publish
from datasets_builder.tasks import reference_text
from hf_icot.cot import TruncationSpec, truncate_example
from hf_icot.data import load_icot_dataset

LINES = {
    "valid": [
        "5 6 3 2 * 7 4 3 4||5 5 5 6 1 + 0 0 6 4 9 0 ( 5 5 1 1 1 1 ) + 0 0 5 9 0 7 0 #### 5 5 6 0 8 2 0 1",
        "Tom has 3 apples and buys 2 more.||<<3+2=5>> <<5*1=5>> #### 5",
    ],
    "test": ["6 9 * 6 4||6 7 3 + 0 4 8 2 #### 6 1 2 3"],
}


@pytest.fixture
def folder(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    for stem, lines in LINES.items():
        (source / f"{stem}.txt").write_text("\n".join(lines) + "\n")
    out = tmp_path / "published"
    publish.build_config(out, "reference_text", reference_text.Params(path=[str(source)], config="mixed"))
    return out


def test_loads_every_split_unchanged_without_truncation(folder):
    loaded = load_icot_dataset(str(folder), "mixed")
    assert sorted(loaded) == ["test", "validation"]
    assert loaded["validation"]["cot"] == [
        ["5 5 5 6 1", "+ 0 0 6 4 9 0 ( 5 5 1 1 1 1 )", "+ 0 0 5 9 0 7 0"],
        ["<<3+2=5>>", "<<5*1=5>>"],
    ]


@pytest.mark.parametrize(
    "truncation, expected",
    [
        ("step:all", [[], []]),
        ("step:left:1", [["+ 0 0 6 4 9 0 ( 5 5 1 1 1 1 )", "+ 0 0 5 9 0 7 0"], ["<<5*1=5>>"]]),
        ("step:right:2:hint", [["<len_1>", "5 5 5 6 1"], ["<len_0>"]]),
        (
            TruncationSpec(unit="token", which="left", count=2),
            [["5 6 1", "+ 0 0 6 4 9 0 ( 5 5 1 1 1 1 )", "+ 0 0 5 9 0 7 0"], []],
        ),
    ],
)
def test_truncation_matches_truncate_example(folder, truncation, expected):
    full = load_icot_dataset(str(folder), "mixed", split="validation")
    truncated = load_icot_dataset(str(folder), "mixed", truncation=truncation, split="validation")
    assert truncated["cot"] == expected
    spec = TruncationSpec.parse(truncation) if isinstance(truncation, str) else truncation
    assert truncated.to_list() == [truncate_example(row, spec) for row in full]
    assert truncated["question"] == full["question"] and truncated["answer"] == full["answer"]
    assert truncated.features == full.features


def test_bad_names_and_counts_raise_one_sentence(folder, tmp_path):
    with pytest.raises(ValueError, match=r"^config 'other' is not in '.*published'; available: mixed\.$"):
        load_icot_dataset(str(folder), "other")
    with pytest.raises(ValueError, match=r"^split 'train' is not in config 'mixed'; available: test, validation\.$"):
        load_icot_dataset(str(folder), "mixed", split="train")
    with pytest.raises(ValueError, match=r"^validation example 1: cannot remove 3 steps from the left of a CoT of 2"):
        load_icot_dataset(str(folder), "mixed", truncation="step:left:3", split="validation")
    with pytest.raises(ValueError, match=r"^truncation spec 'sideways' does not name what to remove"):
        load_icot_dataset(str(folder), "mixed", truncation="sideways")
    with pytest.raises(ValueError, match=r"^no dataset found at '.*nowhere'"):
        load_icot_dataset(str(tmp_path / "nowhere"), "mixed")
    saturated = load_icot_dataset(str(folder), "mixed", truncation="step:left:3:saturate", split="validation")
    assert saturated["cot"] == [[], []]


def test_an_evaluation_split_comes_from_a_text_file_or_a_published_dataset(tmp_path):
    from datasets_builder import publish, registry
    from hf_icot.cot import render_line
    from hf_icot.data import read_evaluation_split

    params = registry.make_params("parity", n_bits=8, k=2, train_size=20, validation_size=5, test_size=6, seed=3)
    folder = tmp_path / "parity"
    publish.build_config(folder, "parity", params, progress=False)
    built = registry.get_task("parity").build(params)
    config = params.config_name()
    for source in (f"{folder}:test", f"{folder}:{config}:test"):
        split = read_evaluation_split(source)
        assert [render_line(row) for row in split] == [render_line(row) for row in built["test"]]
    text = tmp_path / "valid.txt"
    text.write_text("".join(render_line(row) + "\n" for row in built["validation"]))
    assert read_evaluation_split(str(text))["question"] == built["validation"]["question"]
    with pytest.raises(
        ValueError, match=rf"^split 'dev' is not in '{re.escape(str(folder))}:dev'; it has train, validation, test\.$"
    ):
        read_evaluation_split(f"{folder}:dev")
    with pytest.raises(ValueError, match=rf"config 'nope' is not in '{re.escape(str(folder))}'"):
        read_evaluation_split(f"{folder}:nope:test")
    with pytest.raises(ValueError, match=r"evaluation file 'missing\.txt' does not exist"):
        read_evaluation_split("missing.txt")


def test_a_file_rewritten_with_other_rows_and_the_same_size_and_time_is_read_anew(tmp_path):
    import os

    import pyarrow.parquet as pq

    out = tmp_path / "published"
    source = tmp_path / "source"
    source.mkdir()
    (source / "test.txt").write_text("1 2 * 3 4||5 6 #### 7 8\n")
    publish.build_config(out, "reference_text", reference_text.Params(path=[str(source)], config="one"))
    (path,) = (out / "one").glob("test*.parquet")
    assert load_icot_dataset(str(out), "one", split="test")["answer"] == ["7 8"]
    table = pq.read_table(path)
    stat = path.stat()
    pq.write_table(table.set_column(table.schema.get_field_index("answer"), "answer", [["9 9"]]), path)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # as `cp -p`, `rsync -t` or an unpacked archive leave it
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (stat.st_size, stat.st_mtime_ns)
    assert load_icot_dataset(str(out), "one", split="test")["answer"] == ["9 9"]


def test_a_cut_short_parquet_file_is_named_in_one_sentence(folder):
    (path,) = (folder / "mixed").glob("test*.parquet")
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(ValueError) as caught:
        load_icot_dataset(str(folder), "mixed")
    message = str(caught.value)
    assert message.startswith(f"{str(path)!r} is cut short or is not a Parquet file (")
    assert message.endswith(
        "no Parquet footer); copy it again or rebuild the dataset with `python -m datasets_builder build`."
    )
    assert len(message) < 300 + len(str(path))
