"""Selector attention on a model whose attention is uniform (so the mass is a count), and on a trained one."""

import numpy as np
import pytest
import torch

from hf_icot.diagnostics import selector_attention
from tests.hf_icot.diagnostics.study import ANSWER_START, PAD, study_examples, tiny_gpt2


def test_uniform_attention_puts_selector_count_over_prefix_length_on_z():
    model = tiny_gpt2(n_layer=2, n_head=2)
    with torch.no_grad():  # queries and keys the same at every position: each head attends uniformly
        for block in model.transformer.h:
            block.attn.c_attn.weight.zero_()
    mass = selector_attention(model, study_examples(4, 2), pad_token_id=PAD, batch_size=3)
    # The query is the last prompt position (6): it sees positions 0..6, two of which hold z.
    assert mass.shape == (2, 2)
    np.testing.assert_allclose(mass, np.full((2, 2), 2 / ANSWER_START), atol=1e-6)


def test_attention_implementation_is_restored(trained):
    assert trained.config._attn_implementation == "sdpa"
    mass = selector_attention(trained, study_examples(4, 2), pad_token_id=PAD)
    assert trained.config._attn_implementation == "sdpa"
    assert ((mass >= 0) & (mass <= 1 + 1e-6)).all()


def test_examples_without_selector_positions_are_refused():
    rows = [{k: v for k, v in r.items() if k != "selector_positions"} for r in study_examples(4, 2)]
    with pytest.raises(ValueError, match="selector_attention needs the column 'selector_positions'"):
        selector_attention(tiny_gpt2(), rows, pad_token_id=PAD)
    with pytest.raises(ValueError, match=r"selector_positions \[9\]; they must be .* prompt positions in \[0, 7\)"):
        selector_attention(tiny_gpt2(), [dict(study_examples(4, 2)[0], selector_positions=[9])], pad_token_id=PAD)
