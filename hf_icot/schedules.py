"""Curricula: which CoT tokens each example loses at each optimizer step.

A schedule is a plain, serialisable object that maps ``(global step, example id)`` — plus its own ``seed`` and the
``steps_per_epoch`` bound when training starts — to a :class:`hf_icot.cot.TruncationSpec`. "Global step" is the
0-based index of the optimizer step being computed (``trainer.state.global_step`` before the update), so step ``s``
belongs to epoch ``s // steps_per_epoch``. Everything random is a pure function of ``(seed, step, example id)``: every
rank of a distributed run and every resumed run draws the same truncations.

Schedules: :class:`FullCoT`, :class:`NoCoT`, :class:`Stepwise` (the stepwise-ICoT reference), :class:`Staged`
(left / right / inductive stages), :class:`LogICoT` (tree levels padded stage by stage), :class:`Mixture` (every
example draws its CoT length) and :class:`hf_icot.adaptive.AdaptiveStepwise` (the next unit goes once the model has
absorbed the last removal). Build one from an :class:`hf_icot.config.ICoTConfig` with
:func:`hf_icot.config.schedule_from_config`, store it with ``to_dict()`` and rebuild it with :func:`schedule_from_dict`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from hf_icot.cot import FILLS, TruncationSpec
from hf_icot.layout import SequenceLayout, check_choice

_U64 = np.uint64


@functools.lru_cache(maxsize=65536)
def _spec(unit: str, which: str, count: int, fill: str, hint: bool = False) -> TruncationSpec:
    # Specs are immutable; caching spares re-validating the same few specs for every example of every step.
    return TruncationSpec(unit=unit, which=which, count=count, fill=fill, hint=hint, saturate=True)


def _mix64(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser: a bijective 64-bit mixer (wrap-around arithmetic on uint64 arrays)."""
    x = (x ^ (x >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> _U64(27))) * _U64(0x94D049BB133111EB)
    return x ^ (x >> _U64(31))


def example_uniforms(seed: int, step: int, example_ids: Sequence[int]) -> np.ndarray:
    """Uniform draws in [0, 1), one per example: a pure function of ``(seed, step, example id)``.

    Counter-based hashing instead of a generator per example keeps this vectorised (one call per batch) while staying
    independent of batch composition, rank and resumption.
    """
    with np.errstate(over="ignore"):
        key = _mix64(np.array([seed & 0xFFFFFFFFFFFFFFFF], dtype=_U64))
        key = _mix64(key + np.array([step & 0xFFFFFFFFFFFFFFFF], dtype=_U64))
        ids = np.asarray(example_ids, dtype=np.int64).astype(_U64)
        bits = _mix64(_mix64(key + ids))
    return (bits >> _U64(11)).astype(np.float64) * 2.0**-53


# The validators every schedule uses: one sentence naming the value and what is allowed.


def check_at_least(what: str, value: float | None, low: float, note: str = "") -> None:
    """``value >= low`` (None passes: unset)."""
    if value is not None and not value >= low:
        raise ValueError(f"{what} {value} is not allowed; it must be >= {low:g}{note}.")


def check_positive(what: str, value: float, note: str = "") -> None:
    if not value > 0:
        raise ValueError(f"{what} {value} is not allowed; it must be > 0{note}.")


def check_non_negative(what: str, value: int) -> int:
    check_at_least(what, value, 0)
    return int(value)


STAGE_UNITS = ("epochs", "steps")


def _stage_steps(stage_length: float, stage_unit: str, steps_per_epoch: int | None) -> int:
    if stage_unit == "steps":
        return int(stage_length)
    if steps_per_epoch is None:
        raise ValueError("this schedule counts stages in epochs, so it needs steps_per_epoch; call bind() first.")
    return max(1, round(stage_length * steps_per_epoch))


