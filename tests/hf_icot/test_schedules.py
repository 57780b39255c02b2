"""Schedules remove exactly the CoT units their definition says, checked against independent computations."""

import json
import math

import numpy as np
import pytest

from hf_icot.cot import PLACEHOLDER_TOKEN, truncate
from hf_icot.curriculum import FullCoT, LogICoT, Mixture, NoCoT, Staged, Stepwise, schedule_from_dict
from hf_icot.curriculum.base import example_uniforms

TEN_TOKENS = {"question": "q", "cot": ["1 2 3", "4 5", "6 7 8 9 10"], "answer": "a"}


def reference_counts(n_steps, steps_per_epoch, remove_per_epoch, pretrain_epochs=0, start=0, beyond=math.inf):
    """The scheduled count per step, simulated the way the stepwise-ICoT reference script's loop does it."""
    period = int(round(steps_per_epoch / remove_per_epoch))
    scheduled, counter, out = start, 0, []
    for step in range(n_steps):
        epoch = step // steps_per_epoch
        if counter == period or period == 0:
            scheduled += 1
            counter = 0
        if epoch >= pretrain_epochs:
            counter += 1
        out.append(math.inf if scheduled >= beyond else scheduled)
    return out


@pytest.mark.parametrize(
    "steps_per_epoch, remove_per_epoch, pretrain_epochs, start, beyond",
    [(10, 2, 0, 0, math.inf), (12, 5, 1, 0, math.inf), (7, 3, 2, 4, 9), (30, 8, 0, 0, 12), (5, 20, 0, 2, math.inf)],
)
def test_stepwise_scheduled_count_matches_the_reference_loop(
    steps_per_epoch, remove_per_epoch, pretrain_epochs, start, beyond
):
    schedule = Stepwise(
        remove_per_epoch=remove_per_epoch,
        pretrain_epochs=pretrain_epochs,
        remove_start_from=start,
        remove_all_when_remove_beyond=beyond,
    )
    schedule.bind(steps_per_epoch)
    n_steps = 8 * steps_per_epoch
    expected = reference_counts(n_steps, steps_per_epoch, remove_per_epoch, pretrain_epochs, start, beyond)
    assert [schedule.removed_count(step) for step in range(n_steps)] == expected
    if remove_per_epoch > 2 * steps_per_epoch:  # P = 0: one more token every step, from the first step on
        assert schedule.steps_per_removed_token == 0
        assert [schedule.scheduled(s) for s in range(4)] == [start + 1, start + 2, start + 3, start + 4]


def test_stepwise_formula_and_pretraining():
    schedule = Stepwise(remove_per_epoch=4, pretrain_epochs=2)
    schedule.bind(20)  # P = 5, s0 = 40
    assert schedule.steps_per_removed_token == 5
    assert {schedule.scheduled(s) for s in range(40)} == {0}
    for step in range(40, 200):
        assert schedule.scheduled(step) == (step - 40) // 5
    zero_period = Stepwise(remove_per_epoch=100, pretrain_epochs=1)
    zero_period.bind(10)
    assert [zero_period.scheduled(s) for s in (0, 9, 10, 11, 15)] == [0, 0, 1, 2, 6]


