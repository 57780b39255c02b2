"""hf_icot.data.answer_only: <bos> B <sep> z <sep> A <eos>, loss on A and the final <eos> only."""

import pytest

from datasets_builder import build_dataset
from hf_icot.data.answer_only import (
    answer_only_tokenizer,
    encode_answer_only,
    encode_answer_only_example,
    selectors_shown,
)


@pytest.fixture(scope="module")
def ambiguity():
    dataset, _ = build_dataset("ambiguity", {"n_bases": 5, "k": 3, "seed": 2})
    return dataset


def test_the_study_layout_labels_the_answer_and_final_eos_only(ambiguity):
    tokenizer = answer_only_tokenizer(ambiguity)
    row = encode_answer_only(ambiguity["train"], tokenizer)[0]
    words = tokenizer.convert_ids_to_tokens(row["input_ids"])
    base, selector, answer = list(row["group"]), list(row["selector"]), row["answer"].split()
    assert words == ["<bos>", *base, "<sep>", *selector, "<sep>", *answer, "<eos>"]
    labelled = [tokenizer.convert_ids_to_tokens(t) for t in row["labels"] if t != -100]
    assert labelled == [*answer, "<eos>"]
    assert row["labels"][: 3 + len(base) + len(selector)] == [-100] * (3 + len(base) + len(selector))
    assert [words[i] for i in row["selector_positions"]] == selector
    assert row["selector_positions"] == [8, 9]


def test_a_hidden_selector_leaves_one_separator():
    dataset, _ = build_dataset("ambiguity", {"n_bases": 4, "k": 2, "direction": "b_to_a"})
    tokenizer = answer_only_tokenizer(dataset)
    row = dataset["train"][0]
    encoded = encode_answer_only_example(row, tokenizer)
    words = tokenizer.convert_ids_to_tokens(encoded["input_ids"])
    assert words == ["<bos>", *row["group"], "<sep>", *row["answer"].split(), "<eos>"]
    assert encoded["selector_positions"] == []


def test_a_to_b_is_the_study_a_sep_b_and_a_hidden_selector_is_decided_per_dataset():
    dataset, _ = build_dataset("ambiguity", {"n_bases": 6, "k": 3, "direction": "a_to_b"})
    train = dataset["train"]
    tokenizer = answer_only_tokenizer(dataset)
    # a question whose last characters happen to spell its hidden selector is not taken for one that shows it
    row = dict(train[0])
    row["question"] = " ".join(row["question"].split()[:2] + list(row["selector"]))
    mimic = train.select(range(1, len(train))).add_item(row)
    assert not selectors_shown(mimic)
    encoded = encode_answer_only(mimic, tokenizer)
    for example in encoded:
        words = tokenizer.convert_ids_to_tokens(example["input_ids"])
        assert words == ["<bos>", *example["question"].split(), "<sep>", *example["group"], "<eos>"]
        assert example["selector_positions"] == []
        assert [t for t in example["labels"] if t != -100] == tokenizer.convert_tokens_to_ids(
            [*example["group"], "<eos>"]
        )


@pytest.mark.parametrize(
    "example, message",
    [
        ({"question": "a b", "cot": ["c"], "answer": "d"}, r"has a chain of thought \(1 steps\); the answer-only"),
        ({"question": "a b", "cot": [], "answer": "%"}, r"has words the tokenizer does not know"),
    ],
)
def test_bad_examples_are_refused_with_one_sentence(ambiguity, example, message):
    with pytest.raises(ValueError, match=message):
        encode_answer_only_example(example, answer_only_tokenizer(ambiguity))
