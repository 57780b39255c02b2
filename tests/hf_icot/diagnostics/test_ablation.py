"""Head ablation touches exactly one head's slice of the output projection's input, and costs nothing for a head
whose output the projection discards."""

import contextlib

import numpy as np
import pytest
import torch

from hf_icot.diagnostics import ablate_head, attention_output_projections, head_ablation
from hf_icot.diagnostics.ablation import mean_projection_inputs
from tests.hf_icot.diagnostics.study import PAD, study_examples, tiny_gpt2

HEAD_DIM = 16  # n_embd 32 / n_head 2


def projection_input(model, layer, ids, ablation=None):
    """The input of ``layer``'s output projection, seen after any ablation hook (hooks run in registration order)."""
    captured = []
    with ablation or contextlib.nullcontext(), torch.no_grad():
        handle = attention_output_projections(model)[layer].register_forward_pre_hook(
            lambda module, args: captured.append(args[0].clone())
        )
        try:
            model(input_ids=ids)
        finally:
            handle.remove()
    return captured[0]  # (B, S, n_heads * head_dim)


@pytest.mark.parametrize("mode", ["zero", "mean"])
def test_ablating_a_head_changes_only_its_slice(trained, mode):
    rows = study_examples(4, 2)
    ids = torch.tensor([row["input_ids"] for row in rows])
    means = mean_projection_inputs(trained, [row["input_ids"] for row in rows], PAD)
    for layer in (0, 1):
        clean = projection_input(trained, layer, ids)
        ablated = projection_input(trained, layer, ids, ablate_head(trained, layer, 1, mode, means[layer]))
        torch.testing.assert_close(ablated[..., :HEAD_DIM], clean[..., :HEAD_DIM], rtol=0, atol=0)
        expected = (
            torch.zeros_like(clean[..., HEAD_DIM:])
            if mode == "zero"
            else means[layer][:, HEAD_DIM:].expand_as(clean[..., HEAD_DIM:])
        )
        torch.testing.assert_close(ablated[..., HEAD_DIM:], expected)
        assert not torch.allclose(ablated[..., HEAD_DIM:], clean[..., HEAD_DIM:])
    # The mean is the position-wise average over the rows (all of equal length here).
    torch.testing.assert_close(means[1], projection_input(trained, 1, ids).mean(0))
    # The hook is gone afterwards.
    assert all(not p._forward_pre_hooks for p in attention_output_projections(trained))


def test_a_head_the_projection_ignores_costs_nothing():
    model = tiny_gpt2(seed=3)
    with torch.no_grad():  # GPT-2's Conv1D weight is (in, out): rows of head 0 in layer 1 discard that head
        model.transformer.h[1].attn.c_proj.weight[:HEAD_DIM] = 0
    increases = head_ablation(model, study_examples(4, 2), pad_token_id=PAD, batch_size=3)
    for mode in ("zero", "mean"):
        assert increases[mode].shape == (2, 2)
        assert abs(increases[mode][1, 0]) < 1e-9
        assert np.abs(increases[mode][[0, 0, 1], [0, 1, 1]]).min() > 1e-6  # the other heads do matter


def test_only_the_chosen_heads_are_measured(trained):
    increases = head_ablation(trained, study_examples(4, 2), pad_token_id=PAD, heads=[(1, 1)], modes=["zero"])
    assert set(increases) == {"zero"}
    assert np.isnan(increases["zero"][[0, 0, 1], [0, 1, 0]]).all() and increases["zero"][1, 1] != 0


def test_bad_heads_and_modes_are_refused():
    model, rows = tiny_gpt2(), study_examples(4, 2)
    with pytest.raises(
        ValueError, match=r"head \(layer=0, head=2\) is outside the model; it has layers 0\.\.1 and heads 0\.\.1"
    ):
        head_ablation(model, rows, pad_token_id=PAD, heads=[(0, 2)])
    with pytest.raises(ValueError, match=r"head \(layer=2, head=0\) is outside the model"):
        head_ablation(model, rows, pad_token_id=PAD, heads=[(2, 0)])
    with pytest.raises(ValueError, match="mode 'resample' is unknown; allowed: zero, mean"):
        head_ablation(model, rows, pad_token_id=PAD, modes=["resample"])
    with pytest.raises(ValueError, match="has no attention output projection"):
        head_ablation(torch.nn.Linear(2, 2), rows, pad_token_id=PAD)