@dataclass
class Schedule:
    """Base class. Subclasses are dataclasses whose fields are their whole state.

    Every schedule carries the four layout fields; each subclass names the values it takes (``units``, ``sides``,
    ``takes_hint``) and its defaults, and :attr:`layout` gathers them for the collator, the trainer, evaluation and the
    model card.

    Attributes:
        seed: seed of every per-example draw.
        steps_per_epoch: optimizer steps per epoch (train dataloader length / gradient accumulation), bound by the
            trainer when training starts.
        fill, unit, side, hint, sequence_format: the :class:`SequenceLayout` fields.
    """

    name: ClassVar[str] = ""
    units: ClassVar[tuple[str, ...]] = ("token",)
    sides: ClassVar[tuple[str, ...]] = ("left", "right")
    takes_hint: ClassVar[bool] = False
    #: Whether the trainer must feed :meth:`observe` the answer-token accuracy of every training step.
    needs_answer_accuracy: ClassVar[bool] = False
    seed: int = 0
    steps_per_epoch: int | None = None
    fill: str = "drop"
    unit: str = "token"
    side: str = "left"
    hint: bool = False
    sequence_format: str = "hf_icot"

    def __post_init__(self) -> None:
        check_choice("fill", self.fill, FILLS)
        check_choice(f"{self.name} unit", self.unit, self.units)
        check_choice(f"{self.name} removal side", self.side, self.sides)
        if self.hint and not self.takes_hint:
            raise ValueError(f"length hints are for the mixture schedule; {self.name} takes hint=False.")
        _ = self.layout  # the layout checks the sequence format against the other fields, here rather than later

    @property
    def layout(self) -> SequenceLayout:
        """How this curriculum lays sequences out (see :class:`SequenceLayout`)."""
        return SequenceLayout(
            fill=self.fill, unit=self.unit, side=self.side, hint=self.hint, sequence_format=self.sequence_format
        )

    def bind(
        self,
        steps_per_epoch: int | None,
        max_cot_level: int | None = None,
        max_cot_tokens: int | None = None,
        max_cot_steps: int | None = None,
    ) -> None:
        """Bind what is only known when training starts: ``max_cot_level`` is the deepest ``cot_level`` of the
        training data (it sets ``num_levels`` where a schedule has that field and it is unset), ``max_cot_tokens`` /
        ``max_cot_steps`` its longest CoT in tokens / steps (kept by the schedules that have a field of that name)."""
        check_at_least("steps_per_epoch", steps_per_epoch, 1)
        self.steps_per_epoch = steps_per_epoch
        for name, value in (("max_cot_tokens", max_cot_tokens), ("max_cot_steps", max_cot_steps)):
            if value is not None and hasattr(self, name):
                setattr(self, name, check_non_negative(name, value))
        if max_cot_level is not None and getattr(self, "num_levels", 0) is None:
            self.num_levels = max(1, int(max_cot_level))

    def stage(self, step: int) -> int:
        """Index of the curriculum stage that step ``step`` belongs to (0 first; non-decreasing in ``step``)."""
        return 0

    def removed_count(self, step: int) -> float:
        """The nominal number of units removed at ``step`` (``inf`` once everything goes)."""
        return 0.0

    def resets_optimizer_at(self, step: int) -> bool:
        """Whether the optimizer state should be reset before step ``step`` (the trainer may still skip it)."""
        return False

    def state_dict(self) -> dict[str, Any]:
        """What a training-driven pace has decided so far (kept in checkpoints, not in to_dict); fixed paces: none."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state_dict`'s output (``{}``: start afresh)."""

    def observe(self, step: int, accuracy: float | None) -> bool:
        """Step ``step``'s training answer-token accuracy (``needs_answer_accuracy`` schedules); True: more goes."""
        return False

    def specs(
        self,
        step: int,
        example_ids: Sequence[int],
        n_tokens: Sequence[int] | None = None,
        n_steps: Sequence[int] | None = None,
        training: bool = True,
    ) -> list[TruncationSpec]:
        """The truncation of each example at ``step``.

        Args:
            step: 0-based optimizer step.
            example_ids: dataset row index of each example.
            n_tokens / n_steps: each example's CoT length in tokens / steps (only :class:`Mixture` needs them).
            training: False at evaluation, where random parts (removal smoothing) are switched off.
        """
        raise NotImplementedError

    def spec(self, step: int, example_id: int = 0, training: bool = True) -> TruncationSpec:
        """:meth:`specs` for one example whose CoT length does not matter."""
        return self.specs(step, [example_id], training=training)[0]

    def describe_stage(self, step: int) -> str:
        """What the stage containing ``step`` removes, in words (for model cards)."""
        return str(self.spec(step, training=False))

    def describe(self, total_steps: int) -> list[dict[str, Any]]:
        """The stages of a run of ``total_steps`` steps: ``index``, ``start_step``, ``end_step`` (exclusive) and
        ``removes`` (in words)."""
        stages, start = [], 0
        while start < total_steps:
            index = self.stage(start)
            low, high = start, total_steps  # the stage ends at the first step of a higher stage: binary search
            while low + 1 < high:
                middle = (low + high) // 2
                low, high = (middle, high) if self.stage(middle) == index else (low, middle)
            stages.append(
                {"index": index, "start_step": start, "end_step": high, "removes": self.describe_stage(start)}
            )
            start = high
        return stages

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields plus ``name`` (infinities become the string ``"inf"``)."""
        out: dict[str, Any] = {"name": self.name}
        for f in dataclasses.fields(self):
            if not f.init:
                continue
            value = getattr(self, f.name)
            out[f.name] = "inf" if isinstance(value, float) and math.isinf(value) else value
        return out


@dataclass
class FullCoT(Schedule):
    """Every example keeps its whole CoT (the explicit baseline)."""

    name: ClassVar[str] = "full_cot"

    def specs(self, step, example_ids, n_tokens=None, n_steps=None, training=True):
        return [_spec("token", "none", 0, "drop")] * len(example_ids)


@dataclass
class NoCoT(Schedule):
    """No example has any CoT (the end-to-end baseline, ``which="all"``)."""

    name: ClassVar[str] = "no_cot"

    def removed_count(self, step: int) -> float:
        return math.inf

    def specs(self, step, example_ids, n_tokens=None, n_steps=None, training=True):
        return [_spec("token", "all", 0, self.fill)] * len(example_ids)


def smoothing_offset_probabilities(removal_smoothing_lambda: float, size: int = 100) -> np.ndarray:
    """P(offset = o) of removal smoothing: ``(1 - e^-λ) e^(-λ o)`` for ``o < size - 1``, the rest on ``size - 1``."""
    if math.isinf(removal_smoothing_lambda):
        probabilities = np.zeros(size)
        probabilities[0] = 1.0
        return probabilities
    offsets = np.arange(size, dtype=np.float64)
    probabilities = (1.0 - math.exp(-removal_smoothing_lambda)) * np.exp(-removal_smoothing_lambda * offsets)
    probabilities[-1] = 1.0 - probabilities[:-1].sum()
    return probabilities


def smoothed_removal_specs(
    unit: str, side: str, fill: str, scheduled: int, cdf: np.ndarray, seed: int, step: int, example_ids: Sequence[int]
) -> list[TruncationSpec]:
    """Each example removes ``scheduled`` units plus its removal-smoothing offset, drawn from ``cdf`` (the cumulative
    :func:`smoothing_offset_probabilities`) with the uniforms of ``(seed, step, example id)``."""
    offsets = np.searchsorted(cdf, example_uniforms(seed, step, example_ids), side="right")
    offsets = np.minimum(offsets, len(cdf) - 1)
    return [_spec(unit, side, scheduled + int(o), fill) for o in offsets]


class CountedRemoval(Schedule):
    """A schedule that removes a growing count of CoT units from one side: the count at a step is
    ``scheduled(step)`` (from ``remove_start_from``), and the whole CoT goes once it reaches ``_all_removed_from``.
    Stages, the reported count and optimizer resets follow from those two (:class:`Stepwise` and
    :class:`hf_icot.adaptive.AdaptiveStepwise`)."""

    def scheduled(self, step: int) -> int:
        raise NotImplementedError

    @property
    def _all_removed_from(self) -> float:
        raise NotImplementedError

    def removes_all(self, step: int) -> bool:
        return self.scheduled(step) >= self._all_removed_from

    def removed_count(self, step: int) -> float:
        return math.inf if self.removes_all(step) else float(self.scheduled(step))

    def stage(self, step: int) -> int:
        if self.removes_all(step):
            return max(math.ceil(self._all_removed_from), self.remove_start_from) - self.remove_start_from
        return self.scheduled(step) - self.remove_start_from

    def resets_optimizer_at(self, step: int) -> bool:
        if not self.reset_optimizer:
            return False
        previous = self.scheduled(step - 1) if step > 0 else self.remove_start_from
        return self.scheduled(step) > previous and previous < self._all_removed_from


@dataclass
class Stepwise(CountedRemoval):
    """The stepwise-ICoT reference curriculum: remove CoT tokens one at a time, linearly in optimizer steps.

    With ``P = round(steps_per_epoch / remove_per_epoch)`` and ``s0 = pretrain_epochs * steps_per_epoch``, the
    scheduled count is ``remove_start_from`` before ``s0`` and ``remove_start_from + (s - s0) // P`` from then on
    (``P = 0``: ``remove_start_from + s - s0 + 1``, one more token every step). Once it reaches
    ``remove_all_when_remove_beyond`` the whole CoT goes. In training each example removes
    ``scheduled + offset`` tokens, the offset drawn from :func:`smoothing_offset_probabilities`
    (``removal_smoothing_lambda = inf``: no offset; none during the pretraining epochs either, as in the reference). Counts beyond an example's CoT remove all of it.

    ``max_cot_tokens`` (bound from the training data; None: unknown) ends the curriculum where the data ends: once the
    scheduled count reaches the longest CoT, every CoT is gone whatever the offsets, so from there the schedule reports
    "all" (``removed_count`` inf), stays in its last stage and asks for no more optimizer resets. What each example
    sees is the same as without it.

    One difference from the reference script: it kept incrementing during pretraining when ``P = 0``; here
    pretraining always keeps ``remove_start_from``.
    """

    name: ClassVar[str] = "stepwise"
    remove_per_epoch: float = 8.0
    remove_start_from: int = 0
    removal_smoothing_lambda: float = math.inf
    remove_all_when_remove_beyond: float = math.inf
    pretrain_epochs: int = 0
    reset_optimizer: bool = False
    max_cot_tokens: int | None = None
    _cdf: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.removal_smoothing_lambda = float(self.removal_smoothing_lambda)
        self.remove_all_when_remove_beyond = float(self.remove_all_when_remove_beyond)
        check_positive("remove_per_epoch", self.remove_per_epoch)
        check_at_least("remove_start_from", self.remove_start_from, 0)
        check_positive("removal_smoothing_lambda", self.removal_smoothing_lambda, " (inf: off)")
        check_at_least("remove_all_when_remove_beyond", self.remove_all_when_remove_beyond, 0)
        check_at_least("pretrain_epochs", self.pretrain_epochs, 0)
        check_at_least("max_cot_tokens", self.max_cot_tokens, 0)
        self._cdf = np.cumsum(smoothing_offset_probabilities(self.removal_smoothing_lambda))

    @property
    def _all_removed_from(self) -> float:
        """The scheduled count from which the whole CoT goes: the threshold, or the longest CoT if that is lower."""
        longest = math.inf if self.max_cot_tokens is None else max(self.max_cot_tokens, self.remove_start_from)
        return min(self.remove_all_when_remove_beyond, longest)

    @property
    def steps_per_removed_token(self) -> int:
        """``P``: optimizer steps between two increments (0: every step)."""
        if self.steps_per_epoch is None:
            raise ValueError("Stepwise needs steps_per_epoch to pace removal; call bind() first.")
        return int(round(self.steps_per_epoch / self.remove_per_epoch))

    def scheduled(self, step: int) -> int:
        """The scheduled count before the ``remove_all_when_remove_beyond`` threshold is applied."""
        period = self.steps_per_removed_token
        first = self.pretrain_epochs * self.steps_per_epoch
        if step < first:
            return self.remove_start_from
        return self.remove_start_from + ((step - first) // period if period > 0 else step - first + 1)

    def specs(self, step, example_ids, n_tokens=None, n_steps=None, training=True):
        if self.removes_all(step):
            return [_spec("token", "all", 0, self.fill)] * len(example_ids)
        scheduled = self.scheduled(step)
        # During pretraining the reference removes exactly remove_start_from tokens (`to_remove.fill_`): no offsets.
        pretraining = step < self.pretrain_epochs * self.steps_per_epoch
        if not training or math.isinf(self.removal_smoothing_lambda) or pretraining:
            return [_spec("token", self.side, scheduled, self.fill)] * len(example_ids)
        return smoothed_removal_specs(
            "token", self.side, self.fill, scheduled, self._cdf, self.seed, step, example_ids
        )

    def describe_stage(self, step: int) -> str:
        if self.removes_all(step):
            return "all CoT tokens"
        smoothing = (
            "" if math.isinf(self.removal_smoothing_lambda) else f" (+ smoothing λ={self.removal_smoothing_lambda})"
        )
        return f"first {self.scheduled(step)} CoT tokens from the {self.side}{smoothing}"


@dataclass
class Staged(Schedule):
    """Whole-step stages, each ``stage_length`` ``stage_unit`` long.

    ``side`` ``left``/``right``: stage i removes the first/last ``i * steps_per_stage`` steps; ``inductive``: stage i
    keeps every ``(1 + i * steps_per_stage)``-th step (stride curriculum). With ``num_stages``, the last stage lasts to
    the end of training, or, with ``final_remove_all``, is followed by one stage removing the whole CoT. Without it
    stages go on, saturating at "all". ``max_cot_steps`` (bound from the training data; None: unknown) ends the stages where the data
    ends: the first stage that leaves no step of the longest CoT removes "all" and lasts to the end of training.
    """

    name: ClassVar[str] = "staged"
    units: ClassVar[tuple[str, ...]] = ("step",)
    sides: ClassVar[tuple[str, ...]] = ("left", "right", "inductive")
    unit: str = "step"
    steps_per_stage: int = 1
    stage_length: float = 1.0
    stage_unit: str = "epochs"
    num_stages: int | None = None
    final_remove_all: bool = False
    max_cot_steps: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        check_at_least("max_cot_steps", self.max_cot_steps, 0)
        check_choice("stage_unit", self.stage_unit, STAGE_UNITS)
        check_at_least("steps_per_stage", self.steps_per_stage, 1)
        check_positive("stage_length", self.stage_length)
        check_at_least("num_stages", self.num_stages, 1, " (or None: unbounded)")
        if self.final_remove_all and self.num_stages is None:
            raise ValueError("final_remove_all needs num_stages, the number of stages before the final one.")

    def _empties_longest_cot(self, index: int) -> bool:
        # left/right k >= n and a stride s > n (1 + index * steps_per_stage) both leave no step of an n-step CoT
        return self.max_cot_steps is not None and index * self.steps_per_stage >= self.max_cot_steps

    def stage(self, step: int) -> int:
        index = step // _stage_steps(self.stage_length, self.stage_unit, self.steps_per_epoch)
        if self.num_stages is not None:
            index = min(index, self.num_stages if self.final_remove_all else self.num_stages - 1)
        if self.max_cot_steps is not None:
            index = min(index, -(-self.max_cot_steps // self.steps_per_stage))
        return index

    def _stage_spec(self, index: int) -> TruncationSpec:
        if (self.final_remove_all and index == self.num_stages) or self._empties_longest_cot(index):
            return _spec("step", "all", 0, self.fill)
        if self.side == "inductive":
            return _spec("step", "stride", 1 + index * self.steps_per_stage, self.fill)
        return _spec("step", self.side, index * self.steps_per_stage, self.fill)

    def removed_count(self, step: int) -> float:
        spec = self._stage_spec(self.stage(step))
        return math.inf if spec.which == "all" else float(spec.count if spec.which != "stride" else spec.count - 1)

    def specs(self, step, example_ids, n_tokens=None, n_steps=None, training=True):
        return [self._stage_spec(self.stage(step))] * len(example_ids)


@dataclass
class LogICoT(Schedule):
    """Log-ICoT: stage t = 1, 2, … pads the steps of the t - 1 lowest tree levels (``which="levels"``).

    With ``L = num_levels`` (the deepest ``cot_level``; bound from the data when None), t runs 1..L + 1 — the last
    stage pads every step — optionally followed by a stage that drops the whole CoT (``final_remove_all``).
    """

    name: ClassVar[str] = "log_icot"
    units: ClassVar[tuple[str, ...]] = ("step",)
    sides: ClassVar[tuple[str, ...]] = ("left",)  # levels go from the input up
    fill: str = "pad"
    unit: str = "step"
    num_levels: int | None = None
    stage_length: float = 1.0
    stage_unit: str = "epochs"
    final_remove_all: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice("stage_unit", self.stage_unit, STAGE_UNITS)
        check_positive("stage_length", self.stage_length)
        check_at_least("num_levels", self.num_levels, 1)

    def stage(self, step: int) -> int:
        if self.num_levels is None:
            raise ValueError("LogICoT needs num_levels (the deepest cot_level of the data); set it or call bind().")
        index = step // _stage_steps(self.stage_length, self.stage_unit, self.steps_per_epoch)
        return min(index, self.num_levels + (1 if self.final_remove_all else 0))

    def removed_count(self, step: int) -> float:
        index = self.stage(step)
        return math.inf if index > self.num_levels else float(index)

    def specs(self, step, example_ids, n_tokens=None, n_steps=None, training=True):
        index = self.stage(step)
        if index > self.num_levels:
            spec = _spec("step", "all", 0, "drop")
        else:
            spec = _spec("step", "levels", index + 1, self.fill)
        return [spec] * len(example_ids)


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
    max_length: int | None = None
    weights: list[float] | None = None
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


# The adaptive pace has its own module (it holds state the trainer feeds); it builds on the names above.
from hf_icot.adaptive import AdaptiveStepwise  # noqa: E402

SCHEDULES: dict[str, type[Schedule]] = {
    cls.name: cls for cls in (FullCoT, NoCoT, Stepwise, Staged, LogICoT, Mixture, AdaptiveStepwise)
}


def schedule_from_dict(data: dict[str, Any]) -> Schedule:
    """Rebuild a schedule from :meth:`Schedule.to_dict`'s output.

    Raises:
        ValueError: an unknown schedule name or a field the schedule does not have.
    """
    data = dict(data)
    name = data.pop("name", None)
    if name not in SCHEDULES:
        raise ValueError(f"schedule {name!r} is unknown; allowed: {', '.join(SCHEDULES)}.")
    cls = SCHEDULES[name]
    known = {f.name for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(
            f"schedule {name!r} has no field(s) {', '.join(unknown)}; its fields are {', '.join(sorted(known))}."
        )
    data = {key: math.inf if value == "inf" else value for key, value in data.items()}
    return cls(**data)
