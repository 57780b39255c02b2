"""Evaluation: generation stops after the answer, batching does not change outputs, and exact-match scores equal
what hand-built cases make them."""

import copy

import numpy as np
import pytest
import torch
from datasets import Dataset, DatasetDict
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    EvalPrediction,
    GenerationMixin,
    GPT2Config,
    GPT2LMHeadModel,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerFast,
    Trainer,
    TrainingArguments,
)
from transformers.modeling_outputs import CausalLMOutput

from hf_icot.cot import FULL_COT, truncate
from hf_icot.curriculum.layout import SequenceLayout
from hf_icot.data.encoding import encode_example, encode_prompt
from hf_icot.evaluation.generation import generate_batched
from hf_icot.evaluation.generation_accuracy import evaluate_generation
from hf_icot.evaluation.prompts import default_max_new_tokens, gold_cot_text, plan_generation
from hf_icot.evaluation.teacher_forced import make_compute_metrics, preprocess_logits_for_metrics

WORDS = ["<pad>", "<unk>", "<eos>", "####", "+", "*", "(", ")"] + list("0123456789") + [f"<len_{k}>" for k in range(6)]
FILLER = "("  # what the scripted model writes once its script is spent

EXAMPLES = [
    {"question": "1 2 * 3 4", "cot": ["5 6", "+ 7 8"], "answer": "9 0"},
    {"question": "2 * 3", "cot": ["6 7", "+ 8 9"], "answer": "0 1"},
    {"question": "3 4 * 5 6", "cot": ["7 8", "+ 9 0"], "answer": "1 2"},
    {"question": "4 5 6 * 7 8 9 0", "cot": ["8 9 0"], "answer": "2 3 4"},
]

# What the scripted model writes after each prompt. Right/wrong per example, by mode:
#   explicit: answers right for 0 and 2 (0.5); CoTs right for 0, 1 and 3 (0.75); 3 never closes its answer.
#   implicit: answers right for 0, 1, 2 (0.75); each script goes on after the closing <eos>, which must not be read.
#   hint=1:   gold CoT is the last token ("8", "9", "0", "0"); 0 is right in both, 1 has a long CoT but the right
#             answer, 2 and 3 have no script (answer 0.5, CoT 0.25).
SCRIPTS = {
    "explicit": [
        "5 6 + 7 8 <eos> #### 9 0 <eos>",
        "6 7 + 8 9 <eos> #### 0 2 <eos>",
        "5 6 + 7 8 <eos> #### 1 2 <eos>",
        "8 9 0 <eos> #### 2 3 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4",
    ],
    "implicit": [
        "#### 9 0 <eos> 7 7 <eos>",
        "#### 0 1 <eos> <eos> 5",
        "#### 1 2 <eos> #### 3 <eos>",
        "#### 9 9 <eos>",
    ],
    "hint": ["8 <eos> #### 9 0 <eos>", "8 9 <eos> #### 0 1 <eos>", None, None],
}


def _word_level_tokenizer() -> PreTrainedTokenizerFast:
    backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<eos>", pad_token="<pad>", unk_token="<unk>")


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tokenizer")
    _word_level_tokenizer().save_pretrained(folder)
    return AutoTokenizer.from_pretrained(folder)


class ScriptedConfig(PretrainedConfig):
    model_type = "hf_icot_scripted_test"

    def __init__(self, scripts=None, filler_id=0, vocab_size=None, **kwargs):
        super().__init__(**kwargs)
        self.scripts = scripts or {}  # prompt ids joined by spaces -> continuation ids
        self.filler_id = filler_id
        self.vocab_size = vocab_size or len(WORDS)


