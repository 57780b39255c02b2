"""SIM-CoT's step supervision on Coconut and CODI: each thought group's target, the step loss against a slow loop
written from its code's definition, training that logs the term, a saved model without the decoder and generation at
the same cost, reading the thoughts back, and the bad options."""

import json

import pytest
import torch
from safetensors.torch import load_file
from transformers import GPT2Config, GPT2LMHeadModel

from hf_icot.curriculum import CODI, Coconut, LatentPlan
from hf_icot.curriculum.layout import LATENT_TOKENS
from hf_icot.data.collator import ICoTCollator
from hf_icot.data.tokenization import build_word_level_tokenizer
from hf_icot.evaluation.generation_accuracy import evaluate_generation
from hf_icot.methods import load_latent_model
from hf_icot.methods.coconut import CoconutConfig, CoconutMethod, coconut_loss
from hf_icot.methods.codi import CODIConfig, CODIMethod, codi_loss
from hf_icot.methods.latent_batches import step_token_counts
from hf_icot.methods.latent_forward import LatentProjection, attach_projection, latent_hidden_states, projection_of
from hf_icot.methods.simcot import DECODER_FOLDER, decoder_of, supervision_for
from hf_icot.methods.simcot_decoding import decode_thoughts, load_simcot_run, main
from hf_icot.publishing.model_card import describe_run
from hf_icot.training.trainer import ICoTTrainer
from tests.hf_icot.tiny_task import counting_examples, latent_config, tiny_gpt2

ALL = 10**9


@pytest.fixture(scope="module")
def task():
    train, test = counting_examples(length=6, n_test=16)
    tokenizer = build_word_level_tokenizer([train, test], extra_tokens=[*LATENT_TOKENS, "step"])
    prepared, _ = ICoTCollator(tokenizer).prepare_dataset(train)
    return train, test, tokenizer, prepared


def short(example, n_steps):
    """``example`` with only its first ``n_steps`` CoT steps (rows of different lengths: padding everywhere)."""
    counts = step_token_counts(example)
    kept = sum(counts[:n_steps])
    return {**example, "cot_tokens": example["cot_tokens"][:n_steps], "cot_ids": example["cot_ids"][:kept],
            "n_cot_steps": n_steps}  # fmt: skip


def method_with_simcot(name, tokenizer, lm, prompt=None, **plan):
    if name == "coconut":
        schedule = Coconut(c_thought=plan.get("c", 2), max_latent_stage=3)
        method = CoconutMethod(schedule, CoconutConfig(simcot=True, simcot_prompt=prompt))
    else:
        schedule = CODI(num_latent=plan.get("n", 3))
        method = CODIMethod(
            schedule, CODIConfig(use_prj=True, simcot=True, simcot_prompt=prompt, simcot_loss_factor=0.5)
        )
    method.renderer = method.make_renderer(tokenizer)
    if name == "codi":
        torch.manual_seed(3)
        attach_projection(lm, LatentProjection(32, 24))
    method.supervision = supervision_for(lm, tokenizer, method.renderer, method.step_rule(), method.config)
    with torch.no_grad():  # the decoder starts as a copy: move it away, so that mixing the two up shows
        for parameter in decoder_of(lm).parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    return method


# -- a slow reference: one row and one group at a time, no cache, from the definition --------------------------------


def slow_thoughts(lm, ids, latent_id, projection, after_last):
    """The thoughts of one unpadded row: each slot's input is the hidden state before it (projected), recomputing the
    whole prefix per slot; with ``after_last`` also the projected state at the last slot."""
    decoder, embeds, fed = lm.get_decoder(), lm.get_input_embeddings()(torch.tensor([ids])), []
    slots = [i for i, token in enumerate(ids) if token == latent_id]
    for slot in slots:
        before = decoder(inputs_embeds=embeds[:, :slot]).last_hidden_state[0, -1]
        thought = projection(before) if projection is not None else before
        fed.append(thought)
        embeds = torch.cat([embeds[:, :slot], thought[None, None], embeds[:, slot + 1 :]], dim=1)
    if after_last:
        last = decoder(inputs_embeds=embeds[:, : slots[-1] + 1] if slots else embeds).last_hidden_state[0, -1]
        fed.append(projection(last) if projection is not None else last)
    return fed


