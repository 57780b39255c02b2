"""The transition step τ of a logged series: the first evaluation where it falls below a threshold and stays there.

The study's τ is the first evaluation at which the candidate loss drops below 0.5 · log K (halfway from the
marginal plateau log K to the solved 0): ``detect_transition(steps, candidate_losses, 0.5 * math.log(K))``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from transformers import TrainerCallback


def detect_transition(
    steps: Sequence[int], values: Sequence[float], threshold: float, patience: int = 1
) -> int | None:
    """The first step of the first run of ``patience`` consecutive logged points with ``value < threshold``.

    NaN never counts as below. Returns ``None`` when no such run exists.

    Raises:
        ValueError: ``steps`` and ``values`` of different lengths, or ``patience`` < 1.
    """
    if len(steps) != len(values):
        raise ValueError(f"steps has {len(steps)} entries and values {len(values)}; give one value per step.")
    if patience < 1:
        raise ValueError(f"patience={patience} is not allowed; it counts consecutive points, so it is >= 1.")
    run = 0
    for index, value in enumerate(values):
        run = run + 1 if (not math.isnan(value) and value < threshold) else 0
        if run == patience:
            return steps[index - patience + 1]
    return None


def transition_step(rows: list[dict[str, float]], threshold: float) -> int | None:
    """τ of :class:`~hf_icot.diagnostics.LearningDynamicsCallback` rows: the first measured step whose candidate loss
    is below ``threshold``."""
    return detect_transition([r["step"] for r in rows], [r["candidate_loss"] for r in rows], threshold)


class StopAfterTransition(TrainerCallback):
    """Stop training ``fraction * τ`` steps after τ (and at least ``min_steps`` after it); τ is read from the
    diagnostics' candidate loss as it is measured."""

    def __init__(self, diagnostics: Any, threshold: float, fraction: float, min_steps: int) -> None:
        self.diagnostics, self.threshold, self.fraction, self.min_steps = diagnostics, threshold, fraction, min_steps

    def on_step_end(self, args, state, control, **kwargs):
        tau = transition_step(self.diagnostics.rows, self.threshold)
        if tau is not None and state.global_step >= tau + max(self.fraction * tau, self.min_steps):
            control.should_training_stop = True


class StopBelowLoss(TrainerCallback):
    """Stop training ``min_steps`` after the first logged training loss below ``threshold``."""

    def __init__(self, threshold: float, min_steps: int) -> None:
        self.threshold, self.min_steps, self.crossed = threshold, min_steps, None

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self.crossed is None and logs and logs.get("loss", math.inf) < self.threshold:
            self.crossed = state.global_step
        if self.crossed is not None and state.global_step >= self.crossed + self.min_steps:
            control.should_training_stop = True
