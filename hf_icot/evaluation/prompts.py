"""How each evaluation mode asks a question: the prompt, the positions, and what the model should write.

A model sequence is ``question <eos> [hint] cot <eos> #### answer <eos>`` (see :mod:`hf_icot.data.encoding`). The
modes: ``implicit``, ``explicit``, ``reference`` and ``hint=k`` (:mod:`hf_icot.evaluation.generation_accuracy` says
what each asks). :func:`parse_mode` is the one place mode names are read: the training configuration, the trainer's
callbacks and evaluation all check names with it; :func:`plan_generation` turns one example in one mode into a
:class:`GenerationCase`. No torch here.

A new mode joins in three places: its name here (:data:`NAMED_MODES` for a plain name, :data:`COUNTED_MODES` for a
family ``name=k``), how it asks (:func:`plan_generation`; :func:`scores_cot` if it writes a CoT to score), and how
it generates (:func:`hf_icot.evaluation.generation_accuracy.generate_in_mode`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hf_icot.cot import TruncatedCoT, steps_text, tokenize_steps, truncate
from hf_icot.curriculum.layout import SequenceLayout
from hf_icot.data.encoding import encode_parts, encode_prompt

BASE_MODES = ("implicit", "explicit")
#: The stepwise reference's protocol (its ``evaluate``): prompt ``question <eos>``, free greedy generation up to the
#: answer's ``<eos>``, exact match of ``#### answer`` read from the decoded text with commas removed.
REFERENCE_MODE = "reference"
#: Mode names without a count -> the prompt mode that asks them (:func:`hf_icot.data.encoding.encode_prompt`).
NAMED_MODES = {"implicit": "implicit", "explicit": "explicit", REFERENCE_MODE: "explicit", "latent": "latent"}
#: Mode families ``name=k`` (k >= 0) -> the prompt mode that asks them; ``hint=k``: CoT length hint k (mixtures).
#: ``latent``: continuous thoughts (Coconut, CODI), as many latent slots as the run's layout gives a question;
#: ``latent=k``: ``k`` slots for every question.
COUNTED_MODES = {"hint": "hint", "latent": "latent"}


def parse_mode(mode: str) -> tuple[str, int | None]:
    """Split a mode name into its prompt mode and count: ``"explicit"`` and ``"reference"`` -> ``("explicit", None)``,
    ``"hint=3"`` -> ``("hint", 3)``.

    Raises:
        ValueError: any other name (the message lists the allowed ones).
    """
    if not isinstance(mode, str):
        raise ValueError(f"evaluation mode {mode!r} is not a string; {_allowed_modes()}.")
    if mode in NAMED_MODES:
        return NAMED_MODES[mode], None
    family, equals, count = mode.partition("=")
    if equals and family in COUNTED_MODES and count.isdigit():
        return COUNTED_MODES[family], int(count)
    raise ValueError(f"evaluation mode {mode!r} is unknown; {_allowed_modes()}.")


def _allowed_modes() -> str:
    names = [repr(name) for name in NAMED_MODES] + [f"'{family}=k'" for family in COUNTED_MODES]
    return f"allowed: {', '.join(names[:-1])} or {names[-1]} with k >= 0"


def scores_cot(mode: str) -> bool:
    """Whether ``mode``'s CoT is scored (``cot_em``): the model writes one in explicit and hint modes; reference mode
    scores answers only, as the reference does.

    Raises:
        ValueError: an unknown mode.
    """
    prompt_mode, _ = parse_mode(mode)
    return prompt_mode in ("explicit", "hint") and mode != REFERENCE_MODE


def expand_modes(modes: Sequence[str], hint_lengths: Sequence[int] | None) -> list[str]:
    if isinstance(modes, str):
        modes = (modes,)
    expanded = list(modes) + [f"hint={k}" for k in (hint_lengths or ())]
    for mode in expanded:
        parse_mode(mode)
    if not expanded:
        raise ValueError("no evaluation modes were given; pass e.g. modes=('implicit', 'explicit').")
    return list(dict.fromkeys(expanded))


@dataclass(frozen=True)
class GenerationCase:
    """One example asked in one mode: what the model is fed and what it should write.

    Attributes:
        prompt: the prompt's token ids (:func:`hf_icot.data.encoding.encode_prompt`).
        position_shift: for ``keep_position`` models, ``(start, shift)`` as :func:`generate_batched` takes it (the
            tokens from index ``start`` of prompt + continuation sit ``shift`` positions later, where they stood with
            the full CoT); None when positions run on.
        gold_cot: the CoT the model should write ("" in implicit mode).
        gold_length: the tokens of the right continuation (CoT, ``<eos>``, ``#### answer <eos>``).
        empty_cot_shift: for ``keep_position`` models in free generation, how far the first generated token and all
            after it move when that token is ``<eos>`` (an empty CoT): the CoT's length; None otherwise.
    """

    prompt: list[int]
    position_shift: tuple[int, int] | None
    gold_cot: str
    gold_length: int
    empty_cot_shift: int | None = None


def plan_generation(
    example: Mapping[str, Any], tokenizer: Any, mode: str, layout: SequenceLayout | None = None
) -> GenerationCase:
    """Prompt, position shift and gold continuation of ``example`` in ``mode``, all from one tokenization of its CoT.

    * explicit: the whole CoT, positions running on (a model writing its CoT has nothing removed), except that under
      ``keep_position`` an empty CoT moves what follows where the full CoT ended (``empty_cot_shift``); reference
      mode asks the same, and in the reference format under ``keep_position`` shifts the prompt's ``<eos>`` instead;
    * implicit: no CoT; under ``keep_position`` the prompt's closing ``<eos>`` (in the reference format, both
      ``<eos>``) sits where the full CoT ended;
    * ``hint=k``: the ``k`` units (``layout.unit``) a removal from ``layout.side`` keeps, as training kept them; under
      ``keep_position`` the tokens after the removed ones (the first kept CoT token for a left removal, the ``<eos>``
      closing the kept CoT for a right one) sit where they stood with the full CoT.

    Raises:
        ValueError: an unknown mode, or a question, answer or hint token the tokenizer cannot represent.
    """
    layout = layout or SequenceLayout()
    base, hint = parse_mode(mode)
    if base == "latent":
        return _plan_latent(example, tokenizer, hint, layout)
    prompt = encode_prompt(example["question"], tokenizer, mode=base, hint=hint, layout=layout)
    _, step_tokens, answer_ids = encode_parts(example, tokenizer, layout)
    total, answer_length = sum(len(tokens) for tokens in step_tokens), len(answer_ids) + 1
    # The reference format shifts from the token before the removed CoT: the first <eos>, not the one after it.
    first_shifted = len(prompt) - (2 if layout.is_reference else 1)
    if base == "implicit":
        shift = (first_shifted, total) if layout.keeps_positions else None
        return GenerationCase(prompt, shift, "", answer_length)
    if hint is None:
        case = GenerationCase(prompt, None, " ".join(example["cot"]), total + 1 + answer_length)
        if not layout.keeps_positions:
            return case
        if layout.is_reference and mode == REFERENCE_MODE:
            return dataclasses.replace(case, position_shift=(len(prompt) - 1, total))
        if not layout.is_reference:
            return dataclasses.replace(case, empty_cot_shift=total)
        return case
    kept = _kept_under_hint(example, tokenizer, hint, layout)
    shift = None
    if layout.keeps_positions:
        shift = (len(prompt) + (kept.kept if layout.side == "right" else 0), kept.removed)
    gold_cot = " ".join(steps_text(kept, tokenizer)[1])
    return GenerationCase(prompt, shift, gold_cot, kept.kept + 1 + answer_length)


def _plan_latent(
    example: Mapping[str, Any], tokenizer: Any, slots: int | None, layout: SequenceLayout
) -> GenerationCase:
    """The question and ``<|start-latent|> <|latent|>×n <|end-latent|>`` in the layout's latent format (``hf_icot``:
    ``question <eos> <|start-latent|> … <|end-latent|>``; :meth:`hf_icot.data.latent_formats.LatentFormat.prompt`),
    ``n`` from the layout (``latent``) or ``slots`` (``latent=k``); the model writes the CoT steps the slots do not
    stand for, then the answer and its ``<eos>`` as the format closes them."""
    from hf_icot.curriculum.layout import LATENT_TOKENS
    from hf_icot.data.encoding import token_id
    from hf_icot.data.latent_formats import LatentFormat

    fmt = LatentFormat.of(tokenizer, layout) if layout.latent else LatentFormat(tokenizer)
    markers = [token_id(tokenizer, token) for token in LATENT_TOKENS]
    n_steps = len(example["cot"])
    n = layout.latent_slots(n_steps) if slots is None else slots
    replaced = layout.latent_replaced_steps(n_steps) if slots is None else n_steps
    prompt = fmt.ask(example["question"], n, markers)
    written = sum(len(ids) for ids in fmt.step_ids(example["cot"][replaced:]))
    gold_cot = " ".join(example["cot"][replaced:])
    answer_length = len(fmt.answer_ids([example["answer"]])[0])
    return GenerationCase(prompt, None, gold_cot, written + len(fmt.after_cot) + answer_length + 1)


def _kept_under_hint(example: Mapping[str, Any], tokenizer: Any, hint: int, layout: SequenceLayout) -> TruncatedCoT:
    # The CoT's own tokens, joined by spaces, split back into exactly those tokens: truncate without re-tokenizing.
    tokens = {"cot": [" ".join(step) for step in tokenize_steps(example["cot"], tokenizer)]}
    units = sum(len(step.split()) for step in tokens["cot"]) if layout.unit == "token" else len(example["cot"])
    return truncate(tokens, layout.hint_spec(units, hint))


def gold_cot_text(
    example: Mapping[str, Any], tokenizer: Any, hint: int | None = None, layout: SequenceLayout | None = None
) -> str:
    """The CoT a model should write for ``example``: all steps joined by spaces, or under a hint of ``k`` units the
    ``k`` that the layout's removal keeps (the last ones after a "left" removal), as training kept them."""
    if hint is None:
        return " ".join(example["cot"])
    return " ".join(steps_text(_kept_under_hint(example, tokenizer, hint, layout or SequenceLayout()), tokenizer)[1])


def gold_continuation_length(
    example: Mapping[str, Any], tokenizer: Any, mode: str, layout: SequenceLayout | None = None
) -> int:
    """Tokens a model should generate for ``example`` in ``mode``: the CoT tokens (none in implicit mode, those of
    the ``k`` units kept under ``hint=k``), then ``<eos> #### answer <eos>`` (``#### answer <eos>`` in implicit
    mode)."""
    return plan_generation(example, tokenizer, mode, layout).gold_length


def max_new_tokens_for(cases: Sequence[GenerationCase]) -> int:
    # A quarter (at least 8 tokens) of slack lets a model writing a slightly longer CoT still reach its answer.
    longest = max(case.gold_length for case in cases)
    return longest + max(8, longest // 4)


def default_max_new_tokens(
    dataset: Sequence[Mapping[str, Any]], tokenizer: Any, mode: str, layout: SequenceLayout | None = None
) -> int:
    """The longest gold continuation of ``dataset`` in ``mode``, plus a quarter (at least 8 tokens) of slack so that a
    model writing a slightly longer CoT can still reach its answer."""
    return max_new_tokens_for([plan_generation(example, tokenizer, mode, layout) for example in dataset])
