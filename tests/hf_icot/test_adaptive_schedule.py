"""The adaptive pace removes the next unit exactly when its rule says, in a real run, after a resume and on 2 ranks."""

import json
import math
import signal

import pytest
import torch
from safetensors.torch import load_file
from transformers import TrainerCallback

from hf_icot.cot import truncate
from hf_icot.curriculum import schedule_from_dict
from hf_icot.curriculum.adaptive import AdaptiveStepwise
from hf_icot.data.tokenization import build_word_level_tokenizer
from hf_icot.evaluation.teacher_forced import answer_token_hits
from hf_icot.publishing.model_card import describe_run
from hf_icot.training.adaptive_pace import ANSWER_MASK_KEY
from hf_icot.training.config import ICoTConfig, schedule_from_config
from hf_icot.training.trainer import ICoTTrainer
from tests.hf_icot.test_multiprocess import launch_two_processes
from tests.hf_icot.test_resume import launch, schedule_log
from tests.hf_icot.tiny_task import counting_examples, tiny_gpt2

# threshold 0.8 over 3 steps, at least 4 and at most 10 steps per removal, a 5-token CoT.
RULE = dict(threshold=0.8, window=3, min_steps_per_removal=4, max_steps_per_removal=10, max_cot_tokens=5)
ACCURACIES = (
    [1.0] * 4  # steps 0-3: the window is full at step 2, but the minimum holds it to step 3 -> removal from 4
    + [0.9, 0.5, 0.9, 0.9, 0.9]  # 4-8: means 0.767, 0.767, 0.9 (step 8) -> removal from 9
    + [0.0] * 10  # 9-18: never absorbed; the maximum of 10 steps forces it -> removal from 19
    + [None] * 3  # 19-21: no answer token: counted as steps, but the window stays empty
    + [0.8, 0.8, 0.8]  # 22-24: a mean of exactly the threshold counts -> removal from 25
    + [1.0] * 10  # 25-28 -> removal from 29: 5 tokens, the whole CoT; nothing more after that
)


def run_rule(schedule, accuracies, start=0):
    return [step for step, accuracy in enumerate(accuracies, start) if schedule.observe(step, accuracy)]


def test_removals_happen_exactly_when_the_rule_says_within_min_and_max():
    schedule = AdaptiveStepwise(**RULE, reset_optimizer=True)
    decided = run_rule(schedule, ACCURACIES)
    assert decided == [3, 8, 18, 24, 28]
    assert schedule.removal_steps == [4, 9, 19, 25, 29]
    assert [schedule.removed_count(s) for s in (0, 3, 4, 8, 9, 19, 25, 28, 29, 40)] == [0, 0, 1, 1, 2, 3, 4, 4] + [
        math.inf
    ] * 2
    assert [schedule.stage(s) for s in (0, 4, 9, 19, 25, 29, 1000)] == [0, 1, 2, 3, 4, 5, 5]
    assert [s for s in range(40) if schedule.resets_optimizer_at(s)] == [4, 9, 19, 25, 29]
    assert schedule.spec(29).which == "all"
    cut = truncate({"question": "q", "cot": ["1 2 3", "4 5"], "answer": "a"}, schedule.spec(9))
    assert cut.tokens == ("3", "4", "5")  # two tokens gone from the left
    stages = schedule.describe(35)
    assert [stage["start_step"] for stage in stages] == [0, 4, 9, 19, 25, 29]
    assert "averages >= 0.8 over 3 steps" in stages[0]["removes"]
    with pytest.raises(ValueError, match="step 7 observed, but step 35 is the next one"):
        schedule.observe(7, 1.0)


def test_pace_state_round_trips_and_continues_identically_but_is_not_the_schedules_identity():
    whole = AdaptiveStepwise(**RULE)
    run_rule(whole, ACCURACIES)
    first = AdaptiveStepwise(**RULE)
    run_rule(first, ACCURACIES[:21])  # stopped mid-wait: steps 19-20 observed at count 3
    saved = json.loads(json.dumps(first.state_dict()))
    assert saved == {"removal_steps": [4, 9, 19], "observed_steps": 21, "recent_accuracies": []}
    second = schedule_from_dict(json.loads(json.dumps(first.to_dict())))
    assert second.to_dict() == AdaptiveStepwise(**RULE).to_dict()  # the decisions are not in the identity
    second.load_state_dict(saved)
    run_rule(second, ACCURACIES[21:], start=21)
    assert second.removal_steps == whole.removal_steps
    second.load_state_dict({})
    assert second.removal_steps == [] and second.observed_steps == 0
    with pytest.raises(ValueError, match="inconsistent"):
        second.load_state_dict({"removal_steps": [9, 4], "observed_steps": 10})


