"""Candidate loss: log K for a model uniform over the candidates, ~0 for one that solves the task; group accuracy
on a model that is right exactly where the test says."""

import math

import numpy as np
import pytest
import torch

from hf_icot.diagnostics import candidate_loss, group_accuracy
from tests.hf_icot.diagnostics.study import PAD, SELECTOR_TOKENS, study_examples, tiny_gpt2


def constant_logits_model():
    """A GPT-2 whose logits are 0 everywhere: every token, hence every candidate, is equally likely."""
    model = tiny_gpt2(tie_word_embeddings=False)
    with torch.no_grad():
        model.lm_head.weight.zero_()
    return model


class PeekingModel(torch.nn.Module):
    """Predicts each next token by looking at it (logit 10 on the true next token), except in rows whose selector is
    ``wrong_selector``, where it predicts the pad token: those rows are never solved, all others always."""

    def __init__(self, wrong_selector: int, vocab_size: int = 23):
        super().__init__()
        self.unused = torch.nn.Parameter(torch.zeros(1))
        self.wrong_selector, self.vocab_size = wrong_selector, vocab_size

    def forward(self, input_ids, attention_mask=None):
        following = torch.roll(input_ids, -1, dims=1)
        wrong = (input_ids[:, 4] == self.wrong_selector)[:, None]
        following = torch.where(wrong, torch.full_like(following, PAD), following)
        return type("Output", (), {"logits": 10.0 * torch.nn.functional.one_hot(following, self.vocab_size).float()})


def test_a_model_uniform_over_candidates_scores_log_k():
    for k in (2, 3):
        scored = candidate_loss(constant_logits_model(), study_examples(4, k), pad_token_id=PAD)
        assert scored.loss == pytest.approx(math.log(k), abs=1e-12)
        assert scored.mean_log_k == pytest.approx(math.log(k))


def test_log_k_is_per_group_when_groups_differ_in_size():
    rows = study_examples(2, 3)[:5]  # group B0 keeps its 3 answers, B1 only 2
    scored = candidate_loss(constant_logits_model(), rows, pad_token_id=PAD)
    assert scored.loss == pytest.approx((3 * math.log(3) + 2 * math.log(2)) / 5, abs=1e-12)


def test_a_model_that_solves_the_task_scores_near_zero(trained):
    scored = candidate_loss(trained, study_examples(4, 2), pad_token_id=PAD, batch_size=3)
    assert scored.loss < 0.05 and scored.accuracy == 1.0


def test_group_accuracy_counts_solved_rows_per_group():
    rows = study_examples(4, 2)
    rows = rows[:2] + rows[2:] + [dict(rows[0], selector_positions=[4, 5])]  # B0 has 3 rows
    rows[-1]["input_ids"] = list(rows[-1]["input_ids"])
    rows[-1]["input_ids"][4:6] = [SELECTOR_TOKENS[2]] * 2  # its third row uses z2, which the model gets wrong
    result = group_accuracy(PeekingModel(wrong_selector=SELECTOR_TOKENS[2]), rows, pad_token_id=PAD)
    assert result.groups == ["B0", "B1", "B2", "B3"]
    np.testing.assert_allclose(result.accuracy, [2 / 3, 1, 1, 1])
    assert result.solved_fraction == 0.75  # 2/3 < 0.8
    lenient = group_accuracy(PeekingModel(SELECTOR_TOKENS[2]), rows, pad_token_id=PAD, threshold=0.6)
    assert lenient.solved_fraction == 1.0
    none_solved = group_accuracy(PeekingModel(SELECTOR_TOKENS[0]), study_examples(4, 1), pad_token_id=PAD)
    assert none_solved.solved_fraction == 0.0 and not none_solved.accuracy.any()


def test_bad_examples_are_refused_in_one_sentence():
    rows = study_examples(4, 2)
    model = tiny_gpt2()
    with pytest.raises(ValueError, match="candidate_loss needs the column 'group'"):
        candidate_loss(model, [{k: v for k, v in r.items() if k != "group"} for r in rows], pad_token_id=PAD)
    short = dict(rows[1], input_ids=rows[1]["input_ids"][:-1], labels=rows[1]["labels"][:-1])
    with pytest.raises(ValueError, match=r"group 'B0' has answers of \[2, 3\] tokens"):
        candidate_loss(model, [rows[0], short], pad_token_id=PAD)
    with pytest.raises(ValueError, match="threshold=1.5 is not allowed"):
        group_accuracy(model, rows, pad_token_id=PAD, threshold=1.5)
    with pytest.raises(ValueError, match="has no labelled token"):
        candidate_loss(model, [dict(rows[0], labels=[-100] * 10)], pad_token_id=PAD)
