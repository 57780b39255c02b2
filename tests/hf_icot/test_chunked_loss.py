"""The output layer and the cross entropy over chunks of rows (hf_icot.modeling.chunked_loss, ``chunked_loss``): the
plain loss and gradients for any chunking, a mean or a sum over num_items_in_batch, with and without a bias; the
check that takes it only where the output layer alone makes the model's logits; one clear error for bad shapes."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM, Gemma2Config

from hf_icot.modeling.chunked_loss import chunk_rows, chunked_loss_is_exact, hidden_states_at, linear_cross_entropy
from hf_icot.modeling.labelled_logits import predicting_positions
from tests.hf_icot.test_labelled_logits import FAMILIES, VOCAB, icot_like_batch


@pytest.mark.parametrize("rows", [1, 3, 7, 64])
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("num_items", [None, 40])
def test_the_chunked_loss_is_the_plain_loss_with_its_gradients(rows, with_bias, num_items):
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(23, 16, generator=generator)
    weight, bias = torch.randn(VOCAB, 16, generator=generator), torch.randn(VOCAB, generator=generator)
    targets = torch.randint(0, VOCAB, (23,), generator=generator)
    results = []
    for chunked in (False, True):
        leaves = [tensor.clone().requires_grad_() for tensor in (hidden, weight, bias)]
        h, w, b = leaves[0], leaves[1], leaves[2] if with_bias else None
        if chunked:
            loss = linear_cross_entropy(h, w, targets, b, num_items, rows=rows)
        else:
            reduction = "mean" if num_items is None else "sum"
            loss = F.cross_entropy(F.linear(h, w, b).float(), targets, reduction=reduction) / (num_items or 1)
        (3.0 * loss).backward()  # an incoming gradient other than 1 reaches every input
        results.append((loss.item(), [leaf.grad for leaf in leaves[: 3 if with_bias else 2]]))
    (plain, plain_grads), (ours, our_grads) = results
    assert abs(ours - plain) <= 1e-6 * max(1.0, abs(plain))
    for got, expected in zip(our_grads, plain_grads, strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)


def test_no_gradient_is_made_where_none_is_wanted_and_chunks_fit_the_budget():
    hidden, weight = torch.randn(5, 8), torch.randn(VOCAB, 8, requires_grad=True)
    loss = linear_cross_entropy(hidden, weight, torch.zeros(5, dtype=torch.long), rows=2)
    loss.backward()
    assert hidden.grad is None and weight.grad is not None
    assert chunk_rows(50_257) == 125 and chunk_rows(400) == 15_728 and chunk_rows(10**9) == 1


def test_bad_shapes_get_one_sentence():
    with pytest.raises(
        ValueError, match=r"takes \(N, H\) hidden states and \(N,\) targets, got \(2, 3, 4\) and \(2,\)"
    ):
        linear_cross_entropy(torch.zeros(2, 3, 4), torch.zeros(5, 4), torch.zeros(2, dtype=torch.long))


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_the_check_takes_models_whose_output_layer_makes_their_logits(family):
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(FAMILIES[family]).train()
    batch = icot_like_batch("right", keep_position=False)
    layer = model.get_output_embeddings()
    assert chunked_loss_is_exact(model, batch, layer, "logits_to_keep") and model.training
    positions = predicting_positions(batch["labels"])
    inputs = {name: value for name, value in batch.items() if name != "labels"}
    hidden = hidden_states_at(model, inputs, positions, "logits_to_keep", layer)
    assert hidden.shape == (int(positions.sum()), layer.in_features)
    assert model(**inputs).logits.shape[-1] == VOCAB  # the layer's own forward is back


@pytest.mark.parametrize("cap", [None, 0.5])
def test_the_check_refuses_logits_capped_after_the_output_layer(cap):
    config = Gemma2Config(vocab_size=VOCAB, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                          num_attention_heads=2, num_key_value_heads=1, head_dim=8, final_logit_softcapping=cap,
                          bos_token_id=1, eos_token_id=1, pad_token_id=0)  # fmt: skip
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)
    batch = icot_like_batch("right", keep_position=False)
    assert chunked_loss_is_exact(model, batch, model.get_output_embeddings(), "logits_to_keep") == (cap is None)


def chunked_calls(monkeypatch) -> list[int]:
    """Count the trainer's calls of the chunked loss (one entry of N rows per call)."""
    import hf_icot.levers.labelled_loss as labelled_loss

    calls, chunked = [], labelled_loss.linear_cross_entropy

    def counted(hidden, *args, **kwargs):
        calls.append(hidden.shape[0])
        return chunked(hidden, *args, **kwargs)

    monkeypatch.setattr(labelled_loss, "linear_cross_entropy", counted)
    return calls


def test_a_batch_whose_logits_fit_one_chunk_keeps_the_plain_loss(tmp_path, monkeypatch):
    from tests.hf_icot.test_labelled_logits import accumulated_run

    calls = chunked_calls(monkeypatch)
    trainer, losses, _ = accumulated_run(tmp_path, "gpt2", lora=False, labelled=True)
    # Checked on the first batch like any run (so every process checks at the same step), then not used.
    assert trainer.labelled_logits_strategy == "logits_to_keep" and trainer.chunked_loss_exact is True
    assert len(losses) == 4 and calls == []
