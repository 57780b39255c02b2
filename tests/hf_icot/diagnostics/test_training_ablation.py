"""Training with a head removed: the head contributes exactly nothing (its own weights no longer matter), no
gradient reaches it from the removal step on, the saved model computes what was trained, and bad heads are refused
in one sentence."""

import pytest
import torch
from datasets import Dataset
from transformers import Trainer, TrainerCallback, TrainingArguments

from hf_icot.diagnostics import HeadAblationCallback, attention_output_projections, parse_heads
from tests.hf_icot.diagnostics.study import study_examples, tiny_gpt2

N_EMBD, HEAD_DIM = 32, 16  # tiny_gpt2: 2 layers, 2 heads


def _qkv_columns(head: int) -> list[int]:
    """The columns of GPT-2's fused ``c_attn`` (in, 3 * n_embd) that compute one head's query, key and value."""
    return [block * N_EMBD + head * HEAD_DIM + i for block in range(3) for i in range(HEAD_DIM)]


def _ids() -> torch.Tensor:
    return torch.tensor([row["input_ids"] for row in study_examples(4, 2)])


def _logits(model) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=_ids()).logits


def test_a_removed_head_contributes_nothing() -> None:
    model = tiny_gpt2(seed=1).eval()
    clean = _logits(model)
    callback = HeadAblationCallback(model, [(1, 0)])
    callback.active = True
    removed = _logits(model)
    assert not torch.allclose(removed, clean), "the head mattered before"
    with torch.no_grad():  # whatever head (1, 0) computes or writes, nothing of it reaches the output
        model.transformer.h[1].attn.c_attn.weight[:, _qkv_columns(0)] = torch.randn(N_EMBD, 3 * HEAD_DIM) * 5
        model.transformer.h[1].attn.c_proj.weight[:HEAD_DIM] += 3.0
    torch.testing.assert_close(_logits(model), removed, rtol=0, atol=0)
    callback.bake()
    assert not attention_output_projections(model)[1]._forward_pre_hooks, "baking drops the hooks"
    assert (model.transformer.h[1].attn.c_proj.weight[:HEAD_DIM] == 0).all()
    torch.testing.assert_close(_logits(model), removed, rtol=0, atol=1e-6)


class _GradientProbe(TrainerCallback):
    """Per optimiser step: the completed steps before it, and whether head (1, 0)'s and head (1, 1)'s query / key
    / value weights got any gradient; per step end, whether the removal was on for the measurement there."""

    def __init__(self, removal: HeadAblationCallback) -> None:
        self.removal, self.steps, self.seen_at_step_end = removal, [], {}

    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        grad = model.transformer.h[1].attn.c_attn.weight.grad
        self.steps.append(
            (state.global_step, bool(grad[:, _qkv_columns(0)].any()), bool(grad[:, _qkv_columns(1)].any()))
        )

    def on_step_end(self, args, state, control, **kwargs):
        self.seen_at_step_end[state.global_step] = self.removal.active


def _train(tmp_path, from_step: int) -> tuple[torch.nn.Module, _GradientProbe, torch.Tensor]:
    model = tiny_gpt2(seed=2)
    before = model.transformer.h[1].attn.c_attn.weight[:, _qkv_columns(0)].detach().clone()
    rows = [{"input_ids": r["input_ids"], "labels": r["labels"]} for r in study_examples(4, 2)]
    removal = HeadAblationCallback(model, [(1, 0)], from_step=from_step)
    probe = _GradientProbe(removal)
    args = TrainingArguments(output_dir=str(tmp_path), max_steps=4, per_device_train_batch_size=8, learning_rate=1e-2,
                             weight_decay=0.0, report_to="none", use_cpu=True, save_strategy="no",
                             disable_tqdm=True, logging_steps=100)  # fmt: skip
    Trainer(model=model, args=args, train_dataset=Dataset.from_list(rows), callbacks=[removal, probe]).train()
    return model, probe, before


def test_training_with_a_head_removed_from_the_start(tmp_path) -> None:
    model, probe, before = _train(tmp_path, from_step=0)
    assert [(step, own) for step, own, _ in probe.steps] == [(0, False), (1, False), (2, False), (3, False)]
    assert all(other for _, _, other in probe.steps), "the other head of the layer learns"
    # no gradient and no weight decay: the removed head's weights are where they started
    torch.testing.assert_close(model.transformer.h[1].attn.c_attn.weight[:, _qkv_columns(0)], before, rtol=0, atol=0)
    # the saved model is the trained one: the projection no longer reads the head, and no hook is left behind
    assert (model.transformer.h[1].attn.c_proj.weight[:HEAD_DIM] == 0).all()
    assert (model.transformer.h[1].attn.c_proj.weight[HEAD_DIM:] != 0).any()
    assert not any(p._forward_pre_hooks for p in attention_output_projections(model))


def test_a_head_removed_from_a_later_step(tmp_path) -> None:
    _, probe, _ = _train(tmp_path, from_step=2)
    assert [(step, own) for step, own, _ in probe.steps] == [(0, True), (1, True), (2, False), (3, False)]
    assert probe.seen_at_step_end == {1: False, 2: True, 3: True, 4: True}


def test_bad_heads_are_refused_in_one_sentence() -> None:
    model = tiny_gpt2()
    with pytest.raises(
        ValueError, match=r"^head \(layer=2, head=0\) is outside the model; it has layers 0\.\.1 and heads 0\.\.1\.$"
    ):
        HeadAblationCallback(model, [(2, 0)])
    with pytest.raises(ValueError, match=r"^head \(layer=0, head=5\) is outside the model"):
        HeadAblationCallback(model, [(0, 5)])
    with pytest.raises(ValueError, match=r"^from_step=-1 is not allowed"):
        HeadAblationCallback(model, [(0, 0)], from_step=-1)
    with pytest.raises(ValueError, match=r"^heads is empty"):
        HeadAblationCallback(model, [])
    assert not any(p._forward_pre_hooks for p in attention_output_projections(model)), "no hook when refused"
    assert parse_heads(["0:3", " 1:0"]) == [(0, 3), (1, 0)]
    with pytest.raises(ValueError, match=r"^head '0-3' is not 'layer:head'"):
        parse_heads(["0-3"])