class ScriptedLM(PreTrainedModel, GenerationMixin):
    """Writes a fixed continuation after each known prompt, one token per forward pass, without a KV cache (its
    ``generation_config`` says so, and ``generate`` feeds it the whole sequence each time).

    It reads the real tokens of each row through ``attention_mask`` (all tokens when ``generate`` drops a mask
    without padding) and checks that ``position_ids`` number them 0, 1, ... — so a left-padding mistake fails loudly
    instead of shifting the script.
    """

    config_class = ScriptedConfig

    def __init__(self, config):
        super().__init__(config)
        self.anchor = torch.nn.Parameter(torch.zeros(1))  # gives the model a device
        self.calls = 0
        self.post_init()
        self.generation_config.use_cache = False

    def forward(self, input_ids, attention_mask=None, position_ids=None, **kwargs):
        self.calls += 1
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        logits = torch.zeros((*input_ids.shape, self.config.vocab_size), device=input_ids.device)
        for row in range(input_ids.shape[0]):
            real = attention_mask[row].bool()
            if position_ids is not None:
                assert position_ids[row][real].tolist() == list(range(int(real.sum())))
            tokens = input_ids[row][real].tolist()
            next_id, matched = self.config.filler_id, 0
            for prompt, script in self.config.scripts.items():
                prompt_ids = [int(i) for i in prompt.split()]
                written = tokens[len(prompt_ids) :]
                # An explicit prompt is a prefix of the implicit and hint ones: the script must also match what was
                # written so far, and the longest prompt wins.
                on_script = tokens[: len(prompt_ids)] == prompt_ids and written == script[: len(written)]
                if on_script and len(prompt_ids) > matched:
                    matched = len(prompt_ids)
                    next_id = script[len(written)] if len(written) < len(script) else self.config.filler_id
            logits[row, -1, next_id] = 1.0
        return CausalLMOutput(logits=logits + self.anchor)


class ScriptedLMWithoutPositions(ScriptedLM):
    """Takes no ``position_ids``: left padding would misplace its tokens, so every batch must be one length."""

    def forward(self, input_ids, attention_mask=None, **kwargs):
        assert attention_mask is None or bool(attention_mask.all()), "a batch mixed prompt lengths"
        return super().forward(input_ids, attention_mask)


def _scripts(tokenizer, examples=EXAMPLES):
    scripts = {}
    for mode, continuations in SCRIPTS.items():
        for example, text in zip(examples, continuations):
            if text is not None:
                prompt = encode_prompt(example["question"], tokenizer, mode=mode, hint=1 if mode == "hint" else None)
                scripts[" ".join(map(str, prompt))] = tokenizer.convert_tokens_to_ids(text.split())
    return scripts


@pytest.fixture(scope="module")
def scripted(tokenizer):
    config = ScriptedConfig(scripts=_scripts(tokenizer), filler_id=tokenizer.convert_tokens_to_ids(FILLER))
    return ScriptedLM(config)


@pytest.fixture(scope="module")
def tiny_gpt2(tokenizer, tmp_path_factory):
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=len(WORDS), n_positions=64, n_embd=32, n_layer=2, n_head=2)
    config.eos_token_id = config.bos_token_id = tokenizer.eos_token_id
    config.pad_token_id = tokenizer.pad_token_id
    model = GPT2LMHeadModel(config)
    # Strong position embeddings, so that a row given the wrong positions under left padding writes other tokens.
    torch.nn.init.normal_(model.transformer.wpe.weight, std=1.0)
    folder = tmp_path_factory.mktemp("gpt2")
    model.save_pretrained(folder)
    return AutoModelForCausalLM.from_pretrained(folder)


def test_scripted_model_scores_exactly_as_built(scripted, tokenizer):
    metrics, predictions = evaluate_generation(
        scripted,
        tokenizer,
        Dataset.from_list(EXAMPLES),
        modes=("implicit", "explicit", "hint=1"),
        batch_size=3,
        return_predictions=True,
    )
    assert metrics["implicit/answer_em"] == 0.75
    assert "implicit/cot_em" not in metrics
    assert metrics["explicit/answer_em"] == 0.5
    assert metrics["explicit/cot_em"] == 0.75
    assert metrics["hint=1/answer_em"] == 0.5
    assert metrics["hint=1/cot_em"] == 0.25
    assert all(
        metrics[f"{mode}/tokens_per_s"] > 0 and metrics[f"{mode}/examples_per_s"] > 0
        for mode in ("implicit", "explicit", "hint=1")
    )

    eos = tokenizer.eos_token_id
    implicit = [tokenizer.convert_ids_to_tokens(p["generated_ids"]) for p in predictions["implicit"]]
    assert implicit[0] == ["####", "9", "0", "<eos>"]  # stopped at its first <eos>, the script's tail unread
    assert implicit[2] == ["####", "1", "2", "<eos>"]
    explicit = predictions["explicit"]
    assert explicit[1]["generated_ids"].count(eos) == 2 and explicit[1]["generated_ids"][-1] == eos
    limit = default_max_new_tokens(EXAMPLES, tokenizer, "explicit")
    assert len(explicit[3]["generated_ids"]) == limit  # never closed its answer: cut at the cap
    assert [p["answer_correct"] for p in explicit] == [True, False, True, False]
    assert [p["cot_correct"] for p in explicit] == [True, True, False, True]
    assert predictions["hint=1"][1]["gold_cot"] == "9" and predictions["hint=1"][1]["generated_cot"] == "8 9"