def test_step_unit_and_removal_smoothing():
    schedule = AdaptiveStepwise(threshold=1.0, window=1, unit="step", removal_smoothing_lambda=0.5, max_cot_steps=3)
    assert run_rule(schedule, [1.0, 0.0, 1.0]) == [0, 2]
    assert schedule.spec(1, training=False).unit == "step" and schedule.spec(1, training=False).count == 1
    counts = {spec.count for spec in schedule.specs(1, list(range(200)))}
    assert min(counts) == 1 and max(counts) > 2  # offsets drawn per example in training, none at evaluation


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"adaptive_threshold": 0.0}, r"^adaptive threshold 0.0 is not allowed; it must be in \(0, 1\]\.$"),
        ({"adaptive_threshold": 1.5}, r"^adaptive threshold 1.5 is not allowed; it must be in \(0, 1\]\.$"),
        ({"adaptive_window": 0}, r"^adaptive window 0 is not allowed; it must be >= 1 \(steps\)\.$"),
        (
            {"min_steps_per_removal": 8, "max_steps_per_removal": 5},
            r"^min_steps_per_removal 8 is above max_steps_per_removal 5; the minimum must be <= the maximum\.$",
        ),
        ({"min_steps_per_removal": 0}, r"^min_steps_per_removal 0 is not allowed; it must be >= 1\.$"),
    ],
)
def test_bad_values_raise_one_sentence(tmp_path, fields, message):
    with pytest.raises(ValueError, match=message):
        ICoTConfig(output_dir=str(tmp_path), schedule="adaptive", report_to="none", use_cpu=True, **fields)


def test_config_builds_the_adaptive_schedule(tmp_path):
    config = ICoTConfig(
        output_dir=str(tmp_path), schedule="adaptive", adaptive_threshold=0.7, adaptive_window=5,
        max_steps_per_removal=50, removal_unit="step", reset_optimizer=True, report_to="none", use_cpu=True,
    )  # fmt: skip
    schedule = schedule_from_config(config)
    assert isinstance(schedule, AdaptiveStepwise)
    assert (schedule.threshold, schedule.window, schedule.max_steps_per_removal, schedule.unit) == (0.7, 5, 50, "step")
    assert schedule.reset_optimizer


def test_answer_token_hits_count_the_teacher_forced_argmax_on_the_mask():
    input_ids = torch.tensor([[5, 6, 7, 8], [5, 6, 7, 0]])
    mask = torch.tensor([[False, False, True, True], [False, True, True, False]])
    logits = torch.zeros(2, 4, 10)
    logits[0, 1, 7] = logits[0, 2, 1] = 1  # row 0: predicts 7 at position 2 (right), 1 at position 3 (wrong)
    logits[1, 0, 6] = logits[1, 1, 7] = 1  # row 1: both right
    assert answer_token_hits(logits, input_ids, mask).tolist() == [3, 4]


class PaceLog(TrainerCallback):
    """After ICoTStateCallback's on_step_end: the accuracy each step handed to the schedule."""

    def __init__(self, trainer):
        self.trainer, self.accuracies = trainer, []

    def on_step_end(self, args, state, control, **kwargs):
        self.accuracies.append(self.trainer.last_answer_accuracy)


def counting_adaptive_run(tmp_path, **fields):
    """An adaptive run (threshold 0.7 over 3 steps, at least 3 per removal) on the counting task, trained; returns the
    trainer, the accuracies each step handed to the schedule, and the tokenizer."""
    torch.set_num_threads(1)
    train, _ = counting_examples(length=6, n_test=8)
    tokenizer = build_word_level_tokenizer(train)
    model = tiny_gpt2(len(tokenizer), tmp_path / "init", n_layer=2, n_embd=64)
    settings = dict(
        output_dir=str(tmp_path / "run"), schedule="adaptive", adaptive_threshold=0.7, adaptive_window=3,
        min_steps_per_removal=3, per_device_train_batch_size=16, learning_rate=1e-2, report_to="none", use_cpu=True,
        save_strategy="no", disable_tqdm=True, seed=0, keep_stage_checkpoints=False, evaluate_each_stage=False,
    )  # fmt: skip
    trainer = ICoTTrainer(
        model=model, args=ICoTConfig(**settings, **fields), train_dataset=train, processing_class=tokenizer
    )
    log = PaceLog(trainer)
    trainer.add_callback(log)
    trainer.train()
    return trainer, log, tokenizer


def test_a_real_run_removes_tokens_when_the_answer_accuracy_crosses(tmp_path):
    trainer, log, tokenizer = counting_adaptive_run(tmp_path, reset_optimizer=True, max_steps=70, logging_steps=10)

    removals, accuracies = trainer.schedule.removal_steps, log.accuracies
    assert len(accuracies) == 70 and all(0 <= a <= 1 for a in accuracies)
    assert len(removals) >= 2  # no maximum: every removal came from the accuracy
    start = 0
    for removal in removals:  # the rule, recomputed: the first step whose 3-step window (at this count) averages 0.7
        means = {s: sum(accuracies[s - 2 : s + 1]) / 3 for s in range(start + 2, removal)}
        assert means[removal - 1] >= 0.7 and all(mean < 0.7 for s, mean in means.items() if s < removal - 1)
        start = removal
    assert trainer.optimizer_resets == len(removals)
    logged = [entry for entry in trainer.state.log_history if "cot/answer_accuracy" in entry]
    assert logged and logged[-1]["cot/removed_tokens"] == len(removals)
    assert not any("cot/sequence_accuracy" in entry for entry in trainer.state.log_history)
    card = describe_run(trainer)["schedule"]  # the model card's curriculum section
    assert card["name"] == "adaptive" and card["params"]["threshold"] == 0.7
    assert [stage["start_step"] for stage in card["stages"]] == [0, *removals]
    # The mask marks the answer itself (after ####), never the CoT or the final <eos>.
    batch, _ = trainer._render(next(iter(trainer.get_train_dataloader())), 0, training=True)
    masked = [ids[mask].tolist() for ids, mask in zip(batch["input_ids"], batch[ANSWER_MASK_KEY])]
    rows = [tokenizer.convert_ids_to_tokens(ids) for ids in masked]
    assert len(rows) == 16 and all(len(row) == 1 and row[0].isdigit() for row in rows)


