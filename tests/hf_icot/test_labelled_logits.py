"""Logits only where a label is (``labelled_logits_only``): the same loss and gradients as the full computation on
three model families (either side padded, with and without kept positions), in real ICoTTrainer runs with gradient
accumulation and LoRA, the adaptive pace's decisions unchanged, and the full computation for a model that computes
its own loss."""

from __future__ import annotations

import logging

import pytest
import torch
from transformers import AutoModelForCausalLM, GPT2Config, LlamaConfig, MistralConfig, TrainerCallback

from hf_icot.command_line.arguments import ModelArguments
from hf_icot.curriculum import Stepwise
from hf_icot.evaluation.teacher_forced import answer_token_hits
from hf_icot.modeling.labelled_logits import (
    STRATEGIES,
    causal_lm_loss,
    exact_strategies,
    labelled_logits,
    predicting_positions,
)
from hf_icot.modeling.loading import apply_lora, load_model_and_tokenizer
from hf_icot.training.config import ICoTConfig
from hf_icot.training.trainer import ICoTTrainer
from tests.hf_icot.test_adaptive_schedule import counting_adaptive_run
from tests.hf_icot.tiny_task import counting_examples
from tests.results.test_parity_theory_models import _args, _data, _model

VOCAB = 61
FAMILIES = {
    "gpt2": GPT2Config(vocab_size=VOCAB, n_embd=16, n_layer=2, n_head=2, n_positions=32, bos_token_id=1, eos_token_id=1),
    "llama": LlamaConfig(vocab_size=VOCAB, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, bos_token_id=1, eos_token_id=1),
    "mistral": MistralConfig(vocab_size=VOCAB, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                             num_attention_heads=2, num_key_value_heads=1, bos_token_id=1, eos_token_id=1),
}  # fmt: skip


def icot_like_batch(padding_side: str, keep_position: bool) -> dict[str, torch.Tensor]:
    """Four rows of 12, 10, 7 and 5 tokens padded to 12 on ``padding_side``: a 3-token question without labels, then
    labelled tokens; with ``keep_position`` the positions jump by 3 after the question (CoT tokens removed)."""
    generator = torch.Generator().manual_seed(0)
    lengths, width = [12, 10, 7, 5], 12
    batch = {
        "input_ids": torch.randint(2, VOCAB, (len(lengths), width), generator=generator),
        "attention_mask": torch.zeros(len(lengths), width, dtype=torch.long),
        "labels": torch.full((len(lengths), width), -100),
        "position_ids": torch.zeros(len(lengths), width, dtype=torch.long),
    }
    for row, n in enumerate(lengths):
        at = slice(width - n, width) if padding_side == "left" else slice(0, n)
        batch["attention_mask"][row, at] = 1
        batch["labels"][row, at] = batch["input_ids"][row, at]
        batch["labels"][row, at.start : at.start + 3] = -100
        steps = torch.arange(n)
        batch["position_ids"][row, at] = steps + 3 * (steps >= 3) if keep_position else steps
    if not keep_position:
        del batch["position_ids"]
    return batch


