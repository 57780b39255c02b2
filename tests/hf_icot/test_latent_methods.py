"""Coconut and CODI: the latent forward against a slow loop written here, the losses, the curricula, training,
saving and loading, latent generation, and the bad inputs."""

import json
import math

import pytest
import torch
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM

from hf_icot.curriculum import CODI, LatentPlan, build_schedule
from hf_icot.curriculum.layout import LATENT_TOKENS
from hf_icot.data.collator import ICoTCollator
from hf_icot.data.tokenization import build_word_level_tokenizer
from hf_icot.evaluation.generation_accuracy import evaluate_generation
from hf_icot.methods.coconut import coconut_loss
from hf_icot.methods.codi import CODIConfig, CODIMethod, codi_loss
from hf_icot.methods.generation import generate_latent
from hf_icot.methods.latent_batches import LatentRenderer
from hf_icot.methods.latent_forward import (
    LatentProjection,
    attach_projection,
    check_latent_model,
    latent_hidden_states,
    load_projection,
    projection_of,
)
from hf_icot.modeling.labelled_logits import IGNORE_INDEX
from hf_icot.training.trainer import ICoTTrainer
from tests.hf_icot.tiny_task import counting_examples, latent_config, tiny_gpt2

# -- a slow reference, written from the methods' description: one row at a time, no KV cache, every pass from 0 --


def slow_hidden(lm, ids, latent_id, projection=None, layers=False):
    """Last hidden states (and every layer's) of one unpadded row: each latent slot gets the hidden state before it,
    recomputing the whole prefix for every slot."""
    decoder = lm.get_decoder()
    embeds = lm.get_input_embeddings()(torch.tensor([ids]))  # (1, T, H)
    for slot in [i for i, token in enumerate(ids) if token == latent_id]:
        before = decoder(inputs_embeds=embeds[:, :slot]).last_hidden_state[0, -1]
        fed = projection(before) if projection is not None else before
        embeds = torch.cat([embeds[:, :slot], fed[None, None], embeds[:, slot + 1 :]], dim=1)
    out = decoder(inputs_embeds=embeds, output_hidden_states=layers)
    return out.last_hidden_state[0], (out.hidden_states if layers else None)


def slow_cross_entropy(lm, rows):
    """Mean cross entropy over every labelled token of ``rows`` = [(hidden (T, H), labels (T,))]."""
    losses = []
    for hidden, labels in rows:
        logits = lm.get_output_embeddings()(hidden[:-1]).float()
        targets = torch.tensor(labels[1:])
        keep = targets != IGNORE_INDEX
        losses.append(torch.nn.functional.cross_entropy(logits[keep], targets[keep], reduction="sum"))
    n = sum(sum(1 for t in labels[1:] if t != IGNORE_INDEX) for _, labels in rows)
    return sum(losses) / n


def real_rows(batch, key="input_ids", mask_key="attention_mask", labels_key="labels"):
    rows = []
    for ids, mask, labels in zip(batch[key], batch[mask_key], batch[labels_key]):
        keep = mask.bool()
        rows.append((ids[keep].tolist(), labels[keep].tolist()))
    return rows


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    train, test = counting_examples(length=6, n_test=16)
    tokenizer = build_word_level_tokenizer([train, test], extra_tokens=LATENT_TOKENS)
    collator = ICoTCollator(tokenizer)
    prepared, _ = collator.prepare_dataset(train)
    return train, test, tokenizer, prepared


