"""The parity theory models (results.parity.theory): the pieces the studies state (phi, the level mask, rounding, the
trainable block of W^KQ), training through ICoTTrainer / Trainer, save/load round trips, generation, bad input."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, GPT2Config, GPT2LMHeadModel

from datasets_builder import build_dataset
from datasets_builder.tasks.parity import Params, cot_levels
from hf_icot.command_line.arguments import ModelArguments
from hf_icot.evaluation.generation_accuracy import evaluate_generation
from hf_icot.modeling.loading import load_model_and_tokenizer
from hf_icot.training.config import ICoTConfig, schedule_from_config
from hf_icot.training.trainer import ICoTTrainer
from results.parity.theory import (
    LinearAttentionParityConfig,
    LogICoTParityConfig,
    ParityMLPConfig,
    RoundingCallback,
    check_parity_data,
)
from results.parity.theory.log_icot_parity import level_mask, phi, tree_levels
from results.parity.theory.parity_layout import sequence_length

N, K = 8, 4
REPO = Path(__file__).resolve().parents[2]
#: A run folder written before the layout move, with a Log-ICoT model saved by model_type (its README says how).
OLD_RUN = REPO / "tests" / "fixtures" / "run_before_layout_move"


def _data(layout: str, n: int = N, k: int = K, size: int = 96):
    task_args = {"n_bits": n, "k": k, "cot_layout": layout, "train_size": size, "validation_size": 16}
    return build_dataset("parity", {**task_args, "test_size": 16, "seed": 0})[0]


def _args(tmp_path, schedule: str = "log_icot", **extra) -> ICoTConfig:
    values = dict(
        output_dir=str(tmp_path / "run"), schedule=schedule, removal_fill="pad", max_steps=4,
        per_device_train_batch_size=16, per_device_eval_batch_size=16, learning_rate=1.0, logging_steps=1,
        report_to="none", use_cpu=True, save_strategy="no", evaluate_each_stage=False,
        keep_stage_checkpoints=False, stage_unit="steps", stage_length=1, lr_scheduler_type="constant",
    )  # fmt: skip
    values.update(extra)
    return ICoTConfig(**values)


def _model(model_type: str, args: ICoTConfig, dataset, **fields):
    scratch = {"model_type": model_type, "n_bits": N, "k": K, **fields}
    return load_model_and_tokenizer(ModelArguments(scratch_model=scratch), schedule_from_config(args).layout, dataset)


def test_phi_turns_the_mean_of_two_signs_into_their_product() -> None:
    for a in (-1.0, 1.0):
        for b in (-1.0, 1.0):
            assert phi(torch.tensor((a + b) / 2)).item() == pytest.approx(a * b, abs=1e-6)
    t = torch.tensor([0.0, 1.0, -1.0], requires_grad=True)
    phi(t).sum().backward()
    assert torch.allclose(t.grad, torch.zeros(3), atol=1e-5)  # vanishing derivative at 0 and ±1


def test_level_mask_blocks_exactly_what_it_should() -> None:
    n, k = 10, 8
    mask = level_mask(tree_levels(n, k))
    # Independent construction: position of every node from datasets_builder's levels, loops over pairs.
    levels = {p: 0 for p in range(n)}
    levels.update({n + 1 + s: level for s, level in enumerate(cot_levels(Params(n_bits=n, k=k, cot_layout="tree", train_size=1, validation_size=1, test_size=1)))})  # fmt: skip
    expected = torch.zeros(sequence_length(n, k), sequence_length(n, k), dtype=torch.bool)
    for i, level_i in levels.items():
        for j, level_j in levels.items():
            expected[i, j] = level_i >= 1 and level_j < level_i
    assert torch.equal(mask, expected)
    assert not mask[:n].any() and not mask[n].any()  # bits and separators attend to nothing


def test_only_the_positional_block_of_w_kq_learns_and_rounding_leaves_integers(tmp_path) -> None:
    dataset = _data("tree")
    args = _args(tmp_path)
    model, tokenizer = _model("log_icot_parity", args, dataset)
    trainable = {name for name, p in model.named_parameters() if p.requires_grad}
    assert trainable == {f"layers.{i}.w_kq_pos" for i in range(2)}
    T = sequence_length(N, K)
    before = [layer.w_kq_pos.detach().clone() for layer in model.layers]
    rounding = RoundingCallback(grid=1.0, at="step")
    trainer = ICoTTrainer(
        model=model, args=args, train_dataset=dataset["train"], processing_class=tokenizer, callbacks=[rounding]
    )
    trainer.train()
    assert rounding.roundings == 4 and any("loss" in log for log in trainer.state.log_history)
    for layer in model.layers:
        full = layer.key_query_matrix().detach()
        assert full.shape == (T + 1, T + 1)
        assert torch.equal(full[T:], torch.zeros_like(full[T:])) and torch.equal(
            full[:, T:], torch.zeros_like(full[:, T:])
        )
        assert torch.equal(layer.w_kq_pos, torch.round(layer.w_kq_pos))  # every attention weight an integer
    assert any(not torch.equal(layer.w_kq_pos, old) for layer, old in zip(model.layers, before))


@pytest.mark.parametrize(
    ("model_type", "layout", "schedule", "extra"),
    [
        ("log_icot_parity", "tree", "log_icot", {}),
        ("linear_attention_parity", "chain", "stepwise", {"remove_per_epoch": 6.0, "learning_rate": 0.05}),
    ],
)
def test_a_few_steps_train_save_load_and_generate(tmp_path, model_type, layout, schedule, extra) -> None:
    dataset = _data(layout)
    args = _args(tmp_path, schedule, **extra)
    model, tokenizer = _model(model_type, args, dataset)
    before = [p.detach().clone() for p in model.parameters()]
    trainer = ICoTTrainer(model=model, args=args, train_dataset=dataset["train"], processing_class=tokenizer)
    trainer.train()
    assert any("loss" in log for log in trainer.state.log_history)
    assert any(not torch.equal(p, old) for p, old in zip(model.parameters(), before))
    model.save_pretrained(tmp_path / "saved")
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "saved")
    batch = trainer.data_collator.render(
        list(trainer.train_dataset.select(range(4))), [trainer.schedule.specs(0, [0])[0]] * 4
    )
    with torch.no_grad():
        ours, theirs = model(**batch).logits, loaded(**batch).logits
        assert torch.equal(ours, theirs)
    metrics = evaluate_generation(
        loaded, tokenizer, dataset["test"], modes=("implicit", "explicit"), layout=trainer.layout
    )
    assert 0.0 <= metrics["implicit/answer_em"] <= 1.0 and "explicit/cot_em" in metrics


def test_the_log_icot_solution_answers_every_question_in_both_modes(tmp_path) -> None:
    from datasets_builder.tasks.parity import secret_support

    dataset = _data("tree")
    model, tokenizer = _model("log_icot_parity", _args(tmp_path), dataset)
    levels = tree_levels(N, K)
    params = Params(n_bits=N, k=K, cot_layout="tree", train_size=96, validation_size=16, test_size=16)
    children = {0: secret_support(params)}  # level 0: the secret bits, in the order the tree pairs them
    with torch.no_grad():  # each node attends to its two children with score 20, to the rest with 0
        for level, layer in enumerate(model.layers, start=1):
            nodes = [p for p in range(len(levels)) if levels[p] == level]
            for index, p in enumerate(nodes):
                layer.w_kq_pos[p, children[level - 1][2 * index]] = 20.0
                layer.w_kq_pos[p, children[level - 1][2 * index + 1]] = 20.0
            children[level] = nodes
    metrics = evaluate_generation(model, tokenizer, dataset["test"], modes=("implicit", "explicit"))
    assert metrics["implicit/answer_em"] == 1.0 and metrics["explicit/answer_em"] == 1.0
    assert metrics["explicit/cot_em"] == 1.0


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: LogICoTParityConfig(n_bits=20, k=6), "k=6 is not a power of two"),
        (lambda: LogICoTParityConfig(n_bits=4, k=8), "n_bits=4 is below k=8"),
        (lambda: LogICoTParityConfig(n_bits=20, k=8, num_layers=2), "num_layers=2 does not match log2(k)=3"),
        (lambda: LinearAttentionParityConfig(n_bits=2, k=3), "n_bits=2 is below k=3"),
        (lambda: ParityMLPConfig(n_bits=8, k=1), "k=1 is not allowed"),
        (lambda: RoundingCallback(grid=0), "rounding grid 0 is not allowed"),
    ],
)
def test_bad_configurations_are_one_sentence(build, message) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        build()


def test_a_chain_dataset_is_refused_by_the_tree_model() -> None:
    chain = _data("chain")["train"]
    with pytest.raises(ValueError, match=r"^the data's CoT is not a binary tree .*cot_layout tree\.$"):
        check_parity_data("log_icot_parity", {"n_bits": N, "k": K}, chain)
    no_levels = chain.remove_columns("cot_level")
    with pytest.raises(ValueError, match="not a binary tree"):
        check_parity_data("log_icot_parity", {"n_bits": N, "k": K}, no_levels)
    with pytest.raises(ValueError, match="configured for n_bits=12"):
        check_parity_data("linear_attention_parity", {"n_bits": 12, "k": K}, chain)


def test_rounding_a_model_without_attention_weights_is_one_sentence() -> None:
    gpt2 = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=8, n_head=1, vocab_size=8, n_positions=8))
    with pytest.raises(ValueError, match=r"^rounding was asked for GPT2LMHeadModel, which has no attention weights"):
        RoundingCallback().bind(gpt2)
    callback = RoundingCallback(grid=0.5, parameter_names=["transformer.h.0.attn.c_attn.weight"])
    callback.bind(gpt2)
    callback.round_now()
    weight = gpt2.transformer.h[0].attn.c_attn.weight
    assert torch.equal(weight * 2, torch.round(weight * 2))
    assert math.isclose(callback.grid, 0.5)


@pytest.mark.parametrize(("model_type", "layout"), [("log_icot_parity", "tree"), ("linear_attention_parity", "chain")])
def test_one_step_over_accumulated_micro_batches_is_the_step_over_the_whole_batch(
    tmp_path, model_type, layout
) -> None:
    # The papers' algorithm at a large B needs gradient accumulation: 4 micro-batches of 24 must move the weights as
    # one batch of 96 does (the models' mean loss must be divided by the 4 steps, not summed over them). No clipping:
    # it would hide the scale.
    dataset = _data(layout)
    weights = []
    for batch, accumulation in ((96, 1), (24, 4)):
        args = _args(tmp_path / f"b{batch}", schedule="full_cot", max_steps=1, optim="sgd", learning_rate=5.0,
                     max_grad_norm=0.0, per_device_train_batch_size=batch, gradient_accumulation_steps=accumulation,
                     train_sampling_strategy="sequential")  # fmt: skip
        model, tokenizer = _model(model_type, args, dataset)
        before = {name: p.detach().clone() for name, p in model.named_parameters()}
        ICoTTrainer(model=model, args=args, train_dataset=dataset["train"], processing_class=tokenizer).train()
        weights.append({name: p.detach() - before[name] for name, p in model.named_parameters()})
    whole, accumulated = weights
    assert any(update.abs().max() > 1e-3 for update in whole.values()), "the step moved nothing"
    for name in whole:
        assert torch.allclose(accumulated[name], whole[name], rtol=1e-4, atol=1e-6), name


def test_a_model_saved_before_the_move_loads_by_its_model_type() -> None:
    # results.parity.theory, imported above, registers the models: the saved config.json names only "log_icot_parity".
    model = AutoModelForCausalLM.from_pretrained(OLD_RUN / "log_icot_parity")
    assert type(model).__name__ == "LogICoTParityModel" and model.config.k == 4
    assert type(model).__module__ == "results.parity.theory.log_icot_parity"


def test_the_library_knows_the_theory_models_only_once_the_study_registers_them() -> None:
    code = (
        "import hf_icot.modeling.loading, hf_icot.training.trainer\n"
        "from transformers import CONFIG_MAPPING\n"
        "before = 'log_icot_parity' in CONFIG_MAPPING\n"
        "import results.parity.theory\n"
        "from hf_icot.modeling.loading import _is_causal_lm\n"
        "print(before, _is_causal_lm('log_icot_parity'), _is_causal_lm('parity_mlp'))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.stdout.split() == ["False", "True", "False"], result.stderr[-2000:]
