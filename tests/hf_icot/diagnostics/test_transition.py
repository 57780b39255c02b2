"""τ by one rule: the crossing interpolated between the measurements around it, and the measured step where a run
sees it while it trains."""

import math

import pytest

from hf_icot.diagnostics import crossing, transition_step

STEPS = [0, 10, 20, 30, 40, 50, 60, 70]
#: A candidate loss at the log 4 plateau that dips once (step 30), recovers, then falls for good from step 50.
LOSSES = [math.log(4), math.log(4), 1.0, 0.6, 0.8, 0.5, 0.4, 0.3]
HALF_LOG_4 = 0.5 * math.log(4)  # 0.693


def test_a_crossing_is_interpolated_between_the_measurements_around_it() -> None:
    assert crossing([0, 10, 20, 30], [1.0, 1.0, 0.0, 0.0], 0.5) == (15.0, 10.0)
    assert crossing([0, 10, 20], [1.0, 0.1, 0.001], 0.01, log=True) == pytest.approx((15.0, 10.0))
    assert crossing([0, 10], [1.0, 0.9], 0.5) is None and crossing([0, 10], [0.1, 0.0], 0.5) == (0.0, 0.0)
    tau, width = crossing(STEPS, LOSSES, HALF_LOG_4)  # the first dip: between 20 (1.0) and 30 (0.6)
    assert width == 10.0 and tau == pytest.approx(20 + 10 * (1.0 - HALF_LOG_4) / 0.4)


def test_a_training_run_reads_tau_at_the_measurement_where_the_crossing_is_seen() -> None:
    rows = [{"step": step, "candidate_loss": loss} for step, loss in zip(STEPS, LOSSES)]
    assert transition_step(rows, HALF_LOG_4) == 30
    assert transition_step(rows[:3], HALF_LOG_4) is None  # not crossed yet
    assert transition_step([{"step": 5, "candidate_loss": 0.1}], 0.5) == 5


def test_never_below_and_nan_do_not_count() -> None:
    assert crossing(STEPS, [math.log(4)] * 8, HALF_LOG_4) is None
    for losses in ([math.nan, 0.9, 0.1], [0.9, math.nan, 0.1], [0.9, 0.5, 0.1]):  # 0.5 is not below 0.5
        rows = [{"step": step, "candidate_loss": loss} for step, loss in zip([0, 1, 2], losses)]
        assert transition_step(rows, 0.5) == 2, losses
    assert crossing([], [], 0.5) is None


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="steps has 2 entries and values 1"):
        crossing([0, 1], [0.1], 0.5)
