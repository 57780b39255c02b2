"""Tiny tasks, tokenizers and models for the trainer tests (no dependency on datasets_builder).

* :func:`counting_examples`: questions are ``length`` letters from {a, b}; the CoT is the running count of ``a``
  after each letter (one step per letter), the answer is the final count. Without CoT a small transformer solves it
  in one pass (attention can average), so a curriculum can reach zero CoT tokens and stay accurate.
* :func:`tiny_gpt2`: a 1–2-layer GPT-2 built from a config, saved and reloaded through ``from_pretrained``.
* :func:`tiny_bpe_tokenizer`: a byte-level BPE trained offline on task text, wrapped as ``GPT2TokenizerFast``.
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import datasets
import torch
from tokenizers import ByteLevelBPETokenizer
from transformers import AutoModelForCausalLM, AutoTokenizer, GPT2Config, GPT2LMHeadModel, GPT2TokenizerFast

from hf_icot.cot import example_features


def counting_example(letters: tuple[str, ...]) -> dict:
    counts, count = [], 0
    for letter in letters:
        count += letter == "a"
        counts.append(str(count))
    return {"question": " ".join(letters), "cot": counts, "answer": str(count)}


def counting_examples(length: int = 6, seed: int = 0, n_test: int = 16) -> tuple[datasets.Dataset, datasets.Dataset]:
    """All 2**length questions, split into train and a disjoint test set of ``n_test`` (deterministic)."""
    rows = [counting_example(letters) for letters in itertools.product("ab", repeat=length)]
    random.Random(seed).shuffle(rows)
    features = example_features()
    return (
        datasets.Dataset.from_list(rows[n_test:], features=features),
        datasets.Dataset.from_list(rows[:n_test], features=features),
    )


def tiny_gpt2(vocab_size: int, folder: Path, n_layer: int = 2, n_embd: int = 64, n_positions: int = 64, seed: int = 0):
    """A small GPT-2, saved to ``folder`` and reloaded through ``AutoModelForCausalLM`` (safetensors)."""
    torch.manual_seed(seed)
    config = GPT2Config(
        vocab_size=vocab_size,
        n_positions=n_positions,
        n_embd=n_embd,
        n_layer=n_layer,
        n_head=4,
        bos_token_id=1,
        eos_token_id=1,
    )
    GPT2LMHeadModel(config).save_pretrained(folder)
    return AutoModelForCausalLM.from_pretrained(folder)


def tiny_bpe_tokenizer(texts: list[str], folder: Path) -> GPT2TokenizerFast:
    """A byte-level BPE with a small vocabulary trained on ``texts`` (multi-character merges, so BPE tokens and
    words differ), saved and reloaded as a GPT-2 tokenizer."""
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(texts, vocab_size=300, min_frequency=1, special_tokens=["<|endoftext|>"])
    folder.mkdir(parents=True, exist_ok=True)
    bpe.save_model(str(folder))
    tokenizer = GPT2TokenizerFast(
        vocab=str(folder / "vocab.json"),
        merges=str(folder / "merges.txt"),
        eos_token="<|endoftext|>",
        bos_token="<|endoftext|>",
        unk_token="<|endoftext|>",
    )
    tokenizer.save_pretrained(folder)
    return AutoTokenizer.from_pretrained(folder)


def latent_config(tmp_path: Path, **overrides):
    """A few-step CPU ``ICoTConfig`` writing to ``tmp_path/run`` (the latent methods' tests), ``overrides`` on top."""
    from hf_icot.training.config import ICoTConfig

    values = dict(
        output_dir=str(tmp_path / "run"), per_device_train_batch_size=16, learning_rate=3e-3, report_to="none",
        use_cpu=True, save_strategy="no", disable_tqdm=True, seed=0, logging_steps=3,
    )  # fmt: skip
    values.update(overrides)
    return ICoTConfig(**values)
