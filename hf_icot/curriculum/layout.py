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
#: The continuous-thought markers of latent layouts (Coconut's names): ``<|start-latent|>`` and ``<|end-latent|>``
#: enclose the latent slots, each ``<|latent|>`` slot's input embedding is replaced by the last hidden state before it
#: (:mod:`hf_icot.methods`). Added to the tokenizer as special tokens.
START_LATENT_TOKEN, LATENT_TOKEN, END_LATENT_TOKEN = "<|start-latent|>", "<|latent|>", "<|end-latent|>"
LATENT_TOKENS = (START_LATENT_TOKEN, LATENT_TOKEN, END_LATENT_TOKEN)
#: The text formats of latent sequences (:mod:`hf_icot.data.latent_formats`): ``hf_icot`` (this toolkit's),
#: ``coconut`` (the token ids of Coconut's ``dataset.py``), ``codi`` (those of CODI's ``train.py`` on GSM8K-Aug).
LATENT_FORMATS = ("hf_icot", "coconut", "codi")


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
        latent: sequences carry continuous thoughts (Coconut, CODI): ``question <eos> <|start-latent|> <|latent|>…
            <|end-latent|> [kept CoT steps] <eos> #### answer <eos>``, the removed steps' place taken by latent slots
            (:data:`LATENT_TOKENS`); whole steps leave from the left and nothing else (drop, no hint, ``hf_icot``).
        latent_thoughts: the latent slots a question gets at inference (CODI: ``num_latent``; Coconut: ``c_thought``
            × the steps its last stage replaces).
        latent_per_step: Coconut's ``c_thought`` where a question of ``n`` steps gets at most ``n × c`` slots (Coconut's
            evaluation without ``pad_latent_to_max``); 0: every question gets ``latent_thoughts``.
        latent_format: how a latent sequence's question, CoT steps and answer become token ids and what separates
            them (:data:`LATENT_FORMATS`, :mod:`hf_icot.data.latent_formats`): ``hf_icot`` as above, ``coconut`` or
            ``codi`` for those methods' own ids. Training and latent generation read it alike.
        remove_eos: CODI's ``remove_eos``, in its format only: no ``<eos>`` after the question or after
            ``<|end-latent|>`` (nor, in its teacher, around the CoT).
        latent_iterations: PCCoT's ``num_iterations``: every latent slot is computed at once, by this many Jacobi
            iterations over all of them (:func:`hf_icot.methods.latent_forward.jacobi_hidden_states`); None: one
            decoder pass per thought, each fed the hidden state before it (Coconut, CODI).
    """

    fill: str = "drop"
    unit: str = "token"
    side: str = "left"
    hint: bool = False
    sequence_format: str = "hf_icot"
    latent: bool = False
    latent_thoughts: int = 0
    latent_per_step: int = 0
    latent_format: str = "hf_icot"
    remove_eos: bool = False
    latent_iterations: int | None = None

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
        if self.latent and (self.fill, self.unit, self.side, self.hint, self.sequence_format) != (
            "drop",
            "step",
            "left",
            False,
            "hf_icot",
        ):
            raise ValueError(
                "a latent layout replaces whole CoT steps from the left by latent thoughts: fill 'drop', unit 'step', "
                f"side 'left', no hint, sequence_format 'hf_icot'; got fill={self.fill!r}, unit={self.unit!r}, "
                f"side={self.side!r}, hint={self.hint}, sequence_format={self.sequence_format!r}."
            )
        check_choice("latent_format", self.latent_format, LATENT_FORMATS)
        if self.latent_format != "hf_icot" and not self.latent:
            raise ValueError(
                f"latent_format {self.latent_format!r} lays out continuous-thought sequences; a layout without latent "
                "thoughts takes latent_format 'hf_icot'."
            )
        if self.remove_eos and self.latent_format != "codi":
            raise ValueError(
                f"remove_eos true is CODI's format's option; it applies with latent_format 'codi', not "
                f"{self.latent_format!r}."
            )
        if self.latent_iterations is not None and (not self.latent or self.latent_iterations < 0):
            raise ValueError(
                f"latent_iterations {self.latent_iterations} is not allowed; it must be >= 0, and only a latent "
                "layout has latent slots to iterate over."
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
        ``fill="pad"``, the latent markers of a latent layout, and with hints ``<len_0>`` … ``<len_{longest_hint}>``."""
        tokens = [PLACEHOLDER_TOKEN] if self.uses_placeholder else []
        if self.latent:
            tokens += list(LATENT_TOKENS)
        if self.hint:
            tokens += [hint_token(n) for n in range(longest_hint + 1)]
        return tokens

    def hint_spec(self, n_units: int, hint: int) -> TruncationSpec:
        """What a model trained with hints keeps when asked for ``hint`` units of a CoT of ``n_units``: the
        removal of ``n_units - hint`` units from :attr:`side` (saturated: a hint beyond the CoT keeps all of it)."""
        which = "left" if self.side == "inductive" else self.side
        return TruncationSpec(unit=self.unit, which=which, count=max(n_units - hint, 0), saturate=True)

    def latent_slots(self, n_steps: int) -> int:
        """The latent slots a question of ``n_steps`` CoT steps gets at inference (see :attr:`latent_per_step`)."""
        if self.latent_per_step:
            return min(self.latent_thoughts, n_steps * self.latent_per_step)
        return self.latent_thoughts

    def latent_replaced_steps(self, n_steps: int) -> int:
        """The CoT steps the latent slots stand for (the model writes the rest): all of them, or under
        :attr:`latent_per_step` one step per ``latent_per_step`` slots."""
        if self.latent_per_step:
            return min(n_steps, self.latent_thoughts // self.latent_per_step)
        return n_steps

    def latent_passes(self, n_slots: int) -> int:
        """Decoder passes spent on ``n_slots`` latent thoughts before the answer's first pass: one per thought, or
        with :attr:`latent_iterations` the prompt's pass (its slots as ``<|latent|>``) and one per iteration."""
        if self.latent_iterations is None or n_slots == 0:
            return n_slots
        return self.latent_iterations + 1

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
