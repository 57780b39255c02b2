"""ICoTTrainer end to end: a curriculum to zero CoT, optimizer resets, stage checkpoints, failures, configuration."""

import json
import math

import datasets
import pytest
import torch
import yaml
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, TrainerCallback

from hf_icot.command_line.parsing import parse_config
from hf_icot.cot import TruncationSpec
from hf_icot.curriculum import Mixture
from hf_icot.curriculum.layout import SequenceLayout
from hf_icot.data.tokenization import build_word_level_tokenizer, prepare_tokenizer_for_icot
from hf_icot.evaluation.generation_accuracy import evaluate_generation
from hf_icot.training.config import ICoTConfig
from hf_icot.training.trainer import ICoTTrainer, NonFiniteLossError
from tests.hf_icot.tiny_task import counting_examples, tiny_bpe_tokenizer, tiny_gpt2


def config(tmp_path, **overrides) -> ICoTConfig:
    values = dict(
        output_dir=str(tmp_path / "run"),
        per_device_train_batch_size=4,
        learning_rate=3e-3,
        report_to="none",
        use_cpu=True,
        save_strategy="no",
        disable_tqdm=True,
        seed=0,
    )
    values.update(overrides)
    return ICoTConfig(**values)


def test_stepwise_curriculum_reaches_zero_cot_and_answers_implicitly(tmp_path):
    torch.set_num_threads(1)
    train, test = counting_examples(length=8, n_test=32)  # 224 training questions, 32 held out
    tokenizer = build_word_level_tokenizer([train, test])
    model = tiny_gpt2(len(tokenizer), tmp_path / "init", n_layer=2, n_embd=64)
    args = config(
        tmp_path,
        schedule="stepwise",
        remove_per_epoch=1,  # one CoT token per epoch ...
        remove_all_when_remove_beyond=8,  # ... and none left from epoch 8 on
        reset_optimizer=True,
        num_train_epochs=50,
        per_device_train_batch_size=16,
        lr_scheduler_type="linear",
        logging_steps=14,
        eval_modes=["implicit"],
        per_device_eval_batch_size=32,
    )
    trainer = ICoTTrainer(model=model, args=args, train_dataset=train, eval_dataset=test, processing_class=tokenizer)
    trainer.train()

    train_logs = [entry for entry in trainer.state.log_history if "loss" in entry]
    for entry in train_logs:  # logged at the end of each epoch: 14 steps, the last trained step is 14 e - 1
        step = entry["step"] - 1
        assert entry["cot/stage"] == min(step // 14, 8)
        assert entry["cot/removed_tokens"] == (step // 14 if step < 8 * 14 else math.inf)
    assert train_logs[0]["cot/kept_tokens_mean"] == 8.0
    assert train_logs[-1]["cot/kept_tokens_mean"] == 0.0 and train_logs[-1]["cot/removed_tokens"] == math.inf
    assert trainer.optimizer_resets == 8
    assert trainer.schedule.max_cot_tokens == 8  # bound from the data

    # Every stage was evaluated and saved; the last one answers without any CoT.
    assert sorted(trainer.stage_metrics) == list(range(9))
    assert all(math.isfinite(metrics["eval_loss"]) for metrics in trainer.stage_metrics.values())
    assert trainer.stage_metrics[8]["eval_implicit/answer_em"] >= 0.9
    assert trainer.stage_metrics[0]["eval_implicit/answer_em"] < 0.5  # trained with the full CoT, it needs it
    final = tmp_path / "run" / "stage-8"
    record = json.loads((final / "icot_schedule.json").read_text())
    assert record["removes"] == "all CoT tokens" and record["last_step"] == 699
    assert record["schedule"]["name"] == "stepwise" and record["schedule"]["steps_per_epoch"] == 14
    reloaded = AutoModelForCausalLM.from_pretrained(final)
    assert evaluate_generation(reloaded, tokenizer, test, modes=["implicit"])["implicit/answer_em"] >= 0.9
    assert {p.name for p in (tmp_path / "run").iterdir() if p.name.startswith("stage-")} == {
        f"stage-{i}" for i in range(9)
    }


class AdamProbe(TrainerCallback):
    """Records, when each step begins (after the curriculum's reset, before the optimizer step), the Adam state."""

    def __init__(self):
        self.trainer, self.sizes, self.moments = None, {}, {}

    def on_step_begin(self, args, state, control, optimizer=None, **kwargs):
        inner = getattr(optimizer, "optimizer", optimizer)
        self.sizes[state.global_step] = len(inner.state)
        self.moments[state.global_step] = sum(float(s["exp_avg"].abs().sum()) for s in inner.state.values())


def test_optimizer_reset_clears_adam_state_unless_the_previous_step_had_no_cot(tmp_path):
    train, _ = counting_examples(length=4, n_test=4)  # 12 examples: 3 steps of 4 per epoch, CoTs of 4 tokens
    tokenizer = build_word_level_tokenizer(train)
    model = tiny_gpt2(len(tokenizer), tmp_path / "init", n_layer=1, n_embd=32)
    args = config(tmp_path, schedule="stepwise", remove_per_epoch=1, reset_optimizer=True, max_steps=17)
    probe = AdamProbe()
    trainer = ICoTTrainer(model=model, args=args, train_dataset=train, processing_class=tokenizer, callbacks=[probe])
    trainer.train()
    # Increments at steps 3, 6, 9, 12, 15; from 12 on, 4 tokens go: the longest CoT, so the schedule asks no more.
    assert trainer.optimizer_resets == 4
    for step in (3, 6, 9, 12):
        assert probe.sizes[step] == 0 and probe.moments[step] == 0.0
        assert probe.sizes[step - 1] > 0 and probe.moments[step - 1] > 0
    assert probe.sizes[15] > 0 and probe.moments[15] > 0
    inner = getattr(trainer.optimizer, "optimizer", trainer.optimizer)
    assert {int(state["step"]) for state in inner.state.values()} == {17 - 12}  # steps since the last reset


def test_optimizer_reset_is_skipped_when_smoothing_left_the_previous_batch_without_cot(tmp_path):
    train, _ = counting_examples(length=4, n_test=4)  # 12 examples: 3 steps of 4 per epoch, CoTs of 4 tokens
    tokenizer = build_word_level_tokenizer(train)
    model = tiny_gpt2(len(tokenizer), tmp_path / "init", n_layer=1, n_embd=32)
    args = config(
        tmp_path,
        schedule="stepwise",
        remove_per_epoch=1,
        removal_smoothing_lambda=0.1,  # large offsets: some batches lose their whole CoT before the schedule does
        reset_optimizer=True,
        max_steps=12,
        logging_steps=1,
    )
    trainer = ICoTTrainer(model=model, args=args, train_dataset=train, processing_class=tokenizer)
    trainer.train()
    kept = {entry["step"] - 1: entry["cot/kept_tokens_mean"] for entry in trainer.state.log_history if "loss" in entry}
    increments = [3, 6, 9]  # the schedule asks for a reset at each (the count stays below the 4-token CoT)
    expected = [step for step in increments if kept[step - 1] > 0]
    assert 0 < len(expected) < len(increments)  # the seed gives both cases
    assert trainer.optimizer_resets == len(expected)


@pytest.mark.parametrize("side", ["left", "right"])
def test_mixture_with_hints_and_kept_positions_answers_under_every_hint(tmp_path, side):
    # Hint k: the model writes the k CoT units a removal from `side` keeps (the last k for left, the first k for
    # right), at the positions they had in the full CoT, then the answer at its full-CoT position.
    torch.set_num_threads(1)
    train, test = counting_examples(length=6, n_test=16)  # 48 training questions, CoTs of 6 tokens
    tokenizer = build_word_level_tokenizer([train, test], max_hint_length=6)
    model = tiny_gpt2(len(tokenizer), tmp_path / "init", n_layer=2, n_embd=64)
    hints = [f"hint={k}" for k in range(7)]
    args = config(
        tmp_path, schedule="mixture", length_hint=True, removal_side=side, removal_fill="keep_position",
        num_train_epochs=150, per_device_train_batch_size=16, lr_scheduler_type="linear", eval_modes=hints,
    )  # fmt: skip
    trainer = ICoTTrainer(model=model, args=args, train_dataset=train, eval_dataset=test, processing_class=tokenizer)
    trainer.train()
    metrics = trainer.evaluate_generation()
    assert min(metrics[f"eval_{mode}/answer_em"] for mode in hints) >= 0.9, metrics
    assert min(metrics[f"eval_{mode}/cot_em"] for mode in hints) >= 0.8, metrics
    other_side = "left" if side == "right" else "right"
    wrong = evaluate_generation(
        trainer.model, tokenizer, test, modes=["hint=3"], layout=SequenceLayout(fill="keep_position", side=other_side)
    )
    assert wrong["hint=3/answer_em"] < 0.5 and wrong["hint=3/cot_em"] < 0.5  # the side matters: the test can fail


class Diverge(TrainerCallback):
    def on_step_begin(self, args, state, control, model=None, **kwargs):
        if state.global_step == 3:
            with torch.no_grad():
                model.lm_head.weight.fill_(float("nan"))


def test_nan_loss_stops_training_and_leaves_the_last_good_checkpoint(tmp_path):
    train, _ = counting_examples(length=4, n_test=4)
    tokenizer = build_word_level_tokenizer(train)
    model = tiny_gpt2(len(tokenizer), tmp_path / "init", n_layer=1, n_embd=32)
    args = config(tmp_path, schedule="full_cot", max_steps=6, save_strategy="steps", save_steps=1)
    trainer = ICoTTrainer(
        model=model, args=args, train_dataset=train, processing_class=tokenizer, callbacks=[Diverge()]
    )
    last = tmp_path / "run" / "checkpoint-3"
    with pytest.raises(
        NonFiniteLossError, match=rf"loss is nan at step 4 .*learning rate .*last good checkpoint is {last}"
    ):
        trainer.train()
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["checkpoint-1", "checkpoint-2", "checkpoint-3"]
    weights = load_file(last / "model.safetensors")
    assert all(torch.isfinite(tensor).all() for tensor in weights.values())


def test_bpe_tokenizer_with_keep_position_stages_and_eval_loss(tmp_path):
    train, test = counting_examples(length=4, n_test=4)
    texts = [f"{ex['question']} {' '.join(ex['cot'])} #### {ex['answer']}" for ex in train]
    tokenizer = prepare_tokenizer_for_icot(tiny_bpe_tokenizer(texts, tmp_path / "bpe"))
    model = tiny_gpt2(len(tokenizer), tmp_path / "init", n_layer=1, n_embd=32)
    before = model.transformer.h[0].mlp.c_fc.weight.detach().clone()
    args = config(
        tmp_path, schedule="staged", removal_side="right", removal_fill="keep_position", stage_length=2,
        stage_unit="steps", max_steps=6, logging_steps=2, keep_stage_checkpoints=False,
    )  # fmt: skip
    trainer = ICoTTrainer(model=model, args=args, train_dataset=train, eval_dataset=test, processing_class=tokenizer)
    assert math.isfinite(trainer.evaluate()["eval_loss"])  # before training: the schedule binds itself
    trainer.train()
    assert [entry["cot/stage"] for entry in trainer.state.log_history if "loss" in entry] == [0, 1, 2]
    assert sorted(trainer.stage_metrics) == [0, 1, 2]
    assert trainer.schedule.max_cot_steps == 4  # bound from the data: stage 4 would remove all 4 steps
    assert math.isfinite(trainer.evaluate()["eval_loss"])
    assert not torch.equal(before, trainer.model.transformer.h[0].mlp.c_fc.weight.detach())


def test_too_long_sequences_error_or_are_skipped_and_counted(tmp_path):
    short, _ = counting_examples(length=4, n_test=4)  # 4 + 1 + 4 + 1 + 2 + 1 = 13 tokens
    long, _ = counting_examples(length=8, n_test=252)  # 21 tokens
    train = datasets.concatenate_datasets([short, long])
    tokenizer = build_word_level_tokenizer(train)
    model = tiny_gpt2(len(tokenizer), tmp_path / "init", n_layer=1, n_embd=32, n_positions=16)
    with pytest.raises(
        ValueError, match="example 12 is 21 tokens long with its full CoT, beyond the model's context of 16"
    ):
        ICoTTrainer(model=model, args=config(tmp_path), train_dataset=train, processing_class=tokenizer)
    args = config(tmp_path, too_long="skip", schedule="no_cot", max_steps=2, logging_steps=1)
    trainer = ICoTTrainer(model=model, args=args, train_dataset=train, processing_class=tokenizer)
    assert len(trainer.train_dataset) == 12 and trainer.skipped_too_long == 4
    trainer.train()
    assert trainer.state.log_history[0]["cot/skipped_too_long"] == 4


def test_config_from_yaml_with_command_line_overrides(tmp_path):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        yaml.safe_dump(
            {
                "output_dir": str(tmp_path / "out"),
                "schedule": "mixture",
                "mixture_weights": [1, 2, 3],
                "length_hint": True,
                "removal_smoothing_lambda": "inf",
                "eval_modes": ["implicit", "hint=2"],
                "learning_rate": 5e-4,
            }
        )
    )
    (args,) = parse_config(ICoTConfig, ["--config", str(recipe), "--learning_rate", "1e-4", "--removal_unit", "step"])
    assert args.schedule == "mixture" and args.mixture_weights == [1, 2, 3] and args.length_hint is True
    assert args.learning_rate == 1e-4 and args.removal_unit == "step" and args.removal_smoothing_lambda == math.inf
    assert args.eval_modes == ["implicit", "hint=2"] and args.remove_unused_columns is False
    recipe.write_text(yaml.safe_dump({"output_dir": "x", "remove_speed": 2}))
    with pytest.raises(ValueError, match="unknown key\\(s\\) remove_speed"):
        parse_config(ICoTConfig, ["--config", str(recipe)])


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"schedule": "linear"}, "schedule 'linear' is unknown"),
        ({"removal_smoothing_lambda": 0}, "removal_smoothing_lambda 0.0 is not allowed"),
        ({"remove_start_from": -1}, "remove_start_from -1 is not allowed"),
        ({"too_long": "truncate"}, "too_long 'truncate' is not allowed"),
        ({"eval_modes": ["cot"]}, "evaluation mode 'cot' is unknown"),
        ({"removal_side": "inductive"}, "stepwise removal side 'inductive' is not allowed; choose one of left, right"),
        ({"schedule": "log_icot", "removal_side": "right"}, "log_icot removal side 'right' is not allowed"),
        ({"schedule": "staged", "removal_unit": "token"}, "staged unit 'token' is not allowed; choose one of step"),
        ({"length_hint": True}, "length hints are for the mixture schedule; stepwise takes hint=False"),
        ({"schedule": "staged", "stage_unit": "hours"}, "stage_unit 'hours' is not allowed"),
        ({"schedule": "mixture", "mixture_weights": [-1.0]}, "mixture weights"),
        ({"remove_unused_columns": True}, "remove_unused_columns=True would drop"),
        ({"max_new_tokens": 0}, "max_new_tokens 0 is not allowed"),
    ],
)
def test_bad_config_values_raise_one_sentence(tmp_path, overrides, message):
    with pytest.raises(ValueError, match=message):
        config(tmp_path, **overrides)


