"""PCCoT: its Jacobi forward and loss against a slow loop written here from its definition (one row at a time, no KV
cache, every pass from position 0), with gradients; the sequential forward as its limit; its plan, bad options, a
short training run that logs its terms, its projection saved and reloaded, and latent generation with iterations."""

import pytest
import torch
from transformers import AutoModelForCausalLM

from hf_icot.curriculum import LatentPlan, PCCoT, build_schedule
from hf_icot.curriculum.layout import LATENT_TOKENS
from hf_icot.data.collator import ICoTCollator
from hf_icot.data.tokenization import build_word_level_tokenizer
from hf_icot.evaluation.generation_accuracy import evaluate_generation
from hf_icot.methods.generation import generate_latent
from hf_icot.methods.latent_batches import LatentRenderer
from hf_icot.methods.latent_forward import (
    LatentProjection,
    attach_projection,
    jacobi_hidden_states,
    latent_hidden_states,
    load_projection,
    projection_of,
)
from hf_icot.methods.pccot import PCCoTConfig, PCCoTMethod, pccot_loss
from hf_icot.training.trainer import ICoTTrainer
from tests.hf_icot.test_latent_methods import config, real_rows, slow_cross_entropy, tiny_models
from tests.hf_icot.tiny_task import counting_examples, tiny_gpt2


@pytest.fixture(scope="module")
def task():
    train, test = counting_examples(length=6, n_test=16)
    tokenizer = build_word_level_tokenizer([train, test], extra_tokens=LATENT_TOKENS)
    prepared, _ = ICoTCollator(tokenizer).prepare_dataset(train)
    return train, test, tokenizer, prepared


def slow_jacobi(lm, ids, latent_id, iterations, projection=None, layers=False):
    """Last hidden states (and every layer's) of one unpadded row, from PCCoT's definition: a pass over the prompt
    with its slots as <|latent|> tokens; then each iteration feeds slot j the state the previous pass left at j - 1
    (slot 0: the state before the slots) and recomputes the whole prefix; the whole sequence runs with the last
    iteration's inputs."""
    decoder, embed = lm.get_decoder(), lm.get_input_embeddings()
    project = projection if projection is not None else (lambda x: x)
    slots = [i for i, token in enumerate(ids) if token == latent_id]
    first, end = slots[0], slots[-1] + 1
    embeds = embed(torch.tensor([ids]))  # (1, T, H)
    states = decoder(inputs_embeds=embeds[:, :end]).last_hidden_state[0]  # (end, H)
    fed = project(states[first - 1 : end - 1])  # (L, H)
    for iteration in range(iterations):
        if iteration:
            fed = torch.cat([fed[:1], project(states[first : end - 1])])
        prefix = torch.cat([embeds[0, :first], fed])[None]
        states = decoder(inputs_embeds=prefix).last_hidden_state[0]
    if iterations:
        embeds = torch.cat([embeds[:, :first], fed[None], embeds[:, end:]], dim=1)
    out = decoder(inputs_embeds=embeds, output_hidden_states=layers)
    return out.last_hidden_state[0], (out.hidden_states if layers else None)


def batch_of(tokenizer, prepared, n_rows, n_latent, method=None):
    renderer = LatentRenderer(tokenizer)
    method = method or PCCoTMethod(PCCoT(num_latent_tokens=n_latent))
    method.renderer = renderer
    examples = [prepared[i] for i in range(n_rows)]
    # Questions of different lengths, so rows carry left padding: drop tokens from the front of every other question.
    examples = [
        {**ex, "question_ids": ex["question_ids"][2 * (i % 2) :]} if i % 2 else ex for i, ex in enumerate(examples)
    ]
    batch, _ = method.render(examples, 0, True, collator=None)
    return renderer, method, batch