def test_default_token_cap_follows_the_gold_lengths_of_each_mode(tokenizer):
    # Longest gold continuation: explicit "5 6 + 7 8 <eos> #### 9 0 <eos>" = 10 tokens; implicit "#### 2 3 4 <eos>" = 5.
    assert default_max_new_tokens(EXAMPLES, tokenizer, "explicit") == 10 + 8
    assert default_max_new_tokens(EXAMPLES, tokenizer, "implicit") == 5 + 8
    assert default_max_new_tokens(EXAMPLES, tokenizer, "hint=1") == 1 + 1 + 5 + 8
    # Under step hints, the last step is 3 tokens ("+ 7 8", "8 9 0"): longest "8 9 0 <eos> #### 2 3 4 <eos>".
    assert default_max_new_tokens(EXAMPLES, tokenizer, "hint=1", SequenceLayout(unit="step")) == 3 + 1 + 4 + 1 + 8


def test_gold_cot_under_a_hint_keeps_the_units_the_removal_side_leaves(tokenizer):
    example = EXAMPLES[0]  # CoT tokens: 5 6 + 7 8; a left removal (the default) keeps the last ones
    assert gold_cot_text(example, tokenizer) == "5 6 + 7 8"
    assert gold_cot_text(example, tokenizer, hint=3) == "+ 7 8"
    assert gold_cot_text(example, tokenizer, hint=0) == ""
    assert gold_cot_text(example, tokenizer, hint=9) == "5 6 + 7 8"
    assert gold_cot_text(example, tokenizer, hint=1, layout=SequenceLayout(unit="step")) == "+ 7 8"
    assert gold_cot_text(example, tokenizer, hint=3, layout=SequenceLayout(side="right")) == "5 6 +"
    assert gold_cot_text(example, tokenizer, hint=1, layout=SequenceLayout(unit="step", side="right")) == "5 6"


def test_model_without_position_ids_gets_batches_of_one_prompt_length(tokenizer):
    config = ScriptedConfig(scripts=_scripts(tokenizer), filler_id=tokenizer.convert_tokens_to_ids(FILLER))
    metrics = evaluate_generation(ScriptedLMWithoutPositions(config), tokenizer, EXAMPLES, modes=("implicit",))
    assert metrics["implicit/answer_em"] == 0.75


def test_left_padded_batches_generate_what_single_prompts_do(tiny_gpt2, tokenizer):
    questions = ["1 2 * 3", "4 * 5", "6 7 8 9 * 1 2 3", "2", "3 3 * 4 4 4"]
    prompts = [encode_prompt(q, tokenizer, mode="explicit") for q in questions]
    batched = generate_batched(tiny_gpt2, tokenizer, prompts, max_new_tokens=6, batch_size=4, stop_after_answer=False)
    single = generate_batched(tiny_gpt2, tokenizer, prompts, max_new_tokens=6, batch_size=1, stop_after_answer=False)
    assert batched == single
    assert all(len(ids) == 6 for ids in batched)
    # The KV-cache loop agrees with recomputing the whole sequence at every step.
    with torch.no_grad():
        ids = torch.tensor([prompts[2]])
        for _ in range(6):
            ids = torch.cat([ids, tiny_gpt2(ids).logits[:, -1:].argmax(-1)], dim=1)
    assert batched[2] == ids[0, len(prompts[2]) :].tolist()


def test_training_mode_is_restored_and_peft_models_generate(tiny_gpt2, tokenizer):
    from peft import LoraConfig, get_peft_model

    lora = LoraConfig(r=2, target_modules=["c_attn"], fan_in_fan_out=True)
    peft_model = get_peft_model(copy.deepcopy(tiny_gpt2), lora)
    peft_model.train()
    prompts = [encode_prompt("1 2 * 3", tokenizer), encode_prompt("4 * 5", tokenizer, mode="implicit")]
    out = generate_batched(peft_model, tokenizer, prompts, max_new_tokens=4, batch_size=2, stop_after_answer=False)
    assert peft_model.training and all(m.training for m in peft_model.modules())
    # LoRA starts as a no-op, so the wrapped model generates what the bare one does.
    assert out == generate_batched(tiny_gpt2, tokenizer, prompts, max_new_tokens=4, stop_after_answer=False)


