"""τ: the first logged step of the first run of points below the threshold."""

import math

import pytest

from hf_icot.diagnostics import detect_transition

STEPS = [0, 10, 20, 30, 40, 50, 60, 70]
#: A candidate loss at the log 4 plateau that dips once (step 30), recovers, then falls for good from step 50.
LOSSES = [math.log(4), math.log(4), 1.0, 0.6, 0.8, 0.5, 0.4, 0.3]
HALF_LOG_4 = 0.5 * math.log(4)  # 0.693


def test_first_point_below_threshold():
    assert detect_transition(STEPS, LOSSES, HALF_LOG_4) == 30


def test_patience_skips_a_single_dip():
    assert detect_transition(STEPS, LOSSES, HALF_LOG_4, patience=2) == 50
    assert detect_transition(STEPS, LOSSES, HALF_LOG_4, patience=3) == 50
    assert detect_transition(STEPS, LOSSES, HALF_LOG_4, patience=4) is None


def test_never_below_and_nan_do_not_count():
    assert detect_transition(STEPS, [math.log(4)] * 8, HALF_LOG_4) is None
    assert detect_transition([0, 1, 2], [math.nan, 0.1, 0.1], 0.5, patience=2) == 1
    assert detect_transition([], [], 0.5) is None


def test_bad_input():
    with pytest.raises(ValueError, match="steps has 2 entries and values 1"):
        detect_transition([0, 1], [0.1], 0.5)
    with pytest.raises(ValueError, match="patience=0 is not allowed"):
        detect_transition([0], [0.1], 0.5, patience=0)
