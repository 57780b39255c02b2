"""The example schema every task shares, its two renderings, and CoT truncation.

An example is a dict with ``question`` (str), ``cot`` (list of str, one per reasoning step), ``answer`` (str) and
optionally ``cot_level`` (list of int, the tree level of each step, 1 = nearest the input). Tokens inside each string
are separated by single spaces (reference text files such as GSM8K keep their own spacing in the question).

Renderings, both in the format of the public stepwise-ICoT reference:

* the text line ``question||cot #### answer`` (steps joined by spaces) — :func:`render_line` / :func:`parse_line`;
* the model sequence ``question <eos> cot <eos> #### answer <eos>`` — built token by token by
  :mod:`hf_icot.data.collator` from :func:`truncate`'s output, so the two can never disagree.

:func:`truncate` is the one place where CoT tokens are removed. Every curriculum is a way of choosing a
:class:`TruncationSpec` per example.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the schema's Features are built on demand: importing datasets costs a recipe's --help a second
    import datasets

LINE_SEPARATOR = "||"
ANSWER_PREFIX = "####"
#: Replaces each removed CoT token under ``fill="pad"``. It is a real token the model attends to (Log-ICoT's zeros),
#: not the batch padding that ``attention_mask`` hides.
PLACEHOLDER_TOKEN = "<cot_pad>"

UNITS = ("token", "step")
WHICH = ("none", "all", "left", "right", "stride", "levels")
FILLS = ("drop", "pad", "keep_position")


def example_features(extra: Mapping[str, Any] | None = None, with_levels: bool = False) -> datasets.Features:
    """The ``datasets.Features`` of the shared schema, plus ``cot_level`` if asked and any task columns in ``extra``
    (a mapping of column name to a ``datasets`` feature, e.g. ``{"group": datasets.Value("string")}``)."""
    import datasets

    columns: dict[str, Any] = {
        "question": datasets.Value("string"),
        "cot": datasets.Sequence(datasets.Value("string")),
        "answer": datasets.Value("string"),
    }
    if with_levels:
        columns["cot_level"] = datasets.Sequence(datasets.Value("int32"))
    columns.update(extra or {})
    return datasets.Features(columns)


def hint_token(length: int) -> str:
    """The length-hint token saying that ``length`` CoT units follow (used by mixture models)."""
    return f"<len_{length}>"


# ---------------------------------------------------------------------------------------------------------------
# Text lines


class MalformedLineError(ValueError):
    """A reference text line that is not ``question||cot #### answer``."""


def render_line(example: Mapping[str, Any]) -> str:
    """``question||cot #### answer`` with the CoT steps joined by single spaces (no trailing newline)."""
    return f"{example['question']}{LINE_SEPARATOR}{' '.join(example['cot'])} {ANSWER_PREFIX} {example['answer']}"


_GSM8K_STEP = re.compile(r"<<[^>]*>>")


def split_steps(cot_text: str) -> list[str]:
    """Split a reference CoT string into steps.

    GSM8K-style CoTs made only of ``<<…>>`` chunks give one step per chunk; the stepwise-ICoT multiplication format
    gives one step per partial product (``p0``, ``+ p1 ( s1 )``, …, ``+ pn``); anything else is one step per
    space-separated token. An empty string gives no steps.
    """
    cot_text = cot_text.strip()
    if not cot_text:
        return []
    chunks = cot_text.split(" ")
    if all(_GSM8K_STEP.fullmatch(chunk) for chunk in chunks):
        return chunks
    if " + " in cot_text and re.fullmatch(r"[0-9 +()]+", cot_text):
        first, *rest = cot_text.split(" + ")
        return [first] + [f"+ {step}" for step in rest]
    return chunks


