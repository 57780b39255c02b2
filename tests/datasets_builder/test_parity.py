"""The sparse-parity builder: answers and every CoT step against a direct computation, layouts, splits, errors."""

import pytest

from datasets_builder.tasks import parity
from datasets_builder.tasks.parity import Params, build, secret_support
from hf_icot.cot import example_features


def xor(bits):
    value = 0
    for bit in bits:
        value ^= bit
    return value


def expected_steps(bits, support, layout):
    """The CoT (values, levels) computed bit by bit with plain Python."""
    secret = [bits[i] for i in support]
    if layout == "chain":
        return [xor(secret[: j + 1]) for j in range(1, len(secret))], [1] * (len(secret) - 1)
    values, levels, level, current = [], [], 1, secret
    while len(current) > 1:
        current = [current[i] ^ current[i + 1] for i in range(0, len(current), 2)]
        values += current
        levels += [level] * len(current)
        level += 1
    return values, levels


@pytest.mark.parametrize(
    ("n_bits", "k", "layout"), [(12, 5, "chain"), (12, 8, "tree"), (70, 16, "tree"), (9, 1, "chain")]
)
def test_every_step_and_answer_match_a_direct_computation(n_bits, k, layout):
    params = Params(n_bits=n_bits, k=k, cot_layout=layout, train_size=200, validation_size=20, test_size=20, seed=4)
    support = secret_support(params)
    assert len(support) == k and support == sorted(set(support)) and all(0 <= i < n_bits for i in support)
    data = build(params)
    assert data["train"].features == example_features(with_levels=True)
    for split in data.values():
        for row in split:
            bits = [int(t) for t in row["question"].split(" ")]
            assert len(bits) == n_bits and set(bits) <= {0, 1}
            values, levels = expected_steps(bits, support, layout)
            assert row["cot"] == [str(v) for v in values]
            assert row["cot_level"] == levels
            assert len(row["cot"]) == k - 1
            assert row["answer"] == str(xor(bits[i] for i in support))


def test_tree_levels_shape():
    params = Params(n_bits=16, k=16, cot_layout="tree", train_size=10, validation_size=1, test_size=1)
    assert parity.cot_levels(params) == [1] * 8 + [2] * 4 + [3] * 2 + [4]


def test_splits_disjoint_and_small_space_exhausted():
    data = build(Params(n_bits=6, k=3, train_size=54, validation_size=5, test_size=5, seed=2))
    questions = [q for split in data.values() for q in split["question"]]
    assert len(questions) == 64 == len(set(questions))
    with pytest.raises(ValueError, match="65 examples were asked for but only 64 distinct inputs of 6 bits"):
        Params(n_bits=6, k=3, train_size=55, validation_size=5, test_size=5)


def test_large_space_splits_disjoint():
    data = build(Params(n_bits=80, k=4, train_size=2000, validation_size=100, test_size=100, seed=9))
    seen = set()
    for split in data.values():
        questions = set(split["question"])
        assert len(questions) == len(split) and seen.isdisjoint(questions)
        seen |= questions


def test_inputs_look_uniform():
    data = build(Params(n_bits=20, k=8, train_size=20_000, validation_size=10, test_size=10, seed=1))
    bits = [int(t) for q in data["train"]["question"][:5000] for t in q.split(" ")]
    assert abs(sum(bits) / len(bits) - 0.5) < 0.01
    answers = [int(a) for a in data["train"]["answer"]]
    assert abs(sum(answers) / len(answers) - 0.5) < 0.02


def test_deterministic_to_the_parquet_byte_and_seed_dependent(tmp_path):
    params = Params(n_bits=24, k=4, cot_layout="tree", train_size=300, validation_size=10, test_size=10, seed=7)
    first, second = build(params), build(params)
    for split in first:
        assert first[split].to_list() == second[split].to_list()
    first["train"].to_parquet(tmp_path / "a.parquet")
    second["train"].to_parquet(tmp_path / "b.parquet")
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()
    other = Params(n_bits=24, k=4, cot_layout="tree", train_size=300, validation_size=10, test_size=10, seed=8)
    assert build(other)["train"]["question"] != first["train"]["question"]
    assert secret_support(Params(seed=0)) == secret_support(Params(seed=0, train_size=5))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_bits": 0}, "n_bits=0 is not allowed; use n_bits >= 2"),
        ({"n_bits": 1, "k": 1, "train_size": 1, "validation_size": 1, "test_size": 1}, "n_bits=1 is not allowed"),
        ({"n_bits": 4, "k": 5, "train_size": 3}, "k=5 is not allowed; the secret needs 1 <= k <= n_bits=4 positions"),
        ({"k": 0}, "k=0 is not allowed"),
        ({"k": 6, "cot_layout": "tree"}, "k=6 is not a power of two; the tree layout"),
        ({"cot_layout": "graph"}, "cot_layout='graph' is unknown; allowed: chain, tree"),
        ({"validation_size": 0}, "validation_size=0 is not allowed; each split needs at least 1 example"),
        ({"seed": -3}, "seed=-3 is not allowed"),
        ({"n_bits": 10, "k": 2}, "102000 examples were asked for but only 1024 distinct inputs of 10 bits"),
    ],
)
def test_bad_params_raise_one_clear_sentence(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Params(**kwargs)


def test_contract_surface():
    params = Params(n_bits=20, k=8, cot_layout="chain", seed=0)
    assert parity.TASK_NAME == "parity"
    assert params.config_name() == "parity_n20_k8_chain"
    details = parity.card_details(params)
    assert details["secret support (0-based positions, ascending)"] == ", ".join(map(str, secret_support(params)))