@pytest.mark.parametrize(("family", "iterations"), [("gpt2", 2), ("llama", 1), ("mistral", 3), ("gpt2", 0)])
def test_jacobi_forward_and_loss_with_gradients_equal_a_slow_loop(task, tmp_path, family, iterations):
    _, _, tokenizer, prepared = task
    lm = tiny_models(len(tokenizer), tmp_path)[family].eval()
    projection = None
    if family == "gpt2" and iterations:
        torch.manual_seed(1)
        projection = LatentProjection(32, 32, dropout=0.0)
        attach_projection(lm, projection)
    config_ = PCCoTConfig(loss_alpha=0.5, loss_beta=2.0, loss_gamma=3.0, use_layerwise_std=family != "llama")
    method = PCCoTMethod(PCCoT(num_latent_tokens=4, num_iterations=iterations), config_)
    renderer, _, batch = batch_of(tokenizer, prepared, 5, 4, method)
    assert batch["attention_mask"][:, 0].tolist() == [1, 0, 1, 0, 1]  # some rows are left-padded
    latent = renderer.tokens.latent
    out = pccot_loss(lm, latent_id=latent, iterations=iterations, config=config_, **batch)
    out.loss.backward()
    ours = {name: p.grad.clone() for name, p in lm.named_parameters() if p.grad is not None}
    lm.zero_grad()
    with torch.no_grad():
        hidden, _, _ = jacobi_hidden_states(
            lm, batch["input_ids"], batch["attention_mask"], batch["position_ids"], latent, iterations, projection
        )
    students, teachers, student_states, teacher_states = [], [], [], []
    teacher_rows = real_rows(batch, "teacher_input_ids", "teacher_attention_mask", "teacher_labels")
    for row, ((ids, labels), (t_ids, t_labels)) in enumerate(zip(real_rows(batch), teacher_rows)):
        reference, layers = slow_jacobi(lm, ids, latent, iterations, projection, layers=True)
        got = hidden[row][batch["attention_mask"][row].bool()]
        assert torch.allclose(got, reference, atol=1e-5), (family, row, (got - reference).abs().max())
        t_out = lm.get_decoder()(input_ids=torch.tensor([t_ids]), output_hidden_states=True)
        students.append((reference, labels))
        teachers.append((t_out.last_hidden_state[0], t_labels))
        assert ids[-3] == t_ids[-3] == tokenizer.convert_tokens_to_ids("####")  # where the two are distilled
        student_states.append(torch.stack([layer[0, len(ids) - 3] for layer in layers[1:]]))  # (N, H)
        teacher_states.append(torch.stack([layer[0, len(t_ids) - 3] for layer in t_out.hidden_states[1:]]).detach())
    student, teacher = torch.stack(student_states, 1), torch.stack(teacher_states, 1)  # (N, B, H)
    terms = torch.nn.functional.smooth_l1_loss(student, teacher, reduction="none")
    if config_.use_layerwise_std:
        distill = torch.stack([t.mean() / s.std() for t, s in zip(terms, teacher)]).mean()
    else:
        distill = terms.mean() / teacher.std()
    student_ce, teacher_ce = slow_cross_entropy(lm, students), slow_cross_entropy(lm, teachers)
    for got, expected in ((out.student_ce, student_ce), (out.teacher_ce, teacher_ce), (out.distill, distill)):
        assert abs(got.item() - expected.item()) < 1e-5
    expected = 0.5 * teacher_ce + 2.0 * student_ce + 3.0 * distill
    assert abs(out.loss.item() - expected.item()) < 1e-5 and distill.item() > 0
    expected.backward()
    for name, p in lm.named_parameters():
        if p.grad is not None:
            assert torch.allclose(ours[name], p.grad, atol=1e-5), (name, (ours[name] - p.grad).abs().max())
    assert ours.keys() == {name for name, p in lm.named_parameters() if p.grad is not None}
    if projection is not None:  # the thoughts' gradient reaches the projection through every iteration
        assert all(ours[name].abs().sum() > 0 for name in ours if name.startswith("latent_projection."))


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_as_many_iterations_as_thoughts_give_the_sequential_forward(task, tmp_path, family):
    """Jacobi iteration on a causal model is exact for the first k slots after k iterations, so with one iteration
    per slot PCCoT's forward is Coconut's and CODI's; with fewer, the last slots differ."""
    _, _, tokenizer, prepared = task
    lm = tiny_models(len(tokenizer), tmp_path)[family].eval()
    renderer, _, batch = batch_of(tokenizer, prepared, 4, 3)
    args = (lm, batch["input_ids"], batch["attention_mask"], batch["position_ids"], renderer.tokens.latent)
    real = batch["attention_mask"].bool()[..., None]
    with torch.no_grad():
        sequential = latent_hidden_states(*args).hidden
        gaps = [float(((jacobi_hidden_states(*args, k)[0] - sequential).abs() * real).max()) for k in range(5)]
    assert gaps[3] < 1e-5 and gaps[4] < 1e-5 and min(gaps[:3]) > 1e-3, gaps


def test_the_plan_and_its_layout():
    schedule = build_schedule("pccot", {"num_latent_tokens": 24, "num_iterations": 3})
    schedule.bind(10, max_cot_steps=4)
    assert schedule.latent_plans(55, [0, 1], [4, 1]) == [LatentPlan(10**9, 24)] * 2
    layout = schedule.layout
    assert (layout.latent_slots(2), layout.latent_iterations, layout.latent_passes(24)) == (24, 3, 4)
    assert build_schedule("codi", {}).layout.latent_passes(6) == 6  # one pass per thought
    assert schedule.describe_stage(0).startswith("all CoT steps, as 24 continuous thoughts from 3 Jacobi iterations")
    defaults = build_schedule("pccot", {})
    assert (defaults.num_latent_tokens, defaults.num_iterations) == (6, 6)  # its PCCoTArguments and config


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"num_latent_tokens": 0}, "num_latent_tokens 0 is not allowed; it must be >= 1."),
        ({"num_iterations": -1}, "num_iterations -1 is not allowed; it must be >= 0."),
        ({"removal_fill": "pad"}, "removal_fill 'pad' does not apply to pccot: its removed steps become latent"),
        ({"loss_gamma": -1.0}, "loss_gamma -1.0 is not allowed; it must be >= 0."),
        ({"loss_alpha": -0.5}, "loss_alpha -0.5 is not allowed; it must be >= 0."),
    ],
)
def test_bad_options_get_one_sentence(tmp_path, options, message):
    with pytest.raises(ValueError, match=message):
        config(tmp_path, schedule="pccot", **options)
    assert not (tmp_path / "run").exists()


