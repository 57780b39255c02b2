"""The GPT-2 recipe end to end on a tiny GPT-2 with a BPE tokenizer: train a few steps through the curriculum,
evaluate, save, reload, card; LoRA saved alone or merged; two CPU processes under ``accelerate launch``; and the
one-sentence errors for bad input."""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from huggingface_hub import ModelCard
from transformers import AutoModelForCausalLM, AutoTokenizer

from hf_icot.cot import cot_token_count
from hf_icot.data.encoding import encode_prompt
from hf_icot.evaluation.generation import generate_batched
from hf_icot.evaluation.generation_accuracy import evaluate_generation, reportable_metrics
from tests.recipes.conftest import RECIPE, REPO, TASK_ARGS, recipe_args, run_recipe, save_tiny_gpt2


def _questions() -> list[str]:
    from datasets_builder import registry

    params = registry.make_params("multiplication", **TASK_ARGS)
    return list(registry.get_task("multiplication").build(params)["test"]["question"])


def _generations(model, tokenizer, questions: list[str]) -> dict[str, list[list[int]]]:
    """Greedy continuations of every question in implicit and explicit mode."""
    return {
        mode: generate_batched(model, tokenizer, [encode_prompt(q, tokenizer, mode=mode) for q in questions], 24)
        for mode in ("implicit", "explicit")
    }