def slow_step_loss(lm, method, examples, plans, batch):
    rule, supervision, eos = method.step_rule(), method.supervision, method.renderer.eos
    decoder, embed = decoder_of(lm), lm.get_input_embeddings()
    per_group: dict[int, list] = {}
    for row, (example, plan) in enumerate(zip(examples, plans)):
        keep = batch["attention_mask"][row].bool()
        ids = batch["input_ids"][row][keep].tolist()
        thoughts = slow_thoughts(lm, ids, method.renderer.tokens.latent, projection_of(lm), rule.after_last)
        groups = [thoughts[i : i + rule.thoughts_per_step] for i in range(0, len(thoughts), rule.thoughts_per_step)]
        targets = supervision.targets(example, len(groups), method.supervised_steps(example, plan))
        for group, (vectors, target) in enumerate(zip(groups, targets)):
            if target is None:
                continue
            prompt = supervision.prompt_ids(group)
            written = torch.tensor([*target, eos])
            inputs = torch.cat([embed(torch.tensor(prompt, dtype=torch.long)), torch.stack(vectors), embed(written)])
            positions = torch.arange(len(inputs))[None] + rule.first_position
            logits = decoder(inputs_embeds=inputs[None], position_ids=positions).logits[0]
            predicted = logits[len(prompt) + len(vectors) - 1 : -1]  # the last thought predicts the first token
            per_token = torch.nn.functional.cross_entropy(predicted, written, reduction="none")
            per_group.setdefault(group, []).append(per_token)
    if rule.per_row_sum:  # Coconut: each row's sum, averaged over rows, then over groups
        terms = [sum(t.sum() for t in rows) / len(rows) for rows in per_group.values()]
    else:  # CODI: the mean token of each group, then over groups
        terms = [torch.cat(rows).mean() for rows in per_group.values()]
    return sum(terms) / len(terms)


CASES = {
    # Coconut, c = 2: a row with 1 replaced step (1 group), one past the last stage with all 6 steps (3 groups, the
    # last writing steps 3-6), one of 2 steps padded to 3 groups (the third writes the answer), one at stage 2.
    "coconut": ([6, 6, 2, 4], [LatentPlan(1, 2), LatentPlan(ALL, 6), LatentPlan(ALL, 6), LatentPlan(2, 4)]),
    # CODI, 3 thoughts + the state after the last: teacher steps 5 (the last group writes steps 4-5), 1 (groups 2-4
    # write nothing), 0 (no group at all), 3.
    "codi": ([6, 2, 1, 4], [LatentPlan(ALL, 3)] * 4),
}


@pytest.mark.parametrize("prompt", [None, "step {k}"])
@pytest.mark.parametrize("name", ["coconut", "codi"])
def test_step_loss_equals_a_slow_loop_from_the_definition(task, tmp_path, name, prompt):
    _, _, tokenizer, prepared = task
    lm = tiny_gpt2(len(tokenizer), tmp_path / "init", n_layer=2, n_embd=32).eval()
    method = method_with_simcot(name, tokenizer, lm, prompt)
    decoder_of(lm).eval()
    lengths, plans = CASES[name]
    examples = [short(prepared[i], n) for i, n in enumerate(lengths)]
    examples[1] = {**examples[1], "question_ids": examples[1]["question_ids"][:4]}  # a shorter question: left pads
    batch, _ = method.renderer.render(examples, plans)
    batch.update(method.extra_batch(examples))
    supervised = [method.supervised_steps(e, p) for e, p in zip(examples, plans)]
    batch.update(method.supervision.batch(examples, [p.n_latent for p in plans], supervised, batch["input_ids"]))
    with torch.no_grad():
        latent_id = method.renderer.tokens.latent
        states = latent_hidden_states(
            lm, batch["input_ids"], batch["attention_mask"], batch["position_ids"], latent_id, projection_of(lm)
        )
        ours = method.supervision.loss(lm, states, batch)
        expected = slow_step_loss(lm, method, examples, plans, batch)
        assert abs(ours.item() - expected.item()) < 1e-5, (ours, expected)
        # The whole loss is the method's plus the weighted step term, logged unweighted.
        out = method.loss(lm, latent_id, **batch)
        without = (coconut_loss(lm, latent_id=latent_id, **batch) if name == "coconut"
                   else codi_loss(lm, latent_id=latent_id, config=method.config, **batch))  # fmt: skip
        assert abs(out.step_ce.item() - ours.item()) < 1e-6
        factor = method.config.simcot_loss_factor
        assert abs(out.loss.item() - (without.loss.item() + factor * ours.item())) < 1e-5


