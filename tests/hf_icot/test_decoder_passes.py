"""``cot/forward_passes``: the decoder passes a method's training step runs per example, counted on the model's
transformer (and SIM-CoT's decoder), as each method's code implies them."""

from __future__ import annotations

import pytest
import torch

from hf_icot.curriculum.layout import LATENT_TOKENS
from hf_icot.data.tokenization import build_word_level_tokenizer
from hf_icot.training.trainer import ICoTTrainer
from tests.hf_icot.tiny_task import counting_examples, latent_config, tiny_gpt2


@pytest.fixture(scope="module")
def task():
    train, _ = counting_examples(length=6, n_test=16)
    return train, build_word_level_tokenizer([train], extra_tokens=LATENT_TOKENS)


#: (schedule options, passes per example): a token method once; Coconut at stage 2 (c = 1), its last, 2 thoughts and
#: the rest; CODI its teacher, the question, 3 thoughts; PCCoT its teacher, the prompt, 2 Jacobi iterations, the rest;
#: SIM-CoT one pass of its decoder more
CASES = [
    ({"schedule": "stepwise", "remove_per_epoch": 1}, 1.0),
    ({"schedule": "coconut", "start_stage": 2, "max_latent_stage": 2}, 3.0),
    ({"schedule": "coconut", "start_stage": 2, "max_latent_stage": 2, "simcot": True}, 4.0),
    ({"schedule": "codi", "num_latent": 3}, 5.0),
    ({"schedule": "codi", "num_latent": 3, "simcot": True}, 6.0),
    ({"schedule": "pccot", "num_latent_tokens": 3, "num_iterations": 2}, 5.0),
]


@pytest.mark.parametrize(("options", "passes"), CASES, ids=[str(case[0]) for case in CASES])
def test_each_methods_training_step_logs_its_decoder_passes_per_example(task, tmp_path, options, passes):
    torch.set_num_threads(1)
    train, tokenizer = task
    model = tiny_gpt2(len(tokenizer), tmp_path / "init", n_layer=1, n_embd=32)
    args = latent_config(tmp_path, max_steps=6, logging_steps=2, **options)
    trainer = ICoTTrainer(model=model, args=args, train_dataset=train, processing_class=tokenizer)
    trainer.train()
    logged = [entry["cot/forward_passes"] for entry in trainer.state.log_history if "cot/forward_passes" in entry]
    assert len(logged) == 3 and logged[1:] == [passes, passes]  # the first step may probe the model once more