@pytest.fixture(scope="module")
def full_run(tiny_gpt2: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One run of the recipe on a dataset folder written by datasets_builder (loaded by path, as from the Hub)."""
    from datasets_builder import publish, registry

    data = tmp_path_factory.mktemp("data") / "multiplication"
    publish.build_config(data, "multiplication", registry.make_params("multiplication", **TASK_ARGS), progress=False)
    output = tmp_path_factory.mktemp("run") / "out"
    argv = recipe_args(tiny_gpt2, output, "--card_license", "mit")
    task_at = argv.index("--task")
    argv[task_at : task_at + 4] = ["--dataset_name_or_path", str(data), "--dataset_config", "mult_2x2"]
    argv_used = list(argv)
    with pytest.MonkeyPatch.context() as patch:
        import hf_icot.publishing.saving

        saved: list = []
        original = hf_icot.publishing.saving.save_model
        patch.setattr(
            hf_icot.publishing.saving,
            "save_model",
            lambda model, *a, **k: saved.append(model) or original(model, *a, **k),
        )
        metrics = run_recipe(argv)
    return {"output": output, "metrics": metrics, "model": saved[0], "data": data, "argv": argv_used}


def test_run_folder_holds_model_tokenizer_curves_card(full_run: dict) -> None:
    output = full_run["output"]
    for name in ("model.safetensors", "config.json", "tokenizer.json", "README.md", "training_curves.png"):
        assert (output / name).is_file(), name
    assert not list(output.glob("*.bin")) and not list(output.glob(".*")), "no pickles, no leftover staging files"
    assert (output / "training_curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    history = json.loads((output / "training_log.json").read_text())
    losses = [entry for entry in history if "loss" in entry]
    assert len(losses) == 12  # 48 examples / 16 per batch * 4 epochs, logged every step
    # 3 steps per epoch and 8 tokens per epoch: P = round(3 / 8) = 0, so step s removes s + 1 tokens (plus the
    # smoothing offsets), until the count reaches the longest CoT of the training data and everything goes.
    tokenizer = AutoTokenizer.from_pretrained(output)
    train = _split("train")
    longest = max(cot_token_count(example, tokenizer) for example in train)
    expected = [step + 1 if step + 1 < longest else math.inf for step in range(12)]
    assert [entry["cot/removed_tokens"] for entry in losses] == expected
    assert [entry["cot/stage"] for entry in losses] == [min(step + 1, longest) for step in range(12)]
    assert losses[-1]["cot/kept_tokens_mean"] == 0, "the curriculum ends with no CoT tokens"
    # eval_results.json holds every score, and speeds only for modes whose answers are right.
    assert json.loads((output / "eval_results.json").read_text()) == reportable_metrics(full_run["metrics"])


def test_same_seed_same_bytes(full_run: dict, tmp_path: Path) -> None:
    argv = list(full_run["argv"])
    argv[argv.index("--output_dir") + 1] = str(tmp_path / "again")
    run_recipe(argv)
    for name in ("model.safetensors", "tokenizer.json", "config.json", "training_curves.png"):
        assert (tmp_path / "again" / name).read_bytes() == (full_run["output"] / name).read_bytes(), name


def test_saved_model_reloads_and_generates_the_same_answers(full_run: dict) -> None:
    output = full_run["output"]
    model = AutoModelForCausalLM.from_pretrained(output)
    tokenizer = AutoTokenizer.from_pretrained(output)
    questions = _questions()
    assert _generations(model, tokenizer, questions) == _generations(full_run["model"], tokenizer, questions)

    import datasets

    folder = datasets.load_dataset(str(full_run["data"]), "mult_2x2")
    again = evaluate_generation(model, tokenizer, {name: folder[name] for name in ("validation", "test")})
    for key, value in full_run["metrics"].items():
        if key.endswith("_em"):
            assert again[key] == value, key


def test_card_model_index_holds_the_measured_numbers(full_run: dict) -> None:
    card = ModelCard.load(full_run["output"] / "README.md")
    metrics = full_run["metrics"]
    found = {(r.dataset_split, r.metric_name): r.metric_value for r in card.data.eval_results}
    expected = {
        (split, f"{mode.capitalize()} exact match"): metrics[f"{split}/{mode}/answer_em"]
        for split in ("validation", "test")
        for mode in ("implicit", "explicit")
    }
    assert found == expected
    assert {r.dataset_config for r in card.data.eval_results} == {"mult_2x2"}
    assert card.data.license == "mit" and card.data.base_model is None  # a local folder is not a Hub id
    record = json.loads((full_run["data"] / "mult_2x2" / "icot_config.json").read_text())
    assert record["fingerprint"] in card.text
    assert "![Training loss with the curriculum's stage boundaries](training_curves.png)" in card.text
    # 12 steps, one more token every step from the first: the stages end with the one where the longest CoT is gone.
    table = card.text.split("| index | start_step | end_step | removes |", 1)[1].split("\n\n", 1)[0]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in table.strip().splitlines()[1:]]
    assert rows[-1][2:] == ["12", "all CoT tokens"]
    assert not any("all CoT tokens" in row[3] for row in rows[:-1])
    assert "From Explicit CoT to Implicit CoT: Learning to Internalize CoT Step by Step" in card.text
    shown = reportable_metrics(metrics)
    for mode in ("implicit", "explicit"):
        speed = f"{metrics[f'test/{mode}/examples_per_s']:.1f}"
        # a speed is shown where the mode's answers are right (a wrong mode's speed means nothing)
        assert (speed in card.text) == (f"test/{mode}/examples_per_s" in shown and "examples/s" in card.text), mode


def test_card_snippet_loads_the_model_and_prints_its_answer(full_run: dict) -> None:
    text = (full_run["output"] / "README.md").read_text()
    snippet = re.search(r"```python\n(.*?)```", text, re.DOTALL).group(1)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(snippet, "model_card_snippet", "exec"), {})
    question = re.search(r"^question = (.*)$", snippet, re.MULTILINE).group(1)
    model = AutoModelForCausalLM.from_pretrained(full_run["output"])
    tokenizer = AutoTokenizer.from_pretrained(full_run["output"])
    _, predictions = evaluate_generation(
        model, tokenizer, [{"question": json.loads(question), "cot": [], "answer": "0"}], modes=["implicit"],
        return_predictions=True,
    )  # fmt: skip
    assert printed.getvalue().strip() == predictions["implicit"][0]["generated_answer"]


def test_mixture_with_hints_is_evaluated_under_the_hints_asked_for(tiny_gpt2: Path, tmp_path: Path) -> None:
    output = tmp_path / "out"
    argv = recipe_args(
        tiny_gpt2, output, "--schedule", "mixture", "--length_hint", "--removal_side", "right",
        "--eval_modes", "hint=1", "hint=2",
    )  # fmt: skip
    metrics = run_recipe(argv)
    saved = json.loads((output / "eval_results.json").read_text())
    for split in ("validation", "test"):
        for mode in ("implicit", "explicit", "hint=1", "hint=2"):
            assert f"{split}/{mode}/answer_em" in metrics and f"{split}/{mode}/answer_em" in saved, (split, mode)
        assert 0.0 <= saved[f"{split}/hint=2/cot_em"] <= 1.0
    tokenizer = AutoTokenizer.from_pretrained(output)
    assert {"<len_1>", "<len_2>"} <= set(tokenizer.get_vocab())


def test_lora_adapter_is_saved_alone_naming_the_hub_base(tiny_gpt2: Path, tmp_path: Path, capture_saved_model) -> None:
    from peft import PeftModel

    output = tmp_path / "lora"
    run_recipe(
        recipe_args(tiny_gpt2, output, "--use_peft", "--lora_r", "4", "--base_model_hub_id", "someone/gpt2-tiny")
    )
    adapter = json.loads((output / "adapter_config.json").read_text())
    assert adapter["base_model_name_or_path"] == "someone/gpt2-tiny"
    assert adapter["target_modules"] == ["c_attn"] and adapter["fan_in_fan_out"] is True and adapter["r"] == 4
    assert (output / "adapter_model.safetensors").is_file() and not (output / "model.safetensors").exists()
    card = ModelCard.load(output / "README.md")
    assert card.data.library_name == "peft" and card.data.base_model == "someone/gpt2-tiny"
    assert "only the LoRA adapter" in card.text

    tokenizer = AutoTokenizer.from_pretrained(output)
    reloaded = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_gpt2), output)
    questions = _questions()
    assert _generations(reloaded, tokenizer, questions) == _generations(capture_saved_model[0], tokenizer, questions)


def test_lora_merged_into_a_plain_model(tiny_gpt2: Path, tmp_path: Path, capture_saved_model) -> None:
    output = tmp_path / "merged"
    run_recipe(recipe_args(tiny_gpt2, output, "--use_peft", "--lora_r", "4", "--merge_adapter"))
    assert (output / "model.safetensors").is_file() and not (output / "adapter_config.json").exists()
    model = AutoModelForCausalLM.from_pretrained(output)
    assert not any("lora" in name for name, _ in model.named_parameters())
    tokenizer = AutoTokenizer.from_pretrained(output)
    trained = capture_saved_model[0].merge_and_unload()
    questions = _questions()
    assert _generations(model, tokenizer, questions) == _generations(trained, tokenizer, questions)
    assert "the adapter is merged into these weights" in (output / "README.md").read_text()


def test_two_cpu_processes_under_accelerate_launch(tiny_gpt2: Path, tmp_path: Path) -> None:
    output = tmp_path / "ddp"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    with socket.socket() as probe:  # a free port for the processes' rendezvous
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    config = REPO / "recipes" / "accelerate" / "ddp_cpu.yaml"  # use_cpu: true
    launch = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(config), "--multi_gpu"]
    launch += ["--num_processes", "2", "--main_process_port", port]
    # Stage evaluation with generation on: every process generates its share of the validation set (one rule).
    extra = ["--per_device_train_batch_size", "8", "--evaluate_each_stage", "true", "--eval_modes", "implicit"]
    result = subprocess.run(
        [*launch, str(RECIPE), *recipe_args(tiny_gpt2, output, *extra)],
        capture_output=True, text=True, env=env, timeout=300, cwd=REPO,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    history = json.loads((output / "training_log.json").read_text())
    # Each process takes 8 of every 16 examples: 3 optimizer steps per epoch, as in one process with batch 16.
    assert [entry["step"] for entry in history if "loss" in entry] == list(range(1, 13))
    stage_generation = [entry for entry in history if "eval_implicit/answer_em" in entry]
    assert len(stage_generation) >= 2 and all(0 <= e["eval_implicit/answer_em"] <= 1 for e in stage_generation)
    card = ModelCard.load(output / "README.md")
    assert "| 8 × 1 × 2 |" in card.text and len(card.data.eval_results) == 4
    model = AutoModelForCausalLM.from_pretrained(output)
    initial = AutoModelForCausalLM.from_pretrained(tiny_gpt2)
    moved = [name for name, p in model.named_parameters() if not torch.equal(p, initial.state_dict()[name])]
    assert len(moved) == len(list(model.parameters())), "every weight trained"
    # The metrics both processes computed from the gathered generations are what the saved model gives alone.
    tokenizer = AutoTokenizer.from_pretrained(output)
    saved = json.loads((output / "eval_results.json").read_text())
    again = evaluate_generation(model, tokenizer, {name: _split(name) for name in ("validation", "test")})
    assert {k: v for k, v in saved.items() if k.endswith("_em")} == {
        k: v for k, v in again.items() if k.endswith("_em")
    }


# ---------------------------------------------------------------------------------------------------------------
# Bad input: one sentence, before training


def _error(argv: list[str]) -> str:
    with pytest.raises(ValueError) as caught:
        run_recipe(argv)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_unknown_model_id_offline_or_missing_folder_says_what_to_give(tmp_path: Path) -> None:
    message = _error(recipe_args("nobody/no-such-model", tmp_path / "out"))
    assert message == (
        "cannot load the model 'nobody/no-such-model': it is not in the local cache and HF_HUB_OFFLINE is set; "
        "unset it, or give a local folder."
    )
    message = _error(recipe_args(tmp_path / "missing", tmp_path / "out"))
    assert message == (
        f"model folder '{tmp_path / 'missing'}' does not exist; give a folder saved with save_pretrained, or a Hub id."
    )
    (tmp_path / "empty").mkdir()
    message = _error(recipe_args(tmp_path / "empty", tmp_path / "out"))
    assert message.startswith(f"cannot load the model '{tmp_path / 'empty'}': the folder holds no safetensors")
    assert not (tmp_path / "out").exists()


def test_model_context_shorter_than_the_sequences(tmp_path: Path) -> None:
    short = save_tiny_gpt2(tmp_path / "short", n_positions=12)
    message = _error(recipe_args(short, tmp_path / "out"))
    assert "cannot train on this data" in message and "beyond the model's context of 12" in message


def test_tokenizer_that_cannot_represent_the_task(tmp_path: Path) -> None:
    from hf_icot.data.tokenization import build_word_level_tokenizer

    folder = save_tiny_gpt2(tmp_path / "words")
    # A word-level tokenizer that never saw the digit 9: multiplication data needs it.
    examples = [{"question": "1 2 * 3 4", "cot": ["5 6 7 8 0", "+ 0"], "answer": "1 2"}]
    build_word_level_tokenizer(examples).save_pretrained(folder)
    message = _error(recipe_args(folder, tmp_path / "out"))
    # refused before training, naming where the word is (the bad-rows check of the loaded data)
    assert message.startswith("split 'train' row 0, column 'question' has the word '9'"), message
    assert "word-level tokenizer does not know" in message


def test_lora_target_modules_the_model_lacks(tiny_gpt2: Path, tmp_path: Path) -> None:
    message = _error(recipe_args(tiny_gpt2, tmp_path / "out", "--use_peft", "--lora_target_modules", "q_proj"))
    assert "--lora_target_modules q_proj names no module" in message and "c_attn" in message


def test_push_without_token_or_with_hub_offline_fails_before_training(
    tiny_gpt2: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from huggingface_hub import constants

    push = ["--push_to_hub", "--hub_model_id", "someone/icot"]
    assert "HF_HUB_OFFLINE is set" in _error(recipe_args(tiny_gpt2, tmp_path / "out", *push))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    assert "needs a Hugging Face token" in _error(recipe_args(tiny_gpt2, tmp_path / "out", *push))
    monkeypatch.setenv("HF_TOKEN", "hf_dummy")
    message = _error(recipe_args(tiny_gpt2, tmp_path / "out", *push, "--use_peft"))
    assert "pass --base_model_hub_id" in message
    assert not (tmp_path / "out").exists()


def test_two_cpu_processes_under_fsdp(tiny_gpt2: Path, tmp_path: Path) -> None:
    """fsdp.yaml with CPU processes (no GPU here): stage and final generation on every rank in lockstep, the full
    state dict saved by rank 0."""
    config = yaml.safe_load((REPO / "recipes" / "accelerate" / "fsdp.yaml").read_text())
    config.update(use_cpu=True, mixed_precision="no", num_processes=2)
    config["fsdp_config"]["fsdp_cpu_ram_efficient_loading"] = False
    (tmp_path / "fsdp_cpu.yaml").write_text(yaml.safe_dump(config))
    output = tmp_path / "fsdp"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    launch = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(tmp_path / "fsdp_cpu.yaml")]
    result = subprocess.run(
        [*launch, "--main_process_port", port, str(RECIPE),
         *recipe_args(tiny_gpt2, output, "--evaluate_each_stage", "true", "--eval_modes", "implicit")],
        capture_output=True, text=True, timeout=600, cwd=REPO,
        env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    model = AutoModelForCausalLM.from_pretrained(output)
    tokenizer = AutoTokenizer.from_pretrained(output)
    initial = AutoModelForCausalLM.from_pretrained(tiny_gpt2)
    assert not torch.equal(model.lm_head.weight, initial.lm_head.weight), "the saved weights are the trained ones"
    history = json.loads((output / "training_log.json").read_text())
    assert [entry["cot/kept_tokens_mean"] for entry in history if "loss" in entry][-1] == 0
    stage_generation = [entry for entry in history if "eval_implicit/answer_em" in entry]
    assert len(stage_generation) >= 2, "every stage's generation evaluation ran (and no rank hung)"
    metrics = json.loads((output / "eval_results.json").read_text())
    again = evaluate_generation(model, tokenizer, _test_split(), modes=["implicit", "explicit"])
    assert {key: again[key] for key in ("implicit/answer_em", "explicit/cot_em")} == {
        key: metrics[f"test/{key}"] for key in ("implicit/answer_em", "explicit/cot_em")
    }


def _split(name: str):
    from datasets_builder import build_dataset

    return build_dataset("multiplication", TASK_ARGS)[0][name]


def _test_split():
    return _split("test")


def test_reference_format_run_evaluates_reference_files_and_keeps_the_best_epoch(
    tiny_gpt2: Path, tmp_path: Path
) -> None:
    from hf_icot.cot import render_line

    # Reference-format files of other questions than the generated splits (2x2 products the builder did not draw).
    lines = [
        render_line(ex) for ex in [{"question": "1 1 * 2 0", "cot": ["2 2 0", "+ 0 0 0 ( 2 2 0 )"], "answer": "2 2 0"}]
    ]
    files = {}
    for name in ("validation", "test"):
        files[name] = tmp_path / f"{name}.txt"
        files[name].write_text("\n".join(lines * 3) + "\n", encoding="utf-8")
    output = tmp_path / "out"
    argv = recipe_args(
        tiny_gpt2, output, "--sequence_format", "reference", "--select_best_epoch", "--selection_mode", "reference",
        "--eval_files", json.dumps({name: str(path) for name, path in files.items()}),
    )  # fmt: skip
    metrics = run_recipe(argv)
    saved = json.loads((output / "eval_results.json").read_text())
    for split in ("validation", "test"):
        for mode in ("reference", "implicit", "explicit"):
            assert 0.0 <= saved[f"{split}/{mode}/answer_em"] <= 1.0, (split, mode)
    assert saved["selection/best_epoch"] in (0.0, 1.0, 2.0, 3.0)
    assert {f"selection/epoch_{e}/validation_answer_em" for e in range(4)} <= set(saved)
    card = ModelCard.load(output / "README.md")
    assert "reference exact match" in card.text and "### Model selection" in card.text
    assert card.data.to_dict()["model-index"][0]["results"]  # the model-index holds the scores
    assert metrics["selection/best_epoch"] == saved["selection/best_epoch"]
