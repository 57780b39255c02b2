"""Fixtures for the recipe tests: a tiny GPT-2 with a byte-level BPE tokenizer saved locally (the stand-in for
``gpt2``, which cannot be downloaded here), a small multiplication dataset folder, and the recipe run in-process."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import torch

from recipes import icot_gpt2
from tests.hub_server import loopback_hub  # noqa: F401  (a fixture of the push tests)

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "recipes" / "icot_gpt2.py"
#: 2x2 multiplication: short sequences, so a run of a few steps takes seconds.
TASK_ARGS = {"a_digits": 2, "b_digits": 2, "train_size": 48, "validation_size": 8, "test_size": 8, "seed": 0}


def recipe_args(model: Path | str, output_dir: Path, *extra: str, task_args: dict | None = None) -> list[str]:
    """Command-line arguments of a few-step run: 2x2 multiplication built on the fly, one CoT token removed per
    step (3 steps per epoch, so the whole CoT is gone by the end), final evaluation on validation and test."""
    return [
        "--task", "multiplication",
        "--task_args", json.dumps(task_args or TASK_ARGS),
        "--model_name_or_path", str(model),
        "--output_dir", str(output_dir),
        "--num_train_epochs", "4",
        "--per_device_train_batch_size", "16",
        "--per_device_eval_batch_size", "16",
        "--learning_rate", "1e-3",
        "--remove_per_epoch", "8",
        "--removal_smoothing_lambda", "4",
        "--reset_optimizer",
        "--evaluate_each_stage", "false",
        "--keep_stage_checkpoints", "false",
        "--save_strategy", "no",
        "--logging_steps", "1",
        "--report_to", "none",
        "--use_cpu",
        "--seed", "0",
        *extra,
    ]  # fmt: skip


def run_recipe(argv: list[str]) -> dict[str, float]:
    """Parse ``argv`` as the command line of the recipe and run it in this process; returns its metrics."""
    torch.set_num_threads(1)
    return icot_gpt2.main(*icot_gpt2.parse_args(argv))


def multiplication_texts(a_digits: int = 2, b_digits: int = 2) -> list[str]:
    from datasets_builder import registry
    from hf_icot.cot import render_line

    params = registry.make_params("multiplication", a_digits=a_digits, b_digits=b_digits, train_size=200, seed=1)
    dataset = registry.get_task("multiplication").build(params)
    return [render_line(example) for split in dataset.values() for example in split]


def save_tiny_gpt2(folder: Path, n_positions: int = 64, tokenizer_texts: list[str] | None = None) -> Path:
    """A 2-layer GPT-2 (32 wide) and a byte-level BPE ``GPT2TokenizerFast`` trained on multiplication lines, saved
    with ``save_pretrained`` into ``folder`` (safetensors); the tokenizer's eos is ``<|endoftext|>`` as in GPT-2."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, GPT2TokenizerFast

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(tokenizer_texts or multiplication_texts(), trainer)
    eos = "<|endoftext|>"
    tokenizer = GPT2TokenizerFast(tokenizer_object=backend, bos_token=eos, eos_token=eos, unk_token=eos)
    tokenizer.save_pretrained(folder)
    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=n_positions,
        n_embd=32,
        n_layer=2,
        n_head=2,
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    GPT2LMHeadModel(config).save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_gpt2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Folder of a tiny GPT-2 with a BPE tokenizer, loadable with ``AutoModelForCausalLM.from_pretrained``."""
    return save_tiny_gpt2(tmp_path_factory.mktemp("tiny_gpt2"))


@pytest.fixture
def capture_saved_model(monkeypatch: pytest.MonkeyPatch) -> list:
    """Records the model object the recipe hands to ``hf_icot.publishing.saving.save_model`` (the trained model in memory)."""
    import hf_icot.publishing.saving

    saved: list = []
    original = hf_icot.publishing.saving.save_model

    def recording_save_model(model, *args, **kwargs):
        saved.append(copy.deepcopy(model))  # before saving: merging changes a PEFT model in place
        return original(model, *args, **kwargs)

    monkeypatch.setattr(hf_icot.publishing.saving, "save_model", recording_save_model)
    return saved
