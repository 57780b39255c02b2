"""How a run lays out its sequences — the one object the collator, the trainer, evaluation, the model card and the
recipes read (derived from the schedule: :attr:`hf_icot.curriculum.Schedule.layout`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hf_icot.cot import FILLS, PLACEHOLDER_TOKEN, UNITS, TruncationSpec, hint_token

SIDES = ("left", "right", "inductive")
#: ``hf_icot``: ``question <eos> cot <eos> #### answer <eos>`` from separately tokenized parts; ``reference``: the
#: stepwise-ICoT reference's ids, ``' {q} <eos> ' + cot + ' <eos> ' + answer + ' <eos>'`` tokenized whole (see
#: :mod:`hf_icot.data.encoding`).
SEQUENCE_FORMATS = ("hf_icot", "reference")


def check_choice(what: str, value: Any, allowed: Sequence[str]) -> None:
    """One sentence naming ``value`` and the allowed ones (the layout's and every schedule's check)."""
    if value not in allowed:
        raise ValueError(f"{what} {value!r} is not allowed; choose one of {', '.join(allowed)}.")


@dataclass(frozen=True)
class SequenceLayout:
    """How a run lays out its sequences: what the collator builds in training, what generation must build at
    evaluation, and what the model card's snippet shows. Derived from a schedule (:attr:`Schedule.layout`).

    Attributes:
        fill: ``drop``, ``pad`` (each removed token becomes :data:`~hf_icot.cot.PLACEHOLDER_TOKEN`) or
            ``keep_position`` (later tokens keep their untruncated position ids).
        unit: what is removed and what a length hint counts: ``token`` or ``step``.
        side: where removal starts: ``left``, ``right`` or (staged only) ``inductive``. Under a hint of ``k`` units
            the ``k`` kept ones are the last after a ``left`` removal, the first after a ``right`` one.
        hint: a length-hint token before the CoT says how many units follow.
        sequence_format: ``hf_icot`` or ``reference`` (:data:`SEQUENCE_FORMATS`). The reference format puts the
            tokenizer's space token before each ``<eos>`` (counted as the CoT's last token, so the curriculum removes
            it too), the tokenizer's BOS first where it adds one, drops commas from the answer, and under
            ``keep_position`` moves the token before the removed tokens next to what follows them, as the
            reference's ``position_ids[removal_from - 1:] += removed`` does. It removes tokens without hints.
    """

    fill: str = "drop"
    unit: str = "token"
    side: str = "left"
    hint: bool = False
    sequence_format: str = "hf_icot"

    def __post_init__(self) -> None:
        check_choice("removal fill", self.fill, FILLS)
        check_choice("removal unit", self.unit, UNITS)
        check_choice("removal side", self.side, SIDES)
        check_choice("sequence format", self.sequence_format, SEQUENCE_FORMATS)
        if self.is_reference and (self.unit != "token" or self.hint or self.side == "inductive"):
            raise ValueError(
                "sequence_format 'reference' is the stepwise reference's: it removes tokens from the left or right "
                f"without hints, not unit={self.unit!r}, side={self.side!r}, hint={self.hint}; use 'hf_icot'."
            )

    @property
    def is_reference(self) -> bool:
        """Whether sequences carry the stepwise reference's token ids (:data:`SEQUENCE_FORMATS`)."""
        return self.sequence_format == "reference"

    @property
    def keeps_positions(self) -> bool:
        """Whether what follows a removed CoT keeps the position ids it had with the full CoT."""
        return self.fill == "keep_position"

    @property
    def uses_placeholder(self) -> bool:
        return self.fill == "pad"

    def inserted_tokens(self, longest_hint: int = 0) -> list[str]:
        """The tokens the curriculum puts into sequences, which the tokenizer must have: the placeholder under
        ``fill="pad"``, and with hints ``<len_0>`` … ``<len_{longest_hint}>``."""
        tokens = [PLACEHOLDER_TOKEN] if self.uses_placeholder else []
        if self.hint:
            tokens += [hint_token(n) for n in range(longest_hint + 1)]
        return tokens

    def hint_spec(self, n_units: int, hint: int) -> TruncationSpec:
        """What a model trained with hints keeps when asked for ``hint`` units of a CoT of ``n_units``: the
        removal of ``n_units - hint`` units from :attr:`side` (saturated: a hint beyond the CoT keeps all of it)."""
        which = "left" if self.side == "inductive" else self.side
        return TruncationSpec(unit=self.unit, which=which, count=max(n_units - hint, 0), saturate=True)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
