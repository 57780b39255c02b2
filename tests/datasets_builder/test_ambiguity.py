"""The ambiguity task: (B, z) -> A is a function with globally unique targets, D = K * n_b, test == train."""

import math
from collections import Counter, defaultdict

import pytest

from datasets_builder.tasks import ambiguity


def _entropy(counts: Counter) -> float:
    total = sum(counts.values())
    return -sum(c / total * math.log(c / total) for c in counts.values())


@pytest.mark.parametrize("direction", ambiguity.DIRECTIONS)
def test_invariants(direction):
    params = ambiguity.Params(n_bases=30, k=5, direction=direction, seed=3)
    dataset = ambiguity.build(params)
    train, test = dataset["train"].to_list(), dataset["test"].to_list()

    assert list(dataset) == ["train", "test"]
    assert len(train) == params.k * params.n_bases == 150
    assert test == train  # a memorisation task evaluates on its training set

    targets = {}
    for row in train:
        a_text = " ".join(row["question"].split()[:4]) if direction in ("az_to_b", "a_to_b") else row["answer"]
        target = a_text.replace(" ", "")
        b, z = row["group"], row["selector"]
        assert len(b) == 6 and len(z) == 2 and len(target) == 4
        assert set(b + z + target) <= set(ambiguity.ALPHABET)
        assert row["cot"] == []
        if direction == "bz_to_a":
            assert row["question"] == " ".join(b + z) and row["answer"] == " ".join(target)
        elif direction == "az_to_b":
            assert row["question"] == " ".join(target + z) and row["answer"] == " ".join(b)
        elif direction == "a_to_b":  # the study's A -> B: A alone, answer its B
            assert row["question"] == " ".join(target) and row["answer"] == " ".join(b)
        else:
            assert row["question"] == " ".join(b) and row["answer"] == " ".join(target)
        assert (b, z) not in targets, "each (B, z) cell appears once"
        targets[(b, z)] = target

    assert len(set(targets.values())) == len(targets), "every target A is globally unique"
    assert len({z for _, z in targets}) == params.k, "the K selectors are shared by all bases"
    answers_of_base = defaultdict(set)
    for (b, _), target in targets.items():
        answers_of_base[b].add(target)
    assert len(answers_of_base) == params.n_bases
    assert all(len(answers) == params.k for answers in answers_of_base.values())

    # H(A|B) = log K and H(A|B,z) = 0, measured on the rows
    h_a_given_b = sum(_entropy(Counter(answers)) for answers in answers_of_base.values()) / params.n_bases
    assert h_a_given_b == pytest.approx(math.log(params.k))
    per_cell = Counter((row["group"], row["selector"]) for row in train)
    assert set(per_cell.values()) == {1}


def test_same_seed_same_rows_other_seed_other_rows():
    rows = ambiguity.build(ambiguity.Params(n_bases=20, k=3, seed=1))["train"].to_list()
    assert ambiguity.build(ambiguity.Params(n_bases=20, k=3, seed=1))["train"].to_list() == rows
    assert ambiguity.build(ambiguity.Params(n_bases=20, k=3, seed=2))["train"].to_list() != rows


def test_config_name_and_card():
    params = ambiguity.Params(n_bases=20, k=3, direction="az_to_b", seed=7, target_length=5)
    assert params.config_name() == "az_to_b_b20_k3_seed7_len6x2x5"
    details = ambiguity.card_details(params)
    assert "training set itself" in details["evaluation set"]
    assert details["examples"].endswith("= 60")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"k": 0}, r"^k=0 is not allowed; it must be at least 1\.$"),
        ({"n_bases": 0}, r"^n_bases=0 is not allowed; it must be at least 1\.$"),
        ({"k": 1297}, r"^k=1297 is larger than the 1296 distinct selectors of 2 characters; use k <= 1296"),
        ({"n_bases": 37, "base_length": 1}, r"^n_bases=37 is larger than the 36 distinct bases of 1 characters"),
        (
            {"n_bases": 40, "k": 40, "target_length": 2},
            r"^k \* n_bases = 1600 targets do not fit in the 1296 distinct",
        ),
        ({"direction": "ab"}, r"^direction 'ab' is unknown; allowed: bz_to_a, az_to_b, b_to_a, a_to_b\.$"),
    ],
)
def test_bad_params_raise_one_sentence(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ambiguity.Params(**kwargs)


def test_distinct_first_chars_make_the_first_target_token_carry_log_k():
    params = ambiguity.Params(n_bases=200, k=36, distinct_first_chars=True, seed=5)
    rows = ambiguity.build(params)["train"].to_list()
    firsts = defaultdict(list)
    for row in rows:
        firsts[row["group"]].append(row["answer"].split()[0])
    assert all(sorted(chars) == sorted(ambiguity.ALPHABET) for chars in firsts.values())
    assert len({row["answer"] for row in rows}) == len(rows) == 7200, "targets stay globally unique"
    assert params.config_name() == "bz_to_a_b200_k36_seed5_distinct_first"
    assert "distinct among the K targets" in ambiguity.card_details(params)["first target characters"]
    # without the option, some base has two targets with one first character (birthday bound: near certain at K=10)
    free = ambiguity.build(ambiguity.Params(n_bases=50, k=10, seed=5))["train"].to_list()
    by_base = defaultdict(list)
    for row in free:
        by_base[row["group"]].append(row["answer"][0])
    assert any(len(set(chars)) < len(chars) for chars in by_base.values())


def test_distinct_first_chars_refuse_more_than_36_targets_per_base():
    with pytest.raises(ValueError, match=r"^k=37 targets cannot start with distinct characters of the 36-character"):
        ambiguity.Params(k=37, distinct_first_chars=True)
    with pytest.raises(ValueError, match=r"more targets starting with .* use a longer target_length\.$"):
        # 36 one-character targets fit in all, but bases drawing their first characters freely reuse one
        ambiguity.build(ambiguity.Params(n_bases=36, k=1, target_length=1, base_length=1, distinct_first_chars=True))


def test_a_to_b_is_unambiguous_and_k_questions_share_each_answer():
    rows = ambiguity.build(ambiguity.Params(n_bases=25, k=4, direction="a_to_b", seed=2))["train"].to_list()
    answer_of = {row["question"]: row["answer"] for row in rows}
    assert len(answer_of) == len(rows) == 100, "each question A appears once: A -> B is a function"
    assert all(len(row["question"].split()) == 4 for row in rows), "no selector in the question"
    assert set(Counter(answer_of.values()).values()) == {4}, "each B answers its K = 4 targets"
    assert all(row["answer"] == " ".join(row["group"]) for row in rows)