def test_trainer_rejects_plain_training_arguments_and_missing_tokenizer(tmp_path):
    from transformers import TrainingArguments

    train, _ = counting_examples(length=4, n_test=4)
    tokenizer = build_word_level_tokenizer(train)
    model = tiny_gpt2(len(tokenizer), tmp_path / "init", n_layer=1, n_embd=32)
    with pytest.raises(ValueError, match="needs an ICoTConfig as args, got TrainingArguments"):
        ICoTTrainer(
            model=model,
            args=TrainingArguments(output_dir=str(tmp_path)),
            train_dataset=train,
            processing_class=tokenizer,
        )
    with pytest.raises(ValueError, match="needs the tokenizer as processing_class"):
        ICoTTrainer(model=model, args=config(tmp_path), train_dataset=train)
    unschema = datasets.Dataset.from_list([{"text": "a b"}])
    with pytest.raises(ValueError, match="lacks the column\\(s\\) question, cot, answer"):
        ICoTTrainer(model=model, args=config(tmp_path), train_dataset=unschema, processing_class=tokenizer)
    with pytest.raises(ValueError, match="the tokenizer has no token '<len_0>'; add it with"):
        ICoTTrainer(
            model=model,
            args=config(tmp_path, schedule="mixture", length_hint=True),
            train_dataset=train,
            processing_class=tokenizer,
        )
    short_hints = build_word_level_tokenizer(train, max_hint_length=2)  # hints up to the longest CoT's
    with pytest.raises(ValueError, match="the tokenizer has no token '<len_3>'; add it with"):
        ICoTTrainer(
            model=model,
            args=config(tmp_path, schedule="mixture", length_hint=True),
            train_dataset=train,
            processing_class=short_hints,
        )