def test_slots_not_in_shared_columns_are_refused(task, tmp_path):
    _, _, tokenizer, prepared = task
    lm = tiny_models(len(tokenizer), tmp_path)["gpt2"].eval()
    renderer = LatentRenderer(tokenizer)
    batch, _ = renderer.render([prepared[0], prepared[1]], [LatentPlan(10**9, 2), LatentPlan(10**9, 3)])
    with pytest.raises(ValueError, match="PCCoT's Jacobi forward needs every row's latent slots in the same"):
        jacobi_hidden_states(
            lm, batch["input_ids"], batch["attention_mask"], batch["position_ids"], renderer.tokens.latent, 2
        )
    with pytest.raises(ValueError, match="iterations -1 is not allowed; it must be an integer >= 0, or None."):
        generate_latent(lm, [[1, 2]], renderer.tokens.latent, renderer.eos, renderer.pad, 4, iterations=-1)


def test_training_logs_its_terms_and_a_saved_run_answers_as_evaluation_did(task, tmp_path):
    torch.set_num_threads(1)
    train, test, tokenizer, _ = task
    model = tiny_gpt2(len(tokenizer), tmp_path / "init", n_layer=2, n_embd=32)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    args = config(tmp_path, schedule="pccot", num_latent_tokens=3, num_iterations=2, use_projection=True,
                  num_train_epochs=2, eval_modes=["latent"])  # fmt: skip
    trainer = ICoTTrainer(model=model, args=args, train_dataset=train, eval_dataset=test, processing_class=tokenizer)
    projection = projection_of(model)
    assert projection.settings == {"hidden_size": 32, "width": 32, "dropout": 0.0, "layer_norm": True}
    assert float(projection[1].weight.detach().std()) == pytest.approx(0.02, rel=0.2)  # the model's own initialisation
    trainer.train()
    logs = [entry for entry in trainer.state.log_history if "loss" in entry]
    for entry in logs:
        terms = entry["pccot/teacher_ce"] + entry["pccot/student_ce"] + entry["pccot/distill"]
        assert entry["pccot/distill"] > 0 and entry["loss"] == pytest.approx(terms, rel=1e-4)
    assert logs[-1]["pccot/student_ce"] < logs[0]["pccot/student_ce"]
    assert any(not torch.equal(before[name], p) for name, p in model.named_parameters() if name in before)
    metrics, predictions = evaluate_generation(
        model, tokenizer, test, modes=["latent"], layout=trainer.layout, return_predictions=True
    )
    generated = [len(row["generated_ids"]) for row in predictions["latent"]]
    # The prompt's pass and 2 iterations for the 3 thoughts, then one pass per token.
    assert metrics["latent/forward_passes"] == pytest.approx(3 + sum(generated) / len(generated))
    trainer.save_model()
    folder = tmp_path / "run"
    reloaded = AutoModelForCausalLM.from_pretrained(folder)
    assert load_projection(str(folder), reloaded) is projection_of(reloaded)
    again = evaluate_generation(reloaded, tokenizer, test, modes=["latent"], layout=trainer.layout)
    assert again["latent/answer_em"] == metrics["latent/answer_em"]


def test_latent_generation_with_iterations_matches_step_by_step_greedy_decoding(task, tmp_path):
    _, test, tokenizer, _ = task
    lm = tiny_models(len(tokenizer), tmp_path)["llama"].eval()
    renderer = LatentRenderer(tokenizer)
    prepared, _ = ICoTCollator(tokenizer).prepare_dataset(test)
    examples = [prepared[i] for i in range(5)]
    examples[1] = {**examples[1], "question_ids": examples[1]["question_ids"][3:]}  # a shorter prompt: left padding
    prompts = renderer.prompts(examples, [LatentPlan(10**9, 3)] * 5)
    generated = generate_latent(
        lm, prompts, renderer.tokens.latent, renderer.eos, renderer.pad, 6, batch_size=4, iterations=2
    )
    with torch.no_grad():
        for prompt, ours in zip(prompts, generated):
            ids, expected = list(prompt), []
            for _ in range(len(ours)):  # the slow way: the whole sequence again for every token
                hidden, _ = slow_jacobi(lm, ids, renderer.tokens.latent, 2)
                token = int(lm.get_output_embeddings()(hidden[-1]).argmax())
                expected.append(token)
                ids.append(token)
            assert ours == expected
