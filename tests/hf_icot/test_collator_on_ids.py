"""The batch-wide cut on prepared ids gives exactly the tensors of the example-by-example truncate-and-encode path."""

import random

import datasets
import pytest
import torch

from hf_icot.cot import PLACEHOLDER_TOKEN, TruncationSpec, example_features
from hf_icot.curriculum.layout import SequenceLayout
from hf_icot.data.collator import ICoTCollator
from hf_icot.data.tokenization import build_word_level_tokenizer
from tests.hf_icot.tiny_task import tiny_bpe_tokenizer

WORDS = [f"w{i}" for i in range(12)]


def ragged_examples(n=64, seed=0):
    """Questions, CoTs (0-4 steps of 1-3 tokens) and answers of varied lengths, so every part pads differently."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        words = lambda lo, hi: " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))  # noqa: E731
        rows.append(
            {"question": words(1, 6), "cot": [words(1, 3) for _ in range(rng.randint(0, 4))], "answer": words(1, 3)}
        )
    return datasets.Dataset.from_list(rows, features=example_features())


def prepared(layout=None):
    data = ragged_examples()
    tokenizer = build_word_level_tokenizer(data, max_hint_length=12, extra_tokens=[PLACEHOLDER_TOKEN])
    collator = ICoTCollator(tokenizer, layout)
    return collator, collator.prepare_dataset(data)[0]


def example_by_example(collator, examples, specs):
    truncated = collator.truncate_batch(examples, specs)
    return collator.encode_batch(examples, truncated), [cut.kept for cut in truncated]


def cut_on_ids_as_example_by_example(collator, examples, specs):
    """Render on the prepared ids (asserting that path is taken) and check it gives the example path's tensors and
    kept counts; the fast path's batch and counts."""
    assert collator._on_ids(examples, specs)
    fast, fast_kept = collator.render_counted(examples, specs)
    slow, slow_kept = example_by_example(collator, examples, specs)
    assert fast.keys() == slow.keys() and fast_kept == slow_kept
    for key in slow:
        assert torch.equal(fast[key], slow[key]), key
    return fast, fast_kept


@pytest.mark.parametrize("seed", range(8))
def test_cut_on_ids_equals_truncate_and_encode(seed):
    collator, data = prepared()
    rng = random.Random(seed)
    examples = [data[i] for i in rng.sample(range(len(data)), 16)]
    fills = [["drop"], ["keep_position"], ["pad"], ["drop", "keep_position", "pad"]][seed % 4]
    specs = [
        TruncationSpec(
            "token", rng.choice(["none", "all", "left", "right"]), rng.randint(0, 12), rng.choice(fills), saturate=True
        )
        for _ in examples
    ]
    _, fast_kept = cut_on_ids_as_example_by_example(collator, examples, specs)
    assert sum(fast_kept) > 0


def test_other_specs_take_the_example_path_with_the_same_result():
    collator, data = prepared()
    examples = [data[i] for i in range(4)]
    for spec in [
        TruncationSpec("token", "left", 1, "drop", hint=True, saturate=True),
        TruncationSpec("step", "left", 1, "drop", saturate=True),
        TruncationSpec("token", "stride", 2, "drop"),
    ]:
        assert not collator._on_ids(examples, [spec] * 4), spec
        batch, kept = collator.render_counted(examples, [spec] * 4)
        reference, reference_kept = example_by_example(collator, examples, [spec] * 4)
        assert all(torch.equal(batch[key], reference[key]) for key in reference) and kept == reference_kept
    bare = [{key: value for key, value in example.items() if key != "cot_ids"} for example in examples]
    assert not collator._on_ids(bare, [TruncationSpec()] * 4)  # a dataset prepared before cot_ids existed


