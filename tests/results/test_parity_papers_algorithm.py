"""The papers' training algorithm for the Log-ICoT theory model, in the Trainer's world: plain gradient descent, one
step per stage on a fresh batch, the learning rate set from the model's scale, rounding after every update. On a
hand-checkable case (n = 8 bits, k = 2: one node, the root) one step from W = 0 lands on the two children."""

from __future__ import annotations

import math

import pytest
import torch

from datasets_builder import build_dataset
from datasets_builder.tasks.parity import Params, secret_support
from hf_icot.command_line.arguments import ModelArguments
from hf_icot.modeling.loading import load_model_and_tokenizer
from hf_icot.training.config import ICoTConfig, schedule_from_config
from hf_icot.training.trainer import ICoTTrainer
from results.parity.theory import RoundingCallback
from results.parity.theory.inspection import children_report, node_children
from results.parity.theory.log_icot_parity import one_step_learning_rate

N, K, TRAIN = 8, 2, 192  # 256 distinct inputs: 192 to train on, 32 each to validate and test


def test_the_learning_rate_follows_the_models_scale() -> None:
    # target * 2 m^2 N / (s pi^2) with m = n + k - 2 positions and N = k + 3 labelled tokens
    assert one_step_learning_rate(30, 16) == pytest.approx(8 * 2 * 44**2 * 19 / (8 * math.pi**2))
    assert one_step_learning_rate(30, 16, target_score=4) == pytest.approx(one_step_learning_rate(30, 16) / 2)
    assert one_step_learning_rate(8, 2, readout_scale=16) == pytest.approx(one_step_learning_rate(8, 2) / 2)


def test_one_plain_gradient_step_from_zero_lands_on_the_children(tmp_path) -> None:
    torch.set_num_threads(1)
    task = {"n_bits": N, "k": K, "cot_layout": "tree", "train_size": TRAIN, "validation_size": 32, "test_size": 32}
    dataset, _ = build_dataset("parity", {**task, "seed": 0})
    args = ICoTConfig(
        output_dir=str(tmp_path / "run"), schedule="log_icot", removal_fill="pad", stage_unit="steps", stage_length=1,
        max_steps=1, per_device_train_batch_size=TRAIN, optim="sgd", learning_rate=one_step_learning_rate(N, K),
        lr_scheduler_type="constant", weight_decay=0.0, max_grad_norm=0.0, report_to="none", use_cpu=True,
        save_strategy="no", evaluate_each_stage=False, keep_stage_checkpoints=False, logging_steps=1, seed=0,
    )  # fmt: skip
    scratch = {"model_type": "log_icot_parity", "n_bits": N, "k": K}
    model, tokenizer = load_model_and_tokenizer(
        ModelArguments(scratch_model=scratch), schedule_from_config(args).layout, dataset
    )
    assert torch.equal(model.layers[0].w_kq_pos, torch.zeros_like(model.layers[0].w_kq_pos))
    rounding = RoundingCallback(grid=1.0, at="step")
    trainer = ICoTTrainer(model=model, args=args, train_dataset=dataset["train"], processing_class=tokenizer,
                          callbacks=[rounding])  # fmt: skip
    trainer.train()
    assert trainer.state.global_step == 1 and rounding.roundings == 1
    assert (
        type(trainer.optimizer.optimizer if hasattr(trainer.optimizer, "optimizer") else trainer.optimizer).__name__
        == "SGD"
    )
    support = secret_support(Params(**task))
    root = N + 1  # the one CoT node
    assert node_children("log_icot_parity", N, K, support) == {root: support}
    row = model.layers[0].w_kq_pos[root, :N]
    assert torch.equal(row, torch.round(row)), "rounded to integers after the update"
    assert sorted(torch.topk(row, 2).indices.tolist()) == support
    # The formula aims at a gap of 8 from a first-order estimate; at m = 8 positions the attended mean is not small
    # and the step gives the children 4-5 over every other entry (which share a shift the softmax ignores).
    others = row[[b for b in range(N) if b not in support]]
    assert row[support].min() - others.max() >= 4
    report = children_report(model, support)
    assert report["layers"] == [{"layer": 1, "nodes": 1, "found": 1}] and report["nodes"][0]["share"] >= 0.9


def test_the_papers_config_uses_the_theory_learning_rate_and_batch() -> None:
    import yaml

    from tests.recipes.conftest import REPO

    config = yaml.safe_load((REPO / "results/parity/configs/parity_log_icot_paper.yaml").read_text())
    n, k = config["task_args"]["n_bits"], config["task_args"]["k"]
    assert config["learning_rate"] == pytest.approx(one_step_learning_rate(n, k))
    assert config["per_device_train_batch_size"] == n**3 and config["optim"] == "sgd"
    assert config["task_args"]["train_size"] == config["max_steps"] * n**3, "a fresh batch at every step"
    assert config["stage_length"] == 1 and config["stage_unit"] == "steps", "one step per stage"


def test_model_b_internalizes_its_chain_solution_only_when_removed_steps_read_its_own_output() -> None:
    """The chain solution set by hand (1/2 on each step's two inputs): with every step removed it still answers when
    a removed position reads what the model computed there, and is at chance when it reads 0."""
    from results.parity.theory.linear_attention_parity import (
        LinearAttentionParityConfig,
        LinearAttentionParityModel,
        chain_learning_rate,
    )

    n, k = 10, 4
    support = secret_support(Params(n_bits=n, k=k, cot_layout="chain", train_size=1, validation_size=1, test_size=1))
    generator = torch.Generator().manual_seed(0)
    bits = torch.randint(0, 2, (256, n), generator=generator)
    truth = (1 - 2 * bits.float())[:, support].prod(1)
    accuracy = {}
    for reads in ("zero", "computed"):
        model = LinearAttentionParityModel(LinearAttentionParityConfig(n_bits=n, k=k, removed_reads=reads))
        first, weights = n + 1, torch.zeros_like(model.w_kq)
        weights[first, support[:2]] = 0.5
        for j in range(1, k - 1):
            weights[first + j, [first + j - 1, support[j + 1]]] = 0.5
        model.w_kq.data.copy_(weights)
        c = model.config
        ids = torch.full((256, n + k + 4), c.placeholder_token_id)  # every step removed
        ids[:, :n] = torch.where(bits == 1, c.one_token_id, c.zero_token_id)
        with torch.no_grad():
            accuracy[reads] = (model.compute(ids)["h"][:, n + k - 1].sign() == truth).float().mean().item()
    assert accuracy["computed"] == 1.0 and 0.35 < accuracy["zero"] < 0.65
    assert chain_learning_rate(6) == pytest.approx(9 / (8 * math.pi))
    chain = LinearAttentionParityModel(LinearAttentionParityConfig(n_bits=n, k=k, init="chain")).w_kq
    chain = chain.detach()
    assert (
        chain[n + 2, n + 1] == 0.5
        and chain[n + 2].sum() == 0.5
        and chain[n + 1, :n].sum().item() == pytest.approx(1.0)
    )
    with pytest.raises(ValueError, match=r"^removed_reads='ones' is unknown; allowed: zero, computed\.$"):
        LinearAttentionParityConfig(removed_reads="ones")
