"""What users copy works: the card's how-to-use snippet, run on a trained keep_position model over every one of 112
held-out questions, answers exactly what the recipe's evaluation scored (position ids with an attention mask; without
the mask transformers 5 reads the jump in position ids as a new packed sequence and the answer loses its question)."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import torch
from huggingface_hub import ModelCard
from transformers import AutoModelForCausalLM, GPT2Config

from hf_icot.cot import render_line
from hf_icot.curriculum.layout import SequenceLayout
from hf_icot.data.tokenization import build_word_level_tokenizer
from hf_icot.evaluation.generation_accuracy import evaluate_generation
from tests.hf_icot.tiny_task import counting_examples
from tests.recipes.conftest import recipe_args, run_recipe


def test_card_snippet_answers_what_evaluation_scored_on_a_trained_keep_position_model(tmp_path: Path) -> None:
    train, held_out = counting_examples(length=9, n_test=128)  # 384 training questions, 9-token CoTs
    data = tmp_path / "counting"
    data.mkdir()
    splits = {"train": train, "valid": held_out.select(range(16)), "test": held_out.select(range(16, 128))}
    for stem, rows in splits.items():
        (data / f"{stem}.txt").write_text("".join(render_line(row) + "\n" for row in rows))
    tokenizer = build_word_level_tokenizer([train, held_out])
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=len(tokenizer), n_positions=64, n_embd=64, n_layer=2, n_head=4,
                        bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id)  # fmt: skip
    model_folder = tmp_path / "init"
    AutoModelForCausalLM.from_config(config).save_pretrained(model_folder)
    tokenizer.save_pretrained(model_folder)
    output = tmp_path / "run"
    argv = recipe_args(model_folder, output, "--removal_fill", "keep_position", "--num_train_epochs", "30",
                       "--remove_per_epoch", "1", "--remove_all_when_remove_beyond", "9",
                       "--removal_smoothing_lambda", "inf", "--learning_rate", "3e-3", "--lr_scheduler_type", "linear",
                       "--per_device_train_batch_size", "32")  # fmt: skip
    at = argv.index("--task")
    argv[at : at + 4] = ["--task", "reference_text", "--task_args", json.dumps({"path": [str(data)]})]
    metrics = run_recipe(argv)

    card = ModelCard.load(output / "README.md")
    snippet = re.search(r"```python\n(.*?)```", card.text, re.DOTALL).group(1)
    assert snippet.count("question = ") == 1 and "attention_mask" in snippet and "position_ids" in snippet
    trained = AutoModelForCausalLM.from_pretrained(output)
    test = splits["test"]
    _, predictions = evaluate_generation(
        trained, tokenizer, test, modes=["implicit"], layout=SequenceLayout(fill="keep_position"),
        return_predictions=True,
    )  # fmt: skip
    printed_answers = []
    for example in test:
        code = re.sub(r"^question = .*$", f"question = {json.dumps(example['question'])}", snippet, flags=re.M)
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(code, "model_card_snippet", "exec"), {})
        printed_answers.append(printed.getvalue().strip())
    assert printed_answers == [p["generated_answer"] for p in predictions["implicit"]]
    accuracy = sum(a == ex["answer"] for a, ex in zip(printed_answers, test)) / len(test)
    assert accuracy == metrics["test/implicit/answer_em"] and accuracy >= 0.9, accuracy