def test_each_group_writes_its_step_the_last_every_step_left(task, tmp_path):
    _, _, tokenizer, prepared = task
    lm = tiny_gpt2(len(tokenizer), tmp_path / "init", n_layer=1, n_embd=32)
    coconut = method_with_simcot("coconut", tokenizer, lm).supervision
    example = prepared[0]  # CoT 1 2 2 2 3 4, answer #### 4
    step = [[i] for i in example["cot_ids"]]
    answer = list(example["answer_ids"])
    assert coconut.targets(example, 3, 6) == [step[0], step[1], sum(step[2:], [])]
    assert coconut.targets(example, 3, 3) == [step[0], step[1], step[2]]
    assert coconut.targets(example, 3, 1) == [step[0], answer, answer]  # Coconut: past the steps, the answer
    codi = method_with_simcot("codi", tokenizer, tiny_gpt2(len(tokenizer), tmp_path / "b", 1, 32)).supervision
    assert codi.targets(example, 4, 2) == [step[0], step[1], None, None]  # CODI: nothing
    assert codi.targets(example, 2, 5) == [step[0], sum(step[1:5], [])]


# -- training, saving, generation, reading the thoughts -------------------------------------------------------------


config = latent_config


@pytest.mark.parametrize(
    ("name", "options"),
    [("coconut", dict(c_thought=2, max_latent_stage=2, num_train_epochs=4)),
     ("codi", dict(num_latent=2, use_prj=True, prj_dim=16, num_train_epochs=3))],
)  # fmt: skip
def test_a_run_with_simcot_logs_the_step_term_and_saves_a_model_without_the_decoder(task, tmp_path, name, options):
    torch.set_num_threads(1)
    train, test, tokenizer, _ = task
    model = tiny_gpt2(len(tokenizer), tmp_path / "init", n_layer=2, n_embd=32)
    args = config(tmp_path, schedule=name, simcot=True, eval_modes=["latent"], **options)
    trainer = ICoTTrainer(model=model, args=args, train_dataset=train, processing_class=tokenizer)
    decoder = decoder_of(model)
    start = {key: value.clone() for key, value in decoder.state_dict().items()}
    trainer.train()
    logs = [entry for entry in trainer.state.log_history if "loss" in entry]
    steps = [entry["simcot/step_ce"] for entry in logs if "simcot/step_ce" in entry]
    if name == "coconut":  # stage 0 has no thought: nothing to supervise, nothing logged
        assert "simcot/step_ce" not in logs[0] and logs[0]["cot/stage"] == 0
    assert len(steps) >= 3 and all(value > 0 for value in steps)
    if name == "codi":  # one stage: the same targets throughout, which the decoder learns to write
        assert steps[-1] < steps[0]
    assert any(not torch.equal(start[key], value) for key, value in decoder.state_dict().items())
    trainer.save_model()
    folder = tmp_path / "run"
    kept = load_file(folder / "model.safetensors")
    assert not any(key.startswith("simcot") for key in kept)
    # The card counts the model that answers (tied output rows once), not the decoder beside it.
    answering = sum(p.numel() for n, p in model.named_parameters() if not n.startswith("simcot"))
    assert describe_run(trainer)["architecture"].endswith(f"{answering / 1e3:.1f}K parameters")
    settings = json.loads((folder / DECODER_FOLDER / "simcot.json").read_text())
    assert settings["latent_thoughts"] == trainer.layout.latent_thoughts
    # The model answers as it did, at the same cost, without the decoder (load_latent_model never reads it).
    reloaded, _ = load_latent_model(str(folder))
    assert decoder_of(reloaded) is None
    with_decoder = evaluate_generation(model, tokenizer, test, modes=["latent"], layout=trainer.layout)
    without = evaluate_generation(reloaded, tokenizer, test, modes=["latent"], layout=trainer.layout)
    for key in ("latent/answer_em", "latent/forward_passes"):
        assert with_decoder[key] == without[key], key
    # What each thought says, read back through the saved decoder, as the trained one reads it.
    model_, tokenizer_, saved = load_simcot_run(str(folder))
    questions = list(test["question"][:3])
    read = decode_thoughts(model_, tokenizer_, questions, saved, max_new_tokens=4)
    live = trainer.method.supervision.settings(trainer.layout.latent_thoughts)
    assert read == decode_thoughts(model, tokenizer, questions, live, max_new_tokens=4)
    groups = trainer.layout.latent_thoughts // trainer.method.step_rule().thoughts_per_step
    assert [len(texts) for texts in read] == [groups + (name == "codi")] * 3