def tiny_models(vocab_size, folder):
    torch.manual_seed(0)
    llama = LlamaForCausalLM(
        LlamaConfig(vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    )  # fmt: skip
    mistral = MistralForCausalLM(
        MistralConfig(vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, sliding_window=None)
    )  # fmt: skip
    return {"gpt2": tiny_gpt2(vocab_size, folder / "gpt2", n_layer=2, n_embd=32), "llama": llama, "mistral": mistral}


PLANS = [LatentPlan(0, 0), LatentPlan(2, 2), LatentPlan(10**9, 6), LatentPlan(3, 5), LatentPlan(1, 1)]


@pytest.mark.parametrize("family", ["gpt2", "llama", "mistral"])
def test_latent_forward_and_coconut_loss_equal_a_slow_loop_without_cache(task, tmp_path, family):
    _, _, tokenizer, prepared = task
    lm = tiny_models(len(tokenizer), tmp_path)[family].eval()
    check_latent_model(lm)
    renderer = LatentRenderer(tokenizer)
    examples = [prepared[i] for i in range(len(PLANS))]
    batch, kept = renderer.render(examples, PLANS)
    assert kept == [6, 4, 0, 3, 5]  # the CoT tokens each row keeps (one token per step here)
    latent_id = renderer.tokens.latent
    with torch.no_grad():
        hidden = latent_hidden_states(
            lm, batch["input_ids"], batch["attention_mask"], batch["position_ids"], latent_id
        ).hidden
        loss = coconut_loss(lm, latent_id=latent_id, **{k: v for k, v in batch.items()}).loss
        slow = []
        for row, (ids, labels) in enumerate(real_rows(batch)):
            reference, _ = slow_hidden(lm, ids, latent_id)
            ours = hidden[row][batch["attention_mask"][row].bool()]
            assert torch.allclose(ours, reference, atol=1e-5), (family, row, (ours - reference).abs().max())
            slow.append((reference, labels))
        assert abs(loss.item() - slow_cross_entropy(lm, slow).item()) < 1e-5
    # Every row's latent slots share columns (aligned on <|start-latent|>), the labels skip question, markers, slots.
    starts = (batch["input_ids"] == renderer.tokens.start).nonzero()[:, 1]
    assert starts.unique().numel() == 1
    for ids, labels in real_rows(batch):
        end = ids.index(renderer.tokens.end)
        assert all(label == IGNORE_INDEX for label in labels[: end + 1])
        assert labels[end + 1 :] == ids[end + 1 :]


def test_codi_loss_with_projection_equals_a_slow_loop(task, tmp_path):
    _, _, tokenizer, prepared = task
    lm = tiny_models(len(tokenizer), tmp_path)["gpt2"].eval()
    torch.manual_seed(1)
    attach_projection(lm, LatentProjection(32, 48, dropout=0.0))
    renderer = LatentRenderer(tokenizer)
    method = CODIMethod(
        CODI(num_latent=3),
        CODIConfig(use_prj=True, distill_loss_div_std=True, distill_loss_factor=2.0, ref_loss_factor=0.5),
    )
    method.renderer = renderer
    batch, _ = method.render([prepared[i] for i in range(4)], 0, True, collator=None)
    latent_id = renderer.tokens.latent
    with torch.no_grad():
        out = codi_loss(lm, latent_id=latent_id, config=method.config, **batch)
        students, teachers = [], []
        teacher_rows = real_rows(batch, "teacher_input_ids", "teacher_attention_mask", "teacher_labels")
        for (ids, labels), (t_ids, t_labels) in zip(real_rows(batch), teacher_rows):
            assert t_ids.count(renderer.eos) == 3 and len(t_ids) == 6 + 1 + 5 + 1 + 2 + 1  # the last step left out
            assert ids.count(latent_id) == 3
            students.append((slow_hidden(lm, ids, latent_id, projection_of(lm))[0], labels))
            teachers.append((slow_hidden(lm, t_ids, latent_id)[0], t_labels))
            assert ids[-3] == t_ids[-3] == tokenizer.convert_tokens_to_ids("####")  # where the two are distilled
    expected_student = slow_cross_entropy(lm, students)
    expected_teacher = slow_cross_entropy(lm, teachers)
    assert abs(out.student_ce.item() - expected_student.item()) < 1e-5
    assert abs(out.teacher_ce.item() - expected_teacher.item()) < 1e-5
    expected_loss = expected_student + 2.0 * out.distill + 0.5 * expected_teacher
    assert abs(out.loss.item() - expected_loss.item()) < 1e-5 and out.distill.item() > 0


def test_codi_distillation_term_per_layer(task, tmp_path):
    """The distillation term against its definition, row states taken from the slow loop."""
    _, _, tokenizer, prepared = task
    lm = tiny_models(len(tokenizer), tmp_path)["llama"].eval()
    renderer = LatentRenderer(tokenizer)
    for loss_type, div_std in (("smooth_l1", False), ("l2", True)):
        method = CODIMethod(CODI(num_latent=2), CODIConfig(distill_loss_type=loss_type, distill_loss_div_std=div_std))
        method.renderer = renderer
        batch, _ = method.render([prepared[i] for i in range(3)], 0, True, collator=None)
        with torch.no_grad():
            out = codi_loss(lm, latent_id=renderer.tokens.latent, config=method.config, **batch)
            students, teachers = [], []
            rows = zip(
                real_rows(batch), real_rows(batch, "teacher_input_ids", "teacher_attention_mask", "teacher_labels")
            )
            for (ids, _), (t_ids, _) in rows:
                _, layers = slow_hidden(lm, ids, renderer.tokens.latent, layers=True)
                _, t_layers = slow_hidden(lm, t_ids, renderer.tokens.latent, layers=True)
                students.append(torch.stack([layer[0, len(ids) - 3] for layer in layers]))  # (L, H)
                teachers.append(torch.stack([layer[0, len(t_ids) - 3] for layer in t_layers]))
            student, teacher = torch.stack(students, 1), torch.stack(teachers, 1)  # (L, B, H)
            fn = torch.nn.functional.smooth_l1_loss if loss_type == "smooth_l1" else torch.nn.functional.mse_loss
            terms = [
                fn(s, t) / (t.std() ** (2 if loss_type == "l2" else 1) if div_std else 1)
                for s, t in zip(student, teacher)
            ]
            assert abs(out.distill.item() - (sum(terms) / len(terms)).item()) < 1e-5


# -- curricula ----------------------------------------------------------------------------------------------------


def test_coconut_stages_plans_and_resets_follow_its_code():
    schedule = build_schedule("coconut", {"c_thought": 2, "epochs_per_stage": 2, "reset_optimizer_every": "stage"})
    schedule.bind(10, max_cot_steps=3)
    assert [schedule.stage(step) for step in (0, 19, 20, 40, 60, 80, 1000)] == [0, 0, 1, 2, 3, 4, 4]
    assert schedule.latent_plans(25, [0, 1], [3, 1]) == [LatentPlan(1, 2), LatentPlan(1, 2)]
    past = schedule.latent_plans(85, [0, 1], [3, 1])  # past max_latent_stage: every step goes
    assert [plan.n_latent for plan in past] == [6, 2] and all(plan.skip_steps >= 3 for plan in past)
    assert [s for s in range(1, 100) if schedule.resets_optimizer_at(s)] == [20, 40, 60, 80]
    every_epoch = build_schedule("coconut", {})
    every_epoch.bind(10, max_cot_steps=3)
    assert [s for s in range(1, 50) if every_epoch.resets_optimizer_at(s)] == [10, 20, 30, 40]
    assert schedule.layout_at(None).latent_slots(3) == 6 and schedule.layout_at(25).latent_slots(3) == 2
    assert schedule.layout_at(None).latent_slots(1) == 2  # Coconut's evaluation caps by the question's steps
    # uniform_prob: some examples draw their own stage, deterministically per (seed, step, example).
    mixed = build_schedule("coconut", {"uniform_prob": 1.0, "seed": 3})
    mixed.bind(10, max_cot_steps=6)
    plans = mixed.latent_plans(0, list(range(200)), [6] * 200)
    assert plans == mixed.latent_plans(0, list(range(200)), [6] * 200)
    assert {plan.n_latent for plan in plans} == set(range(7))
    assert mixed.latent_plans(0, list(range(5)), [6] * 5, training=False) == [LatentPlan(0, 0)] * 5


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        ("coconut", {"c_thought": 0}, "c_thought 0 is not allowed; it must be >= 1"),
        ("coconut", {"uniform_prob": 1.5}, "uniform_prob 1.5 is not allowed"),
        ("coconut", {"removal_fill": "pad"}, "removal_fill 'pad' does not apply to coconut"),
        ("codi", {"length_hint": True}, "length_hint True does not apply to codi"),
        ("codi", {"num_latent": -1}, "num_latent -1 is not allowed; it must be >= 0"),
        ("coconut", {"reset_optimizer_every": "step"}, "reset_optimizer_every 'step' is not allowed"),
    ],
)
def test_bad_latent_options_get_one_sentence(name, options, message):
    with pytest.raises(ValueError, match=message):
        build_schedule(name, options)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"distill_loss_type": "kl"}, "distill_loss_type 'kl' is not allowed; choose one of smooth_l1, l2"),
        ({"prj_dropout": 1.0}, r"prj_dropout 1.0 is not allowed; it must be in \[0, 1\)"),
    ],
)
def test_bad_method_options_get_one_sentence(tmp_path, options, message):
    with pytest.raises(ValueError, match=message):
        config(tmp_path, schedule="codi", **options)
    assert not (tmp_path / "run").exists()


