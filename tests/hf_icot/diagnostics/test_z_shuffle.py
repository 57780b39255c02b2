"""Δz: zero for a model blind to z, large for one that reads it; the derangement; bad examples."""

import pytest
import torch

from hf_icot.diagnostics import derangement, z_shuffle_gap
from hf_icot.diagnostics.z_shuffle import shuffle_selectors
from tests.hf_icot.diagnostics.study import PAD, SELECTOR_TOKENS, study_examples, tiny_gpt2


def test_derangement_moves_every_row_and_repeats_with_its_seed():
    for n in (2, 3, 7, 50):
        permutation = derangement(n, seed=1)
        assert sorted(permutation) == list(range(n))
        assert all(permutation[i] != i for i in range(n))
    assert derangement(50, seed=1) == derangement(50, seed=1) != derangement(50, seed=2)
    with pytest.raises(ValueError, match="at least 2 items"):
        derangement(1, seed=0)


def test_shuffle_changes_only_the_selector_tokens():
    rows = study_examples(4, 2)
    permutation = derangement(len(rows), seed=0)
    for row, donor, shuffled in zip(rows, permutation, shuffle_selectors(rows, permutation), strict=True):
        expected = list(row["input_ids"])
        expected[4:6] = rows[donor]["input_ids"][4:6]
        assert shuffled == expected


def test_gap_is_zero_for_a_model_that_cannot_tell_selectors_apart():
    model = tiny_gpt2(seed=1)
    with torch.no_grad():  # every selector token gets the same embedding: z carries nothing into the model
        model.transformer.wte.weight[list(SELECTOR_TOKENS)] = model.transformer.wte.weight[SELECTOR_TOKENS[0]].clone()
    gap = z_shuffle_gap(model, study_examples(4, 2), pad_token_id=PAD)
    assert gap.clean_loss > 1.0  # an untrained model: the loss itself is far from 0
    assert gap.gap == 0.0 and gap.shuffled_loss == gap.clean_loss


def test_gap_is_large_for_a_model_that_reads_the_selector(trained):
    gap = z_shuffle_gap(trained, study_examples(4, 2), pad_token_id=PAD, seed=0)
    assert gap.clean_loss < 0.05
    assert gap.gap > 1.0
    assert gap.gap == pytest.approx(gap.shuffled_loss - gap.clean_loss)


def test_bad_examples_are_refused_in_one_sentence():
    rows = study_examples(4, 2)
    model = tiny_gpt2()
    with pytest.raises(ValueError, match="z_shuffle_gap needs the column 'selector_positions'"):
        z_shuffle_gap(model, [{k: v for k, v in r.items() if k != "selector_positions"} for r in rows], pad_token_id=0)
    with pytest.raises(ValueError, match="at least 2 distinct selectors among the examples; got 1"):
        z_shuffle_gap(model, study_examples(4, 1), pad_token_id=PAD)
    uneven = [dict(r) for r in rows]
    uneven[0]["selector_positions"] = [4]
    with pytest.raises(ValueError, match=r"they have \[1, 2\] tokens"):
        z_shuffle_gap(model, uneven, pad_token_id=PAD)
