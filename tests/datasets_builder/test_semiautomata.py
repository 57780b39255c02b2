"""The semiautomaton builder: every state against an independent run, OOD laws really biased, splits, table checks."""

import json

import numpy as np
import pytest

from datasets_builder.tasks import semiautomata
from datasets_builder.tasks.semiautomata import Params, build, card_details
from hf_icot.cot import example_features

# A machine with tokens of different widths (exercises the non-fixed-width text path) that is not a group.
TURNSTILE = {
    "states": ["locked", "open", "jam"],
    "inputs": ["coin", "push", "kick"],
    "start": "locked",
    "transitions": {
        "locked": {"coin": "open", "push": "locked", "kick": "jam"},
        "open": {"coin": "open", "push": "locked", "kick": "open"},
        "jam": {"coin": "jam", "push": "jam", "kick": "locked"},
    },
}


def write_table(tmp_path, table, name="machine.json"):
    path = tmp_path / name
    path.write_text(json.dumps(table))
    return str(path)


def all_rows(data):
    return [(split, row) for split in data for row in data[split]]


def assert_splits_disjoint(data):
    seen = set()
    for split in data.values():
        questions = set(split["question"])
        assert len(questions) == len(split), "a split repeats an input sequence"
        assert seen.isdisjoint(questions), "two splits share an input sequence"
        seen |= questions


def test_counter_states_match_modular_counting():
    data = build(Params(kind="counter", modulus=3, length=20, train_size=300, test_size=50, ood_size=50, seed=1))
    assert set(data) == {"train", "test", "test_ood_p0_1", "test_ood_p0_9"}
    assert data["train"].features == example_features()
    for _, row in all_rows(data):
        state, expected = 0, []
        for symbol in row["question"].split(" "):
            assert symbol in ("0", "1")
            state = (state + int(symbol)) % 3
            expected.append(str(state))
        assert row["cot"] == expected and row["answer"] == expected[-1]
    assert_splits_disjoint(data)


def test_counter_with_two_digit_states():
    data = build(Params(kind="counter", modulus=12, length=40, train_size=100, test_size=10, ood_p=[0.5], ood_size=10))
    for _, row in all_rows(data):
        assert int(row["answer"]) == row["question"].split(" ").count("1") % 12
        assert len(row["cot"]) == 40


def test_states_per_step_groups_the_same_states_into_steps():
    params = dict(kind="counter", modulus=7, length=12, train_size=200, test_size=20, ood_size=20, seed=3)
    single, grouped = build(Params(**params)), build(Params(**params, states_per_step=4))
    assert Params(**params, states_per_step=4).config_name() == "counter_c7_t12_s4"
    assert Params(**params).config_name() == "counter_c7_t12"
    for split in single:
        assert grouped[split]["question"] == single[split]["question"]
        assert grouped[split]["answer"] == single[split]["answer"]
        for one, four in zip(single[split]["cot"], grouped[split]["cot"]):
            assert len(four) == 3
            assert four == [" ".join(one[i : i + 4]) for i in range(0, 12, 4)]
    assert card_details(Params(**params, states_per_step=4))["CoT steps"] == "3 steps of 4 states"
    assert "CoT steps" not in card_details(Params(**params))


def compose(state, element):
    """state ∘ element on one-line tuples: apply element first."""
    return tuple(state[element[x]] for x in range(3))


def test_s3_states_match_composing_permutation_tuples():
    data = build(
        Params(kind="s3", length=12, train_size=300, test_size=50, ood_size=40, ood_weights=["hot=9,1,1,1,1,1"])
    )
    assert set(data) == {"train", "test", "test_ood_hot"}
    for _, row in all_rows(data):
        state, expected = (0, 1, 2), []
        for token in row["question"].split(" "):
            state = compose(state, tuple(int(c) for c in token))
            expected.append("".join(map(str, state)))
        assert row["cot"] == expected and row["answer"] == expected[-1]
    assert_splits_disjoint(data)


def test_s3_convention_on_a_worked_example():
    machine = semiautomata.symmetric_group_s3()
    ids = {name: i for i, name in enumerate(machine.inputs)}
    states = machine.run(np.array([[ids["120"], ids["021"]]]))
    # 120 then 021: x -> 120[021[x]], so 0 -> 1, 1 -> 0, 2 -> 2.
    assert [machine.states[s] for s in states[0]] == ["120", "102"]


def test_table_machine_with_uneven_token_widths(tmp_path):
    path = write_table(tmp_path, TURNSTILE, "turn-stile.json")
    params = Params(
        kind="table", table_path=path, length=9, train_size=200, test_size=30, ood_size=30, ood_weights=["kicky=1,1,8"]
    )
    assert params.config_name() == "table_turn_stile_t9"
    data = build(params)
    for _, row in all_rows(data):
        state, expected = "locked", []
        for symbol in row["question"].split(" "):
            state = TURNSTILE["transitions"][state][symbol]
            expected.append(state)
        assert row["cot"] == expected and row["answer"] == expected[-1]
    assert_splits_disjoint(data)
    details = card_details(params)
    assert json.loads(details["transition table"]) == TURNSTILE["transitions"]
    assert "test_ood_kicky" in details["splits"]