def test_resume_mid_wait_equals_the_uninterrupted_run(tmp_path):
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    runs = [launch(whole, "--schedule", "adaptive"), launch(killed, "--schedule", "adaptive", "--kill_at_step", "21")]
    assert [run.wait(timeout=300) for run in runs] == [0, -signal.SIGKILL]
    checkpoint = killed / "run" / "checkpoint-20"
    state = json.loads((checkpoint / "trainer_state.json").read_text())["stateful_callbacks"]["ICoTStateCallback"]
    pace = state["attributes"]["pace"]
    final_pace = schedule_log(whole)[23]["pace"]
    later = [step for step in final_pace["removal_steps"] if step > 20]
    assert pace["observed_steps"] == 20 and pace["recent_accuracies"] and later  # between two removals
    assert pace["removal_steps"] == [step for step in final_pace["removal_steps"] if step <= 20]

    resumed = launch(killed, "--schedule", "adaptive", "--resume", str(checkpoint))
    assert resumed.wait(timeout=300) == 0, (killed / "stdout.txt").read_text()[-3000:]
    assert schedule_log(killed) == schedule_log(whole)  # same removal steps, pace windows, resets and draws
    assert accuracy_log(killed) == accuracy_log(whole)
    expected, got = load_file(whole / "final-rank0.safetensors"), load_file(killed / "final-rank0.safetensors")
    for name in expected:
        assert torch.allclose(expected[name], got[name], atol=1e-6), name


def accuracy_log(out, rank=0):
    records = [json.loads(line) for line in (out / f"accuracy-rank{rank}.jsonl").read_text().splitlines()]
    return {record["step"]: record["answer_accuracy"] for record in records}


def test_two_processes_remove_at_the_same_steps(tmp_path):
    launch_two_processes(tmp_path, "--schedule", "adaptive", "--max_steps", "24", "--save_steps", "100")
    logs = [
        [json.loads(line) for line in (tmp_path / f"schedule-rank{rank}.jsonl").read_text().splitlines()]
        for rank in (0, 1)
    ]
    assert logs[0] == logs[1]  # the decisions and the accuracy they read: summed over both ranks
    assert logs[0][-1]["pace"]["removal_steps"] and logs[0][-1]["pace"]["observed_steps"] == 23
    assert accuracy_log(tmp_path, 0) == accuracy_log(tmp_path, 1) and len(accuracy_log(tmp_path)) == 24
    weights = [load_file(tmp_path / f"final-rank{rank}.safetensors") for rank in (0, 1)]
    assert all(torch.equal(weights[0][name], weights[1][name]) for name in weights[0])


def test_per_example_hits_count_rows_whose_every_masked_token_is_right():
    input_ids = torch.tensor([[5, 6, 7, 8], [5, 6, 7, 0], [5, 6, 7, 8]])
    mask = torch.tensor([[False, True, True, True], [False, True, True, False], [False, False, False, False]])
    logits = torch.zeros(3, 4, 10)
    logits[0, 0, 6] = logits[0, 1, 7] = logits[0, 2, 8] = 1  # row 0: all three right
    logits[1, 0, 6] = logits[1, 1, 3] = 1  # row 1: one of two wrong
    logits[1, 2, 9] = 1  # unmasked position: not scored
    assert answer_token_hits(logits, input_ids, mask, per_example=True).tolist() == [1, 2]  # row 2 has no mask
    assert answer_token_hits(logits, input_ids, mask).tolist() == [4, 5]


def test_the_sequence_metric_scores_every_labelled_token_of_a_real_run(tmp_path):
    trainer, log, _ = counting_adaptive_run(tmp_path, adaptive_metric="sequence", max_steps=12, logging_steps=4)
    assert all(accuracy * 16 == round(accuracy * 16) for accuracy in log.accuracies)  # whole examples out of 16
    batch, _ = trainer._render(next(iter(trainer.get_train_dataloader())), 0, training=True)
    assert torch.equal(batch[ANSWER_MASK_KEY], batch["labels"] != -100)  # CoT, separators, answer and final <eos>
    assert "whole-sequence accuracy averages >= 0.7" in trainer.schedule.describe_stage(0)
    logged = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert len(logged) == 3 and all("cot/answer_accuracy" not in entry for entry in logged)  # its own key
    assert [entry["cot/sequence_accuracy"] for entry in logged] == [log.accuracies[step] for step in (3, 7, 11)]
