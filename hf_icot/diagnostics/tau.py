"""τ, the transition step of a logged series, by one rule: where the series first falls below a threshold,
interpolated linearly between the measurement before and the first one below (:func:`crossing`).

The marginals study's τ is where the candidate loss crosses 0.5 · log K (halfway from the marginal plateau log K to
the solved 0): ``crossing(steps, candidate_losses, 0.5 * math.log(K))``. A run that acts on τ while it trains (stops
after it, keeps checkpoints around it) reads it at the measurement where the crossing is seen
(:func:`transition_step`), the first step it can know it. Pure Python and numpy: the analysis imports it without torch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def crossing(
    steps: Sequence[float], values: Sequence[float], threshold: float, log: bool = False
) -> tuple[float, float] | None:
    """The first step where ``values`` fall below ``threshold``, interpolated linearly (in log value when ``log``)
    between the measurement before and the first one below, with the interval between those two measurements (0 when
    the first measurement is already below). NaN never counts as below. None if never below.

    Raises:
        ValueError: ``steps`` and ``values`` of different lengths.
    """
    import numpy as np

    if len(steps) != len(values):
        raise ValueError(f"steps has {len(steps)} entries and values {len(values)}; give one value per step.")
    i = first_below(values, threshold)
    if i is None:
        return None
    steps, values = np.asarray(steps, float), np.asarray(values, float)
    if i == 0:
        return float(steps[0]), 0.0
    (s0, s1), (v0, v1) = steps[i - 1 : i + 1], values[i - 1 : i + 1]
    if log:
        v0, v1, threshold = math.log(v0), math.log(max(v1, 1e-12)), math.log(threshold)
    return float(s0 + (s1 - s0) * (v0 - threshold) / (v0 - v1)), float(s1 - s0)


def first_below(values: Sequence[float], threshold: float) -> int | None:
    """The index of the first value below ``threshold`` (NaN never is); None if none is."""
    return next((i for i, value in enumerate(values) if value < threshold), None)


def transition_step(rows: list[dict[str, float]], threshold: float) -> int | None:
    """τ of :class:`~hf_icot.diagnostics.LearningDynamicsCallback` rows as a run sees it while it trains: the measured
    step at which the candidate loss's :func:`crossing` of ``threshold`` is seen (the first one below); None before."""
    i = first_below([row["candidate_loss"] for row in rows], threshold)
    return None if i is None else rows[i]["step"]
