"""The multiplication builder: reference lines byte for byte, any digit count against big-int arithmetic, splits."""

import random

import pytest

from datasets_builder.tasks import multiplication
from datasets_builder.tasks.multiplication import Params, build, multiplication_example
from hf_icot.cot import example_features, render_line
from tests.anchor_data import ANCHOR, missing_anchor_message

ANCHOR_FILES = [(d, f) for d in (4, 5, 7, 9) for f in ("valid.txt", "test_bigbench.txt")]


def operands(question: str) -> tuple[int, int]:
    """The two operands of a question written digit by digit, least significant first."""
    left, right = question.split(" * ")
    return int("".join(left.split())[::-1]), int("".join(right.split())[::-1])


def reversed_digits(value: int, width: int) -> str:
    text = str(value).zfill(width)
    assert len(text) == width, f"{value} does not fit in {width} digits"
    return " ".join(text[::-1])


def expected_example(a: int, b: int, a_digits: int, b_digits: int) -> dict:
    """The reference format computed with Python integers, independently of the builder."""
    b_digit = [int(c) for c in str(b)[::-1]]
    cot, running = [], 0
    for i, digit in enumerate(b_digit):
        partial = a * digit * 10**i
        running += partial
        width = a_digits + 1 + i
        if i == 0:
            cot.append(reversed_digits(partial, width))
        elif i < b_digits - 1:
            cot.append(f"+ {reversed_digits(partial, width)} ( {reversed_digits(running, width)} )")
        else:
            cot.append(f"+ {reversed_digits(partial, width)}")
    assert running == a * b
    question = f"{' '.join(str(a)[::-1])} * {' '.join(str(b)[::-1])}"
    return {"question": question, "cot": cot, "answer": reversed_digits(a * b, a_digits + b_digits)}


@pytest.mark.parametrize(("digits", "filename"), ANCHOR_FILES)
def test_reference_files_regenerate_byte_for_byte(digits, filename):
    path = ANCHOR / f"{digits}_by_{digits}_mult" / filename
    assert path.is_file(), missing_anchor_message()
    text = path.read_text()
    lines = text.splitlines()
    assert len(lines) == 1000
    regenerated = [
        render_line(multiplication_example(*operands(line.split("||")[0]), digits, digits)) for line in lines
    ]
    assert "\n".join(regenerated) + "\n" == text


@pytest.mark.parametrize(("a_digits", "b_digits"), [(1, 1), (2, 3), (3, 2), (1, 5), (6, 6), (12, 12), (25, 3)])
def test_any_digit_count_matches_big_int_arithmetic(a_digits, b_digits):
    rng = random.Random(a_digits * 100 + b_digits)
    for _ in range(20):
        a = rng.randrange(10 ** (a_digits - 1), 10**a_digits)
        b = rng.randrange(10 ** (b_digits - 1), 10**b_digits)
        assert multiplication_example(a, b, a_digits, b_digits) == expected_example(a, b, a_digits, b_digits)


def test_edge_operands_round_trip():
    assert multiplication_example(9, 9, 1, 1) == {"question": "9 * 9", "cot": ["1 8"], "answer": "1 8"}
    big = 10**30 - 1
    example = multiplication_example(big, big, 30, 30)
    assert example == expected_example(big, big, 30, 30)


@pytest.mark.parametrize(("a_digits", "b_digits"), [(3, 2), (20, 20)])
def test_build_rows_are_correct_and_splits_disjoint(a_digits, b_digits):
    params = Params(a_digits=a_digits, b_digits=b_digits, train_size=300, validation_size=40, test_size=60, seed=3)
    data = build(params)
    assert {name: len(split) for name, split in data.items()} == {"train": 300, "validation": 40, "test": 60}
    assert data["train"].features == example_features()
    seen = set()
    for split in data.values():
        questions = split["question"]
        assert len(set(questions)) == len(questions)
        assert seen.isdisjoint(questions)
        seen.update(questions)
        for row in split:
            a, b = operands(row["question"])
            assert 10 ** (a_digits - 1) <= a < 10**a_digits and 10 ** (b_digits - 1) <= b < 10**b_digits
            assert row == expected_example(a, b, a_digits, b_digits)


def test_small_space_is_used_exactly_and_overflow_raises():
    data = build(Params(a_digits=1, b_digits=1, train_size=71, validation_size=5, test_size=5))
    pairs = {operands(q) for split in data.values() for q in split["question"]}
    assert pairs == {(a, b) for a in range(1, 10) for b in range(1, 10)}
    with pytest.raises(ValueError, match="82 examples were asked for but only 81 distinct operand pairs"):
        Params(a_digits=1, b_digits=1, train_size=72, validation_size=5, test_size=5)


def test_build_is_deterministic_to_the_parquet_byte(tmp_path):
    params = Params(a_digits=4, b_digits=4, train_size=500, validation_size=20, test_size=20, seed=11)
    first, second = build(params), build(params)
    for split in first:
        assert first[split].to_list() == second[split].to_list()
    first["train"].to_parquet(tmp_path / "a.parquet")
    second["train"].to_parquet(tmp_path / "b.parquet")
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()
    other = build(Params(a_digits=4, b_digits=4, train_size=500, validation_size=20, test_size=20, seed=12))
    assert other["train"]["question"] != first["train"]["question"]


def test_test_split_does_not_move_when_train_grows():
    small = build(Params(a_digits=4, b_digits=4, train_size=100, validation_size=10, test_size=30, seed=5))
    large = build(Params(a_digits=4, b_digits=4, train_size=100_000, validation_size=10, test_size=30, seed=5))
    assert small["test"].to_list() == large["test"].to_list()
    assert large["train"]["question"][:100] == small["train"]["question"]


def test_progress_bar_reports_chunks(capsys):
    build(Params(a_digits=2, b_digits=2, train_size=50, validation_size=5, test_size=5), progress=True)
    assert "building train" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"a_digits": 0}, "a_digits=0 is not allowed; an operand needs at least 1 digit"),
        ({"b_digits": -2}, "b_digits=-2 is not allowed"),
        ({"train_size": 0}, "train_size=0 is not allowed; each split needs at least 1 example"),
        ({"test_size": -1}, "test_size=-1 is not allowed"),
        ({"seed": -1}, "seed=-1 is not allowed; use an integer >= 0"),
        ({"a_digits": 2, "b_digits": 2}, "810000 examples were asked for but only 8100 distinct operand pairs"),
    ],
)
def test_bad_params_raise_one_clear_sentence(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Params(**kwargs)


def test_example_rejects_operands_of_the_wrong_length():
    with pytest.raises(ValueError, match=r"a=99 is not a 3-digit number; it must lie in \[100, 1000\)"):
        multiplication_example(99, 5, 3, 1)
    with pytest.raises(ValueError, match=r"b=0 is not a 1-digit number"):
        multiplication_example(123, 0, 3, 1)


def test_contract_surface():
    params = Params(a_digits=5, b_digits=3)
    assert multiplication.TASK_NAME == "multiplication"
    assert params.config_name() == "mult_5x3"
    details = multiplication.card_details(params)
    assert "[10000, 99999]" in details["operands"] and details["chain of thought steps"] == "3"
