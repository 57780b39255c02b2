"""GPT-2's GELU in one kernel (hf_icot.levers.fused_gelu): the same loss and gradients in training mode (dropout
drawing the same numbers), the modules swapped and nothing else, the saved model unchanged, and ICoTTrainer doing it
unless ``fused_gelu`` is off."""

from __future__ import annotations

import copy

import pytest
import torch
from transformers import AutoModelForCausalLM, GPT2Config
from transformers.activations import FastGELUActivation, GELUTanh, NewGELUActivation

from hf_icot.data.tokenization import build_word_level_tokenizer
from hf_icot.levers.fused_gelu import fuse_tanh_gelu
from tests.hf_icot.test_labelled_logits import icot_like_batch, loss_and_gradients
from tests.hf_icot.tiny_task import counting_examples

GPT2 = GPT2Config(vocab_size=64, n_embd=32, n_layer=2, n_head=2, n_positions=32, bos_token_id=1, eos_token_id=1)


def activations(model) -> list[type]:
    return [type(block.mlp.act) for block in model.transformer.h]


@pytest.mark.parametrize("activation", ["gelu_new", "gelu_fast"])
def test_the_fused_gelu_gives_the_same_loss_and_gradients(activation):
    torch.set_num_threads(1)
    torch.manual_seed(0)
    config = GPT2Config.from_dict({**GPT2.to_dict(), "activation_function": activation})
    model = AutoModelForCausalLM.from_config(config).train()  # dropout on: the same draws both ways
    fused = copy.deepcopy(model)
    assert fuse_tanh_gelu(fused) == config.n_layer
    assert activations(fused) == [GELUTanh] * config.n_layer
    assert activations(model) == [{"gelu_new": NewGELUActivation, "gelu_fast": FastGELUActivation}[activation]] * 2
    batch = icot_like_batch("right", keep_position=False)
    for _ in range(3):  # training steps of both copies: still the same loss after the parameters move
        loss, gradients = loss_and_gradients(model, lambda: model(**batch).loss)
        fused_loss, fused_gradients = loss_and_gradients(fused, lambda: fused(**batch).loss)
        assert abs(loss - fused_loss) <= 1e-6
        assert gradients.keys() == fused_gradients.keys()
        for name, gradient in gradients.items():
            torch.testing.assert_close(fused_gradients[name], gradient, atol=1e-6, rtol=1e-5, msg=name)
        with torch.no_grad():
            for parameter, fused_parameter in zip(model.parameters(), fused.parameters(), strict=True):
                parameter -= 0.1 * parameter.grad
                fused_parameter -= 0.1 * fused_parameter.grad
    # The swap is exact enough to be useless as a signal: the two losses would differ by > 1e-3 with another GELU.
    exact = copy.deepcopy(model)
    for block in exact.transformer.h:
        block.mlp.act = torch.nn.GELU()
    assert abs(loss_and_gradients(exact, lambda: exact(**batch).loss)[0] - loss) > 1e-6


def test_only_the_python_tanh_gelus_are_swapped_and_the_saved_model_is_the_same(tmp_path):
    torch.manual_seed(0)
    relu = AutoModelForCausalLM.from_config(GPT2Config.from_dict({**GPT2.to_dict(), "activation_function": "relu"}))
    assert fuse_tanh_gelu(relu) == 0
    model = AutoModelForCausalLM.from_config(GPT2)
    model.save_pretrained(tmp_path / "before")
    fuse_tanh_gelu(model)
    model.save_pretrained(tmp_path / "after")
    for name in ("model.safetensors", "config.json"):
        assert (tmp_path / "before" / name).read_bytes() == (tmp_path / "after" / name).read_bytes(), name
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path / "after")
    assert reloaded.config.activation_function == "gelu_new"
    assert activations(reloaded) == [NewGELUActivation] * GPT2.n_layer


@pytest.mark.parametrize("fused_gelu", [True, False])
def test_icot_trainer_fuses_the_gelu_unless_told_not_to(tmp_path, fused_gelu):
    from hf_icot.training.config import ICoTConfig
    from hf_icot.training.trainer import ICoTTrainer

    train, _ = counting_examples(6)
    tokenizer = build_word_level_tokenizer(train)
    config = GPT2Config.from_dict({**GPT2.to_dict(), "vocab_size": len(tokenizer), "eos_token_id": 1})
    args = ICoTConfig(
        output_dir=str(tmp_path), per_device_train_batch_size=8, max_steps=1, report_to="none", use_cpu=True,
        save_strategy="no", evaluate_each_stage=False, fused_gelu=fused_gelu,
    )  # fmt: skip
    model = AutoModelForCausalLM.from_config(config)
    trainer = ICoTTrainer(model=model, args=args, train_dataset=train, processing_class=tokenizer)
    expected = GELUTanh if fused_gelu else NewGELUActivation
    assert activations(trainer.model) == [expected] * GPT2.n_layer
    # model_init: the model the Trainer builds for train() is fused too.
    trainer = ICoTTrainer(
        model_init=lambda: AutoModelForCausalLM.from_config(config), args=args, train_dataset=train,
        processing_class=tokenizer,
    )  # fmt: skip
    trainer.train()
    assert activations(trainer.model) == [expected] * GPT2.n_layer
