"""Dropout's masks drawn ahead on a helper thread (hf_icot.levers.dropout_ahead): the same losses, weights and
generator state bit for bit as torch's own draws — when the forward keeps to its record, when it leaves it (put back),
when it raises, and when something else draws (the lever turns itself off); another thread's dropout, during the
forward, is torch's own; SDPA attention with dropout runs as eager attention while training and comes back; the lever
is off unless asked for, a run that asks says so, ICoTTrainer uses it only where it can pay, and the recipes ask for
sleeping OpenMP threads before torch is imported only when it is asked for."""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import threading
from types import SimpleNamespace

import pytest
import torch
from torch.nn import functional
from transformers import AutoModelForCausalLM, GPT2Config

from hf_icot.data.tokenization import build_word_level_tokenizer
from hf_icot.levers import dropout_kernel
from hf_icot.levers.dropout_ahead import (
    TORCH_DROPOUT,
    DropoutDrawsAhead,
    dropout_draws_ahead_for,
    eager_attention_while,
)
from hf_icot.levers.dropout_kernel import torch_dropout_mask
from tests.hf_icot.tiny_task import counting_examples

GPT2 = GPT2Config(vocab_size=50, n_embd=32, n_layer=2, n_head=4, n_positions=64, bos_token_id=1, eos_token_id=1)
#: Batches of two lengths, in turn and repeated, so some forwards are recorded and others drawn ahead.
LENGTHS = (10, 10, 12, 10, 12, 12)


def gpt2(attention: str = "eager", config: GPT2Config = GPT2):
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(config, attn_implementation=attention).train()


def batches() -> list[dict[str, torch.Tensor]]:
    generator = torch.Generator().manual_seed(0)
    return [
        {"input_ids": torch.randint(0, 50, (4, length), generator=generator),
         "labels": torch.randint(0, 50, (4, length), generator=generator)}
        for length in LENGTHS
    ]  # fmt: skip


