"""LearningDynamicsCallback in real Trainer runs: the CSV rows at the interval, the logs, the Hessian cadence, and
nothing at all when disabled; its bad-input sentences, raised when it is built."""

import csv
import math

import datasets
import pytest
import torch
from transformers import Trainer, TrainerState, TrainingArguments

from hf_icot.diagnostics import LearningDynamicsCallback, candidate_loss, selector_attention, z_shuffle_gap
from tests.hf_icot.diagnostics.study import PAD, study_examples, tiny_gpt2


def collate(rows):
    return {
        "input_ids": torch.tensor([row["input_ids"] for row in rows]),
        "labels": torch.tensor([row["labels"] for row in rows]),
    }


def run(tmp_path, callbacks=(), steps=5, seed=0):
    """A ``steps``-step Trainer run of a tiny GPT-2 on the study rows; returns the trainer."""
    model = tiny_gpt2(seed=seed)
    args = TrainingArguments(
        output_dir=str(tmp_path / "run"),
        max_steps=steps,
        per_device_train_batch_size=4,
        learning_rate=1e-2,
        report_to="none",
        use_cpu=True,
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
        remove_unused_columns=False,
        seed=seed,
    )
    trainer = Trainer(model=model, args=args, train_dataset=study_examples(4, 2), data_collator=collate)
    for make in callbacks:
        trainer.add_callback(make(trainer))
    trainer.train()
    return trainer


def read_csv(path):
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_callback_writes_the_csv_and_the_logs_at_the_interval(tmp_path):
    rows = study_examples(4, 2)
    callback = {}

    def make(trainer):
        callback["it"] = LearningDynamicsCallback(
            trainer.model,
            rows,
            pad_token_id=PAD,
            interval=2,
            hessian_interval=4,
            csv_path=tmp_path / "dynamics.csv",
            group_accuracy_path=tmp_path / "groups.csv",
            trainer=trainer,
        )
        return callback["it"]

    trainer = run(tmp_path, [make])
    written = read_csv(tmp_path / "dynamics.csv")
    assert [int(r["step"]) for r in written] == [0, 2, 4, 5]  # train begin, every 2 steps, the end
    columns = list(written[0])
    assert columns[:4] == ["step", "z_shuffle_gap", "first_token_loss_clean", "first_token_loss_shuffled"]
    for name in ("attn_z_l1h0", "ablate_zero_l0h1", "ablate_mean_l1h1", "hessian_top_1", "hessian_bottom_1"):
        assert name in columns
    assert [r["hessian_top_1"] != "" for r in written] == [True, False, True, True]  # steps 0, 4 and the end
    top, bottom = float(written[0]["hessian_top_1"]), float(written[0]["hessian_bottom_1"])
    assert top > 0 and bottom < top
    log_k = [float(r["candidate_log_k"]) for r in written]
    assert log_k == [pytest.approx(math.log(2))] * 4

    # The last row is the trained model, measured as the functions measure it.
    model = trainer.model
    last = written[-1]
    assert float(last["z_shuffle_gap"]) == pytest.approx(z_shuffle_gap(model, rows, pad_token_id=PAD).gap)
    assert float(last["candidate_loss"]) == pytest.approx(candidate_loss(model, rows, pad_token_id=PAD).loss)
    assert float(last["attn_z_l1h0"]) == pytest.approx(selector_attention(model, rows, pad_token_id=PAD)[1, 0])
    assert float(written[0]["candidate_loss"]) != float(last["candidate_loss"])  # it did train in between

    # The same values went through trainer.log, and the per-group accuracies to their own file.
    logged = [entry for entry in trainer.state.log_history if "z_shuffle_gap" in entry]
    assert [entry["step"] for entry in logged] == [0, 2, 4, 5]
    assert logged[-1]["candidate_loss"] == pytest.approx(float(last["candidate_loss"]))
    assert [r["step"] for r in callback["it"].rows] == [0, 2, 4, 5]
    groups = read_csv(tmp_path / "groups.csv")
    assert list(groups[0]) == ["step", "B0", "B1", "B2", "B3"] and len(groups) == 4
    assert all(0.0 <= float(r[g]) <= 1.0 for r in groups for g in ("B0", "B1", "B2", "B3"))


