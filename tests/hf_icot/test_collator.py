"""Encoding, labels, padding and position ids; BPE token counts; length checks."""

import datasets
import pytest
import torch

from hf_icot.cot import PLACEHOLDER_TOKEN, TruncationSpec, example_features, truncate
from hf_icot.curriculum.layout import SequenceLayout
from hf_icot.data.collator import ICoTCollator, PendingExamples
from hf_icot.data.encoding import IGNORE_INDEX, encode_example, encode_prompt, encode_text, split_generation
from hf_icot.data.tokenization import build_word_level_tokenizer, prepare_tokenizer_for_icot
from tests.hf_icot.tiny_task import tiny_bpe_tokenizer

EXAMPLES = [
    {"question": "1 2 * 3 4", "cot": ["3 6 + 4 8", "( 7 4 1 )"], "answer": "7 4 1"},
    {"question": "5 * 6", "cot": ["0 3"], "answer": "0 3"},
]


@pytest.fixture(scope="module")
def words():
    return build_word_level_tokenizer(EXAMPLES, max_hint_length=9)


@pytest.fixture(scope="module")
def bpe(tmp_path_factory):
    texts = [f"{ex['question']} {' '.join(ex['cot'])} #### {ex['answer']}" for ex in EXAMPLES] * 10
    texts += ["12 345 6789 1011 2468"] * 10
    tokenizer = tiny_bpe_tokenizer(texts, tmp_path_factory.mktemp("bpe"))
    return prepare_tokenizer_for_icot(tokenizer, max_hint_length=9, use_placeholder=True)


def ids(tokenizer, words_):
    return tokenizer.convert_tokens_to_ids(words_.split())


def test_encode_example_layout_labels_and_prompt_length(words):
    example = EXAMPLES[0]
    out = encode_example(example, truncate(example, TruncationSpec(which="left", count=2)), words)
    eos = words.eos_token_id
    expected = (
        ids(words, "1 2 * 3 4") + [eos] + ids(words, "+ 4 8 ( 7 4 1 )") + [eos] + ids(words, "#### 7 4 1") + [eos]
    )
    assert out["input_ids"] == expected
    assert out["prompt_length"] == 6
    assert out["labels"] == [IGNORE_INDEX] * 6 + expected[6:]
    assert out["position_ids"] == list(range(len(expected)))


def test_keep_position_and_hint(words):
    example = EXAMPLES[0]
    spec = TruncationSpec(which="left", count=3, fill="keep_position", hint=True)
    out = encode_example(example, truncate(example, spec), words)
    # question (5) + eos + hint, then CoT tokens 3.. at their untruncated positions 7 + 3 ...
    assert out["input_ids"][6] == words.convert_tokens_to_ids("<len_7>")
    assert out["labels"][:7] == [IGNORE_INDEX] * 7 and out["labels"][7] == out["input_ids"][7]
    assert out["position_ids"][:7] == list(range(7))
    assert out["position_ids"][7:14] == list(range(10, 17))  # the 7 kept CoT tokens
    assert out["position_ids"][14:] == list(range(17, 17 + 6))  # eos #### 7 4 1 eos
    padded = encode_example(example, truncate(example, TruncationSpec(which="left", count=3, fill="pad")), words)
    assert padded["input_ids"][6:9] == [words.convert_tokens_to_ids(PLACEHOLDER_TOKEN)] * 3
    assert len(padded["input_ids"]) == len(
        encode_example(example, truncate(example, TruncationSpec()), words)["input_ids"]
    )


def test_render_pads_right_and_masks_padding(words):
    collator = ICoTCollator(words)
    specs = [TruncationSpec(), TruncationSpec(which="all")]
    batch = collator.render(EXAMPLES, specs)
    long = encode_example(EXAMPLES[0], truncate(EXAMPLES[0], specs[0]), words)
    short = encode_example(EXAMPLES[1], truncate(EXAMPLES[1], specs[1]), words)
    width = len(long["input_ids"])
    assert batch["input_ids"].shape == (2, width) and "position_ids" not in batch
    assert batch["input_ids"][0].tolist() == long["input_ids"]
    n = len(short["input_ids"])
    assert batch["input_ids"][1, :n].tolist() == short["input_ids"]
    assert (batch["input_ids"][1, n:] == words.pad_token_id).all()
    assert (batch["labels"][1, n:] == IGNORE_INDEX).all() and batch["labels"][1, :n].tolist() == short["labels"]
    assert batch["attention_mask"].sum(1).tolist() == [width, n]
    kept = collator.render(EXAMPLES, [TruncationSpec(which="left", count=1, fill="keep_position")] * 2)
    assert kept["position_ids"][0, 6].item() == 7
    assert kept["position_ids"][1].tolist() == [0, 1, 2, 3, 5, 6, 7, 8, 9, 10] + [0] * 11  # padding gets 0