def train(model, ahead: DropoutDrawsAhead | None, change=None) -> tuple[list[float], torch.Tensor]:
    """A few AdamW steps from seed 1; ``change(step, model)`` runs before each. Returns the losses and the generator's
    state at the end."""
    torch.manual_seed(1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses = []
    for step, batch in enumerate(batches()):
        if change is not None:
            change(step, model)
        with contextlib.nullcontext() if ahead is None else ahead.forward(batch):
            loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return losses, torch.get_rng_state()


def same_weights(one, other) -> bool:
    return all(torch.equal(a, b) for a, b in zip(one.parameters(), other.parameters(), strict=True))


def same_run_as_torch(ahead: DropoutDrawsAhead, change=None, attention: str = "eager") -> list[float]:
    """Train one GPT-2 with ``ahead`` and one as torch runs it: the same losses, generator state and weights, bit for
    bit (asserted). Returns the losses."""
    plain, with_lever = gpt2(attention), gpt2(attention)
    losses, state = train(plain, None, change)
    lever_losses, lever_state = train(with_lever, ahead, change)
    assert lever_losses == losses and torch.equal(lever_state, state) and same_weights(plain, with_lever)
    return losses


def test_masks_drawn_ahead_give_the_same_losses_weights_and_generator_state() -> None:
    ahead = DropoutDrawsAhead()
    losses = same_run_as_torch(ahead)
    # Lengths 10, 10, 12, 10, 12, 12: the first forward of each length is recorded, the other four drawn ahead.
    assert (ahead.forwards_ahead, ahead.put_back, ahead.off_reason) == (4, 0, None)
    # Equal because the masks are the same numbers: other numbers give another loss.
    model = gpt2()
    torch.manual_seed(2)
    assert model(**batches()[0]).loss.item() != losses[0]


def test_a_forward_that_leaves_its_record_is_put_back_exactly() -> None:
    def change(step: int, model) -> None:
        if step == 3:  # a length-10 forward whose last dropout has another probability than recorded
            model.transformer.h[1].mlp.dropout.p = 0.3
        if step == 4:  # a length-12 forward that draws one mask fewer than recorded
            model.transformer.h[1].mlp.dropout.p = 0.0

    ahead = DropoutDrawsAhead()
    same_run_as_torch(ahead, change)
    # Steps 3 and 4 are put back, and their lengths recorded again (step 5); step 1 was drawn ahead.
    assert (ahead.forwards_ahead, ahead.put_back, ahead.off_reason) == (1, 2, None)


class TransposedDropout(torch.nn.Dropout):
    """Dropout of a non-contiguous view: torch draws the mask in the memory order of ``empty_like(input)``."""

    def forward(self, hidden):
        return functional.dropout(hidden.transpose(1, 2), self.p, self.training).transpose(1, 2)


def test_a_non_contiguous_dropout_input_gets_torchs_mask() -> None:
    def transposed(step: int, model) -> None:
        if step == 0:
            for block in model.transformer.h:
                block.mlp.dropout = TransposedDropout(block.mlp.dropout.p)

    ahead = DropoutDrawsAhead()
    same_run_as_torch(ahead, transposed)
    assert (ahead.forwards_ahead, ahead.put_back, ahead.off_reason) == (4, 0, None)


def test_a_run_whose_forwards_keep_leaving_their_records_turns_the_lever_off() -> None:
    batch = batches()[0]

    def steps(model, ahead) -> tuple[list[float], torch.Tensor]:
        torch.manual_seed(1)
        losses = []
        for step in range(20):
            model.transformer.h[0].mlp.dropout.p = (0.1, 0.2)[step % 2]  # every forward leaves the last one's record
            with contextlib.nullcontext() if ahead is None else ahead.forward(batch):
                losses.append(model(**batch).loss.item())
        return losses, torch.get_rng_state()

    ahead = DropoutDrawsAhead()
    losses, state = steps(gpt2(), None)
    ahead_losses, ahead_state = steps(gpt2(), ahead)
    assert ahead_losses == losses and torch.equal(ahead_state, state)
    # Recorded, put back, recorded, ...: the 8th put-back (forward 16) ends it.
    assert (ahead.forwards_ahead, ahead.put_back) == (0, DropoutDrawsAhead.MAX_PUT_BACK)
    assert ahead.off_reason == "8 forwards left their records"


def test_another_threads_dropout_during_the_forward_is_torchs_own() -> None:
    # torch.nn.functional.dropout is never replaced: the lever routes only its own thread's calls, only during the
    # forward. Another thread's dropout, from inside a forward drawn ahead, gets torch's own numbers and is not seen by
    # the lever (with a module-wide swap it met the lever, which put the forward back).
    seen = []

    def another_thread_draws(module, args, output) -> None:  # the forward's masks are all drawn by now
        def draw() -> None:
            hidden, generator = torch.ones(3, 7), torch.Generator()
            generator.set_state(torch.get_rng_state())
            got = functional.dropout(hidden, 0.5)
            expected = hidden * torch_dropout_mask((3, 7), torch.float32, 0.5, generator)
            seen.append((functional.dropout is TORCH_DROPOUT, torch.equal(got, expected)))

        thread = threading.Thread(target=draw)
        thread.start()
        thread.join()
        seen.append(functional.dropout is TORCH_DROPOUT)  # this thread's too, in the forward

    def change(step: int, model) -> None:
        if step == 1:  # after the run's first forward, whose check counts every draw made while it runs
            model.register_forward_hook(another_thread_draws)

    ahead = DropoutDrawsAhead()
    same_run_as_torch(ahead, change)  # the same numbers as torch's run with the same calls from the other thread
    assert (ahead.forwards_ahead, ahead.put_back, ahead.off_reason) == (4, 0, None)
    assert seen == [(True, True), True] * 10  # steps 1-5, each model


def test_a_forward_that_raises_leaves_the_generator_where_torch_would() -> None:
    def fail_in_the_second_layer(module, args):
        raise RuntimeError("stop here")

    states = []
    for ahead in (None, DropoutDrawsAhead()):
        model = gpt2()
        train(model, ahead)  # with the lever: a record for length 10, so the next such forward is drawn ahead
        model.transformer.h[1].register_forward_pre_hook(fail_in_the_second_layer)
        batch = batches()[0]
        with pytest.raises(RuntimeError, match="stop here"):
            with contextlib.nullcontext() if ahead is None else ahead.forward(batch):
                model(**batch)  # the embeddings' and the first layer's masks drawn, the second's not
        states.append(torch.get_rng_state())
    assert ahead.put_back == 1 and torch.equal(states[0], states[1])


def test_sdpa_drawing_its_own_dropout_turns_the_lever_off_and_changes_nothing() -> None:
    ahead = DropoutDrawsAhead()
    same_run_as_torch(ahead, attention="sdpa")
    assert ahead.forwards_ahead == 0 and "outside torch.nn.functional.dropout" in ahead.off_reason
    assert "then drawn in the step" in ahead.summary()


def test_eager_attention_while_switches_sdpa_with_attention_dropout_and_back(tmp_path) -> None:
    model = gpt2("sdpa")
    model.save_pretrained(tmp_path / "before")
    with eager_attention_while(model):
        assert model.config._attn_implementation == "eager"
        assert model.transformer.h[0].attn.config._attn_implementation == "eager"
        model.save_pretrained(tmp_path / "during")
    assert model.config._attn_implementation == "sdpa"
    assert (tmp_path / "before" / "config.json").read_bytes() == (tmp_path / "during" / "config.json").read_bytes()
    without_attention_dropout = gpt2("sdpa", GPT2Config.from_dict({**GPT2.to_dict(), "attn_pdrop": 0.0}))
    with eager_attention_while(without_attention_dropout):  # SDPA draws nothing: it keeps its kernel
        assert without_attention_dropout.config._attn_implementation == "sdpa"


@pytest.fixture()
def two_threads_passive(monkeypatch):
    """What the lever's helper thread needs: 2 torch threads and OMP_WAIT_POLICY=PASSIVE, set by the environment."""
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    yield
    torch.set_num_threads(threads)


def icot_trainer(tmp_path, attention: str = "sdpa", model_init: bool = False, **options):
    """An ICoTTrainer on a tiny GPT-2 (dropout 0.1) from seed 0; with ``model_init`` the Trainer builds it in
    ``train()``."""
    from hf_icot.training.config import ICoTConfig
    from hf_icot.training.trainer import ICoTTrainer

    train, _ = counting_examples(6)
    tokenizer = build_word_level_tokenizer(train)
    config = GPT2Config.from_dict({**GPT2.to_dict(), "vocab_size": len(tokenizer)})
    args = ICoTConfig(
        output_dir=str(tmp_path), per_device_train_batch_size=8, max_steps=6, report_to="none", use_cpu=True,
        save_strategy="no", evaluate_each_stage=False, seed=0, remove_per_epoch=2, **options,
    )  # fmt: skip

    def build():
        torch.manual_seed(0)
        return AutoModelForCausalLM.from_config(config, attn_implementation=attention)

    model = {"model_init": build} if model_init else {"model": build()}
    return ICoTTrainer(**model, args=args, train_dataset=train, processing_class=tokenizer)


def test_icot_trainer_draws_ahead_where_it_pays_with_the_same_weights(tmp_path, two_threads_passive) -> None:
    trainers = []
    for name, options in [
        ("ahead", {"draw_dropout_ahead": True}),  # SDPA with attention dropout: eager attention while training
        ("eager", {"attention": "eager", "draw_dropout_ahead": False}),
        ("sdpa", {"draw_dropout_ahead": False}),
    ]:
        trainers.append(icot_trainer(tmp_path / name, **options))  # each from seed 0: weights, then the draws
        trainers[-1].train()
    drawn_ahead, eager, sdpa = trainers
    assert eager.dropout_ahead is None and sdpa.dropout_ahead is None and drawn_ahead.dropout_ahead is not None
    assert drawn_ahead.dropout_ahead.forwards_ahead > 0 and drawn_ahead.dropout_ahead.off_reason is None
    assert drawn_ahead.model.config._attn_implementation == "sdpa", "eager attention while training only"
    # Bit for bit the run with eager attention: the same masks; and SDPA's run to float rounding.
    assert same_weights(eager.model, drawn_ahead.model)
    for ahead, plain in zip(drawn_ahead.model.parameters(), sdpa.model.parameters(), strict=True):
        torch.testing.assert_close(ahead, plain, atol=1e-6, rtol=1e-5)


def test_a_model_that_model_init_builds_in_train_draws_ahead_too(tmp_path, two_threads_passive) -> None:
    # Trainer.train() builds a new model with model_init, after the trainer was made: it gets a lever of its own (its
    # first forward checked again) and trains with eager attention, as a model given to the constructor does.
    built = icot_trainer(tmp_path / "ahead", model_init=True, draw_dropout_ahead=True)
    built.train()
    eager = icot_trainer(tmp_path / "eager", attention="eager", model_init=True, draw_dropout_ahead=False)
    eager.train()
    assert built.dropout_ahead.forwards_ahead > 0 and built.dropout_ahead.off_reason is None
    assert built.model.config._attn_implementation == "sdpa"
    assert same_weights(eager.model, built.model)


def test_the_log_names_the_lever_only_where_a_forward_drew(tmp_path, two_threads_passive, caplog) -> None:
    lines = []
    for name, p in (("dropout", None), ("no_dropout", 0.0)):
        trainer = icot_trainer(tmp_path / name, draw_dropout_ahead=True)
        for module in trainer.model.modules():
            if isinstance(module, torch.nn.Dropout) and p is not None:
                module.p = p
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="hf_icot.levers.dropout_ahead"):
            trainer.train()
        lines.append([record.message for record in caplog.records if record.message.startswith("dropout masks:")])
    assert len(lines[0]) == 1 and "training forwards drawn ahead by" in lines[0][0]
    assert lines[1] == [], "a model without dropout draws nothing: no line"


