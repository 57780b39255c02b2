"""What every curriculum shares: the :class:`Schedule` base, its validators, the per-example random draws and the two
baselines (:class:`FullCoT`, :class:`NoCoT`).

A schedule is a plain, serialisable object that maps ``(global step, example id)`` — plus its own ``seed`` and the
``steps_per_epoch`` bound when training starts — to a :class:`hf_icot.cot.TruncationSpec`. "Global step" is the
0-based index of the optimizer step being computed (``trainer.state.global_step`` before the update), so step ``s``
belongs to epoch ``s // steps_per_epoch``. Everything random is a pure function of ``(seed, step, example id)``: every
rank of a distributed run and every resumed run draws the same truncations.

Every field a user sets is declared once, here or in its schedule, with :func:`option`: its help, its choices and the
flat name under which :class:`hf_icot.training.config.ICoTConfig`, a recipe YAML and the command line set it
(:func:`hf_icot.curriculum.schedule_options` derives them).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from hf_icot.cot import FILLS, UNITS, TruncationSpec
from hf_icot.curriculum.layout import SEQUENCE_FORMATS, SequenceLayout, check_choice

_U64 = np.uint64
#: The metadata key of a field's flat option name (see :func:`option`).
OPTION = "option"


def option(default: Any, help: str, name: str | None = None, choices: Sequence[str] | None = None) -> Any:
    """A schedule field a user sets: ``name`` is its flat option (default: the field's own name), ``help`` says what
    it does (the schedules that read it are added where the options are derived)."""
    metadata: dict[str, Any] = {OPTION: name, "help": help}
    if choices is not None:
        metadata["choices"] = list(choices)
    return dataclasses.field(default=default, metadata=metadata)


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


#: The layout fields every schedule carries, declared once; a schedule with another default redeclares it with
#: :func:`layout_option`.
LAYOUT_HELP = {
    "fill": ("removal_fill", "How removed CoT units leave the sequence: drop, pad (placeholder tokens) or "
             "keep_position (later tokens keep their position ids).", None),
    "unit": ("removal_unit", "What is removed and what a length hint counts: token or step.", UNITS),
    "side": ("removal_side", "Where removal starts: left or right (staged also takes inductive: keep every s-th "
             "step).", None),
    "hint": ("length_hint", "Put a length-hint token before the CoT saying how many units follow (mixture).", None),
    "sequence_format": ("sequence_format", "hf_icot (parts tokenized apart, cleanest for word-level tokenizers) or "
                        "reference (the stepwise reference's token ids: a space token before each <eos>, BOS where the "
                        "tokenizer adds one, answer commas removed, its keep_position positions).", SEQUENCE_FORMATS),
}  # fmt: skip


def layout_option(name: str, default: Any) -> Any:
    """The layout field ``name`` (:data:`LAYOUT_HELP`) with this schedule's ``default``."""
    flat, help, choices = LAYOUT_HELP[name]
    return option(default, help, flat, choices)


@dataclass
class Schedule:
    """Base class. Subclasses are dataclasses whose fields are their whole state.

    Every schedule carries the five layout fields; each subclass names the values it takes (``units``, ``sides``,
    ``takes_hint``) and its defaults, and :attr:`layout` gathers them for the collator, the trainer, evaluation and the
    model card.

    Attributes:
        seed: seed of every per-example draw (the run's seed).
        steps_per_epoch: optimizer steps per epoch (train dataloader length / gradient accumulation), bound by the
            trainer when training starts.
        fill, unit, side, hint, sequence_format: the :class:`SequenceLayout` fields.
    """

    name: ClassVar[str] = ""
    units: ClassVar[tuple[str, ...]] = ("token",)
    sides: ClassVar[tuple[str, ...]] = ("left", "right")
    takes_hint: ClassVar[bool] = False
    #: Whether the trainer must feed :meth:`observe` the training accuracy of every step.
    needs_answer_accuracy: ClassVar[bool] = False
    #: What that accuracy counts: ``"answer"`` (the answer tokens) or ``"sequence"`` (every labelled token); logged as
    #: ``cot/<metric>_accuracy``. :class:`~hf_icot.curriculum.adaptive.AdaptiveStepwise` makes it an option.
    metric: ClassVar[str] = "answer"
    seed: int = option(0, "Seed of every per-example draw.", name="seed")
    steps_per_epoch: int | None = None
    fill: str = layout_option("fill", "drop")
    unit: str = layout_option("unit", "token")
    side: str = layout_option("side", "left")
    hint: bool = layout_option("hint", False)
    sequence_format: str = layout_option("sequence_format", "hf_icot")

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

    def layout_at(self, step: int | None) -> SequenceLayout:
        """The layout after training step ``step`` (None: the end of the curriculum); it changes with the step only
        where a curriculum changes how a question is asked at inference (latent slots: :mod:`.latent`)."""
        return self.layout

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
        """Whether the optimizer state should be reset before step ``step`` (see :attr:`skips_reset_without_cot`)."""
        return False

    @property
    def skips_reset_without_cot(self) -> bool:
        """Whether the trainer skips a reset once the previous step kept no CoT token (the stepwise reference's rule:
        nothing more is removed, so nothing changed)."""
        return True

    def state_dict(self) -> dict[str, Any]:
        """What a training-driven pace has decided so far (kept in checkpoints, not in to_dict); fixed paces: none."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state_dict`'s output (``{}``: start afresh)."""

    def observe(self, step: int, accuracy: float | None) -> bool:
        """Step ``step``'s training accuracy (``needs_answer_accuracy`` schedules); True: more goes from the next."""
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