# -- training, saving, generation ----------------------------------------------------------------------------------


config = latent_config


def test_coconut_trains_stage_by_stage_and_is_evaluated_in_latent_mode(task, tmp_path):
    torch.set_num_threads(1)
    train, test, tokenizer, _ = task
    model = tiny_gpt2(len(tokenizer), tmp_path / "init", n_layer=2, n_embd=32)
    args = config(tmp_path, schedule="coconut", max_latent_stage=2, num_train_epochs=4, eval_modes=["latent"])
    trainer = ICoTTrainer(model=model, args=args, train_dataset=train, eval_dataset=test, processing_class=tokenizer)
    trainer.train()
    logs = [entry for entry in trainer.state.log_history if "loss" in entry]
    stages = {entry["cot/stage"] for entry in logs}
    assert stages == {0, 1, 2, 3} and trainer.optimizer_resets == 3  # every epoch (Coconut's code)
    assert logs[0]["cot/kept_tokens_mean"] == 6.0 and logs[-1]["cot/kept_tokens_mean"] == 0.0
    assert sorted(trainer.stage_metrics) == [0, 1, 2, 3]
    assert all("eval_latent/answer_em" in metrics for metrics in trainer.stage_metrics.values())
    record = json.loads((tmp_path / "run" / "stage-1" / "icot_schedule.json").read_text())
    assert record["removes"] == "the first 1 CoT step(s), as 1 latent thoughts"
    metrics = trainer.evaluate_generation({"test": test}, metric_key_prefix="")
    assert set(metrics) >= {"test/latent/answer_em", "test/latent/examples_per_s", "test/latent/tokens_per_s"}
    _, predictions = evaluate_generation(
        trainer.model, tokenizer, test, modes=["latent"], layout=trainer.layout, return_predictions=True
    )
    generated = [len(row["generated_ids"]) for row in predictions["latent"]]
    # A latent thought costs a decoder pass, as a generated token does: 2 thoughts here, then the tokens.
    assert metrics["test/latent/forward_passes"] == pytest.approx(2 + sum(generated) / len(generated))
    assert trainer.layout.latent_slots(6) == 2  # after the last stage, 2 steps as 1 thought each