def test_mixture_with_length_hints_trains_on_every_length(tmp_path):
    train, _ = counting_examples(length=4, n_test=4)
    tokenizer = build_word_level_tokenizer(train, max_hint_length=4)
    model = tiny_gpt2(len(tokenizer), tmp_path / "init", n_layer=1, n_embd=32)
    args = config(tmp_path, schedule="mixture", length_hint=True, max_steps=3, per_device_train_batch_size=12)
    trainer = ICoTTrainer(model=model, args=args, train_dataset=train, processing_class=tokenizer)
    seen = []
    render = trainer._render

    def keep(inputs, step, training):
        batch, kept = render(inputs, step, training)
        examples = inputs["pending"].examples  # the hint follows the question and its <eos>
        hints = [row[len(example["question_ids"]) + 1] for row, example in zip(batch["input_ids"].tolist(), examples)]
        seen.extend(zip(tokenizer.convert_ids_to_tokens(hints), kept))
        return batch, kept

    trainer._render = keep
    trainer.train()
    assert len(seen) == 36 and all(hint == f"<len_{kept}>" for hint, kept in seen)
    assert len({kept for _, kept in seen}) >= 4  # lengths 0..4 drawn per example and step


def test_the_schedule_alone_sets_the_layout_evaluation_follows(tmp_path, monkeypatch):
    # A step mixture with hints passed as a schedule object, with default args (whose removal_unit is unset): hints
    # count whole steps in training, so evaluation must ask for and score whole steps too.
    import hf_icot.evaluation.generation_accuracy as evaluation
    from hf_icot.data.encoding import encode_text

    train, test = counting_examples(length=4, n_test=4)
    doubled = lambda example: {"cot": [f"{count} {count}" for count in example["cot"]]}  # noqa: E731
    train, test = train.map(doubled), test.map(doubled)  # two tokens per step: token and step hints differ
    tokenizer = build_word_level_tokenizer([train, test], max_hint_length=8)
    model = tiny_gpt2(len(tokenizer), tmp_path / "init", n_layer=1, n_embd=32)
    args = config(tmp_path, eval_modes=["hint=1"])
    trainer = ICoTTrainer(
        model=model,
        args=args,
        train_dataset=train,
        eval_dataset=test,
        processing_class=tokenizer,
        schedule=Mixture(unit="step", hint=True),
    )
    assert trainer.layout == SequenceLayout(unit="step", hint=True)
    eos = tokenizer.eos_token_id

    def writes_the_last_step(model, tok, prompts, limit, batch_size, position_shifts=None):
        rows = [list(test)[i] for i in range(len(prompts))]
        return [encode_text(r["cot"][-1], tok) + [eos] + encode_text(f"#### {r['answer']}", tok) + [eos] for r in rows]

    monkeypatch.setattr(evaluation, "generate_batched", writes_the_last_step)
    metrics = trainer.evaluate_generation()
    assert metrics["eval_hint=1/cot_em"] == 1.0 and metrics["eval_hint=1/answer_em"] == 1.0