def one_token_steps(n=48, seed=0):
    """Tree-like CoTs: 0-7 steps of one token each, with levels 1-3 (Log-ICoT's ``cot_level``)."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        steps = rng.randint(0, 7)
        rows.append(
            {
                "question": " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6))),
                "cot": [rng.choice(WORDS) for _ in range(steps)],
                "cot_level": sorted(rng.randint(1, 3) for _ in range(steps)),
                "answer": rng.choice(WORDS),
            }
        )
    return datasets.Dataset.from_list(rows, features=example_features(with_levels=True))


@pytest.mark.parametrize("seed", range(4))
def test_steps_of_one_token_cut_on_ids_as_example_by_example(seed):
    data = one_token_steps(seed=seed)
    tokenizer = build_word_level_tokenizer(data, max_hint_length=12, extra_tokens=[PLACEHOLDER_TOKEN])
    collator = ICoTCollator(tokenizer)
    prepared_data = collator.prepare_dataset(data)[0]
    rng = random.Random(seed)
    examples = [prepared_data[i] for i in range(32)]
    specs = [
        TruncationSpec("step", "levels", rng.randint(1, 4), rng.choice(["pad", "drop", "keep_position"]))
        if rng.random() < 0.6
        else TruncationSpec(
            "step", rng.choice(["none", "all", "left", "right"]), rng.randint(0, 8), "pad", saturate=True
        )
        for _ in examples
    ]
    fast, _ = cut_on_ids_as_example_by_example(collator, examples, specs)
    assert (fast["input_ids"] == collator.placeholder_id).any()


def test_padding_without_a_placeholder_token_raises_the_example_paths_error(tmp_path):
    data = ragged_examples()
    texts = [f"{row['question']} {' '.join(row['cot'])} #### {row['answer']}" for row in data]
    collator = ICoTCollator(tiny_bpe_tokenizer(texts, tmp_path / "bpe"))  # no placeholder token
    examples = [row for row in collator.prepare_dataset(data)[0] if row["n_cot_tokens"] > 0][:4]
    spec = TruncationSpec("token", "left", 1, "pad", saturate=True)
    assert collator.placeholder_id is None and not collator._on_ids(examples, [spec] * 4)
    with pytest.raises(ValueError, match="cannot represent the CoT token '<cot_pad>'"):
        collator.render_counted(examples, [spec] * 4)


def test_a_count_beyond_the_cot_still_raises_truncates_error():
    collator, data = prepared()
    example = next(data[i] for i in range(len(data)) if 0 < data[i]["n_cot_tokens"] < 5)
    with pytest.raises(ValueError, match=r"cannot remove 9 tokens from the left of a CoT of \d tokens"):
        collator.render_counted([example], [TruncationSpec("token", "left", 9, "drop")])


def test_prepared_cot_ids_are_the_tokens_ids():
    collator, data = prepared()
    for row in data.select(range(8)):
        tokens = [token for step in row["cot_tokens"] for token in step.split()]
        assert row["cot_ids"] == collator.tokenizer.convert_tokens_to_ids(tokens)
    assert not ICoTCollator(collator.tokenizer, SequenceLayout())._on_ids([], [])


@pytest.mark.parametrize("fill", ["drop", "keep_position"])
def test_the_reference_format_cuts_on_ids_as_example_by_example(tmp_path, fill):
    data = ragged_examples(n=48, seed=3)
    texts = [f"{row['question']} {' '.join(row['cot'])} #### {row['answer']}" for row in data]
    layout = SequenceLayout(fill=fill, sequence_format="reference")
    collator = ICoTCollator(tiny_bpe_tokenizer(texts, tmp_path / "bpe"), layout)
    prepared_data = collator.prepare_dataset(data, layout=layout)[0]
    rng = random.Random(0)
    examples = [prepared_data[i] for i in range(24)]
    specs = [
        TruncationSpec("token", rng.choice(["none", "all", "left", "right"]), rng.randint(0, 10), fill, saturate=True)
        for _ in examples
    ]
    cut_on_ids_as_example_by_example(collator, examples, specs)
