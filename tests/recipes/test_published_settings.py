"""Every published setting has its config (recipes/configs/coconut_*.yaml, codi_gsm8k_aug_*.yaml,
pccot_gsm8k_aug_gpt2.yaml, and SIM-CoT's on Coconut and CODI, simcot_*_gsm8k*.yaml), and each runs two steps on the CPU
through the recipe with a model of its shape built from its config (GPT-2 small's; Llama-3.2-1B's width with 2 of its
16 layers), random weights, its own data format (a few
rows written here in the authors' JSON layout), its LoRA, projection and dtype. One setting per method runs in the
default suite, the others under `-m slow`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

from tests.hf_icot.tiny_task import tiny_bpe_tokenizer
from tests.recipes.conftest import REPO, run_recipe

CONFIGS = REPO / "recipes" / "configs"
SETTINGS = {
    "coconut_gsm8k_cot": "gpt2",
    "coconut_gsm8k": "gpt2",
    "coconut_prosqa": "gpt2",
    "coconut_prontoqa": "gpt2",
    "codi_gsm8k_aug_gpt2": "gpt2",
    "codi_gsm8k_aug_nl_gpt2": "gpt2",
    "codi_gsm8k_aug_llama1b": "llama1b",
    "codi_gsm8k_aug_nl_llama1b": "llama1b",
    "pccot_gsm8k_aug_gpt2": "gpt2",
    "simcot_coconut_gsm8k": "gpt2",
    "simcot_codi_gsm8k_aug_gpt2": "gpt2",
}


def gsm_row(start: int, adds: list[int]) -> tuple[str, list[str], str]:
    """A GSM8K-like row: one <<a+b=c>> step per addition (7 steps: the longest latent stage of any setting is 6)."""
    steps, total = [], start
    for add in adds:
        steps.append(f"<<{total}+{add}={total + add}>>")
        total += add
    question = f"Ann has {start} coins and gets " + ", then ".join(str(a) for a in adds) + " more. How many coins?"
    return question, steps, str(total)


GSM_ROWS = [gsm_row(start, [start + i for i in range(1, 8)]) for start in (3, 5, 12, 20)]


def write_rows(folder: Path, fmt: str, names: list[str]) -> list[str]:
    """The rows in the authors' layout: Coconut's JSON lists (steps a list), CODI's JSON Lines (cot one string)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in names:
        path = folder / name
        if fmt == "coconut":
            rows = [{"question": q, "steps": steps, "answer": a} for q, steps, a in GSM_ROWS]
            path.write_text(json.dumps(rows), encoding="utf-8")
        else:  # codi_nl: GSM8k-Aug-NL's natural-language CoT, one sentence per step
            join = (lambda steps: ". ".join(s.strip("<>") for s in steps) + ".") if fmt == "codi_nl" else " ".join
            lines = [json.dumps({"question": q, "cot": join(steps), "answer": a}) for q, steps, a in GSM_ROWS]
            path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        paths.append(str(path))
    return paths


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    """GPT-2 small's shape and Llama-3.2-1B's width (2 layers) from random weights, with a byte-level BPE."""
    folder = tmp_path_factory.mktemp("published")
    texts = [f"{q} {' '.join(steps)} {a}" for q, steps, a in GSM_ROWS] * 4
    tokenizer = tiny_bpe_tokenizer(texts + ["<<", ">>", "####", "### ", "\n"], folder / "bpe")
    vocab = len(tokenizer)
    torch.manual_seed(0)
    shapes = {
        "gpt2": GPT2LMHeadModel(GPT2Config(vocab_size=vocab, n_positions=1024, n_embd=768, n_layer=12, n_head=12)),
        "llama1b": LlamaForCausalLM(
            LlamaConfig(
                vocab_size=vocab,
                hidden_size=2048,
                intermediate_size=8192,
                num_hidden_layers=2,
                num_attention_heads=32,
                num_key_value_heads=8,
                max_position_embeddings=512,
                tie_word_embeddings=True,
            )
        ),  # fmt: skip
    }
    out = {}
    for name, model in shapes.items():
        model.save_pretrained(folder / name)
        tokenizer.save_pretrained(folder / name)
        out[name] = folder / name
    return out


def test_every_published_setting_has_a_config_that_says_what_it_mirrors() -> None:
    for name in SETTINGS:
        text = (CONFIGS / f"{name}.yaml").read_text(encoding="utf-8")
        header = text.split("\n\n")[0]
        assert "PAPER'S FIGURE:" in header and "AUTHORS' COMPUTE:" in header and "WHERE IT DIFFERS" in header, name
        assert any(
            repo in header for repo in ("facebookresearch/coconut", "zhenyi4/codi", "whyNLP/PCCoT", "InternLM/SIM-CoT")
        ), name


#: In the default suite: one setting per method (start stage, marker rows, LoRA, projection, bfloat16 weights, SIM-CoT's
#: decoder beside LoRA); the others (about 30 s each at GPT-2 small's shape) under `-m slow`.
DEFAULT = ("coconut_gsm8k", "codi_gsm8k_aug_gpt2", "simcot_codi_gsm8k_aug_gpt2")


@pytest.mark.parametrize(
    "name", [name if name in DEFAULT else pytest.param(name, marks=pytest.mark.slow) for name in SETTINGS]
)
def test_a_published_setting_runs_two_steps_on_the_cpu(name: str, models, tmp_path: Path) -> None:
    values = yaml.safe_load((CONFIGS / f"{name}.yaml").read_text(encoding="utf-8"))
    names = [Path(path).name for path in values["task_args"]["path"]]
    task_args = {**values["task_args"], "path": write_rows(tmp_path / "data", values["task_args"]["format"], names)}
    argv = [
        "--config", str(CONFIGS / f"{name}.yaml"),
        "--model_name_or_path", str(models[SETTINGS[name]]),
        "--task_args", json.dumps(task_args),
        "--output_dir", str(tmp_path / "run"),
        "--max_steps", "2", "--per_device_train_batch_size", "2", "--per_device_eval_batch_size", "4",
        "--max_new_tokens", "4", "--save_strategy", "no", "--use_cpu", "true", "--logging_steps", "1",
    ]  # fmt: skip
    if name in ("coconut_gsm8k", "simcot_coconut_gsm8k"):  # starts from a checkpoint: the random model stands in
        argv += ["--base_model_hub_id", "gpt2"]
    if values.get("simcot_decoder"):  # SIM-CoT's decoder from the pretrained model: here the same stand-in
        argv += ["--simcot_decoder", str(models[SETTINGS[name]])]
    metrics = run_recipe(argv)
    log = json.loads((tmp_path / "run" / "training_log.json").read_text(encoding="utf-8"))
    rows = log if isinstance(log, list) else log.get("log_history", log)
    losses = [entry["loss"] for entry in rows if "loss" in entry]
    assert losses and all(torch.isfinite(torch.tensor(losses))), losses
    assert any(key.endswith("latent/answer_em") for key in metrics), sorted(metrics)
    if values.get("simcot"):  # its step term trained and logged; its decoder beside the model, never in it
        assert any("simcot/step_ce" in entry for entry in rows), rows
        assert (tmp_path / "run" / "simcot_decoder" / "simcot.json").is_file()