def test_callback_does_not_change_the_training_trajectory(tmp_path):
    def make(trainer):
        return LearningDynamicsCallback(trainer.model, study_examples(4, 2), pad_token_id=PAD, interval=1)

    plain = run(tmp_path / "plain").model.state_dict()
    measured = run(tmp_path / "measured", [make]).model.state_dict()
    assert all(torch.equal(plain[name], measured[name]) for name in plain)


def test_disabled_callback_runs_no_forward_and_writes_nothing(tmp_path):
    forwards = []

    def make(trainer):
        trainer.model.register_forward_pre_hook(lambda module, args: forwards.append(1))
        return LearningDynamicsCallback(
            trainer.model, None, pad_token_id=PAD, interval=1, measurements=(), csv_path=tmp_path / "d.csv"
        )

    trainer = run(tmp_path, [make])
    assert len(forwards) == 5  # the 5 training steps only
    assert not (tmp_path / "d.csv").exists()
    assert all(
        "step" in e and not any(k.startswith(("z_", "attn_", "hessian")) for k in e) for e in trainer.state.log_history
    )


def test_without_a_trainer_values_go_to_the_log_history_and_only_the_main_process_measures(tmp_path):
    model, rows = tiny_gpt2(), datasets.Dataset.from_list(study_examples(4, 2))  # a Dataset serves as well
    callback = LearningDynamicsCallback(
        model, rows, pad_token_id=PAD, interval=3, measurements=["candidate_loss"], csv_path=tmp_path / "d.csv"
    )
    state = TrainerState(is_world_process_zero=True)
    callback.on_train_begin(None, state, None, model=model)
    assert state.log_history == [{**callback.rows[0]}]
    assert set(state.log_history[0]) == {"step", "candidate_loss", "candidate_accuracy", "candidate_log_k"}
    assert state.log_history[0]["candidate_loss"] == candidate_loss(model, rows, pad_token_id=PAD).loss
    other_rank = TrainerState(is_world_process_zero=False)
    for hook in (callback.on_train_begin, callback.on_train_end):
        hook(None, other_rank, None, model=model)
    assert other_rank.log_history == [] and len(read_csv(tmp_path / "d.csv")) == 1


def test_a_resumed_run_continues_the_checkpoints_rows_and_a_fresh_one_overwrites(tmp_path):
    model, rows, path = tiny_gpt2(), study_examples(4, 2), tmp_path / "d.csv"
    options = dict(pad_token_id=PAD, interval=3, measurements=["z_shuffle_gap"], csv_path=path)
    first = LearningDynamicsCallback(model, rows, **options)
    first.on_train_begin(None, TrainerState(), None, model=model)
    for step in (3, 6, 9):  # measured, then killed after step 9; the last checkpoint holds step 6
        first.on_step_end(None, TrainerState(global_step=step), None, model=model)
    assert [r["step"] for r in read_csv(path)] == ["0", "3", "6", "9"]
    saved = TrainerState(global_step=6, stateful_callbacks={"LearningDynamicsCallback": first.state()})
    resumed = LearningDynamicsCallback(model, rows, **options)
    resumed.on_train_begin(None, saved, None, model=model)  # no measurement at a resumed start
    assert [r["step"] for r in read_csv(path)] == ["0", "3", "6"], "the row measured after the checkpoint is gone"
    assert [row["step"] for row in resumed.rows] == [0, 3, 6]
    resumed.on_step_end(None, TrainerState(global_step=9), None, model=model)
    assert read_csv(path) == [{k: str(v) for k, v in row.items()} for row in first.rows], "as if never killed"
    LearningDynamicsCallback(model, rows, **options).on_train_begin(None, TrainerState(), None, model=model)
    assert [r["step"] for r in read_csv(path)] == ["0"]
    other = LearningDynamicsCallback(model, rows, **dict(options, measurements=["candidate_loss"]))
    other.on_train_begin(None, TrainerState(global_step=8), None, model=model)
    with pytest.raises(ValueError, match="give another csv path"):
        other.on_step_end(None, TrainerState(global_step=9), None, model=model)