def parse_line(line: str, line_number: int | None = None) -> dict[str, Any]:
    """Parse ``question||cot #### answer`` into an example (inverse of :func:`render_line`).

    Raises:
        MalformedLineError: the line lacks ``||`` or `` #### ``, or has more than one of either; the message names the
            line number when one is given.
    """
    where = f"line {line_number}" if line_number is not None else "line"
    text = line.rstrip("\r\n")
    if text.count(LINE_SEPARATOR) != 1:
        raise MalformedLineError(
            f"{where} has {text.count(LINE_SEPARATOR)} '{LINE_SEPARATOR}' separators; "
            f"a reference line is 'question{LINE_SEPARATOR}cot {ANSWER_PREFIX} answer' with exactly one."
        )
    question, rest = text.split(LINE_SEPARATOR)
    marker = f" {ANSWER_PREFIX} "
    if rest.count(marker) != 1:
        raise MalformedLineError(
            f"{where} has {rest.count(marker)} '{marker.strip()}' markers after '{LINE_SEPARATOR}'; "
            f"a reference line is 'question{LINE_SEPARATOR}cot {ANSWER_PREFIX} answer' with exactly one."
        )
    cot_text, answer = rest.split(marker)
    if not question.strip():
        raise MalformedLineError(f"{where} has an empty question; every line needs text before '{LINE_SEPARATOR}'.")
    return {"question": question, "cot": split_steps(cot_text), "answer": answer}


# ---------------------------------------------------------------------------------------------------------------
# Truncation


@dataclass(frozen=True)
class TruncationSpec:
    """Which CoT units to remove from an example, and how.

    Attributes:
        unit: ``"token"`` (tokenizer tokens, as the stepwise reference removes them) or ``"step"`` (whole steps).
        which: ``"none"`` (full CoT), ``"all"`` (end-to-end), ``"left"``/``"right"`` (the first/last ``count`` units),
            ``"stride"`` (keep every ``count``-th unit: the inductive curriculum; 1 keeps all), ``"levels"``
            (Log-ICoT stage ``count``: remove the steps of the ``count - 1`` lowest tree levels).
        count: k for left/right, s for stride, t for levels; ignored for none/all.
        fill: ``"drop"`` removes the tokens; ``"pad"`` replaces each by :data:`PLACEHOLDER_TOKEN`, keeping positions;
            ``"keep_position"`` removes them but later tokens keep their original position ids.
        hint: put :func:`hint_token` (number of CoT units that follow, in ``unit``) before the CoT.
        saturate: a count beyond the CoT removes all of it instead of raising (what schedules want; a user who
            asks to publish "left 12" of an 8-step CoT most likely made a mistake, so the default raises).
    """

    unit: str = "token"
    which: str = "none"
    count: int = 0
    fill: str = "drop"
    hint: bool = False
    saturate: bool = False

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise ValueError(f"truncation unit {self.unit!r} is unknown; allowed: {', '.join(UNITS)}.")
        if self.which not in WHICH:
            raise ValueError(f"truncation {self.which!r} is unknown; allowed: {', '.join(WHICH)}.")
        if self.fill not in FILLS:
            raise ValueError(f"truncation fill {self.fill!r} is unknown; allowed: {', '.join(FILLS)}.")
        if not isinstance(self.count, int) or isinstance(self.count, bool) or self.count < 0:
            raise ValueError(f"truncation count {self.count!r} is not allowed; it must be an integer >= 0.")
        if self.which == "stride" and self.count < 1:
            raise ValueError(f"stride {self.count} is not allowed; keep every s-th unit needs s >= 1.")
        if self.which == "levels" and self.count < 1:
            raise ValueError(f"levels stage {self.count} is not allowed; Log-ICoT stages start at 1.")
        if self.which == "levels" and self.unit != "step":
            raise ValueError("truncation 'levels' works on whole steps; use unit 'step'.")

    @classmethod
    def parse(cls, text: str) -> TruncationSpec:
        """Parse the compact form ``[unit:]which[:count][:fill][:hint][:saturate]``.

        Examples: ``none``, ``all``, ``left:8``, ``step:right:2``, ``step:stride:2``, ``step:levels:3:pad``,
        ``token:left:4:keep_position:hint``.
        """
        parts = [p for p in text.strip().split(":") if p]
        if not parts:
            raise ValueError("truncation spec '' is empty; write e.g. 'none', 'all', 'left:8' or 'step:levels:2:pad'.")
        kwargs: dict[str, Any] = {}
        if parts[0] in UNITS:
            kwargs["unit"] = parts.pop(0)
        if not parts or parts[0] not in WHICH:
            raise ValueError(
                f"truncation spec {text!r} does not name what to remove; it is "
                f"'[unit:]which[:count][:fill][:hint]' with which in {', '.join(WHICH)}."
            )
        kwargs["which"] = parts.pop(0)
        for part in parts:
            if part.isdigit() and "count" not in kwargs:
                kwargs["count"] = int(part)
            elif part in FILLS and "fill" not in kwargs:
                kwargs["fill"] = part
            elif part in ("hint", "saturate"):
                kwargs[part] = True
            else:
                raise ValueError(
                    f"truncation spec {text!r} has an unexpected part {part!r}; after 'which' come an optional "
                    f"count, a fill ({', '.join(FILLS)}), 'hint' and 'saturate'."
                )
        if kwargs["which"] in ("left", "right", "stride", "levels") and "count" not in kwargs:
            raise ValueError(f"truncation spec {text!r} needs a count after {kwargs['which']!r}, e.g. 'left:8'.")
        return cls(**kwargs)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        parts = [self.unit, self.which]
        if self.which not in ("none", "all"):
            parts.append(str(self.count))
        parts.append(self.fill)
        parts += [flag for flag in ("hint", "saturate") if getattr(self, flag)]
        return ":".join(parts)