def test_codi_projection_is_saved_beside_the_model_and_loaded_by_one_call(task, tmp_path):
    torch.set_num_threads(1)
    train, test, tokenizer, _ = task
    model = tiny_gpt2(len(tokenizer), tmp_path / "init", n_layer=2, n_embd=32)
    args = config(tmp_path, schedule="codi", num_latent=2, use_prj=True, prj_dim=16, num_train_epochs=2)
    trainer = ICoTTrainer(model=model, args=args, train_dataset=train, processing_class=tokenizer)
    trainer.train()
    logs = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert all(math.isfinite(entry["codi/distill"]) and entry["codi/teacher_ce"] > 0 for entry in logs)
    before = evaluate_generation(model, tokenizer, test, modes=["latent"], layout=trainer.layout)
    trainer.save_model()
    folder = tmp_path / "run"
    assert (folder / "latent_projection.safetensors").exists()
    from safetensors.torch import load_file

    assert not any(key.startswith("latent_projection") for key in load_file(folder / "model.safetensors"))
    reloaded = AutoModelForCausalLM.from_pretrained(folder)
    projection = load_projection(str(folder), reloaded)
    assert projection is projection_of(reloaded) and projection.settings["width"] == 16
    after = evaluate_generation(reloaded, tokenizer, test, modes=["latent"], layout=trainer.layout)
    assert after["latent/answer_em"] == before["latent/answer_em"]


def test_latent_generation_matches_step_by_step_greedy_decoding(task, tmp_path):
    _, test, tokenizer, _ = task
    lm = tiny_models(len(tokenizer), tmp_path)["llama"].eval()
    renderer = LatentRenderer(tokenizer)
    collator = ICoTCollator(tokenizer)
    prepared, _ = collator.prepare_dataset(test)
    examples = [prepared[i] for i in range(6)]
    prompts = renderer.prompts(examples, [LatentPlan(10**9, n) for n in (0, 1, 2, 3, 2, 1)])
    generated = generate_latent(lm, prompts, renderer.tokens.latent, renderer.eos, renderer.pad, 6, batch_size=4)
    with torch.no_grad():
        for prompt, ours in zip(prompts, generated):
            ids, expected = list(prompt), []
            for _ in range(len(ours)):  # the slow way: the whole sequence again for every token
                hidden, _ = slow_hidden(lm, ids, renderer.tokens.latent)
                token = int(lm.get_output_embeddings()(hidden[-1]).argmax())
                expected.append(token)
                ids.append(token)
            assert ours == expected


