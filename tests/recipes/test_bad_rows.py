"""Bad rows in a dataset folder given with ``--dataset_name_or_path`` are refused before training, in one sentence
naming the split, the row and the column: a missing column, a ``cot`` that is not a list of strings, an empty answer,
and a word a word-level tokenizer does not know."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.recipes.conftest import RECIPE, REPO, recipe_args, run_recipe

SCRATCH = ["--scratch_model", '{"n_layer": 1, "n_embd": 16, "n_head": 2}']


@pytest.fixture(scope="module")
def good_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """2x2 multiplication (48 / 8 / 8 rows) as ``python -m datasets_builder build`` writes it."""
    from datasets_builder import publish, registry

    folder = tmp_path_factory.mktemp("data") / "mult"
    params = registry.make_params("multiplication", a_digits=2, b_digits=2, train_size=48, validation_size=8,
                                  test_size=8, seed=0)  # fmt: skip
    publish.build_config(folder, "multiplication", params, progress=False)
    return folder


def broken(good: Path, tmp_path: Path, split: str, change: Callable[[pa.Table], pa.Table]) -> Path:
    """A copy of ``good`` whose ``split`` Parquet file is ``change(table)``, named after the test (``datasets`` keys
    its cache on the folder's name and its files' times, which the copy keeps)."""
    folder = tmp_path / tmp_path.name
    shutil.copytree(good, folder)
    (path,) = (folder / "mult_2x2").glob(f"{split}-*.parquet")
    pq.write_table(change(pq.read_table(path)), path)
    return folder


def replaced(table: pa.Table, column: str, row: int, value: object) -> pa.Table:
    values = table.column(column).to_pylist()
    values[row] = value
    return table.set_column(
        table.schema.get_field_index(column), column, pa.array(values, table.schema.field(column).type)
    )


def refusal(argv: list[str]) -> str:
    """The recipe's one-sentence refusal of ``argv``, raised before any training (no run folder written)."""
    output = Path(argv[argv.index("--output_dir") + 1])
    with pytest.raises(ValueError) as caught:
        run_recipe(argv)
    assert not output.exists() or not any(output.iterdir()), "nothing trained or saved"
    return str(caught.value)


def scratch_run(folder: Path, output: Path) -> list[str]:
    argv = recipe_args("unused", output, "--save_strategy", "no")
    at = argv.index("--task")
    argv[at : at + 4] = ["--dataset_name_or_path", str(folder)]
    at = argv.index("--model_name_or_path")
    argv[at : at + 2] = SCRATCH
    return argv


def test_a_split_without_a_required_column_is_refused(good_folder: Path, tmp_path: Path) -> None:
    folder = broken(good_folder, tmp_path, "validation", lambda table: table.drop_columns(["answer"]))
    assert refusal(scratch_run(folder, tmp_path / "run")) == (
        "split 'validation' has no column 'answer' (it is missing or empty in every row); every split needs question "
        "(text), cot (a list of strings) and answer (text)."
    )


def test_a_cot_that_is_not_a_list_of_strings_is_refused(good_folder: Path, tmp_path: Path) -> None:
    def as_text(table: pa.Table) -> pa.Table:
        text = pa.array([" ".join(steps) for steps in table.column("cot").to_pylist()])
        return table.set_column(table.schema.get_field_index("cot"), "cot", text)

    folder = broken(good_folder, tmp_path, "train", as_text)
    assert refusal(scratch_run(folder, tmp_path / "run")) == (
        "split 'train' row 0, column 'cot' holds string, not a list of strings; give each example's CoT as a list of "
        "steps (an empty list for none)."
    )


def test_an_empty_answer_is_refused_through_the_command_line(good_folder: Path, tmp_path: Path) -> None:
    folder = broken(good_folder, tmp_path, "train", lambda table: replaced(table, "answer", 5, " "))
    result = subprocess.run(
        [sys.executable, str(RECIPE), *scratch_run(folder, tmp_path / "run")], capture_output=True, text=True,
        cwd=REPO, timeout=300, env={"PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "error: split 'train' row 5, column 'answer' is empty; every example needs an answer."
    )


def test_a_word_the_word_level_tokenizer_does_not_know_is_refused(good_folder: Path, tmp_path: Path) -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    from hf_icot.data import load_icot_dataset
    from hf_icot.data.tokenization import build_word_level_tokenizer

    model_folder = tmp_path / "word_level_model"  # a model trained from scratch: its vocabulary is its data's words
    tokenizer = build_word_level_tokenizer(load_icot_dataset(str(good_folder), "mult_2x2"))
    tokenizer.save_pretrained(model_folder)
    GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_layer=1, n_embd=16, n_head=2)).save_pretrained(
        model_folder
    )
    folder = broken(good_folder, tmp_path, "test", lambda table: replaced(table, "question", 3, "1 2 * 3 7x"))
    argv = scratch_run(folder, tmp_path / "run")
    at = argv.index("--scratch_model")
    argv[at : at + 2] = ["--model_name_or_path", str(model_folder)]
    assert refusal(argv) == (
        "split 'test' row 3, column 'question' has the word '7x', which the word-level tokenizer does not know (it "
        "would become <unk>); give a model whose tokenizer was built from this data, or train one from scratch "
        "(--scratch_model)."
    )


def test_the_unknown_token_as_a_word_of_a_question_is_refused_before_training(
    good_folder: Path, tmp_path: Path
) -> None:
    folder = broken(good_folder, tmp_path, "test", lambda table: replaced(table, "question", 3, "1 2 * 3 <unk>"))
    assert refusal(scratch_run(folder, tmp_path / "run")) == (
        "split 'test' row 3, column 'question' has the word '<unk>', the tokenizer's unknown token, which could not be "
        "told from a word the tokenizer lacks; write it otherwise in the data."
    )


def test_a_cut_short_parquet_file_is_named_before_training(good_folder: Path, tmp_path: Path) -> None:
    folder = tmp_path / "copy"
    shutil.copytree(good_folder, folder)
    (path,) = (folder / "mult_2x2").glob("train-*.parquet")
    size = path.stat().st_size
    path.write_bytes(path.read_bytes()[: size // 2])  # a copy cut short
    message = refusal(scratch_run(folder, tmp_path / "run"))
    assert message == (
        f"{str(path)!r} is cut short or is not a Parquet file ({size // 2} bytes, no Parquet footer); copy it again or "
        "rebuild the dataset with `python -m datasets_builder build`."
    )
    assert len(message) - len(str(path)) < 200