def without(rows, column):
    return [{k: v for k, v in row.items() if k != column} for row in rows]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (dict(interval=0), "interval=0 is not allowed"),
        (dict(interval=-3), "interval=-3 is not allowed"),
        (dict(hessian_interval=0), "hessian_interval=0 is not allowed"),
        (dict(measurements=["loss"]), "measurement 'loss' is unknown"),
        (dict(heads=[(0, 5)]), r"head \(layer=0, head=5\) is outside the model"),
        (dict(heads=[(3, 0)]), r"head \(layer=3, head=0\) is outside the model"),
        (dict(ablation_modes=["noise"]), "ablation mode 'noise' is unknown"),
        (dict(hessian_interval=5, hessian_k=0), "hessian_k=0 is not allowed"),
        (dict(batch_size=0), "batch_size=0 is not allowed"),
        (
            dict(examples=without(study_examples(4, 2), "selector_positions")),
            "z_shuffle_gap needs the column 'selector_positions'",
        ),
        (
            dict(examples=without(study_examples(4, 2), "selector_positions"), measurements=["selector_attention"]),
            "selector_attention needs the column 'selector_positions'",
        ),
        (
            dict(examples=without(study_examples(4, 2), "group"), measurements=["candidate_loss"]),
            "candidate_loss needs the column 'group'",
        ),
        (
            dict(examples=without(study_examples(4, 2), "group"), measurements=["group_accuracy"]),
            "group_accuracy needs the column 'group'",
        ),
        (dict(examples=study_examples(4, 1)), "at least 2 distinct selectors"),
        (dict(solved_threshold=2.0, measurements=["group_accuracy"]), "threshold=2.0 is not allowed"),
    ],
)
def test_bad_configuration_is_refused_when_built(overrides, message):
    values = dict(examples=study_examples(4, 2), pad_token_id=PAD, interval=2)
    values.update(overrides)
    with pytest.raises(ValueError, match=message):
        LearningDynamicsCallback(tiny_gpt2(), **values)


def test_unequal_answer_lengths_in_a_group_are_refused_when_built():
    rows = study_examples(4, 2)
    rows[1] = dict(rows[1], input_ids=rows[1]["input_ids"][:-1], labels=rows[1]["labels"][:-1])
    with pytest.raises(ValueError, match="candidate_loss needs equal-length answers within a group; group 'B0'"):
        LearningDynamicsCallback(tiny_gpt2(), rows, pad_token_id=PAD, interval=2, measurements=["candidate_loss"])


def test_callback_logs_through_the_icot_trainer(tmp_path):
    from hf_icot.data.tokenization import build_word_level_tokenizer
    from hf_icot.training.config import ICoTConfig
    from hf_icot.training.trainer import ICoTTrainer
    from tests.hf_icot.tiny_task import counting_examples
    from tests.hf_icot.tiny_task import tiny_gpt2 as saved_tiny_gpt2

    train, test = counting_examples(length=4, n_test=4)
    tokenizer = build_word_level_tokenizer([train, test])
    model = saved_tiny_gpt2(len(tokenizer), tmp_path / "init", n_layer=1, n_embd=32)
    args = ICoTConfig(
        output_dir=str(tmp_path / "run"),
        max_steps=3,
        per_device_train_batch_size=4,
        report_to="none",
        use_cpu=True,
        save_strategy="no",
        disable_tqdm=True,
        schedule="full_cot",
    )
    trainer = ICoTTrainer(model=model, args=args, train_dataset=train, processing_class=tokenizer)
    # Study-layout rows over the run's own vocabulary: only the token ids matter to the measurements.
    rows = [
        dict(
            row,
            input_ids=[i % len(tokenizer) for i in row["input_ids"]],
            labels=[i % len(tokenizer) if i >= 0 else i for i in row["labels"]],
        )
        for row in study_examples(2, 2)
    ]
    callback = LearningDynamicsCallback(
        model, rows, pad_token_id=tokenizer.pad_token_id, interval=2, measurements=["z_shuffle_gap", "candidate_loss"],
        csv_path=tmp_path / "d.csv", trainer=trainer,
    )  # fmt: skip
    trainer.add_callback(callback)
    trainer.train()
    logged = [e for e in trainer.state.log_history if "candidate_loss" in e]
    assert [e["step"] for e in logged] == [0, 2, 3]
    assert [int(r["step"]) for r in read_csv(tmp_path / "d.csv")] == [0, 2, 3]
