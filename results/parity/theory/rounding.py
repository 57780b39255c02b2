"""Rounding as a ``TrainerCallback``: snap a model's attention weights onto a grid after updates.

The Log-ICoT study rounds its attention weights to the nearest integer after every gradient step, which freezes the
layers already learned (their gradient is too small to move an entry by half a unit); the linear-attention study
rounds at the end of its phases. Both are this callback: ``grid`` sets the lattice (1.0: integers), ``at`` when
(``"step"``: after every optimizer step; ``"stage"``: when a curriculum stage ends, which needs the ``schedule``).

A model says what to round with ``rounded_parameters()`` (the hf_icot theory models do); any other model can be
rounded by naming its parameters (``parameter_names``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from transformers import TrainerCallback

ROUNDING_TIMES = ("step", "stage")


class RoundingCallback(TrainerCallback):
    """Round parameters to the nearest multiple of ``grid`` (see the module docstring).

    Args:
        grid: the lattice spacing (> 0).
        at: ``"step"`` or ``"stage"``.
        schedule: the run's :class:`hf_icot.curriculum.Schedule` (needed for ``at="stage"``).
        parameter_names: names (as in ``model.named_parameters()``) to round instead of ``model.rounded_parameters()``.

    Raises:
        ValueError: a bad ``grid`` or ``at``, ``at="stage"`` without a schedule, or (when training begins) a model
            with neither ``rounded_parameters()`` nor the named parameters.
    """

    def __init__(
        self, grid: float = 1.0, at: str = "step", schedule: Any = None, parameter_names: Sequence[str] | None = None
    ) -> None:
        if not grid > 0:
            raise ValueError(f"rounding grid {grid!r} is not allowed; it must be > 0 (1.0 rounds to integers).")
        if at not in ROUNDING_TIMES:
            raise ValueError(f"rounding at {at!r} is unknown; allowed: {', '.join(ROUNDING_TIMES)}.")
        if at == "stage" and schedule is None:
            raise ValueError("rounding at stage ends needs the run's schedule; pass schedule=trainer.schedule.")
        self.grid, self.at, self.schedule, self.parameter_names = float(grid), at, schedule, parameter_names
        self.parameters: list[torch.nn.Parameter] = []
        self.roundings = 0

    def bind(self, model: Any) -> None:
        """Find what to round in ``model`` (PEFT- or accelerate-wrapped models included)."""
        base = getattr(model, "module", model)
        base = base.get_base_model() if hasattr(base, "get_base_model") else base
        if self.parameter_names is not None:
            named = dict(base.named_parameters())
            missing = [name for name in self.parameter_names if name not in named]
            if missing:
                raise ValueError(f"rounding asked for parameter {missing[0]!r}, which {type(base).__name__} lacks.")
            self.parameters = [named[name] for name in self.parameter_names]
        elif hasattr(base, "rounded_parameters"):
            self.parameters = list(base.rounded_parameters())
        else:
            raise ValueError(
                f"rounding was asked for {type(base).__name__}, which has no attention weights to round (no "
                "rounded_parameters()); name its parameters with parameter_names or drop the rounding."
            )

    @torch.no_grad()
    def round_now(self) -> None:
        for parameter in self.parameters:
            parameter.copy_(torch.round(parameter / self.grid) * self.grid)
        self.roundings += 1

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self.bind(model)

    def on_step_end(self, args, state, control, model=None, **kwargs):
        step = state.global_step  # the step just taken was step - 1; step is the next one
        if self.at == "step" or self.schedule.stage(step) != self.schedule.stage(step - 1):
            self.round_now()