def test_every_split_but_train_is_evaluated_with_flat_keys(scripted, tokenizer):
    splits = DatasetDict(
        {name: Dataset.from_list(EXAMPLES) for name in ("train", "test_ood_p0_9", "validation", "test")}
    )
    flat = evaluate_generation(scripted, tokenizer, splits, modes=("implicit",))
    assert list(dict.fromkeys(key.split("/")[0] for key in flat)) == ["validation", "test", "test_ood_p0_9"]
    assert flat["test_ood_p0_9/implicit/answer_em"] == 0.75
    assert {"test/implicit/examples_per_s", "validation/implicit/tokens_per_s"} <= set(flat)
    _, predictions = evaluate_generation(scripted, tokenizer, splits, modes=("implicit",), return_predictions=True)
    assert list(predictions) == ["validation/implicit", "test/implicit", "test_ood_p0_9/implicit"]
    with pytest.raises(ValueError, match="no split to evaluate; the dataset has only: train"):
        evaluate_generation(scripted, tokenizer, DatasetDict({"train": splits["train"]}))


def test_bad_inputs_are_refused_with_a_clear_message(scripted, tokenizer):
    prompt = encode_prompt("1 2", tokenizer)
    with pytest.raises(ValueError, match="evaluation mode 'cot' is unknown"):
        evaluate_generation(scripted, tokenizer, EXAMPLES, modes=("cot",))
    with pytest.raises(ValueError, match="lack the column\\(s\\) cot, answer"):
        evaluate_generation(scripted, tokenizer, [{"question": "1 2"}])
    with pytest.raises(ValueError, match="empty dataset"):
        evaluate_generation(scripted, tokenizer, [])
    with pytest.raises(ValueError, match="max_new_tokens 0 is not allowed"):
        generate_batched(scripted, tokenizer, [prompt], max_new_tokens=0)
    with pytest.raises(ValueError, match="batch_size -1 is not allowed"):
        generate_batched(scripted, tokenizer, [prompt], max_new_tokens=2, batch_size=-1)
    eos = tokenizer.eos_token_id
    with pytest.raises(ValueError, match="prompt 0 already holds 3 <eos>"):
        generate_batched(scripted, tokenizer, [prompt + [eos, eos]], max_new_tokens=2)


def test_compute_metrics_scores_teacher_forced_answers(tokenizer):
    ids = tokenizer.convert_tokens_to_ids
    # question <eos> cot <eos> #### answer <eos> [pad]; labels start after the first <eos>.
    tokens = [
        "1 2 <eos> 5 6 <eos> #### 9 0 <eos> <pad>".split(),
        "3 <eos> 7 <eos> #### 1 2 3 <eos> <pad> <pad>".split(),
    ]
    labels = np.full((2, 11), -100)
    labels[0, 3:10] = ids(tokens[0][3:10])
    labels[1, 2:9] = ids(tokens[1][2:9])
    # Predictions are for the next token; row 0 right everywhere, row 1 wrong on its CoT token and last digit.
    predictions = np.zeros((2, 11), dtype=np.int64)
    predictions[:, :-1] = np.where(labels[:, 1:] == -100, 0, labels[:, 1:])
    predictions[1, 1] = ids("8")
    predictions[1, 6] = ids("4")
    logits = torch.nn.functional.one_hot(torch.tensor(predictions), len(WORDS)).float()
    argmaxed = preprocess_logits_for_metrics((logits,), torch.tensor(labels))
    assert argmaxed.tolist() == predictions.tolist()

    metrics = make_compute_metrics(tokenizer)(EvalPrediction(predictions=argmaxed.numpy(), label_ids=labels))
    assert metrics["answer_em"] == 0.5
    assert metrics["token_accuracy"] == pytest.approx(12 / 14)
    with pytest.raises(ValueError, match="evaluation row 0 has no '####'"):
        make_compute_metrics(tokenizer)(
            EvalPrediction(predictions=predictions, label_ids=np.where(labels == 3, 4, labels))
        )


def _pad_right(features, pad_id):
    width = max(len(f["input_ids"]) for f in features)
    batch = {"input_ids": [], "attention_mask": [], "labels": []}
    for f in features:
        gap = width - len(f["input_ids"])
        batch["input_ids"].append(f["input_ids"] + [pad_id] * gap)
        batch["attention_mask"].append([1] * len(f["input_ids"]) + [0] * gap)
        batch["labels"].append(f["labels"] + [-100] * gap)
    return {key: torch.tensor(value) for key, value in batch.items()}