def test_latent_generation_stops_at_the_models_context(task, tmp_path):
    """A model that never closes its answer writes up to its context, not past it (a position past it has no
    embedding), and a prompt already at the context is one sentence."""
    _, _, tokenizer, prepared = task
    lm = tiny_gpt2(len(tokenizer), tmp_path / "short", n_layer=1, n_embd=32, n_positions=14)
    renderer = LatentRenderer(tokenizer)
    prompts = renderer.prompts([prepared[0], prepared[1]], [LatentPlan(10**9, 2), LatentPlan(10**9, 1)])
    assert max(map(len, prompts)) == 6 + 2 + 2 + 1  # question, <eos>, markers, slots
    never = -1  # as the closing <eos>: no token is, so generation runs until something stops it
    out = generate_latent(lm, prompts, renderer.tokens.latent, never, renderer.pad, 50)
    assert [len(row) for row in out] == [14 - 11, 14 - 11]
    with pytest.raises(ValueError, match="a latent prompt of 14 tokens reaches the model's context of 14"):
        generate_latent(lm, [[renderer.eos] * 11 + prompts[0][-3:]], renderer.tokens.latent, renderer.eos, 0, 5)


def test_a_model_whose_hidden_states_cannot_be_fed_back_is_refused(tmp_path):
    class Scaled(LlamaForCausalLM):
        def forward(self, *args, **kwargs):
            out = super().forward(*args, **kwargs)
            out.logits = out.logits * 2.0
            return out

    model = Scaled(
        LlamaConfig(vocab_size=40, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4)
    )
    with pytest.raises(
        ValueError, match="Scaled cannot take latent thoughts here: its logits are not its output layer"
    ):
        check_latent_model(model)


def test_max_latent_stage_beyond_the_longest_cot_and_missing_markers_are_refused(task, tmp_path):
    train, _, tokenizer, _ = task
    model = tiny_gpt2(len(tokenizer), tmp_path / "init", n_layer=1, n_embd=32)
    with pytest.raises(
        ValueError, match=r"max_latent_stage 7 is larger than the longest CoT of the training data \(6"
    ):
        ICoTTrainer(model=model, args=config(tmp_path, schedule="coconut", max_latent_stage=7), train_dataset=train,
                    processing_class=tokenizer)  # fmt: skip
    plain = build_word_level_tokenizer([train])
    with pytest.raises(ValueError, match=r"the tokenizer has no token '<\|start-latent\|>'"):
        ICoTTrainer(model=tiny_gpt2(len(plain), tmp_path / "plain", n_layer=1, n_embd=32),
                    args=config(tmp_path, schedule="codi"), train_dataset=train, processing_class=plain)  # fmt: skip
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("schedule", "options"),
    [("coconut", {"c_thought": 3}), ("codi", {"num_latent": 20}), ("pccot", {"num_latent_tokens": 20})],
)
def test_thoughts_beyond_the_models_positions_are_one_sentence_before_the_first_step(
    task, tmp_path, schedule, options
):
    """The token sequences fit the 24 positions (the collator checks them), the latent ones do not (Coconut's sixth
    stage: 18 thoughts; CODI's and PCCoT's 20): refused before any step, naming the length, the thoughts and the
    positions, with no model written."""
    train, _, tokenizer, _ = task
    model = tiny_gpt2(len(tokenizer), tmp_path / "init", n_layer=1, n_embd=32, n_positions=24)
    trainer = ICoTTrainer(model=model, args=config(tmp_path, schedule=schedule, **options), train_dataset=train,
                          processing_class=tokenizer)  # fmt: skip
    with pytest.raises(ValueError, match=rf"^--schedule {schedule}: training example \d+ is \d+ tokens with \d+ "
                                         r"continuous thoughts, longer than the model's 24 positions; give the model"):  # fmt: skip
        trainer.train()
    assert trainer.state.global_step == 0 and not list((tmp_path / "run").glob("**/model.safetensors"))