FULL_COT = TruncationSpec()


@dataclass(frozen=True)
class TruncatedCoT:
    """What :func:`truncate` returns: the CoT tokens to render, in order.

    Attributes:
        tokens: kept tokens (and placeholders under ``fill="pad"``); the hint is not among them.
        positions: for each token, its index in the untruncated CoT (so ``keep_position`` can keep position ids).
        steps: for each token, the index of the step it came from.
        hint: the hint token, or None.
        total: number of tokens of the untruncated CoT.
        removed: number of original tokens removed or replaced by placeholders.
        keep_position: later tokens keep their original positions (``fill="keep_position"``).
    """

    tokens: tuple[str, ...]
    positions: tuple[int, ...]
    steps: tuple[int, ...]
    hint: str | None
    total: int
    removed: int
    keep_position: bool = False

    @property
    def kept(self) -> int:
        """Number of original CoT tokens still present (placeholders excluded)."""
        return self.total - self.removed


def tokenize_steps(cot: Sequence[str], tokenizer: Any = None) -> list[list[str]]:
    """The tokens of each CoT step: the tokenizer's own tokens (each step tokenized with a leading space, as it
    stands inside the rendered sequence, so GPT-2 BPE gives its ``Ġ``-prefixed pieces) or, without a tokenizer,
    the space-separated words."""
    if tokenizer is None:
        return [step.split() for step in cot]
    return [tokenizer.tokenize(" " + step) for step in cot]


def _removed_units(n_units: int, spec: TruncationSpec, levels: Sequence[int] | None) -> list[bool]:
    """For each unit, whether ``spec`` removes it."""
    if spec.which == "none":
        return [False] * n_units
    if spec.which == "all":
        return [True] * n_units
    if spec.which in ("left", "right"):
        k = min(spec.count, n_units)
        removed = [i < k for i in range(n_units)]
        return removed if spec.which == "left" else removed[::-1]
    if spec.which == "stride":
        return [(i + 1) % spec.count != 0 for i in range(n_units)]
    # levels: stage t removes the steps of the t - 1 lowest levels
    unit_levels = list(levels) if levels is not None else [1] * n_units
    return [level <= spec.count - 1 for level in unit_levels]


