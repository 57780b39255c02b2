"""Any causal LM through the recipe: tiny GPT-2 (learned positions), Llama and Mistral (rotary positions) models
built from config and saved with a word-level tokenizer, trained by ``recipes/icot_gpt2.py`` to answer counting
questions without CoT (a stepwise curriculum from the full 8-token CoT to none), with and without kept positions,
each reach the implicit accuracy GPT-2 reaches there (Mistral's runs under ``-m slow``); LoRA on Llama's attention
projections trains, saves the adapter alone and reloads to the same generations.

Qwen2 is not among them: for a folder whose config says ``qwen2``, transformers' ``AutoTokenizer`` loads
``Qwen2Tokenizer`` whatever ``tokenizer_config.json`` names, and it drops the ``####`` of a word-level vocabulary
(``test_qwen2_folder_loads_the_saved_word_level_tokenizer`` records it).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer, GPT2Config, LlamaConfig, MistralConfig, Qwen2Config

from hf_icot.cot import render_line
from hf_icot.curriculum.layout import SequenceLayout
from hf_icot.data.tokenization import build_word_level_tokenizer
from hf_icot.evaluation.generation_accuracy import evaluate_generation
from tests.hf_icot.tiny_task import counting_examples
from tests.recipes.conftest import recipe_args, run_recipe

#: Implicit answer exact match GPT-2 reaches on this task with either fill (0.97 to 1.0 on the 32 test questions).
BAR = 0.9
#: One CoT token removed per epoch (13 steps), all 8 gone from epoch 8; 50 epochs, 650 steps.
CURRICULUM = [
    "--num_train_epochs", "50",
    "--remove_per_epoch", "1",
    "--remove_all_when_remove_beyond", "8",
    "--removal_smoothing_lambda", "inf",
    "--learning_rate", "3e-3",
    "--lr_scheduler_type", "linear",
]  # fmt: skip


def tiny_config(family: str, tokenizer):
    """A 2-layer, 64-wide config of ``family`` for ``tokenizer``'s vocabulary (eos doubles as bos)."""
    ids = {
        "vocab_size": len(tokenizer),
        "bos_token_id": tokenizer.eos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
    }
    if family == "gpt2":
        return GPT2Config(n_positions=64, n_embd=64, n_layer=2, n_head=4, **ids)
    rotary = {"llama": LlamaConfig, "mistral": MistralConfig, "qwen2": Qwen2Config}[family]
    return rotary(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=64,
        **ids,
    )


