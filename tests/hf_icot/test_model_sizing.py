"""width_for_budget: the chosen width's real parameter count is within 5% of the budget and is the count of the model
built from it; widths are multiples of the step; a budget too small for the depth is one sentence naming both."""

from __future__ import annotations

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from hf_icot.modeling.sizing import gpt2_formula_count, gpt2_parameter_count, width_for_budget

FIELDS = {"n_head": 4, "vocab_size": 30, "n_positions": 48}


@pytest.mark.parametrize(("depth", "budget"), [(1, 50_000), (4, 200_000), (16, 200_000), (25, 400_000)])
def test_width_meets_the_budget_and_reports_the_built_models_count(depth: int, budget: int) -> None:
    width, count = width_for_budget(depth, budget, **FIELDS)
    assert width % FIELDS["n_head"] == 0
    assert abs(count - budget) <= 0.05 * budget
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=depth, n_embd=width, bos_token_id=0, eos_token_id=0, **FIELDS))
    assert model.num_parameters() == count


def test_at_equal_budget_the_shallow_model_is_wider() -> None:
    shallow, shallow_count = width_for_budget(4, 200_000, **FIELDS)
    deep, deep_count = width_for_budget(16, 200_000, **FIELDS)
    assert shallow > deep and abs(shallow_count - deep_count) <= 0.1 * 200_000


def test_step_sets_the_multiple_and_the_closed_form_matches_a_built_model() -> None:
    assert width_for_budget(2, 105_000, step=16, **FIELDS)[0] == 64
    with pytest.raises(
        ValueError, match="no width for depth 2 comes within 5% of the budget 80,000: widths 48 and 64"
    ):
        width_for_budget(2, 80_000, step=16, **FIELDS)  # 60 k and 105 k parameters: both too far
    fields = {"n_layer": 3, "n_embd": 48, "vocab_size": 33, "n_positions": 40, "n_inner": 100}
    for tied in (True, False):
        assert gpt2_formula_count(**fields, tie_word_embeddings=tied) == gpt2_parameter_count(
            **fields, tie_word_embeddings=tied
        )


def test_a_budget_too_small_for_the_depth_names_both() -> None:
    with pytest.raises(ValueError) as caught:
        width_for_budget(25, 5_000, **FIELDS)
    message = str(caught.value)
    assert message.startswith("a parameter budget of 5,000 is too small for depth 25:") and "\n" not in message


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"depth": 0, "budget": 1000}, "depth 0 is not allowed"),
        ({"depth": 2, "budget": 0}, "parameter budget 0 is not allowed"),
        ({"depth": 2, "budget": 10_000, "step": 6}, "width step 6 is not allowed; use a positive multiple of n_head"),
        ({"depth": 2, "budget": 10_000, "n_embd": 64}, "'n_embd' is set by width_for_budget"),
    ],
)
def test_bad_arguments_are_one_sentence(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        width_for_budget(**{**FIELDS, **kwargs})