def truncate(example: Mapping[str, Any], spec: TruncationSpec, tokenizer: Any = None) -> TruncatedCoT:
    """Apply ``spec`` to the CoT of ``example``; pure and deterministic.

    Args:
        example: a schema example (``cot``, optionally ``cot_level``).
        spec: what to remove.
        tokenizer: a ``transformers`` tokenizer; token units are its tokens. Without one, tokens are the
            space-separated words (what our word-level tokenizers produce).

    Raises:
        ValueError: a left/right count beyond the CoT length (unless ``spec.saturate``), or ``cot_level`` whose length
            differs from ``cot``.
    """
    cot = list(example["cot"])
    levels = example.get("cot_level")
    if levels is not None and len(levels) != len(cot):
        raise ValueError(f"cot_level has {len(levels)} entries but cot has {len(cot)} steps; they must match.")
    step_tokens = tokenize_steps(cot, tokenizer)
    flat = [(tok, step) for step, toks in enumerate(step_tokens) for tok in toks]

    if spec.unit == "step":
        n_units = len(cot)
        removed_steps = _removed_units(n_units, spec, levels)
        removed = [removed_steps[step] for _, step in flat]
    else:
        n_units = len(flat)
        removed = _removed_units(n_units, spec, None)
    if spec.which in ("left", "right") and spec.count > n_units and not spec.saturate:
        raise ValueError(
            f"cannot remove {spec.count} {spec.unit}s from the {spec.which} of a CoT of {n_units} {spec.unit}s; "
            f"the count must be at most {n_units} (or use 'all', or 'saturate')."
        )

    tokens, positions, steps = [], [], []
    for position, ((tok, step), gone) in enumerate(zip(flat, removed)):
        if gone and spec.fill != "pad":
            continue
        tokens.append(PLACEHOLDER_TOKEN if gone else tok)
        positions.append(position)
        steps.append(step)
    n_removed = sum(removed)
    hint = None
    if spec.hint:
        kept_units = n_units - (sum(removed_steps) if spec.unit == "step" else n_removed)
        hint = hint_token(kept_units)
    return TruncatedCoT(
        tokens=tuple(tokens),
        positions=tuple(positions),
        steps=tuple(steps),
        hint=hint,
        total=len(flat),
        removed=n_removed,
        keep_position=spec.fill == "keep_position",
    )


def truncate_example(example: Mapping[str, Any], spec: TruncationSpec, tokenizer: Any = None) -> dict[str, Any]:
    """``example`` with its CoT truncated as text, in the shared schema (to publish or inspect a variant).

    Steps keep their boundaries: a step that loses some tokens keeps the rest, a step that loses all disappears (with
    its ``cot_level``). The hint, if any, becomes the first step. Positions cannot be kept in text, so
    ``keep_position`` reads as ``drop`` here.
    """
    truncated = truncate(example, spec, tokenizer)
    kept_steps, texts = steps_text(truncated, tokenizer)
    out = dict(example)
    out["cot"] = ([truncated.hint] if truncated.hint else []) + texts
    if example.get("cot_level") is not None:
        hint_level = [0] if truncated.hint else []
        out["cot_level"] = hint_level + [example["cot_level"][s] for s in kept_steps]
    return out


def steps_text(truncated: TruncatedCoT, tokenizer: Any = None) -> tuple[list[int], list[str]]:
    """The steps a truncated CoT still has (their indices) and each one's text: its remaining tokens joined as the
    tokenizer writes them (words joined by spaces without one); the hint is not included."""
    by_step: dict[int, list[str]] = {}
    for tok, step in zip(truncated.tokens, truncated.steps):
        by_step.setdefault(step, []).append(tok)
    kept = sorted(by_step)
    if tokenizer is None:
        return kept, [" ".join(by_step[s]) for s in kept]
    return kept, [tokenizer.convert_tokens_to_string(by_step[s]).strip() for s in kept]


def cot_token_count(example: Mapping[str, Any], tokenizer: Any = None) -> int:
    """Number of CoT tokens of ``example`` under ``tokenizer`` (words without one)."""
    return sum(len(toks) for toks in tokenize_steps(example["cot"], tokenizer))
