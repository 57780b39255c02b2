"""Linear probes: a linearly encoded state decodes at ~100%, a random one at chance; hidden states are those the model
returns; the semiautomaton probe map has one row per layer and one column per step, and bad layers, steps or data are
one sentence."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from hf_icot.data.tokenization import build_word_level_tokenizer
from hf_icot.diagnostics.probes import (
    hidden_states_at,
    linear_probe_accuracy,
    probe_accuracy_map,
    state_probe_map,
)


def test_a_linearly_encoded_state_decodes_and_a_random_one_is_at_chance() -> None:
    rng = np.random.default_rng(0)
    n, d, k = 2000, 32, 5
    states = rng.integers(0, k, n)
    encoded = rng.normal(size=(k, d))[states] + 0.5 * rng.normal(size=(n, d))
    assert linear_probe_accuracy(encoded, states, seed=0) >= 0.99
    unrelated = rng.normal(size=(n, d))
    assert abs(linear_probe_accuracy(unrelated, states, seed=0) - 1 / k) < 0.06


def test_probe_bad_input_is_one_sentence() -> None:
    with pytest.raises(ValueError, match="3 labels were given for 4 feature rows"):
        linear_probe_accuracy(np.zeros((4, 2)), [0, 1, 0])
    with pytest.raises(ValueError, match="test_fraction 1.5 is not allowed"):
        linear_probe_accuracy(np.zeros((4, 2)), [0, 1, 0, 1], test_fraction=1.5)


@pytest.fixture(scope="module")
def tiny_model() -> GPT2LMHeadModel:
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=8, n_positions=16, n_embd=16, n_layer=2, n_head=2, bos_token_id=0, eos_token_id=0)
    return GPT2LMHeadModel(config).eval()


def test_hidden_states_are_the_models_at_the_positions(tiny_model: GPT2LMHeadModel) -> None:
    ids = torch.randint(0, 8, (5, 7))
    hidden = hidden_states_at(tiny_model, ids, None, [0, 3, 6], batch_size=2)
    assert hidden.shape == (3, 5, 3, 16)
    with torch.no_grad():
        full = torch.stack(tiny_model(ids, output_hidden_states=True).hidden_states)
    torch.testing.assert_close(hidden, full[:, :, [0, 3, 6]])
    with pytest.raises(ValueError, match="position 7 is outside the sequences"):
        hidden_states_at(tiny_model, ids, None, [7])


def test_the_map_decodes_where_the_state_is_encoded() -> None:
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 3, (600, 2))
    hidden = torch.tensor(rng.normal(size=(2, 600, 2, 8)), dtype=torch.float32)
    hidden[1, :, 0, :3] += 4 * torch.nn.functional.one_hot(torch.tensor(labels[:, 0]), 3)  # layer 1, position 0 only
    accuracy = probe_accuracy_map(hidden, labels)
    assert accuracy.shape == (2, 2) and accuracy[1, 0] >= 0.99
    assert max(accuracy[0, 0], accuracy[0, 1], accuracy[1, 1]) < 0.5


def counter_rows(n: int, length: int, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    inputs = rng.integers(0, 2, (n, length))
    states = np.cumsum(inputs, axis=1) % 3
    return [
        {"question": " ".join(map(str, row)), "cot": [str(s) for s in state], "answer": str(state[-1])}
        for row, state in zip(inputs, states)
    ]


def test_state_probe_map_has_a_row_per_layer_and_a_column_per_step(tiny_model: GPT2LMHeadModel) -> None:
    rows = counter_rows(200, 6)
    result = state_probe_map(tiny_model, build_word_level_tokenizer(rows), rows)
    assert result["layers"] == [0, 1, 2] and result["steps"] == [1, 2, 3, 4, 5, 6]
    accuracy = np.array(result["accuracy"])
    assert accuracy.shape == (3, 6) and ((accuracy >= 0) & (accuracy <= 1)).all()
    # Step 1's state is the first input symbol itself, which the embedding (layer 0) holds at that position.
    assert accuracy[0, 0] == 1.0
    assert len(result["majority"]) == 6


def test_state_probe_map_refuses_a_layer_beyond_the_model_and_a_missing_target(tiny_model) -> None:
    rows = counter_rows(40, 4)
    tokenizer = build_word_level_tokenizer(rows)
    with pytest.raises(ValueError, match=r"^probe layer 5 is beyond the model, which has layers 0\.\.2"):
        state_probe_map(tiny_model, tokenizer, rows, layers=[1, 5])
    with pytest.raises(ValueError, match=r"^probe target step 9 is not in the data: the questions have 4 input"):
        state_probe_map(tiny_model, tokenizer, rows, steps=[9])
    with pytest.raises(ValueError, match="the examples lack 'cot'"):
        state_probe_map(tiny_model, tokenizer, [{"question": "0 1"}])
