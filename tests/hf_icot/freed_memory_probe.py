"""Run in a fresh process by ``test_freed_memory.py`` (malloc's settings are the process's, so the test's own
process, where other tests have trained, cannot show a before): the page faults per step of a plain training loop, a tiny ICoTTrainer run with ``reuse_freed_memory`` off, the same run with it on, and the faults again.
Prints one JSON line."""

from __future__ import annotations

import json
import resource
import sys
import tempfile

import torch
from transformers import AutoModelForCausalLM, GPT2Config, GPT2LMHeadModel

from hf_icot.data.tokenization import build_word_level_tokenizer
from hf_icot.training import freed_memory
from hf_icot.training.config import ICoTConfig
from hf_icot.training.trainer import ICoTTrainer
from tests.hf_icot.tiny_task import counting_examples


def faults_per_step(steps: int = 6) -> float:
    """Minor page faults per training step of a 4-layer, 128-wide GPT-2 on a (32, 70) batch (the stepwise
    reference's 4x4 shape), after two steps to warm up."""
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=400, n_positions=128, n_embd=128, n_layer=4, n_head=4)).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, 400, (32, 70))

    def step() -> None:
        model(input_ids=ids, labels=ids).loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    step(), step()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(steps):
        step()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / steps


def losses(reuse: bool, folder: str) -> list[float]:
    train, _ = counting_examples(6)
    tokenizer = build_word_level_tokenizer(train)
    config = GPT2Config(vocab_size=len(tokenizer), n_embd=32, n_layer=2, n_head=2, n_positions=32, eos_token_id=1)
    torch.manual_seed(0)
    args = ICoTConfig(
        output_dir=folder, per_device_train_batch_size=8, max_steps=6, logging_steps=1, report_to="none",
        use_cpu=True, save_strategy="no", evaluate_each_stage=False, seed=0, reuse_freed_memory=reuse,
        disable_tqdm=True,
    )  # fmt: skip
    trainer = ICoTTrainer(
        model=AutoModelForCausalLM.from_config(config), args=args, train_dataset=train, processing_class=tokenizer
    )
    trainer.train()
    return [row["loss"] for row in trainer.state.log_history if "loss" in row]


def main() -> None:
    before = faults_per_step()
    with tempfile.TemporaryDirectory() as folder:
        off = losses(False, folder)
        kept_after_off = freed_memory._kept
        on = losses(True, folder)
    after = faults_per_step()
    json.dump(
        {"faults_before": before, "faults_after": after, "losses_off": off, "losses_on": on,
         "kept_after_off": kept_after_off, "kept_after_on": freed_memory._kept},
        sys.stdout,
    )  # fmt: skip
    print()


if __name__ == "__main__":
    main()