STEPS = 30


def test_trainer_evaluate_reports_what_the_model_predicts(tiny_gpt2, tokenizer, tmp_path):
    encoded = [encode_example(ex, truncate(ex, FULL_COT, tokenizer), tokenizer) for ex in EXAMPLES]
    features = [{"input_ids": e["input_ids"], "labels": e["labels"]} for e in encoded]
    # A few full-batch steps, so that some tokens and answers (not all) come out right.
    torch.manual_seed(0)
    model = copy.deepcopy(tiny_gpt2).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    batch = _pad_right(features, tokenizer.pad_token_id)
    for _ in range(STEPS):
        model(**batch).loss.backward()
        optimizer.step()
        optimizer.zero_grad()

    args = TrainingArguments(output_dir=str(tmp_path), per_device_eval_batch_size=3, report_to="none", use_cpu=True)
    trainer = Trainer(
        model=model,
        args=args,
        eval_dataset=Dataset.from_list(features),
        data_collator=lambda batch: _pad_right(batch, tokenizer.pad_token_id),
        compute_metrics=make_compute_metrics(tokenizer),
        preprocess_logits_for_metrics=preprocess_logits_for_metrics,
    )
    metrics = trainer.evaluate()

    # The same counts by hand, one example at a time: token t + 1 is predicted at t; the answer is its words + <eos>.
    right = labelled = answers_right = 0
    with torch.no_grad():
        for example, feature in zip(EXAMPLES, features):
            predicted = model(torch.tensor([feature["input_ids"]])).logits[0, :-1].argmax(-1).tolist()
            target = feature["labels"][1:]
            hits = [p == t for p, t in zip(predicted, target) if t != -100]
            right, labelled = right + sum(hits), labelled + len(hits)
            answers_right += all(hits[-(len(example["answer"].split()) + 1) :])
    assert metrics["eval_token_accuracy"] == pytest.approx(right / labelled)
    assert metrics["eval_answer_em"] == answers_right / len(EXAMPLES)
    assert 0 < right < labelled  # partly trained (here 28 of 39 tokens and 1 of 4 answers right)