def test_icot_trainer_draws_in_the_step_where_a_helper_cannot_pay(tmp_path, two_threads_passive, monkeypatch) -> None:
    def lever(name: str, **options):
        return icot_trainer(tmp_path / name, draw_dropout_ahead=True, **options).dropout_ahead

    assert lever("checkpointing", gradient_checkpointing=True) is None
    assert lever("two_threads").helper
    # Without a helper the forward draws with the C kernel; without one either, the lever would change nothing.
    in_step = (
        (lambda ahead: not ahead.helper) if dropout_kernel.loaded() is not None else (lambda ahead: ahead is None)
    )
    torch.set_num_threads(1)
    assert in_step(lever("one_thread"))
    torch.set_num_threads(2)
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    assert in_step(lever("spinning"))


def test_the_lever_is_off_unless_asked_for_and_a_run_that_asks_says_so(tmp_path, two_threads_passive, caplog) -> None:
    from hf_icot.training.config import ICoTConfig

    assert ICoTConfig(output_dir=str(tmp_path / "defaults")).draw_dropout_ahead is False
    lines = []
    for name, options in (("not_asked", {}), ("asked", {"draw_dropout_ahead": True})):
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="hf_icot.levers.dropout_ahead"):
            trainer = icot_trainer(tmp_path / name, **options)
        lines.append([record.message for record in caplog.records if "draw_dropout_ahead" in record.message])
        assert (trainer.dropout_ahead is not None) == bool(options)
    drawer = "the C kernel" if dropout_kernel.loaded() is not None else "torch (no C kernel: "
    assert lines[0] == [] and len(lines[1]) == 1
    assert lines[1][0].startswith(
        f"draw_dropout_ahead is on: dropout masks drawn ahead on a helper thread by {drawer}"
    )


