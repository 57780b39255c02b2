"""The model card rendered by hf_icot.publishing.model_card.write_model_card: valid metadata whose model-index holds the given numbers,
and text that follows what was trained (base model or scratch, adapter, curriculum, curves, citations)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from huggingface_hub import ModelCard

from hf_icot.curriculum import LogICoT, Stepwise
from hf_icot.publishing.hub import is_hub_id
from hf_icot.publishing.model_card import save_training_curves, split_metrics, write_model_card
from hf_icot.publishing.run_files import CURVES_FILE

METRICS = {
    "validation/implicit/answer_em": 0.75,
    "validation/explicit/answer_em": 0.5,
    "validation/implicit/examples_per_s": 300.0,
    "validation/explicit/examples_per_s": 100.0,
    "test/implicit/answer_em": 1.0,
    "test/explicit/answer_em": 0.25,
    "test/explicit/cot_em": 0.25,
    "test/implicit/examples_per_s": 400.0,
    "test/explicit/examples_per_s": 80.0,
    "test_ood_long/implicit/answer_em": 0.125,
}


def _schedule(schedule) -> dict:
    schedule.bind(steps_per_epoch=16, max_cot_level=3)
    return {
        "name": schedule.name,
        "params": {k: v for k, v in schedule.to_dict().items() if k != "name"},
        "stages": schedule.describe(40),
        "total_steps": 40,
    }


def _card(folder: Path, **overrides) -> ModelCard:
    inputs = {
        "title": "gpt2-icot-4x4",
        "model_ref": "someone/gpt2-icot-4x4",
        "base_model": "openai-community/gpt2",
        "architecture": "gpt2, 12 layers, 768 wide, 124.4M parameters",
        "weights_kind": "full",
        "dataset": {
            "source": "someone/icot-multiplication",
            "config": "mult_4x4",
            "fingerprint": "sha256:abc123",
            "splits": {"train": 100, "validation": 10, "test": 10},
            "task": "multiplication",
        },
        "schedule": _schedule(Stepwise(remove_per_epoch=8, removal_smoothing_lambda=4.0, reset_optimizer=True)),
        "hyperparameters": {"learning rate": 5e-5, "max grad norm": 1.0},
        "metrics": METRICS,
        "example": {"question": '5 6 * 7 "4"', "answer": "5 5 6 0", "max_new_tokens": 12},
        "license": "mit",
    }
    inputs.update(overrides)
    path = write_model_card(folder, **inputs)
    assert path == folder / "README.md"
    return ModelCard.load(path)


def test_model_index_holds_implicit_and_explicit_exact_match_per_split(tmp_path: Path) -> None:
    card = _card(tmp_path)
    found = {(r.dataset_split, r.metric_name): r.metric_value for r in card.data.eval_results}
    assert found == {
        ("validation", "Implicit exact match"): 0.75,
        ("validation", "Explicit exact match"): 0.5,
        ("test", "Implicit exact match"): 1.0,
        ("test", "Explicit exact match"): 0.25,
        ("test_ood_long", "Implicit exact match"): 0.125,
    }
    result = card.data.eval_results[0]
    assert (result.dataset_type, result.dataset_config, result.metric_type) == (
        "someone/icot-multiplication",
        "mult_4x4",
        "exact_match",
    )
    assert card.data.base_model == "openai-community/gpt2" and card.data.datasets == ["someone/icot-multiplication"]
    assert card.data.license == "mit" and card.data.library_name == "transformers"


def test_text_states_results_throughput_data_curriculum_and_citation(tmp_path: Path) -> None:
    text = _card(tmp_path).text
    assert "| test | 1.0000 | 0.2500 |" in text and "| test_ood_long | 0.1250 | – |" in text
    assert text.index("| validation |") < text.index("| test |") < text.index("| test_ood_long |")
    assert "**400.0 examples/s" in text and "80.0 examples/s explicit (5.00×" in text  # the test split's speeds
    assert "fine-tuned from [`openai-community/gpt2`](https://huggingface.co/openai-community/gpt2)" in text
    assert "`sha256:abc123`" in text and "config `mult_4x4`" in text and "train (100 examples)" in text
    assert "| remove_per_epoch | 8 |" in text and "| reset_optimizer | True |" in text
    assert "| index | start_step | end_step | removes |" in text
    assert "| 1 | 2 | 4 | first 1 CoT tokens from the left (+ smoothing λ=4.0) |" in text  # 16 steps / 8 tokens
    assert "Deng, Yuntian and Choi, Yejin and Shieber, Stuart" in text and "2605.28600" not in text
    assert 'question = "5 6 * 7 \\"4\\""' in text  # a question with quotes stays a valid Python string
    assert CURVES_FILE not in text  # no curve was saved


def test_scratch_adapter_and_log_icot_variants(tmp_path: Path) -> None:
    scratch = _card(tmp_path / "a", base_model=None)
    assert "It was trained from scratch (gpt2, 12 layers" in scratch.text and scratch.data.base_model is None

    adapter = _card(tmp_path / "b", weights_kind="adapter", peft={"rank": 16, "target modules": "c_attn"})
    assert adapter.data.library_name == "peft" and "lora" in adapter.data.tags
    assert "only the LoRA adapter" in adapter.text and "| target modules | c_attn |" in adapter.text

    local = _card(tmp_path / "c", base_model="/models/gpt2", dataset={**_card_dataset(), "source": "./data"})
    assert local.data.base_model is None and local.data.datasets is None  # local paths are not Hub ids
    assert "fine-tuned from `/models/gpt2`" in local.text

    log_icot = _card(tmp_path / "d", schedule=_schedule(LogICoT(stage_length=1.0)))
    assert "Transformers Provably Learn to Internalize Chain-of-Thought" in log_icot.text


def _card_dataset() -> dict:
    return {"source": "x", "config": None, "fingerprint": None, "splits": {}, "task": "parity"}


def test_loss_curve_is_saved_with_stage_boundaries_and_embedded(tmp_path: Path) -> None:
    history = [{"step": s, "loss": 2.0 / s, "epoch": s / 4} for s in range(1, 9)] + [{"step": 8, "eval_loss": 0.3}]
    png, log = save_training_curves(history, [0, 3, 6], tmp_path)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and log.read_text().count('"loss"') == 8
    first = png.read_bytes()
    save_training_curves(history, [0, 3, 6], tmp_path)
    assert png.read_bytes() == first, "same log, same bytes"
    text = _card(tmp_path).text
    assert f"![Training loss with the curriculum's stage boundaries]({CURVES_FILE})" in text


def test_bad_weights_kind_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="weights_kind 'lora' is unknown; allowed: full, merged, adapter."):
        _card(tmp_path, weights_kind="lora")
    assert not (tmp_path / "README.md").exists()


def test_split_metrics_and_hub_ids() -> None:
    rows = split_metrics({"test/implicit/answer_em": 1.0, "validation/explicit/answer_em": 0.5, "x/y": math.pi})
    assert rows == [
        {"split": "validation", "reference": None, "implicit": None, "explicit": 0.5},
        {"split": "test", "reference": None, "implicit": 1.0, "explicit": None},
    ]
    assert is_hub_id("gpt2") and is_hub_id("openai-community/gpt2")
    assert not any(is_hub_id(x) for x in ("./gpt2", "/abs/model", "a/b/c", "datasets_builder:multiplication", None))


def test_snippet_of_a_keep_position_model_generates_what_evaluation_does(tmp_path: Path) -> None:
    import contextlib
    import io
    import re

    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from hf_icot.curriculum.layout import SequenceLayout
    from hf_icot.data.tokenization import build_word_level_tokenizer
    from hf_icot.evaluation.generation_accuracy import evaluate_generation

    examples = [{"question": f"{a} {b} {c}", "cot": [a, b, c], "answer": c} for a in "01" for b in "01" for c in "01"]
    tokenizer = build_word_level_tokenizer(examples)
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=len(tokenizer), n_positions=32, n_embd=32, n_layer=2, n_head=2)
    model = GPT2LMHeadModel(config)
    torch.nn.init.normal_(model.transformer.wpe.weight, std=1.0)  # positions decide what this model writes
    folder = tmp_path / "model"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)

    def snippet_output(example: dict, shift: int) -> str:
        card = _card(
            tmp_path / f"card{shift}",
            model_ref=str(folder),
            example={"question": example["question"], "answer": example["answer"], "max_new_tokens": 6,
                     "position_shift": shift},
        )  # fmt: skip
        snippet = re.search(r"```python\n(.*?)```", card.text, re.DOTALL).group(1)
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(snippet, "model_card_snippet", "exec"), {})
        return printed.getvalue().strip()

    def implicit_predictions(keep_position: bool) -> list[dict]:
        _, predictions = evaluate_generation(
            model, tokenizer, examples, modes=["implicit"], max_new_tokens=6, return_predictions=True,
            layout=SequenceLayout(fill="keep_position" if keep_position else "drop"),
        )  # fmt: skip
        return predictions["implicit"]

    shifted, plain = implicit_predictions(True), implicit_predictions(False)
    assert [p["generated_ids"] for p in shifted] != [p["generated_ids"] for p in plain]  # the shift matters here
    for index in (0, 5):
        assert snippet_output(examples[index], 3) == shifted[index]["generated_answer"]


def test_reference_mode_leads_the_table_and_the_selection_table_is_shown(tmp_path: Path) -> None:
    metrics = {**METRICS, "test/reference/answer_em": 0.875, "validation/reference/answer_em": 0.625}
    selection = {
        "mode": "reference",
        "best_epoch": 1,
        "epochs": [
            {"epoch": 0, "cot_remained": True, "validation": 0.5, "test": 0.25},
            {"epoch": 1, "cot_remained": False, "validation": 0.75, "test": 0.875},
            {"epoch": 2, "cot_remained": False, "validation": 0.625, "test": None},
        ],
    }
    card = _card(tmp_path, metrics=metrics, selection=selection)
    assert "| test | 0.8750 | 1.0000 | 0.2500 |" in card.text
    assert "the model kept is epoch **1**" in card.text
    assert "| 1 | no | 0.7500 | 0.8750 |" in card.text and "| 2 | no | 0.6250 | – |" in card.text
    names = {result.metric_name for result in card.data.eval_results}
    assert "Reference exact match" in names
    plain = _card(tmp_path / "plain").text  # without a reference score: the two-mode table, no selection section
    assert "| test | 1.0000 | 0.2500 |" in plain and "Model selection" not in plain