def test_the_training_loader_leaves_out_the_texts_and_renders_the_same_batches(tmp_path):
    train, _ = counting_examples(length=4, n_test=4)
    tokenizer = build_word_level_tokenizer(train)
    model = tiny_gpt2(len(tokenizer), tmp_path / "init", n_layer=1, n_embd=32)
    args = config(tmp_path, schedule="stepwise", remove_per_epoch=2, per_device_train_batch_size=8)
    trainer = ICoTTrainer(model=model, args=args, train_dataset=train, processing_class=tokenizer)
    fetched = next(iter(trainer.get_train_dataloader()))["pending"].examples
    assert {"question", "cot", "answer"}.isdisjoint(fetched[0]) and "cot_tokens" in fetched[0]
    full = [trainer.train_dataset[example["example_id"]] for example in fetched]  # the row index is the id
    assert full[0]["question"] and all(row["example_id"] == ex["example_id"] for row, ex in zip(full, fetched))
    for spec in [TruncationSpec("token", "left", 2, "drop"), TruncationSpec("token", "stride", 2, "drop")]:
        lean, lean_kept = trainer.data_collator.render_counted(fetched, [spec] * len(fetched))
        whole, whole_kept = trainer.data_collator.render_counted(full, [spec] * len(full))
        assert lean_kept == whole_kept and all(torch.equal(lean[key], whole[key]) for key in whole)
        assert 0 < sum(lean_kept) < sum(row["n_cot_tokens"] for row in full)