def test_generation_stops_at_the_model_context(tiny_gpt2, tokenizer):
    context = tiny_gpt2.config.n_positions
    prompt = encode_prompt("1 2 * 3", tokenizer, mode="explicit")
    (out,) = generate_batched(
        tiny_gpt2, tokenizer, [prompt], max_new_tokens=500, batch_size=1, stop_after_answer=False
    )
    assert len(prompt) + len(out) == context
    too_long = prompt * (context // len(prompt) + 1)
    with pytest.raises(
        ValueError, match=f"prompt 0 reaches position {len(too_long)} but the model's context is {context}"
    ):
        generate_batched(tiny_gpt2, tokenizer, [too_long], max_new_tokens=5, batch_size=1, stop_after_answer=False)


def _greedy_with_positions(model, prompt, positions, steps, shift_at=None, shift=0):
    """Reference loop: the whole sequence with explicit position ids at every step, no cache, no padding; the
    generated token number ``shift_at`` (0 first) and those after it sit ``shift`` positions later."""
    ids, pos, out = list(prompt), list(positions), []
    with torch.no_grad():
        for index in range(steps):
            logits = model(input_ids=torch.tensor([ids]), position_ids=torch.tensor([pos])).logits
            out.append(int(logits[0, -1].argmax()))
            ids.append(out[-1])
            pos.append(pos[-1] + 1 + (shift if index == shift_at else 0))
    return out


def test_keep_position_shifts_match_explicit_position_ids(tiny_gpt2, tokenizer):
    implicit = encode_prompt("1 2 * 3", tokenizer, mode="implicit")
    other = encode_prompt("6 7 8 9 * 1 2 3", tokenizer, mode="explicit")
    shift = 5
    # The implicit prompt's closing <eos> (and all that follows) sits `shift` positions later.
    positions = list(range(len(implicit) - 1)) + [len(implicit) - 1 + shift]
    expected = _greedy_with_positions(tiny_gpt2, implicit, positions, 6)
    batched = generate_batched(
        tiny_gpt2, tokenizer, [other, implicit], max_new_tokens=6, batch_size=2, stop_after_answer=False,
        position_shifts=[(len(other), 0), (len(implicit) - 1, shift)],
    )  # fmt: skip
    assert batched[1] == expected
    unshifted = generate_batched(tiny_gpt2, tokenizer, [implicit], max_new_tokens=6, stop_after_answer=False)
    assert unshifted[0] != expected  # the shift matters to this model, so the test can fail


def test_a_shift_can_start_inside_the_continuation(tiny_gpt2, tokenizer):
    # A right-removal hint model writes its kept CoT at the usual positions; the <eos> after it jumps the removed ones.
    prompt = encode_prompt("1 2 * 3", tokenizer, mode="explicit")
    other = encode_prompt("6 7 8 9 * 1 2 3", tokenizer, mode="explicit")
    expected = _greedy_with_positions(tiny_gpt2, prompt, list(range(len(prompt))), 7, shift_at=2, shift=5)
    batched = generate_batched(
        tiny_gpt2, tokenizer, [other, prompt], max_new_tokens=7, batch_size=2, stop_after_answer=False,
        position_shifts=[(len(other), 3), (len(prompt) + 2, 5)],
    )  # fmt: skip
    assert batched[1] == expected
    assert batched[0] == _greedy_with_positions(tiny_gpt2, other, list(range(len(other))), 7, shift_at=0, shift=3)
    at_start = generate_batched(
        tiny_gpt2, tokenizer, [prompt], max_new_tokens=7, stop_after_answer=False, position_shifts=[(len(prompt), 5)]
    )
    assert at_start[0] != expected  # where the shift starts matters to this model, so the test can fail


KEPT = SequenceLayout(fill="keep_position")


def test_keep_position_evaluation_shifts_by_the_removed_cot(monkeypatch, scripted, tokenizer):
    import hf_icot.evaluation.generation_accuracy as evaluation

    seen = {}

    def spy(model, tok, prompts, limit, batch_size, position_shifts=None):
        seen["shifts"], seen["prompts"] = position_shifts, prompts
        return [[] for _ in prompts]  # only the shifts are under test here

    monkeypatch.setattr(evaluation, "generate_batched", spy)
    evaluation.evaluate_generation(scripted, tokenizer, EXAMPLES, modes=["implicit"], layout=KEPT)
    expected = [(len(p) - 1, len(" ".join(ex["cot"]).split())) for p, ex in zip(seen["prompts"], EXAMPLES)]
    assert seen["shifts"] == expected and any(shift for _, shift in expected)
    # Explicit prompts run on; only an empty CoT moves (test_reference_evaluation.py generates it).
    cases = [plan_generation(ex, tokenizer, "explicit", KEPT) for ex in EXAMPLES]
    assert [(case.position_shift, case.empty_cot_shift) for case in cases] == [(None, n) for _, n in expected]
    # Under a hint, a left removal shifts from the first generated token, a right one from the <eos> after the kept.
    evaluation.evaluate_generation(scripted, tokenizer, EXAMPLES, modes=["hint=2"], layout=KEPT)
    totals = [len(" ".join(ex["cot"]).split()) for ex in EXAMPLES]
    assert seen["shifts"] == [(len(p), n - min(2, n)) for p, n in zip(seen["prompts"], totals)]
    right = SequenceLayout(fill="keep_position", side="right")
    evaluation.evaluate_generation(scripted, tokenizer, EXAMPLES, modes=["hint=2"], layout=right)
    assert seen["shifts"] == [(len(p) + min(2, n), n - min(2, n)) for p, n in zip(seen["prompts"], totals)]
    with pytest.raises(
        ValueError, match=r"^removal side 'middle' is not allowed; choose one of left, right, inductive\.$"
    ):
        SequenceLayout(side="middle")


def test_the_accuracy_line_gives_every_split_and_mode_in_order():
    from hf_icot.evaluation.generation_accuracy import accuracy_line

    metrics = {
        "validation/implicit/answer_em": 1.0,
        "validation/explicit/cot_em": 0.5,
        "validation/explicit/answer_em": 0.9996,
        "test/implicit/answer_em": 0.5,
        "test/implicit/tokens_per_s": 100.0,
    }
    line = "answer exact match: validation implicit 1.000, explicit 1.000 | test implicit 0.500"
    assert accuracy_line(metrics) == line
    with pytest.raises(ValueError, match="accuracy_line needs '<split>/<mode>/answer_em' metrics"):
        accuracy_line({"implicit/answer_em": 1.0})