def test_decode_thoughts_is_greedy_decoding_by_the_decoder(task, tmp_path, capsys):
    _, test, tokenizer, prepared = task
    lm = tiny_gpt2(len(tokenizer), tmp_path / "init", n_layer=1, n_embd=32).eval()
    method = method_with_simcot("coconut", tokenizer, lm, prompt="step {k}")
    lm.eval()
    settings = method.supervision.settings(4)
    texts = decode_thoughts(lm, tokenizer, [test[0]["question"]], settings, max_new_tokens=3)[0]
    # The slow way: the thoughts of the question's latent prompt, then one token at a time.
    renderer, decoder, embed = method.renderer, decoder_of(lm), lm.get_input_embeddings()
    ids = [*ICoTCollator(tokenizer).prepare_dataset(test)[0][0]["question_ids"], renderer.eos, renderer.tokens.start]
    ids += [renderer.tokens.latent] * 4 + [renderer.tokens.end]
    with torch.no_grad():
        thoughts = slow_thoughts(lm, ids, renderer.tokens.latent, None, after_last=False)
        for group, text in enumerate(texts):
            prefix = [
                embed(torch.tensor(method.supervision.prompt_ids(group))),
                torch.stack(thoughts[2 * group :][:2]),
            ]
            written = []
            for _ in range(3):
                inputs = torch.cat([*prefix, embed(torch.tensor(written, dtype=torch.long))])
                logits = decoder(inputs_embeds=inputs[None], position_ids=torch.arange(len(inputs))[None] + 1).logits
                token = int(logits[0, -1].argmax())
                if token == renderer.eos:
                    break
                written.append(token)
            assert text == tokenizer.decode(written)
    assert len(texts) == 2
    with pytest.raises(ValueError, match="latent_thoughts 0 is not allowed; it must be an integer >= 1"):
        decode_thoughts(lm, tokenizer, ["a b"], settings, latent_thoughts=0)
    with pytest.raises(SystemExit):
        main([str(tmp_path / "nowhere"), "a b"])
    assert "is not a folder; give the output_dir of a run trained with simcot true" in capsys.readouterr().err


# -- bad options ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"simcot_prompt": "step {k}"}, "simcot_prompt 'step {k}' is set but simcot is off; pass simcot true"),
        ({"simcot_decoder": "gpt2"}, "simcot_decoder 'gpt2' is set but simcot is off"),
        ({"simcot": True, "simcot_loss_factor": -1}, "simcot_loss_factor -1.0 is not allowed; it must be >= 0"),
        ({"simcot": True, "simcot_prompt": " "}, "simcot_prompt ' ' is not allowed; give some text"),
    ],
)
def test_bad_simcot_options_get_one_sentence(tmp_path, options, message):
    for schedule in ("coconut", "codi"):
        with pytest.raises(ValueError, match=message):
            config(tmp_path, schedule=schedule, **options)
    assert not (tmp_path / "run").exists()


def test_a_decoder_of_another_width_or_a_prompt_the_tokenizer_cannot_write_is_refused(task, tmp_path):
    train, _, tokenizer, _ = task
    wide = tmp_path / "wide"
    GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_embd=48, n_layer=1, n_head=4)).save_pretrained(wide)
    model = tiny_gpt2(len(tokenizer), tmp_path / "init", n_layer=1, n_embd=32)
    with pytest.raises(ValueError, match=r"simcot_decoder '.*wide' is 48 wide but the model's hidden states are 32"):
        ICoTTrainer(model=model, args=config(tmp_path, schedule="codi", simcot=True, simcot_decoder=str(wide)),
                    train_dataset=train, processing_class=tokenizer)  # fmt: skip
    with pytest.raises(ValueError, match="'Schritt'"):
        ICoTTrainer(model=model, args=config(tmp_path, schedule="coconut", simcot=True, simcot_prompt="Schritt {k}"),
                    train_dataset=train, processing_class=tokenizer)  # fmt: skip
    assert decoder_of(model) is None  # nothing was hung on the model
    small = tmp_path / "small"  # a decoder whose vocabulary lacks the run's tokens: one sentence at the first batch
    GPT2LMHeadModel(GPT2Config(vocab_size=3, n_embd=32, n_layer=1, n_head=4)).save_pretrained(small)
    model = tiny_gpt2(len(tokenizer), tmp_path / "init2", n_layer=1, n_embd=32)
    trainer = ICoTTrainer(model=model, args=config(tmp_path, schedule="codi", simcot=True, simcot_decoder=str(small),
                          max_steps=1), train_dataset=train, processing_class=tokenizer)  # fmt: skip
    with pytest.raises(ValueError, match="which the decoder's vocabulary of 3 lacks"):
        trainer.train()