def test_each_stage_end_logs_what_its_evaluation_and_checkpoint_cost(tmp_path):
    train, test = counting_examples(length=4, n_test=4)
    tokenizer = build_word_level_tokenizer(train)
    model = tiny_gpt2(len(tokenizer), tmp_path / "init", n_layer=1, n_embd=32)
    args = config(tmp_path, schedule="staged", stage_length=2, stage_unit="steps", max_steps=6, logging_steps=2)
    trainer = ICoTTrainer(model=model, args=args, train_dataset=train, eval_dataset=test, processing_class=tokenizer)
    trainer.train()
    ends = [entry for entry in trainer.state.log_history if "cot/ended_stage" in entry]
    assert [entry["cot/ended_stage"] for entry in ends] == [0, 1, 2]
    assert all(entry["cot/stage_evaluation_s"] > 0 and entry["cot/stage_checkpoint_s"] > 0 for entry in ends)
    assert sorted(path.name for path in (tmp_path / "run").glob("stage-*")) == ["stage-0", "stage-1", "stage-2"]
    total = trainer.stage_end_seconds
    assert total["cot/stage_evaluation_s"] >= sum(entry["cot/stage_evaluation_s"] for entry in ends) - 0.01
    assert not any("cot/stage" in entry for entry in ends), "a stage end is not a training step's log"
