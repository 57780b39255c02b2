"""The transition step τ of a logged series: the first evaluation where it falls below a threshold and stays there.

The study's τ is the first evaluation at which the candidate loss drops below 0.5 · log K (halfway from the
marginal plateau log K to the solved 0): ``detect_transition(steps, candidate_losses, 0.5 * math.log(K))``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


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