def loss_and_gradients(model, compute, *args) -> tuple[float, dict[str, torch.Tensor]]:
    """``compute(*args)`` and every gradient, dropout drawn from one seed (the model is in training mode)."""
    model.zero_grad()
    torch.manual_seed(1)
    loss = compute(*args)
    loss.backward()
    return loss.item(), {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("keep_position", [False, True])
@pytest.mark.parametrize("padding_side", ["right", "left"])
@pytest.mark.parametrize("family", list(FAMILIES))
def test_labelled_logits_give_the_full_loss_and_gradients(family, padding_side, keep_position):
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(FAMILIES[family])
    batch = icot_like_batch(padding_side, keep_position)
    labels, positions = batch["labels"], predicting_positions(batch["labels"])
    assert positions.sum() == (labels[:, 1:] != -100).sum() and not positions[:, -1].any()
    inputs = {name: value for name, value in batch.items() if name != "labels"}
    layer = model.get_output_embeddings()
    assert exact_strategies(model, batch, layer) == dict.fromkeys(STRATEGIES, True)
    n_items = int(positions.sum()) + 5  # as gradient accumulation scales it: the tokens of every micro-batch

    def full_loss(scale):
        extra = {} if scale is None else {"num_items_in_batch": torch.tensor(scale)}
        return model(**batch, **extra).loss

    def our_loss(scale, strategy):
        logits = labelled_logits(model, inputs, positions, strategy, layer).logits  # (N, V)
        assert logits.shape == (int(positions.sum()), VOCAB)
        return causal_lm_loss(logits, labels, positions, scale)

    for scale in (None, n_items):
        expected, expected_grads = loss_and_gradients(model, full_loss, scale)
        for strategy in STRATEGIES:
            loss, grads = loss_and_gradients(model, our_loss, scale, strategy)
            assert abs(loss - expected) <= 1e-6, (strategy, scale)
            assert grads.keys() == expected_grads.keys()
            for name, grad in grads.items():
                assert torch.allclose(grad, expected_grads[name], rtol=1e-5, atol=1e-6), (strategy, scale, name)


class GradientLog(TrainerCallback):
    """The trainable parameters' gradients just before each optimizer step."""

    def __init__(self, model) -> None:
        self.model, self.gradients = model, []

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        grads = {name: p.grad.clone() for name, p in self.model.named_parameters() if p.grad is not None}
        self.gradients.append(grads)


def accumulated_run(tmp_path, family: str, lora: bool, labelled: bool):
    """4 optimizer steps of 2 micro-batches of 8 on the counting task, keep_position removal with smoothing (rows of
    unequal length, right-padded); a scratch model of ``family`` built from seed 0, LoRA-wrapped if ``lora``."""
    train, _ = counting_examples(length=6, n_test=8)
    scratch = {
        "gpt2": {"n_layer": 1, "n_embd": 32, "n_head": 2},
        "llama": {"model_type": "llama", "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
                  "num_attention_heads": 2, "num_key_value_heads": 1},
    }[family]  # fmt: skip
    torch.manual_seed(0)
    model, tokenizer = load_model_and_tokenizer(
        ModelArguments(scratch_model=scratch), Stepwise().layout, {"train": train}
    )
    if lora:
        model = apply_lora(model, ModelArguments(scratch_model=scratch, use_peft=True, lora_r=4, lora_dropout=0.0))
    args = ICoTConfig(
        output_dir=str(tmp_path / f"run-{labelled}"), schedule="stepwise", remove_per_epoch=3,
        removal_fill="keep_position", removal_smoothing_lambda=1.0, per_device_train_batch_size=8,
        gradient_accumulation_steps=2, max_steps=4, logging_steps=1, learning_rate=1e-2, report_to="none",
        use_cpu=True, save_strategy="no", disable_tqdm=True, seed=0, keep_stage_checkpoints=False,
        evaluate_each_stage=False, labelled_logits_only=labelled,
    )  # fmt: skip
    trainer = ICoTTrainer(model=model, args=args, train_dataset=train, processing_class=tokenizer)
    log = GradientLog(model)
    trainer.add_callback(log)
    trainer.train()
    return trainer, [entry["loss"] for entry in trainer.state.log_history if "loss" in entry], log.gradients


@pytest.mark.parametrize(("family", "lora"), [("gpt2", False), ("gpt2", True), ("llama", True)])
def test_a_run_with_accumulation_has_the_full_losses_and_gradients(tmp_path, monkeypatch, family, lora):
    torch.set_num_threads(1)
    # Chunks of 2 KiB of logits (a dozen rows here), so this tiny vocabulary runs the chunked loss over several chunks.
    monkeypatch.setattr("hf_icot.levers.labelled_loss.CHUNK_BYTES", 2048)
    monkeypatch.setattr("hf_icot.modeling.chunked_loss.CHUNK_BYTES", 2048)
    from tests.hf_icot.test_chunked_loss import chunked_calls

    calls = chunked_calls(monkeypatch)
    full, full_losses, full_grads = accumulated_run(tmp_path, family, lora, labelled=False)
    ours, losses, grads = accumulated_run(tmp_path, family, lora, labelled=True)
    assert full.labelled_logits_strategy == "undecided" and ours.labelled_logits_strategy == "logits_to_keep"
    assert ours.chunked_loss_exact and full.chunked_loss_exact is None
    # Every micro-batch's loss (7: the 56 training rows make 7 batches of 8, so the 4th step has one) ran in chunks.
    assert len(calls) == 7 and min(calls) > 2048 // (4 * 64)
    assert ours.model_accepts_loss_kwargs  # the loss is summed over num_items_in_batch, not averaged per micro-batch
    assert ours.schedule.removed_count(3) > 0  # kept positions were in play
    assert len(losses) == len(full_losses) == 4
    assert all(abs(a - b) <= 1e-6 for a, b in zip(losses, full_losses)), (losses, full_losses)
    assert len(grads) == len(full_grads) == 4
    for step, (step_grads, step_full) in enumerate(zip(grads, full_grads)):
        assert step_grads.keys() == step_full.keys() and (not lora or all("lora_" in name for name in step_grads))
        for name, grad in step_grads.items():
            assert torch.allclose(grad, step_full[name], rtol=1e-4, atol=1e-6), (step, name)


def test_the_adaptive_pace_reads_the_gathered_logits_and_decides_the_same(tmp_path):
    runs = {
        labelled: counting_adaptive_run(
            tmp_path / str(labelled), max_steps=70, logging_steps=10, labelled_logits_only=labelled
        )
        for labelled in (False, True)
    }
    (full, full_log, _), (ours, log, _) = runs[False], runs[True]
    assert ours.labelled_logits_strategy == "logits_to_keep" and full.labelled_logits_strategy == "undecided"
    assert len(ours.schedule.removal_steps) >= 2 and ours.schedule.removal_steps == full.schedule.removal_steps
    assert log.accuracies == full_log.accuracies
    # The mapping itself, on a batch of the run: the gathered logits score what the full ones do.
    batch, _ = ours._render(next(iter(ours.get_train_dataloader())), 20, training=True)
    mask = batch.pop("icot_answer_mask")
    positions = predicting_positions(batch["labels"])
    inputs = {name: value for name, value in batch.items() if name != "labels"}
    with torch.no_grad():
        every = ours.model(**inputs).logits
        gathered = labelled_logits(ours.model, inputs, positions, "logits_to_keep").logits
    for per_example in (False, True):
        expected = answer_token_hits(every, batch["input_ids"], mask, per_example=per_example)
        got = answer_token_hits(gathered, batch["input_ids"], mask, per_example=per_example, positions=positions)
        assert got.tolist() == expected.tolist() and expected[1] > 0
    sequence = batch["labels"] != -100  # the sequence metric's mask: every labelled token
    assert answer_token_hits(gathered, batch["input_ids"], sequence, True, positions).tolist() == (
        answer_token_hits(every, batch["input_ids"], sequence, True).tolist()
    )


def test_a_model_computing_its_own_loss_gets_the_full_computation_said_once(tmp_path, caplog):
    dataset = _data("chain")
    losses = {}
    for labelled in (False, True):
        args = _args(tmp_path / str(labelled), "stepwise", remove_per_epoch=6.0, learning_rate=0.05)
        args.labelled_logits_only = labelled
        model, tokenizer = _model("linear_attention_parity", args, dataset)
        trainer = ICoTTrainer(model=model, args=args, train_dataset=dataset["train"], processing_class=tokenizer)
        with caplog.at_level(logging.WARNING, logger="hf_icot.levers.labelled_loss"):
            trainer.train()
        losses[labelled] = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert trainer.labelled_logits_strategy is None
    said = [record.message for record in caplog.records if record.name == "hf_icot.levers.labelled_loss"]
    assert len(said) == 1 and "LinearAttentionParityModel gives other logits or another loss" in said[0]
    assert "so the loss uses logits at every position" in said[0]
    assert losses[True] == losses[False] and len(losses[True]) == 4


def test_the_loss_keeps_float64_logits_and_raises_lower_precisions_to_float32():
    labels = torch.tensor([[-100, 3, 1, -100]])
    positions = predicting_positions(labels)
    logits = torch.randn(int(positions.sum()), 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    targets = labels[0, 1:][labels[0, 1:] != -100]
    loss = causal_lm_loss(logits, labels, positions)
    assert loss.dtype == torch.float64
    assert torch.equal(loss, torch.nn.functional.cross_entropy(logits, targets))
    assert causal_lm_loss(logits.bfloat16(), labels, positions).dtype == torch.float32