def test_cayley_table_of_a_group(tmp_path):
    names = ["e", "a", "a2", "a3"]
    table = {
        "states": names,
        "inputs": names,
        "start": "e",
        "transitions": {x: {y: names[(i + j) % 4] for j, y in enumerate(names)} for i, x in enumerate(names)},
    }
    data = build(Params(kind="table", table_path=write_table(tmp_path, table), length=7, train_size=100, test_size=20))
    for _, row in all_rows(data):
        total = sum(names.index(t) for t in row["question"].split(" "))
        assert row["answer"] == names[total % 4]


def test_ood_splits_are_really_biased():
    params = Params(kind="counter", length=200, train_size=400, test_size=100, ood_size=400, ood_p=[0.2, 0.7])
    data = build(params)

    def increment_rate(split):
        symbols = [s for q in data[split]["question"] for s in q.split(" ")]
        return symbols.count("1") / len(symbols)

    assert abs(increment_rate("train") - 0.5) < 0.01
    assert abs(increment_rate("test_ood_p0_2") - 0.2) < 0.01
    assert abs(increment_rate("test_ood_p0_7") - 0.7) < 0.01

    skewed = build(
        Params(kind="s3", length=60, train_size=100, test_size=20, ood_size=200, ood_weights=["hot=10,1,1,1,1,1"])
    )
    tokens = [t for q in skewed["test_ood_hot"]["question"] for t in q.split(" ")]
    assert abs(tokens.count("012") / len(tokens) - 10 / 15) < 0.02


def test_ood_excludes_train_and_test_in_a_crowded_space():
    # 1024 sequences, 900 taken by train and test: every OOD draw must avoid them.
    data = build(Params(kind="counter", length=10, train_size=800, test_size=100, ood_size=50, ood_p=[0.3, 0.6]))
    assert_splits_disjoint(data)
    assert sum(len(split) for split in data.values()) == 1000


