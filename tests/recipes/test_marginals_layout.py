"""The answer-only layout: <bos> B <sep> z <sep> A <eos>, loss on A and the final <eos> only."""

import pytest
from marginals_layout import answer_only_tokenizer, encode_answer_only, encode_answer_only_example

from datasets_builder import build_dataset


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