def test_prepared_and_unprepared_rendering_agree_and_collate_passes_examples(words, bpe):
    for tokenizer in (words, bpe):
        collator = ICoTCollator(tokenizer)
        dataset = datasets.Dataset.from_list(EXAMPLES, features=example_features())
        prepared, skipped = collator.prepare_dataset(dataset)
        assert skipped == 0 and prepared["example_id"] == [0, 1]
        raw = collator([prepared[0], prepared[1]])
        assert raw["example_id"].tolist() == [0, 1] and isinstance(raw["pending"], PendingExamples)
        specs = [TruncationSpec(which="right", count=2, fill="keep_position", saturate=True)] * 2
        fast = collator.render(raw["pending"].examples, specs)
        slow = collator.render(EXAMPLES, specs)
        assert all(torch.equal(fast[key], slow[key]) for key in slow)


def test_bpe_truncation_counts_bpe_tokens(bpe):
    example = {"question": "5 * 6", "cot": ["12 345", "6789 1011"], "answer": "2468"}
    tokens = bpe.tokenize(" 12 345") + bpe.tokenize(" 6789 1011")
    assert len(tokens) > 4  # BPE tokens, not words
    batch = ICoTCollator(bpe).render([example], [TruncationSpec(which="left", count=3)])
    eos = bpe.eos_token_id
    expected = (
        encode_text("5 * 6", bpe)
        + [eos]
        + bpe.convert_tokens_to_ids(tokens[3:])
        + [eos]
        + encode_text("#### 2468", bpe)
        + [eos]
    )
    assert batch["input_ids"][0].tolist() == expected


@pytest.mark.parametrize("which", ["words", "bpe"])
def test_prompts_and_split_generation_round_trip(which, words, bpe):
    tokenizer = words if which == "words" else bpe
    example = EXAMPLES[0]
    full = encode_example(example, truncate(example, TruncationSpec(), tokenizer), tokenizer)["input_ids"]
    prompt = encode_prompt(example["question"], tokenizer, "explicit")
    assert full[: len(prompt)] == prompt
    continuation = full[len(prompt) :] + [tokenizer.pad_token_id] * 3
    assert split_generation(continuation, tokenizer, "explicit") == ("3 6 + 4 8 ( 7 4 1 )", "7 4 1")
    implicit = encode_prompt(example["question"], tokenizer, "implicit")
    assert implicit == prompt + [tokenizer.eos_token_id]
    no_cot = encode_example(example, truncate(example, TruncationSpec(which="all")), tokenizer)["input_ids"]
    assert split_generation(no_cot[len(implicit) :], tokenizer, "implicit") == ("", "7 4 1")
    hinted = encode_prompt(example["question"], tokenizer, "hint", hint=3)
    assert hinted[-1] == tokenizer.convert_tokens_to_ids("<len_3>")
    assert split_generation(
        tokenizer.convert_tokens_to_ids(["<|endoftext|>"] if which == "bpe" else ["<eos>"]), tokenizer, "explicit"
    ) == ("", "")


def test_encoding_errors_are_one_clear_sentence(words):
    with pytest.raises(ValueError, match=r"cannot represent '9' \(in '1 9'\)"):
        encode_text("1 9", words)
    with pytest.raises(ValueError, match=r"cannot represent '1 <unk>': it holds the unknown token '<unk>' itself"):
        encode_text("1 <unk>", words)
    with pytest.raises(ValueError, match="prompt mode 'cot' is unknown"):
        encode_prompt("1 2", words, "cot")
    with pytest.raises(ValueError, match="hint mode needs a CoT length hint >= 0"):
        encode_prompt("1 2", words, "hint")
    with pytest.raises(ValueError, match="no token '<len_40>'"):
        encode_prompt("1 2", words, "hint", hint=40)
    bad = datasets.Dataset.from_list([EXAMPLES[0], {"question": "5 * 6", "cot": ["9"], "answer": "0"}])
    with pytest.raises(ValueError, match="example 1: the tokenizer cannot represent '9'"):
        ICoTCollator(words).prepare_dataset(bad)


def test_too_long_sequences_error_or_are_skipped(words):
    collator = ICoTCollator(words)
    dataset = datasets.Dataset.from_list(EXAMPLES, features=example_features())
    # Example 0: 5 + 1 + 10 + 1 + 4 + 1 = 22 tokens; example 1: 3 + 1 + 2 + 1 + 3 + 1 = 11.
    with pytest.raises(ValueError, match=r"example 0 is 22 tokens long .* context of 20; .* too_long='skip'"):
        collator.prepare_dataset(dataset, max_length=20)
    prepared, skipped = collator.prepare_dataset(dataset, max_length=20, too_long="skip")
    assert skipped == 1 and prepared["example_id"] == [1]
    _, skipped = collator.prepare_dataset(dataset, max_length=22)
    assert skipped == 0
    with pytest.raises(ValueError, match="example 0 is 23 tokens"):  # the hint needs one more position
        collator.prepare_dataset(dataset, max_length=22, layout=SequenceLayout(hint=True))