def test_the_lever_asked_for_on_a_gpu_does_nothing_and_says_why(caplog) -> None:
    args = SimpleNamespace(draw_dropout_ahead=True, device=torch.device("cuda"), gradient_checkpointing=False)
    with caplog.at_level(logging.INFO, logger="hf_icot.levers.dropout_ahead"):
        assert dropout_draws_ahead_for(args, gpt2(), latent=False) is None
    assert [record.message for record in caplog.records] == [
        "draw_dropout_ahead is on but idle: this run trains on cuda, where the lever does nothing (it is for CPU "
        "training)"
    ]


@pytest.mark.parametrize(
    ("flags", "given"),
    [
        ([], None),
        (["--draw_dropout_ahead", "true"], None),  # asked for: still nothing set for the process
        (["--config", "{config}"], None),  # the YAML file asks for it
        (["--draw_dropout_ahead"], "PASSIVE"),  # a policy the environment names is kept
        (["--draw_dropout_ahead"], "ACTIVE"),
    ],
)
def test_a_recipe_sets_no_openmp_policy_even_with_the_lever(tmp_path, flags, given) -> None:
    config = tmp_path / "lever.yaml"
    config.write_text("draw_dropout_ahead: true\n", encoding="utf-8")
    script = (
        "import os, sys\n"
        "from hf_icot.command_line.recipe import run_main\n"
        "assert 'torch' not in sys.modules\n"
        "run_main(lambda: print('policy', os.environ.get('OMP_WAIT_POLICY')), parse=lambda: ())\n"
    )
    env = {key: value for key, value in os.environ.items() if key != "OMP_WAIT_POLICY"}
    if given is not None:
        env["OMP_WAIT_POLICY"] = given
    argv = [flag.format(config=config) for flag in flags]
    done = subprocess.run([sys.executable, "-c", script, *argv], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"policy {given}" in done.stdout
