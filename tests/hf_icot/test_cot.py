"""The shared schema, the reference text line, and truncate."""

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from hf_icot.cot import (
    PLACEHOLDER_TOKEN,
    MalformedLineError,
    TruncationSpec,
    example_features,
    hint_token,
    parse_line,
    render_line,
    split_steps,
    truncate,
    truncate_example,
)
from tests.anchor_data import ANCHOR, missing_anchor_message

EXAMPLE = {"question": "1 2", "cot": ["a b", "c d e", "f"], "answer": "9", "cot_level": [1, 1, 2]}


def spec(text: str) -> TruncationSpec:
    return TruncationSpec.parse(text)


def test_features_have_the_core_columns_and_extras():
    features = example_features({"group": __import__("datasets").Value("string")}, with_levels=True)
    assert list(features) == ["question", "cot", "answer", "cot_level", "group"]


def test_anchor_data_is_present():
    assert len(list(ANCHOR.glob("*/*.txt"))) == 10, missing_anchor_message()


@pytest.mark.parametrize("path", sorted(ANCHOR.glob("*/*.txt")), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_anchor_line_round_trips(path):
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines
    for number, line in enumerate(lines, 1):
        assert render_line(parse_line(line, number)) == line


def test_step_splitting_of_the_reference_formats():
    assert split_steps("<<4-2=2>> <<2/.5=4>>") == ["<<4-2=2>>", "<<2/.5=4>>"]
    assert split_steps("5 5 + 0 0 6 ( 5 5 1 ) + 0 0 0 7") == ["5 5", "+ 0 0 6 ( 5 5 1 )", "+ 0 0 0 7"]
    assert split_steps("  ") == []
    assert split_steps("x y") == ["x", "y"]


@pytest.mark.parametrize(
    "line, message",
    [
        ("no separator #### 3", "0 '||' separators"),
        ("a||b||c #### 3", "2 '||' separators"),
        ("a||b c 3", "0 '####' markers"),
        ("  ||b #### 3", "empty question"),
    ],
)
def test_malformed_lines_name_the_line(line, message):
    with pytest.raises(MalformedLineError, match=f"line 7 has (an )?{message}"):
        parse_line(line, 7)


@pytest.mark.parametrize(
    "text, kept, removed",
    [
        ("none", ["a", "b", "c", "d", "e", "f"], 0),
        ("all", [], 6),
        ("left:2", ["c", "d", "e", "f"], 2),
        ("right:2", ["a", "b", "c", "d"], 2),
        ("left:6", [], 6),
        ("step:left:1", ["c", "d", "e", "f"], 2),
        ("step:right:1", ["a", "b", "c", "d", "e"], 1),
        ("step:stride:2", ["c", "d", "e"], 3),
        ("stride:3", ["c", "f"], 4),
        ("step:levels:1", ["a", "b", "c", "d", "e", "f"], 0),
        ("step:levels:2", ["f"], 5),
        ("step:levels:3", [], 6),
    ],
)
def test_truncate_removes_exactly_what_the_spec_says(text, kept, removed):
    out = truncate(EXAMPLE, spec(text))
    assert list(out.tokens) == kept
    assert out.removed == removed and out.total == 6 and out.kept == 6 - removed


def test_pad_keeps_positions_with_placeholders():
    out = truncate(EXAMPLE, spec("step:levels:2:pad"))
    assert out.tokens == (PLACEHOLDER_TOKEN,) * 5 + ("f",)
    assert out.positions == tuple(range(6)) and out.removed == 5


def test_keep_position_records_original_positions():
    out = truncate(EXAMPLE, spec("left:4:keep_position"))
    assert out.tokens == ("e", "f") and out.positions == (4, 5) and out.keep_position


def test_hint_counts_the_units_that_follow():
    assert truncate(EXAMPLE, spec("left:4:hint")).hint == hint_token(2)
    assert truncate(EXAMPLE, spec("step:left:1:hint")).hint == hint_token(2)
    assert truncate(EXAMPLE, spec("all:hint")).hint == hint_token(0)


def test_count_beyond_the_cot_raises_unless_saturating():
    with pytest.raises(ValueError, match="cannot remove 7 tokens from the left of a CoT of 6 tokens"):
        truncate(EXAMPLE, spec("left:7"))
    assert truncate(EXAMPLE, spec("left:7:saturate")).tokens == ()


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "is empty"),
        ("middle:3", "does not name what to remove"),
        ("left", "needs a count"),
        ("left:3:sideways", "unexpected part 'sideways'"),
        ("token:levels:2", "works on whole steps"),
        ("step:stride:0", "stride 0 is not allowed"),
    ],
)
def test_bad_specs_get_one_sentence(text, message):
    with pytest.raises(ValueError, match=message):
        spec(text)


def test_spec_string_round_trips():
    for text in ["token:none:drop", "step:levels:3:pad", "token:left:4:keep_position:hint:saturate"]:
        assert str(spec(text)) == text


def test_truncate_example_keeps_step_boundaries_and_levels():
    out = truncate_example(EXAMPLE, spec("left:3"))
    assert out["cot"] == ["d e", "f"] and out["cot_level"] == [1, 2]
    assert EXAMPLE["cot"] == ["a b", "c d e", "f"]  # pure: the input is untouched


@pytest.fixture(scope="module")
def bpe_tokenizer():
    """A tiny byte-level BPE tokenizer of the GPT-2 kind, trained offline."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(["12 + 34 ( 46 ) #### 4 6 multiply"] * 20, trainer)
    from tokenizers import decoders

    tok.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>")


def test_token_unit_counts_tokenizer_tokens(bpe_tokenizer):
    example = {"question": "q", "cot": ["12 + 34", "( 46 )"], "answer": "46"}
    full = truncate(example, spec("none"), bpe_tokenizer)
    expected = bpe_tokenizer.tokenize(" 12 + 34") + bpe_tokenizer.tokenize(" ( 46 )")
    assert list(full.tokens) == expected
    cut = truncate(example, spec("left:2"), bpe_tokenizer)
    assert list(cut.tokens) == expected[2:]
    text = truncate_example(example, spec("step:left:1"), bpe_tokenizer)
    assert text["cot"] == ["( 46 )"]
