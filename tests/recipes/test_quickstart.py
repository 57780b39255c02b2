"""The quickstart as the README runs it: its config's schedule arithmetic, and its own path through the recipe
(``--task parity`` built on the fly, ``--scratch_model`` with a word-level tokenizer) for a few dozen steps."""

from __future__ import annotations

import json
import math
from pathlib import Path

from huggingface_hub import ModelCard
from transformers import AutoModelForCausalLM, AutoTokenizer

from hf_icot.training.config import schedule_from_config
from recipes import icot_gpt2
from tests.recipes.conftest import REPO, run_recipe

QUICKSTART = REPO / "recipes" / "configs" / "quickstart.yaml"


def test_quickstart_schedule_full_cot_until_600_then_one_token_every_300_and_none_from_1200() -> None:
    _, args, _ = icot_gpt2.parse_args(["--config", str(QUICKSTART)])
    schedule = schedule_from_config(args)
    # 19,200 questions / batch 64 = 300 steps per epoch; the parity CoT is 3 tokens (k = 4 secret bits).
    assert args.per_device_train_batch_size == 64 and args.num_train_epochs == 6
    schedule.bind(steps_per_epoch=300, max_cot_tokens=3)
    removed = {step: schedule.removed_count(step) for step in (0, 299, 300, 599, 600, 899, 900, 1199, 1200, 1799)}
    assert removed == {0: 0, 299: 0, 300: 0, 599: 0, 600: 1, 899: 1, 900: 2, 1199: 2, 1200: math.inf, 1799: math.inf}
    assert [step for step in range(1800) if schedule.resets_optimizer_at(step)] == [600, 900, 1200]
    stages = [(stage["start_step"], stage["end_step"]) for stage in schedule.describe(1800)]
    assert stages == [(0, 600), (600, 900), (900, 1200), (1200, 1800)]
    assert schedule.layout.keeps_positions
    # The config's own comment says the same.
    text = QUICKSTART.read_text()
    assert "step 600" in text and "1,200" in text and "1,800 steps" in text


def test_quickstart_path_runs_through_the_recipe(tmp_path: Path) -> None:
    output = tmp_path / "quickstart"
    argv = ["--config", str(QUICKSTART), "--output_dir", str(output), "--max_steps", "30", "--max_eval_examples", "40"]
    argv += ["--logging_steps", "10"]
    metrics = run_recipe(argv)
    history = json.loads((output / "training_log.json").read_text())
    assert [entry["step"] for entry in history if "loss" in entry] == [10, 20, 30]
    assert all(entry["cot/removed_tokens"] == 0 for entry in history if "loss" in entry), "full CoT first"
    model = AutoModelForCausalLM.from_pretrained(output)
    tokenizer = AutoTokenizer.from_pretrained(output)
    assert model.config.model_type == "gpt2" and (model.config.n_layer, model.config.n_embd) == (4, 64)
    assert model.config.resid_pdrop == model.config.embd_pdrop == model.config.attn_pdrop == 0.0, "no dropout"
    assert model.config.initializer_range == 0.1, "the marginals study's init scale, 0.8 / sqrt(64)"
    assert model.get_input_embeddings().weight.shape[0] == len(tokenizer) < 40  # word level: bits, counts, specials
    assert set(metrics) >= {"validation/implicit/answer_em", "test/implicit/answer_em", "test/explicit/cot_em"}
    card = ModelCard.load(output / "README.md")
    assert "position_ids" in card.text, "the snippet of a keep_position model passes the shifted positions"