@pytest.fixture(scope="module")
def counting(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Counting questions of 8 letters as reference text files (train 208, validation 16, test 32), the recipe's
    ``--task reference_text`` input, and a word-level tokenizer of their words."""
    train, held_out = counting_examples(length=8, n_test=48)
    folder = tmp_path_factory.mktemp("counting")
    splits = {"train": train, "valid": held_out.select(range(16)), "test": held_out.select(range(16, 48))}
    for stem, rows in splits.items():
        (folder / f"{stem}.txt").write_text("".join(render_line(row) + "\n" for row in rows), encoding="utf-8")
    return {"folder": folder, "test": splits["test"], "tokenizer": build_word_level_tokenizer([train, held_out])}


def save_tiny_model(family: str, folder: Path, tokenizer) -> Path:
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(tiny_config(family, tokenizer)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def counting_args(model: Path, output: Path, task_folder: Path, *extra: str) -> list[str]:
    """The recipe's command line for ``model`` on the counting files (the shared few-step run, its task replaced)."""
    argv = recipe_args(model, output, *CURRICULUM, *extra)
    at = argv.index("--task")
    argv[at : at + 4] = ["--task", "reference_text", "--task_args", json.dumps({"path": [str(task_folder)]})]
    return argv


@pytest.mark.parametrize("fill", ["drop", "keep_position"])
@pytest.mark.parametrize(
    "family",
    # Mistral's runs repeat Llama's check (rotary positions, the same loop; ~40 s each): under -m slow.
    ["gpt2", "llama", pytest.param("mistral", marks=pytest.mark.slow)],
)
def test_each_family_internalizes_counting_as_gpt2_does(family, fill, counting, tmp_path):
    model = save_tiny_model(family, tmp_path / family, counting["tokenizer"])
    metrics = run_recipe(counting_args(model, tmp_path / "run", counting["folder"], "--removal_fill", fill))
    assert metrics["test/implicit/answer_em"] >= BAR and metrics["validation/implicit/answer_em"] >= BAR, metrics
    if fill == "keep_position":
        # The answer was trained where the full CoT would have ended: without those positions the saved model fails,
        # so the accuracy above shows generation gave it the kept positions.
        trained = AutoModelForCausalLM.from_pretrained(tmp_path / "run")
        tokenizer = AutoTokenizer.from_pretrained(tmp_path / "run")
        unshifted = evaluate_generation(trained, tokenizer, counting["test"], modes=["implicit"])
        assert unshifted["implicit/answer_em"] < 0.5


def test_lora_on_llama_attention_saves_the_adapter_and_reloads_to_the_same_generations(
    counting, tmp_path, capture_saved_model
):
    from peft import PeftModel

    base = save_tiny_model("llama", tmp_path / "llama", counting["tokenizer"])
    output = tmp_path / "lora"
    lora = ["--use_peft", "--lora_r", "4", "--lora_target_modules", "q_proj", "v_proj"]
    # Saving, reloading and a falling loss need no accuracy: 40 of the curriculum's 650 steps (3 tokens removed).
    run_recipe(counting_args(base, output, counting["folder"], "--removal_fill", "keep_position", *lora,
                             "--max_steps", "40"))  # fmt: skip

    adapter = json.loads((output / "adapter_config.json").read_text())
    assert sorted(adapter["target_modules"]) == ["q_proj", "v_proj"] and adapter["fan_in_fan_out"] is False
    assert not (output / "model.safetensors").exists()
    weights = load_file(output / "adapter_model.safetensors")
    lora_b = [tensor for name, tensor in weights.items() if "lora_B" in name]
    assert len(lora_b) == 4 and all(tensor.abs().sum() > 0 for tensor in lora_b)  # B starts at zero: it trained
    losses = [entry["loss"] for entry in json.loads((output / "training_log.json").read_text()) if "loss" in entry]
    assert sum(losses[-10:]) < sum(losses[:10])

    reloaded = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base), output)
    tokenizer = AutoTokenizer.from_pretrained(output)

    def generations(model) -> dict[str, list[list[int]]]:
        _, predictions = evaluate_generation(
            model, tokenizer, counting["test"], modes=["implicit", "explicit"], return_predictions=True,
            layout=SequenceLayout(fill="keep_position"),
        )  # fmt: skip
        return {mode: [p["generated_ids"] for p in rows] for mode, rows in predictions.items()}

    assert generations(reloaded) == generations(capture_saved_model[0])


@pytest.mark.xfail(
    strict=True,
    reason="transformers 5 AutoTokenizer loads Qwen2Tokenizer for a qwen2 config whatever tokenizer_config.json "
    "names (MODELS_WITH_INCORRECT_HUB_TOKENIZER_CLASS); it drops the word-level '####'",
)
def test_qwen2_folder_loads_the_saved_word_level_tokenizer(counting, tmp_path):
    folder = save_tiny_model("qwen2", tmp_path / "qwen2", counting["tokenizer"])
    loaded = AutoTokenizer.from_pretrained(folder)
    assert loaded.tokenize("a b #### 2") == ["a", "b", "####", "2"]


def test_a_tokenizer_that_loses_the_answer_marker_stops_the_run_before_training(counting, tmp_path):
    # The qwen2 folder above: without the check it trains to zero loss on sequences without '####' and scores 0.
    folder = save_tiny_model("qwen2", tmp_path / "qwen2", counting["tokenizer"])
    output = tmp_path / "run"
    with pytest.raises(ValueError) as caught:
        run_recipe(counting_args(folder, output, counting["folder"]))
    message = str(caught.value)
    assert (
        "cannot train on this data: the tokenizer (Qwen2Tokenizer) does not keep the answer marker '####'" in message
    )
    assert "\n" not in message
    assert not output.exists()
