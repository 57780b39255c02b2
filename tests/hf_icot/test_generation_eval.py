"""Generation exact match during training: logged against examples seen, equal to a fresh evaluation, and a stop at a
bar that ends training at the first measurement that reaches it."""

import pytest
import torch

from hf_icot.data.tokenization import build_word_level_tokenizer
from hf_icot.diagnostics import GenerationEvalCallback
from hf_icot.training.config import ICoTConfig
from hf_icot.training.trainer import ICoTTrainer
from tests.hf_icot.tiny_task import counting_examples, tiny_gpt2


def counting_trainer(tmp_path, **fields):
    torch.set_num_threads(1)
    train, evaluation = counting_examples(length=6, n_test=16)
    tokenizer = build_word_level_tokenizer(train)
    model = tiny_gpt2(len(tokenizer), tmp_path / "init", n_layer=2, n_embd=64)
    settings = dict(
        output_dir=str(tmp_path / "run"), per_device_train_batch_size=16, learning_rate=1e-2, logging_steps=10,
        report_to="none", use_cpu=True, save_strategy="no", disable_tqdm=True, seed=0,
        keep_stage_checkpoints=False, evaluate_each_stage=False, per_device_eval_batch_size=16,
    )  # fmt: skip
    args = ICoTConfig(**{**settings, **fields})
    return ICoTTrainer(
        model=model, args=args, train_dataset=train, eval_dataset=evaluation, processing_class=tokenizer
    )


def test_measurements_are_logged_with_examples_seen_and_match_a_fresh_evaluation(tmp_path):
    trainer = counting_trainer(
        tmp_path, schedule="no_cot", max_steps=45, generation_eval_steps=20, eval_modes=["implicit", "explicit"],
        generation_eval_examples=12,
    )  # fmt: skip
    trainer.train()
    rows = [entry for entry in trainer.state.log_history if "eval_implicit/answer_em" in entry]
    assert [row["step"] for row in rows] == [20, 40, 45]  # every 20 steps, and the last one
    assert [row["train_examples"] for row in rows] == [320, 640, 720]
    assert all("eval_explicit/answer_em" in row and "eval_explicit/cot_em" in row for row in rows)
    assert [row["step"] for row in trainer.generation_eval.history] == [20, 40, 45]
    fresh = trainer.evaluate_generation(trainer.eval_dataset.select(range(12)), ["implicit"])
    assert rows[-1]["eval_implicit/answer_em"] == fresh["eval_implicit/answer_em"]  # the same model and 12 examples
    losses = [entry["step"] for entry in trainer.state.log_history if "loss" in entry]
    assert losses == [10, 20, 30, 40]  # the measurements at 20 and 40 kept those steps' training-loss rows


def test_the_stop_rule_ends_training_at_the_first_measurement_at_or_above_the_bar(tmp_path):
    """A controlled stream of measurements: just below the bar does not stop, exactly the bar does."""
    trainer = counting_trainer(
        tmp_path, schedule="no_cot", max_steps=400, generation_eval_steps=10, eval_modes=["implicit"],
        stop_at_implicit_em=0.75,
    )  # fmt: skip
    stream = iter([0.0, 0.5, 0.7499, 0.75, 0.9, 1.0])
    trainer.evaluate_generation = lambda split, modes: {"eval_implicit/answer_em": next(stream)}
    trainer.train()
    scores = [row["eval_implicit/answer_em"] for row in trainer.generation_eval.history]
    assert scores == [0.0, 0.5, 0.7499, 0.75]
    assert trainer.state.global_step == 40
    logged = [entry["eval_implicit/answer_em"] for entry in trainer.state.log_history if "train_examples" in entry]
    assert logged == scores


def test_a_real_run_stops_at_the_first_measurement_that_reaches_a_bar_it_clears_early(tmp_path):
    """The real generation path: a bar of 0.25 the model clears long before max_steps (guessing the most frequent
    count already scores 0.31 on these 16 questions), so no CPU's floating-point path decides the outcome."""
    trainer = counting_trainer(
        tmp_path, schedule="no_cot", max_steps=400, generation_eval_steps=10, eval_modes=["implicit"],
        stop_at_implicit_em=0.25,
    )  # fmt: skip
    trainer.train()
    scores = [row["eval_implicit/answer_em"] for row in trainer.generation_eval.history]
    assert scores[-1] >= 0.25 and all(score < 0.25 for score in scores[:-1])
    assert trainer.state.global_step == 10 * len(scores) < 400  # stopped right there, long before max_steps


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"generation_eval_steps": 0, "eval_modes": ["implicit"]}, r"^generation_eval_steps 0 is not allowed"),
        ({"generation_eval_steps": 5}, r"^generation_eval_steps needs eval_modes"),
        (
            {"generation_eval_steps": 5, "eval_modes": ["implicit"], "stop_at_implicit_em": 1.5},
            r"^stop_at_implicit_em 1\.5 is not allowed; it must be in \(0, 1\]",
        ),
        (
            {"generation_eval_steps": 5, "eval_modes": ["explicit"], "stop_at_implicit_em": 0.9},
            r"^stop_at_implicit_em needs generation_eval_steps and 'implicit' among eval_modes",
        ),
        ({"stop_at_implicit_em": 0.9, "eval_modes": ["implicit"]}, r"^stop_at_implicit_em needs"),
    ],
)
def test_bad_config_raises_one_sentence(tmp_path, fields, message):
    with pytest.raises(ValueError, match=message):
        ICoTConfig(output_dir=str(tmp_path), report_to="none", use_cpu=True, **fields)


def test_bad_callback_arguments_raise_one_sentence(tmp_path):
    trainer = counting_trainer(tmp_path, max_steps=1)
    with pytest.raises(ValueError, match=r"^stop_mode 'explicit' is not among the evaluated modes \['implicit'\]"):
        GenerationEvalCallback(trainer, 10, ["implicit"], stop_at=0.9, stop_mode="explicit")
    with pytest.raises(ValueError, match=r"^generation evaluation every=0 steps is not allowed"):
        GenerationEvalCallback(trainer, 0)
    with pytest.raises(ValueError, match=r"^evaluation mode 'sideways' is unknown"):
        GenerationEvalCallback(trainer, 10, ["sideways"])
    trainer.eval_dataset = None
    with pytest.raises(ValueError, match=r"^generation evaluation during training needs the trainer's eval_dataset"):
        GenerationEvalCallback(trainer, 10)


def test_with_several_evaluation_splits_the_named_one_is_measured(tmp_path):
    """semiautomata.py's trainer holds test and test_ood_* at once: the callback measures the split it is told, and
    without a name (or a wrong one) it refuses, naming the splits there are."""
    trainer = counting_trainer(tmp_path, max_steps=1)
    evaluation = trainer.eval_dataset
    trainer.eval_dataset = {"test": evaluation.select(range(10)), "test_ood": evaluation.select(range(10, 16))}
    assert len(GenerationEvalCallback(trainer, 10, split="test_ood").split) == 6
    assert len(GenerationEvalCallback(trainer, 10, examples=4, split="test").split) == 4
    with pytest.raises(
        ValueError, match=r"^no generation_eval_split is one of the evaluation splits; .*: test, test_ood\.$"
    ):
        GenerationEvalCallback(trainer, 10)
    with pytest.raises(ValueError, match=r"^generation_eval_split 'validation' is not one of the evaluation splits"):
        GenerationEvalCallback(trainer, 10, split="validation")
