"""A mixture instead of a curriculum: every example draws how much of its CoT it keeps, anew at every step."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from hf_icot.curriculum.base import Schedule, _spec, check_at_least, example_uniforms, option


@dataclass
class Mixture(Schedule):
    """Every example keeps a random number L of CoT units, drawn anew each step; the epoch size stays the same.

    L is uniform over 0..``max_length`` (None: 0..the example's own CoT length), or drawn with ``weights`` (P(L = i)
    proportional to ``weights[i]``); L beyond an example's CoT keeps all of it. The ``side`` units are removed, so
    "left" keeps the last L. With ``hint``, a length-hint token says how many units follow, so one model can later be
    asked for any CoT length.
    """

    name: ClassVar[str] = "mixture"
    units: ClassVar[tuple[str, ...]] = ("token", "step")
    takes_hint: ClassVar[bool] = True
    max_length: int | None = option(
        None, "Kept lengths are uniform over 0..this (unset: the CoT's length).", name="mixture_max_length"
    )
    weights: list[float] | None = option(
        None, "P(kept length = i) proportional to the i-th weight.", name="mixture_weights"
    )
    _cdf: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        check_at_least("mixture max_length", self.max_length, 0)
        if self.weights is not None and self.max_length is not None:
            raise ValueError("give mixture weights or mixture max_length, not both: weights already fix the lengths.")
        if self.weights is not None:
            weights = np.asarray(self.weights, dtype=np.float64)
            if weights.ndim != 1 or len(weights) == 0 or (weights < 0).any() or not weights.sum() > 0:
                raise ValueError(f"mixture weights {self.weights} are not allowed; give >= 0 numbers with a sum > 0.")
            self.weights = [float(w) for w in weights]
            self._cdf = np.cumsum(weights / weights.sum())

    def specs(self, step, example_ids, n_tokens=None, n_steps=None, training=True):
        lengths = n_tokens if self.unit == "token" else n_steps
        if lengths is None:
            raise ValueError(f"Mixture needs each example's CoT length in {self.unit}s (n_{self.unit}s).")
        # Evaluation draws at a fixed step so that every evaluation sees the same lengths.
        uniforms = example_uniforms(self.seed, step if training else 0, example_ids)
        if self._cdf is not None:
            draws = np.minimum(np.searchsorted(self._cdf, uniforms, side="right"), len(self._cdf) - 1)
        else:
            top = np.asarray(lengths) if self.max_length is None else np.full(len(lengths), self.max_length)
            draws = np.floor(uniforms * (top + 1)).astype(np.int64)
        return [
            _spec(self.unit, self.side, max(0, int(n) - int(kept)), self.fill, self.hint)
            for n, kept in zip(lengths, draws)
        ]

    def describe_stage(self, step: int) -> str:
        law = f"weights {self.weights}" if self.weights else f"uniform over 0..{self.max_length or 'the CoT length'}"
        return f"each example keeps L CoT {self.unit}s, L ~ {law}; the {self.side} ones go" + (
            ", with a length hint" if self.hint else ""
        )
