"""A byte-level BPE's prepared columns by distinct words (hf_icot.data.word_pieces) against the row-by-row path
(``ICoTCollator._tokenize_rows``, every text through the tokenizer): the same values in both sequence formats, and the
row path wherever a word needs the tokenizer."""

from __future__ import annotations

import datasets
import pytest
from transformers import AutoTokenizer

from datasets_builder.tasks import multiplication
from hf_icot.cot import PLACEHOLDER_TOKEN, example_features, render_line
from hf_icot.curriculum.layout import SequenceLayout
from hf_icot.data.collator import ICoTCollator
from hf_icot.data.tokenization import build_word_level_tokenizer, prepare_tokenizer_for_icot
from hf_icot.data.word_pieces import splits_at_spaces
from tests.recipes.conftest import save_tiny_gpt2

FORMATS = ("reference", "hf_icot")
# Words GPT-2's split cuts inside (letters next to digits, apostrophes, commas), commas the reference removes from
# answers, and words with more than one piece.
ODD_ROWS = [
    {"question": "it's a1 b,2 , 1,234", "cot": ["x1 + y2", "( 1,2 )"], "answer": "1,234"},
    {"question": "12 * 34", "cot": ["408"], "answer": "4,08"},
    {"question": "!? ... ###", "cot": ["a", "bb", "ccc"], "answer": "####"},
]


@pytest.fixture(scope="module")
def data() -> datasets.Dataset:
    # More rows than one map batch (1,000), so the second batch is a slice of the table.
    return multiplication.build(multiplication.Params(a_digits=4, b_digits=4, train_size=1200, seed=3))["train"]


@pytest.fixture(scope="module")
def bpe(tmp_path_factory, data):
    texts = [render_line(example) for example in data.select(range(200))]
    texts += [f"{row['question']} {' '.join(row['cot'])} {row['answer']}" for row in ODD_ROWS] * 5
    tokenizer = AutoTokenizer.from_pretrained(save_tiny_gpt2(tmp_path_factory.mktemp("bpe"), tokenizer_texts=texts))
    return prepare_tokenizer_for_icot(tokenizer, max_hint_length=3, use_placeholder=True)


def by_rows(collator: ICoTCollator, dataset: datasets.Dataset) -> dict[str, list]:
    return dataset.map(collator._tokenize_rows, batched=True, with_indices=True, remove_columns=dataset.column_names)[
        :
    ]


def by_columns(collator: ICoTCollator, dataset: datasets.Dataset) -> dict[str, list]:
    prepared = collator.prepare_dataset(dataset)[0]
    return prepared.select_columns([name for name in prepared.column_names if name not in dataset.column_names])[:]


@pytest.mark.parametrize("sequence_format", FORMATS)
def test_columns_by_words_give_the_row_path_values_on_multiplication(bpe, data, sequence_format):
    collator = ICoTCollator(bpe, SequenceLayout(sequence_format=sequence_format))
    assert splits_at_spaces(bpe)
    table = data.with_format("arrow")[:50]
    assert collator._columns_by_words(table, list(range(50))) is not None  # the column path is the one taken
    columns = by_columns(collator, data)
    assert columns == {name: values for name, values in by_rows(collator, data).items() if name in columns}


@pytest.mark.parametrize("sequence_format", FORMATS)
def test_odd_words_and_the_row_path_fallback_give_the_same_values(bpe, sequence_format):
    collator = ICoTCollator(bpe, SequenceLayout(sequence_format=sequence_format))
    odd = datasets.Dataset.from_list(ODD_ROWS, features=example_features())
    assert collator._columns_by_words(odd.with_format("arrow")[:], [0, 1, 2]) is not None
    assert by_columns(collator, odd) == by_rows(collator, odd)
    # A placeholder inside a question (an added token), a non-ASCII word, a double space, and in the reference
    # format a row without CoT and an answer whose removed comma leaves a double space each send their batch down
    # the row path: still the same values.
    reference = sequence_format == "reference"
    for row, falls_back in (
        ({"question": f"1 {PLACEHOLDER_TOKEN} 2", "cot": ["3"], "answer": "4"}, True),
        ({"question": "é 1", "cot": ["3"], "answer": "4"}, True),
        ({"question": "1  2", "cot": ["3"], "answer": "4"}, True),
        ({"question": "1 2", "cot": [], "answer": "4"}, reference),
        ({"question": "1 2", "cot": ["3"], "answer": "4 , 08"}, reference),
    ):
        mixed = datasets.Dataset.from_list([*ODD_ROWS, row], features=example_features())
        taken = collator._columns_by_words(mixed.with_format("arrow")[:], [0, 1, 2, 3])
        assert (taken is None) == falls_back, row
        assert by_columns(collator, mixed) == by_rows(collator, mixed), row


def test_word_level_and_non_byte_level_tokenizers_do_not_take_the_word_path(bpe):
    assert not splits_at_spaces(build_word_level_tokenizer(ODD_ROWS))
    assert ICoTCollator(build_word_level_tokenizer(ODD_ROWS))._word_pieces is None