@pytest.mark.parametrize("side", ["left", "right"])
def test_stepwise_removes_the_scheduled_tokens_and_saturates(side):
    schedule = Stepwise(remove_per_epoch=2, side=side)
    schedule.bind(10)  # P = 5
    tokens = " ".join(TEN_TOKENS["cot"]).split()
    for step in range(0, 80, 3):
        cut = truncate(TEN_TOKENS, schedule.spec(step))
        k = min(step // 5, 10)
        assert cut.removed == k
        assert list(cut.tokens) == (tokens[k:] if side == "left" else tokens[: 10 - k])


def test_stepwise_remove_all_threshold_freezes_stage_and_removes_everything():
    schedule = Stepwise(remove_per_epoch=1, remove_all_when_remove_beyond=3)
    schedule.bind(4)  # P = 4: counts 0,1,2 then all from step 12
    assert [schedule.removed_count(s) for s in (0, 4, 8, 11, 12, 40)] == [0, 1, 2, 2, math.inf, math.inf]
    assert [schedule.stage(s) for s in (0, 4, 8, 12, 40)] == [0, 1, 2, 3, 3]
    assert truncate(TEN_TOKENS, schedule.spec(12)).kept == 0
    assert schedule.spec(12).which == "all"


def test_stepwise_optimizer_resets_at_each_increment_until_all_removed():
    schedule = Stepwise(remove_per_epoch=1, remove_all_when_remove_beyond=3, reset_optimizer=True)
    schedule.bind(4)
    resets = [s for s in range(40) if schedule.resets_optimizer_at(s)]
    assert resets == [4, 8, 12]
    quiet = Stepwise(remove_per_epoch=1)
    quiet.bind(4)
    assert not any(quiet.resets_optimizer_at(s) for s in range(40))


@pytest.mark.parametrize("side, fill, lam", [("left", "keep_position", math.inf), ("right", "pad", 0.5)])
def test_stepwise_bound_to_the_longest_cot_ends_there_and_truncates_the_same(side, fill, lam):
    bound = Stepwise(remove_per_epoch=1, side=side, fill=fill, removal_smoothing_lambda=lam, reset_optimizer=True)
    bound.bind(4, max_cot_tokens=10)  # P = 4: the count reaches the 10 tokens of TEN_TOKENS at step 40
    free = Stepwise(remove_per_epoch=1, side=side, fill=fill, removal_smoothing_lambda=lam, reset_optimizer=True)
    free.bind(4)
    assert [bound.removed_count(s) for s in (36, 39, 40, 200)] == [9, 9, math.inf, math.inf]
    assert [bound.stage(s) for s in (36, 40, 41, 200)] == [9, 10, 10, 10]
    assert [s for s in range(200) if bound.resets_optimizer_at(s)] == list(range(4, 41, 4))
    assert free.stage(200) == 50 and free.resets_optimizer_at(44)
    assert bound.describe_stage(40) == "all CoT tokens"
    assert bound.describe(200)[-1] == {"index": 10, "start_step": 40, "end_step": 200, "removes": "all CoT tokens"}
    # What the examples see does not change: every count from the longest CoT on already removed all of it.
    shorter = {"question": "q", "cot": ["1 2", "3"], "answer": "a"}
    for step in range(0, 200, 7):
        for example in (TEN_TOKENS, shorter):
            for spec_bound, spec_free in zip(bound.specs(step, range(12)), free.specs(step, range(12))):
                assert truncate(example, spec_bound) == truncate(example, spec_free)
    assert Stepwise(**{k: v for k, v in bound.to_dict().items() if k != "name"}).max_cot_tokens == 10
    with pytest.raises(ValueError, match=r"max_cot_tokens -1 is not allowed; it must be >= 0"):
        bound.bind(4, max_cot_tokens=-1)


def test_removal_smoothing_offsets_follow_the_truncated_geometric_law():
    lam = 0.7
    schedule = Stepwise(remove_per_epoch=1, removal_smoothing_lambda=lam, seed=3)
    schedule.bind(1000)  # count 0 during the first 1000 steps: the removed count is the offset itself
    ids = list(range(40000))
    offsets = np.array([spec.count for spec in schedule.specs(5, ids)])
    expected = (1 - math.exp(-lam)) * np.exp(-lam * np.arange(100))
    expected[-1] = 1 - expected[:-1].sum()
    for offset in range(5):
        assert abs((offsets == offset).mean() - expected[offset]) < 0.01
    assert abs(offsets.mean() - (expected * np.arange(100)).sum()) < 0.03
    # Pure in (seed, step, id): same draws in another batch order, new draws at another step or seed.
    again = [spec.count for spec in schedule.specs(5, ids[::-1])][::-1]
    assert again == offsets.tolist()
    assert [spec.count for spec in schedule.specs(6, ids[:200])] != offsets[:200].tolist()
    other_seed = Stepwise(remove_per_epoch=1, removal_smoothing_lambda=lam, seed=4)
    other_seed.bind(1000)
    assert [spec.count for spec in other_seed.specs(5, ids[:200])] != offsets[:200].tolist()
    # Evaluation and λ = inf: no offset.
    assert {spec.count for spec in schedule.specs(5, ids[:500], training=False)} == {0}
    no_smoothing = Stepwise(remove_per_epoch=1)
    no_smoothing.bind(1000)
    assert {spec.count for spec in no_smoothing.specs(5, ids[:500])} == {0}


def test_example_uniforms_are_uniform_and_pure():
    draws = example_uniforms(0, 7, range(50000))
    assert 0 <= draws.min() and draws.max() < 1
    assert abs(draws.mean() - 0.5) < 0.01
    assert np.histogram(draws, bins=10, range=(0, 1))[0].min() > 4700
    assert np.array_equal(example_uniforms(0, 7, [3, 9]), draws[[3, 9]])


def test_staged_left_right_and_inductive_remove_whole_steps():
    example = {"question": "q", "cot": ["s1", "s2", "s3", "s4", "s5", "s6"], "answer": "a"}
    left = Staged(side="left", steps_per_stage=2, stage_length=3, stage_unit="steps")
    assert [left.stage(s) for s in (0, 2, 3, 6, 9, 30)] == [0, 0, 1, 2, 3, 10]
    assert truncate(example, left.spec(3)).tokens == ("s3", "s4", "s5", "s6")
    assert truncate(example, left.spec(30)).kept == 0  # saturates at all
    right = Staged(side="right", stage_length=1, stage_unit="epochs", num_stages=3, final_remove_all=True)
    right.bind(5)
    assert [right.stage(s) for s in (0, 5, 10, 15, 99)] == [0, 1, 2, 3, 3]
    assert truncate(example, right.spec(10)).tokens == ("s1", "s2", "s3", "s4")
    assert right.spec(15).which == "all"
    inductive = Staged(side="inductive", stage_length=1, stage_unit="steps")
    assert truncate(example, inductive.spec(0)).tokens == tuple(example["cot"])
    assert truncate(example, inductive.spec(1)).tokens == ("s2", "s4", "s6")
    assert truncate(example, inductive.spec(2)).tokens == ("s3", "s6")


def test_a_longer_first_stage_keeps_the_full_cot_until_it_ends_then_the_clock_runs_as_before():
    example = {"question": "q", "cot": ["s1", "s2", "s3", "s4", "s5", "s6"], "answer": "a"}
    left = Staged(side="left", steps_per_stage=2, stage_length=3, stage_unit="steps", first_stage_length=7)
    assert [left.stage(s) for s in (0, 6, 7, 9, 10, 13, 99)] == [0, 0, 1, 1, 2, 3, 31]
    assert truncate(example, left.spec(6)).kept == 6 and truncate(example, left.spec(7)).tokens == (
        "s3",
        "s4",
        "s5",
        "s6",
    )
    in_epochs = Staged(side="right", stage_length=1, stage_unit="epochs", first_stage_length=2.5, num_stages=4)
    in_epochs.bind(4)  # stage 0: 10 steps, then 4 per stage
    assert [in_epochs.stage(s) for s in (9, 10, 13, 14, 99)] == [0, 1, 1, 2, 3]
    levels = LogICoT(stage_length=2, stage_unit="steps", num_levels=2, first_stage_length=5)
    assert [levels.stage(s) for s in (4, 5, 6, 7, 99)] == [0, 1, 1, 2, 2]
    assert schedule_from_dict(left.to_dict()) == left


@pytest.mark.parametrize("direction, fill", [("left", "drop"), ("right", "pad"), ("inductive", "keep_position")])
def test_staged_bound_to_the_longest_cot_ends_there_and_truncates_the_same(direction, fill):
    six, four = ["s1", "s2", "s3", "s4", "s5", "s6"], ["s1", "s2", "s3", "s4"]
    bound = Staged(side=direction, steps_per_stage=2, stage_length=3, stage_unit="steps", fill=fill)
    bound.bind(None, max_cot_steps=6)  # stage 3 removes 6 steps (stride 7 for inductive): nothing of 6 steps is left
    free = Staged(side=direction, steps_per_stage=2, stage_length=3, stage_unit="steps", fill=fill)
    assert [bound.stage(s) for s in (0, 8, 9, 12, 300)] == [0, 2, 3, 3, 3]
    assert free.stage(300) == 100
    assert (bound.removed_count(8), bound.removed_count(9)) == (4, math.inf) and bound.spec(300).which == "all"
    assert bound.describe(30)[-1] == {"index": 3, "start_step": 9, "end_step": 30, "removes": str(bound.spec(9))}
    for step in range(0, 60, 4):
        for cot in (six, four):
            example = {"question": "q", "cot": cot, "answer": "a"}
            assert truncate(example, bound.spec(step)) == truncate(example, free.spec(step)), (step, cot)
    assert Staged(**{k: v for k, v in bound.to_dict().items() if k != "name"}).max_cot_steps == 6


def test_log_icot_pads_tree_levels_stage_by_stage():
    k = 8  # a k-parity tree: 4 + 2 + 1 intermediate values on levels 1, 2, 3
    example = {
        "question": " ".join("1" * k),
        "cot": list("0110110"),
        "cot_level": [1, 1, 1, 1, 2, 2, 3],
        "answer": "0",
    }
    schedule = LogICoT(stage_length=2, stage_unit="steps", final_remove_all=True)
    schedule.bind(None, max_cot_level=3)
    assert schedule.num_levels == 3
    for t in range(1, 5):  # stage t pads the first k (1 - 2^-(t-1)) intermediate tokens
        cut = truncate(example, schedule.spec(2 * (t - 1)))
        padded = int(k * (1 - 2 ** -(t - 1)))
        assert cut.tokens[:padded] == (PLACEHOLDER_TOKEN,) * padded
        assert PLACEHOLDER_TOKEN not in cut.tokens[padded:]
        assert len(cut.tokens) == 7
    assert schedule.spec(8).which == "all" and truncate(example, schedule.spec(100)).tokens == ()
    assert [schedule.stage(s) for s in (0, 2, 4, 6, 8, 50)] == [0, 1, 2, 3, 4, 4]


def test_mixture_draws_kept_lengths_uniformly_with_hints():
    schedule = Mixture(unit="token", hint=True)
    ids = list(range(30000))
    specs = schedule.specs(2, ids, n_tokens=[10] * len(ids))
    kept = np.array([truncate(TEN_TOKENS, spec).kept for spec in specs[:3000]])
    assert np.bincount(kept, minlength=11).min() > 3000 / 11 * 0.75
    cut = truncate(TEN_TOKENS, specs[0])
    assert cut.hint == f"<len_{cut.kept}>"
    kept_all = np.array([10 - spec.count for spec in specs])
    assert abs(kept_all.mean() - 5) < 0.06
    weighted = Mixture(unit="step", weights=[1, 0, 3])
    steps = np.array([3 - spec.count for spec in weighted.specs(0, ids, n_steps=[3] * len(ids))])
    assert set(steps.tolist()) == {0, 2}
    assert abs((steps == 2).mean() - 0.75) < 0.01
    capped = Mixture(max_length=2)
    assert {10 - spec.count for spec in capped.specs(0, ids[:2000], n_tokens=[10] * 2000)} == {0, 1, 2}


def test_baselines():
    assert truncate(TEN_TOKENS, FullCoT().spec(99)).kept == 10
    assert truncate(TEN_TOKENS, NoCoT().spec(0)).kept == 0


@pytest.mark.parametrize(
    "schedule",
    [
        FullCoT(seed=1),
        NoCoT(fill="keep_position"),
        Stepwise(
            remove_per_epoch=3, removal_smoothing_lambda=2.0, remove_all_when_remove_beyond=7, reset_optimizer=True
        ),
        Staged(side="inductive", num_stages=3, final_remove_all=True),
        LogICoT(num_levels=3),
        Mixture(unit="step", weights=[1.0, 2.0], hint=True),
    ],
)
def test_schedules_round_trip_through_json(schedule):
    schedule.bind(10)
    data = json.loads(json.dumps(schedule.to_dict()))
    rebuilt = schedule_from_dict(data)
    assert rebuilt == schedule and rebuilt.to_dict() == schedule.to_dict()
    stages = rebuilt.describe(40)
    assert stages[0]["start_step"] == 0 and stages[-1]["end_step"] == 40
    assert all(a["end_step"] == b["start_step"] for a, b in zip(stages, stages[1:]))


def test_describe_lists_stepwise_stages():
    schedule = Stepwise(remove_per_epoch=2, pretrain_epochs=1, remove_all_when_remove_beyond=3)
    schedule.bind(10)  # s0 = 10, P = 5
    stages = schedule.describe(40)
    assert [(s["index"], s["start_step"], s["end_step"]) for s in stages] == [
        (0, 0, 15),
        (1, 15, 20),
        (2, 20, 25),
        (3, 25, 40),
    ]
    assert stages[1]["removes"] == "first 1 CoT tokens from the left" and stages[-1]["removes"] == "all CoT tokens"


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: schedule_from_dict({"name": "linear"}), "schedule 'linear' is unknown"),
        (lambda: Stepwise(removal_smoothing_lambda=0), "removal_smoothing_lambda 0.0 is not allowed"),
        (lambda: Stepwise(remove_per_epoch=-1), "remove_per_epoch -1 is not allowed"),
        (lambda: Stepwise(remove_start_from=-2), "remove_start_from -2 is not allowed"),
        (lambda: Stepwise(side="middle"), "removal side 'middle' is not allowed"),
        (lambda: Staged(steps_per_stage=0), "steps_per_stage 0 is not allowed"),
        (lambda: Staged(final_remove_all=True), "final_remove_all needs num_stages"),
        (lambda: Staged(first_stage_length=0), "first_stage_length 0 is not allowed; it must be > 0"),
        (lambda: Mixture(max_length=-1), "mixture max_length -1 is not allowed"),
        (lambda: Mixture(weights=[0, 0]), "mixture weights"),
        (lambda: schedule_from_dict({"name": "stepwise", "speed": 2}), "has no field(s) speed"),
    ],
)
def test_bad_schedule_values_raise_one_sentence(build, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build()


def test_unbound_schedules_say_what_is_missing():
    with pytest.raises(ValueError, match="steps_per_epoch"):
        Stepwise().spec(0)
    with pytest.raises(ValueError, match="num_levels"):
        LogICoT().spec(0)