def test_deterministic_to_the_parquet_byte(tmp_path):
    params = Params(
        kind="s3", length=8, train_size=300, test_size=30, ood_size=30, ood_weights=["a=1,2,3,4,5,6"], seed=5
    )
    first, second = build(params), build(params)
    assert list(first) == list(second)
    for split in first:
        assert first[split].to_list() == second[split].to_list()
        first[split].to_parquet(tmp_path / f"{split}_1.parquet")
        second[split].to_parquet(tmp_path / f"{split}_2.parquet")
        assert (tmp_path / f"{split}_1.parquet").read_bytes() == (tmp_path / f"{split}_2.parquet").read_bytes()
    other = build(
        Params(kind="s3", length=8, train_size=300, test_size=30, ood_size=30, ood_weights=["a=1,2,3,4,5,6"], seed=6)
    )
    assert other["train"]["question"] != first["train"]["question"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kind": "dfa"}, "kind='dfa' is unknown; allowed: counter, cyclic, s3, table"),
        ({"modulus": 1}, "modulus=1 is not allowed; C_n needs at least 2 states"),
        ({"kind": "table"}, "kind='table' needs table_path"),
        ({"table_path": "x.json"}, "table_path='x.json' is only used with kind='table'"),
        ({"length": 0}, "length=0 is not allowed; a question needs at least 1 input symbol"),
        ({"length": 10, "states_per_step": 4}, "states_per_step=4 is not allowed; use an integer >= 1 that divides"),
        ({"states_per_step": 0}, "states_per_step=0 is not allowed"),
        ({"train_size": 0}, "train_size=0 is not allowed; each split needs at least 1 example"),
        ({"ood_size": -1}, "ood_size=-1 is not allowed"),
        ({"seed": -1}, "seed=-1 is not allowed"),
        ({"ood_p": [1.5]}, r"ood_p value 1.5 is not allowed; an increment probability lies in \(0, 1\)"),
        ({"ood_p": [0.0]}, "ood_p value 0.0 is not allowed"),
        ({"ood_p": [0.1, 0.1]}, r"out-of-distribution splits \['test_ood_p0_1'\] are given twice"),
        ({"ood_weights": ["bad name=1,1"]}, "ood_weights entry 'bad name=1,1' is not 'name=w1,w2,...'"),
        ({"ood_weights": ["w=1"]}, r"ood_weights entry 'w=1' has 1 weights; give one per input \(2: 0 1\)"),
        ({"ood_weights": ["w=1,-1"]}, "weights must be finite, >= 0 and not all zero"),
        ({"ood_weights": ["w=0,0"]}, "weights must be finite, >= 0 and not all zero"),
        ({"ood_weights": ["w=a,b"]}, "has a weight that is not a number"),
        ({"kind": "s3", "ood_weights": ["w=1,1"]}, r"has 2 weights; give one per input \(6:"),
        (
            {"length": 3, "train_size": 5, "test_size": 2, "ood_size": 1},
            "9 examples were asked for but only 8 distinct",
        ),
    ],
)
def test_bad_params_raise_one_clear_sentence(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Params(**kwargs)


def test_concentrated_law_that_cannot_fill_its_split_raises():
    params = Params(kind="counter", length=8, train_size=20, test_size=10, ood_size=200, ood_p=[0.001])
    with pytest.raises(
        ValueError, match="distinct input sequences turned up in .* draws from this input law, fewer than"
    ):
        build(params)


def broken(**changes):
    table = json.loads(json.dumps(TURNSTILE))
    for key, value in changes.items():
        if value is None:
            del table[key]
        else:
            table[key] = value
    return table


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (broken(start=None), "has keys .*; a table is an object with exactly states, inputs, start, transitions"),
        (broken(extra=1), "has keys"),
        (["not", "an", "object"], "has keys list"),
        (broken(start="broken"), r"start state 'broken' is not one of the states"),
        (broken(states=["locked", "open", "jam", "open"]), r"'states' lists \['open'\] more than once"),
        (broken(inputs=["coin", "push", "a kick"]), "inputs entry 'a kick' is not a token"),
        (broken(states=[]), "'states' must be a non-empty list of strings"),
        (
            {
                "states": ["s"],
                "inputs": ["coin", "push"],
                "start": "s",
                "transitions": {"s": {"coin": "s", "push": "s"}},
            },
            r"^table machine\.json: 'states' lists the one state 's'; a semiautomaton needs at least 2 states, else "
            r"every answer is the same\.$",
        ),
        (
            broken(
                transitions={state: {"coin": "jam", "push": "jam", "kick": "jam"} for state in TURNSTILE["states"]}
            ),
            r"^table machine\.json: every input sequence of length 5 ends in state 'jam', so every answer would be the "
            r"same; give a table in which inputs of that length lead to at least 2 different states\.$",
        ),
        (
            broken(transitions={**TURNSTILE["transitions"], "ghost": {"coin": "jam", "push": "jam", "kick": "jam"}}),
            r"transitions name unknown states \['ghost'\] and lack states \[\]",
        ),
        (
            broken(transitions={k: v for k, v in TURNSTILE["transitions"].items() if k != "jam"}),
            r"lack states \['jam'\]",
        ),
        (
            broken(transitions={**TURNSTILE["transitions"], "jam": {"coin": "jam", "push": "jam"}}),
            r"transitions\['jam'\] has inputs \['coin', 'push'\]; it must give exactly",
        ),
        (
            broken(transitions={**TURNSTILE["transitions"], "jam": {"coin": "jam", "push": "jam", "kick": "nowhere"}}),
            r"transitions\['jam'\]\['kick'\] = 'nowhere' is not one of the states",
        ),
    ],
)
def test_bad_tables_are_rejected(tmp_path, table, message):
    path = write_table(tmp_path, table)
    with pytest.raises(ValueError, match=message):
        Params(kind="table", table_path=path, length=5, train_size=10, test_size=5)


def test_unreadable_or_invalid_table_files(tmp_path):
    with pytest.raises(ValueError, match="cannot be read"):
        Params(kind="table", table_path=str(tmp_path / "missing.json"))
    (tmp_path / "bad.json").write_text("{states: ")
    with pytest.raises(ValueError, match="is not valid JSON"):
        Params(kind="table", table_path=str(tmp_path / "bad.json"))


def test_contract_surface():
    assert semiautomata.TASK_NAME == "semiautomaton"
    assert Params(kind="counter", modulus=2, length=16, train_size=1000).config_name() == "counter_c2_t16"
    assert Params(kind="s3", length=8, train_size=100).config_name() == "s3_t8"
    details = card_details(Params(kind="s3", length=8, train_size=100))
    assert "state_t = state_(t-1) ∘ input_t" in details["transition rule"]
    assert details["states"] == "012 021 102 120 201 210"


def test_the_cyclic_group_acting_on_itself_ends_at_the_sum_of_the_inputs_mod_n() -> None:
    from datasets_builder import build_dataset

    dataset, info = build_dataset(
        "semiautomaton",
        {"kind": "cyclic", "modulus": 5, "length": 6, "train_size": 40, "test_size": 8, "ood_size": 8,
         "ood_weights": ["stay=6,1,1,1,1"]},
    )  # fmt: skip
    assert info["config"] == "cyclic_c5_t6" and set(dataset) == {"train", "test", "test_ood_stay"}
    for example in dataset["train"]:
        inputs = [int(x) for x in example["question"].split()]
        running = [sum(inputs[: t + 1]) % 5 for t in range(6)]
        assert example["cot"] == [str(s) for s in running] and example["answer"] == str(running[-1])
    assert {x for e in dataset["train"] for x in e["question"].split()} == {"0", "1", "2", "3", "4"}
    with pytest.raises(ValueError, match=r"^modulus=1 is not allowed; C_n needs at least 2 states\.$"):
        build_dataset("semiautomaton", {"kind": "cyclic", "modulus": 1})
