"""Callbacks that end a run after its transition: :class:`StopAfterTransition` (a fraction of τ after τ, τ by
:mod:`hf_icot.diagnostics.tau`'s rule) and :class:`StopBelowLoss`."""

from __future__ import annotations

import math
from typing import Any

from transformers import TrainerCallback

from hf_icot.diagnostics.tau import transition_step


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
