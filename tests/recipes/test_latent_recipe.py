"""The GPT-2 recipe with the continuous-thought methods, end to end on a tiny GPT-2 with a BPE tokenizer: Coconut
(full weights, pushed to the loopback Hub), CODI and PCCoT (LoRA adapters saved alone, their projections beside them)
train, evaluate in latent mode, save, and write a card whose snippet answers as evaluation did; a latent option that
does not apply is one sentence."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest
import torch

from hf_icot.curriculum import build_schedule
from hf_icot.evaluation.generation_accuracy import evaluate_generation
from hf_icot.methods import load_latent_model
from hf_icot.methods.latent_forward import causal_lm_of
from tests.recipes.conftest import TASK_ARGS, recipe_args, run_recipe

LATENT_FLAGS = {
    "coconut": ["--schedule", "coconut", "--c_thought", "1", "--epochs_per_stage", "1", "--max_latent_stage", "2"],
    "codi": ["--schedule", "codi", "--num_latent", "2", "--use_prj", "--prj_dim", "16", "--use_peft", "--lora_r", "4"],
    "pccot": ["--schedule", "pccot", "--num_latent_tokens", "3", "--num_iterations", "2", "--use_projection",
              "--use_peft", "--lora_r", "4"],
}  # fmt: skip
#: The plan options of LATENT_FLAGS, for the layout evaluation asks each method's model with.
PLAN = {"c_thought": 1, "max_latent_stage": 2, "num_latent": 2, "num_latent_tokens": 3, "num_iterations": 2}
PAPERS = {"coconut": "arXiv:2412.06769", "codi": "arXiv:2502.21074", "pccot": "arXiv:2506.18582"}


def run_snippet(card: str) -> str:
    snippet = re.search(r"```python\n(.*?)```", card, re.DOTALL).group(1)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(snippet, "model_card_snippet", "exec"), {})
    return printed.getvalue().strip()


@pytest.mark.parametrize("method", ["coconut", "codi", "pccot"])
def test_latent_recipe_trains_evaluates_saves_cards_and_pushes(
    method: str, tiny_gpt2: Path, tmp_path: Path, loopback_hub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", loopback_hub.token)
    output = tmp_path / "run"
    push = ["--push_to_hub", "--hub_model_id", f"loopback-user/{method}"] if method == "coconut" else []
    metrics = run_recipe(recipe_args(tiny_gpt2, output, *LATENT_FLAGS[method], *push))
    assert {"test/latent/answer_em", "validation/latent/answer_em", "test/latent/tokens_per_s"} <= set(metrics)
    assert not any("/implicit/" in key for key in metrics)  # a latent run is asked in latent mode
    assert (
        json.loads((output / "eval_results.json").read_text())["test/latent/answer_em"]
        == metrics["test/latent/answer_em"]
    )
    layout = build_schedule(method, PLAN).layout
    card = (output / "README.md").read_text()
    assert "load_latent_model" in card and PAPERS[method] in card
    assert ("iterations=2" in card) == (method == "pccot")  # the snippet computes PCCoT's thoughts as it trained
    if method == "codi":  # the method's own options beside its plan's
        assert "use_prj" in card and "prj_dim" in card

    # The card's snippet, run as printed on the run folder, answers as evaluation did.
    model, tokenizer = load_latent_model(str(output))
    if method != "coconut":
        assert (output / "adapter_config.json").is_file() and (output / "latent_projection.safetensors").is_file()
        assert model.latent_projection.settings["width"] == (16 if method == "codi" else model.config.n_embd)
    from datasets_builder import registry

    test = registry.get_task("multiplication").build(registry.make_params("multiplication", **TASK_ARGS))["test"]
    _, predictions = evaluate_generation(
        model, tokenizer, [test[0]], modes=["latent"], layout=layout, return_predictions=True
    )
    card_at_folder = card.replace(f"loopback-user/{method}", str(output))
    assert run_snippet(card_at_folder) == predictions["latent"][0]["generated_answer"]
    if method == "coconut":
        files = loopback_hub.files("loopback-user/coconut", repo_type="model")
        assert {"model.safetensors", "tokenizer.json", "README.md", "eval_results.json"} <= set(files)


def test_a_removal_option_given_to_a_latent_method_is_one_sentence(tiny_gpt2: Path, tmp_path: Path) -> None:
    from tests.recipes.test_recipe_errors import _error

    message = _error(recipe_args(tiny_gpt2, tmp_path / "out", "--schedule", "coconut", "--removal_fill", "pad"))
    assert message == (
        "removal_fill 'pad' does not apply to coconut: its removed steps become latent thoughts; leave removal_fill "
        "unset."
    )
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("family", "method"),
    [("llama", "coconut"), ("llama", "pccot"), pytest.param("mistral", "codi", marks=pytest.mark.slow)],
)
def test_latent_methods_on_rotary_families_through_the_recipe(family, method, tmp_path):
    """Llama and Mistral (rotary positions, no learned position table) take latent thoughts through the recipe: the
    tokenizer gains the markers, the model is widened, trained a few steps, and reloads to the same answers."""
    from tests.recipes.test_model_families import counting_examples, save_tiny_model

    train, held_out = counting_examples(length=8, n_test=16)
    from hf_icot.cot import render_line
    from hf_icot.data.tokenization import build_word_level_tokenizer

    folder = tmp_path / "counting"
    folder.mkdir()
    for stem, rows in {"train": train.select(range(64)), "valid": held_out.select(range(8)), "test": held_out}.items():
        (folder / f"{stem}.txt").write_text("".join(render_line(row) + "\n" for row in rows), encoding="utf-8")
    model = save_tiny_model(family, tmp_path / family, build_word_level_tokenizer([train, held_out]))
    output = tmp_path / "run"
    argv = recipe_args(model, output, *LATENT_FLAGS[method], "--max_steps", "8")  # CODI and PCCoT with LoRA
    at = argv.index("--task")
    argv[at : at + 4] = ["--task", "reference_text", "--task_args", json.dumps({"path": [str(folder)]})]
    metrics = run_recipe(argv)
    assert "test/latent/answer_em" in metrics
    reloaded, tokenizer = load_latent_model(str(output))
    assert type(causal_lm_of(reloaded)).__name__.lower().startswith(family)
    layout = build_schedule(method, PLAN).layout
    again = evaluate_generation(reloaded, tokenizer, held_out, modes=["latent"], layout=layout)
    assert again["latent/answer_em"] == metrics["test/latent/answer_em"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--schedule", "coconut", "--c_thought", "0"], "c_thought 0 is not allowed; it must be >= 1."),
        (["--schedule", "codi", "--num_latent", "-1"], "num_latent -1 is not allowed; it must be >= 0."),
        (["--schedule", "codi", "--length_hint", "true"], "length_hint True does not apply to codi"),
        (["--schedule", "pccot", "--num_iterations", "-2"], "num_iterations -2 is not allowed; it must be >= 0."),
        (["--schedule", "pccot", "--loss_beta", "-1"], "loss_beta -1.0 is not allowed; it must be >= 0."),
        (["--schedule", "coconut", "--max_latent_stage", "9"], "max_latent_stage 9 is larger than the longest CoT"),
    ],
)
def test_bad_latent_options_through_the_recipe(tiny_gpt2: Path, tmp_path: Path, flags, message) -> None:
    from tests.recipes.test_recipe_errors import _error

    assert message in _error(recipe_args(tiny_gpt2, tmp_path / "out", *flags))


@pytest.mark.parametrize(("family", "method"), [("gpt2", "codi"), ("llama", "coconut")])
def test_simcot_through_the_recipe_with_lora(family, method, tiny_gpt2, tmp_path, capture_saved_model):
    """SIM-CoT on a LoRA run through the recipe (GPT-2 with CODI on multiplication; a Llama built from its config with
    Coconut on counting): the decoder starts as the base weights without the adapter, trains in full beside the
    adapter (as SIM-CoT's CODI path trains its decoder outside LoRA), is saved beside the adapter and reads the
    thoughts of the saved run; the adapter's model answers as evaluation did, the decoder never loaded."""
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    from hf_icot.methods.simcot import decoder_of
    from hf_icot.methods.simcot_decoding import decode_thoughts, load_simcot_run

    output = tmp_path / "run"
    lora = ["--use_peft", "--lora_r", "4", "--simcot", "true"]
    if family == "gpt2":
        model = tiny_gpt2
        argv = recipe_args(model, output, *LATENT_FLAGS[method], *lora, "--max_steps", "6")
        from datasets_builder import registry

        params = registry.make_params("multiplication", **TASK_ARGS)
        question = registry.get_task("multiplication").build(params)["test"][0]["question"]
    else:
        from hf_icot.cot import render_line
        from hf_icot.data.tokenization import build_word_level_tokenizer
        from tests.recipes.test_model_families import counting_examples, save_tiny_model

        train, held_out = counting_examples(length=8, n_test=16)
        folder = tmp_path / "counting"
        folder.mkdir()
        for stem, rows in {
            "train": train.select(range(64)),
            "valid": held_out.select(range(8)),
            "test": held_out,
        }.items():
            (folder / f"{stem}.txt").write_text("".join(render_line(row) + "\n" for row in rows), encoding="utf-8")
        model = save_tiny_model(family, tmp_path / family, build_word_level_tokenizer([train, held_out]))
        argv = recipe_args(model, output, *LATENT_FLAGS["coconut"], *lora, "--max_steps", "8")
        at = argv.index("--task")
        argv[at : at + 4] = ["--task", "reference_text", "--task_args", json.dumps({"path": [str(folder)]})]
        question = held_out[0]["question"]
    metrics = run_recipe(argv)
    assert "test/latent/answer_em" in metrics
    assert (output / "adapter_config.json").is_file() and (output / "simcot_decoder" / "simcot.json").is_file()
    trained = capture_saved_model[-1]
    decoder = decoder_of(trained)
    assert not any("lora_" in name for name, _ in decoder.named_parameters())
    unused = {id(decoder.get_input_embeddings().weight)} - {id(decoder.get_output_embeddings().weight)}
    assert all(p.requires_grad for p in decoder.parameters() if id(p) not in unused)  # all of it, beside LoRA
    original = AutoModelForCausalLM.from_pretrained(model).state_dict()
    saved = load_file(output / "simcot_decoder" / "model.safetensors")
    moved = [name for name in saved if name in original and saved[name].shape == original[name].shape
             and not torch.equal(saved[name], original[name])]  # fmt: skip
    assert moved, "the decoder did not train"
    reloaded, tokenizer = load_latent_model(str(output))
    assert decoder_of(reloaded) is None
    model_, tokenizer_, settings = load_simcot_run(str(output))
    texts = decode_thoughts(model_, tokenizer_, [question], settings, max_new_tokens=3)[0]
    assert len(texts) == settings["latent_thoughts"] // settings["thoughts_per_step"] + settings["after_last"]
