"""Evaluate ICoT models: greedy generation, exact match of answers and CoTs per split, inference speed.

A model sequence is ``question <eos> [hint] cot <eos> #### answer <eos>`` (see :mod:`hf_icot.collator`). Each
*mode* asks the model a question in one of the ways it was trained for:

* ``"explicit"`` — prompt ``question <eos>``; the model writes ``cot <eos> #### answer <eos>``;
* ``"implicit"`` — prompt ``question <eos> <eos>`` (an empty CoT); the model writes ``#### answer <eos>``;
* ``"hint=k"`` — prompt ``question <eos> <len_k>`` for mixture models; the model writes k CoT units (the last k of
  the CoT when the mixture removed from the left, its default; the first k with ``removal_side="right"``), then
  ``<eos> #### answer <eos>``;
* ``"reference"`` — the stepwise reference's protocol: the explicit prompt, free generation, and exact match of the
  ``#### answer`` read from the decoded continuation with commas removed (:func:`hf_icot.collator.reference_answer`).

Explicit and reference mode let the model write as much CoT as it wants. Under ``keep_position`` a model that writes
none (its first token is ``<eos>``) has that ``<eos>`` and what follows placed where they stood with the full CoT,
as in training once the CoT was gone; in the reference format, whose positions shift from the prompt's ``<eos>`` on,
reference mode instead places the prompt's ``<eos>`` there, as the reference asks a model with its CoT removed.

In every mode the answer is closed by the third ``<eos>`` of the sequence, so generation of a row stops once its
prompt plus continuation hold three; a batch ends when all its rows have stopped (:mod:`hf_icot.generation`).

Teacher-forced metrics for ``Trainer(compute_metrics=...)`` come from :func:`make_compute_metrics`. Every exact match
here is computed by the metric shipped in :mod:`hf_icot.metrics`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from hf_icot.collator import encode_parts, encode_prompt, encode_text, reference_answer, split_generation
from hf_icot.cot import ANSWER_PREFIX, TruncatedCoT, steps_text, tokenize_steps, truncate
from hf_icot.data import split_order
from hf_icot.generation import generate_batched, generate_with_empty_cot_shifts
from hf_icot.layout import SequenceLayout
from hf_icot.metrics import load_exact_match

BASE_MODES = ("implicit", "explicit")
#: The stepwise reference's protocol (its ``evaluate``): prompt ``question <eos>``, free greedy generation up to the
#: answer's ``<eos>``, exact match of ``#### answer`` read from the decoded text with commas removed.
REFERENCE_MODE = "reference"
#: A mode's speed is reported (card, ``eval_results.json``) only when its answers are right: its answer exact match on
#: the split is above 0 and at least this fraction of the split's best mode's, so speeds compare modes that work.
SPEED_MIN_FRACTION_OF_BEST = 0.5


# ---------------------------------------------------------------------------------------------------------------
# Modes


def parse_mode(mode: str) -> tuple[str, int | None]:
    """Split a mode name into its prompt mode and hint: ``"explicit"`` and ``"reference"`` -> ``("explicit", None)``,
    ``"hint=3"`` -> ``("hint", 3)``.

    Raises:
        ValueError: any other name.
    """
    if mode in BASE_MODES:
        return mode, None
    if mode == REFERENCE_MODE:
        return "explicit", None
    if mode.startswith("hint=") and mode[len("hint=") :].isdigit():
        return "hint", int(mode[len("hint=") :])
    raise ValueError(
        f"evaluation mode {mode!r} is unknown; allowed: 'implicit', 'explicit', 'reference' or 'hint=k' with k >= 0."
    )


def _expand_modes(modes: Sequence[str], hint_lengths: Sequence[int] | None) -> list[str]:
    if isinstance(modes, str):
        modes = (modes,)
    expanded = list(modes) + [f"hint={k}" for k in (hint_lengths or ())]
    for mode in expanded:
        parse_mode(mode)
    if not expanded:
        raise ValueError("no evaluation modes were given; pass e.g. modes=('implicit', 'explicit').")
    return list(dict.fromkeys(expanded))


# ---------------------------------------------------------------------------------------------------------------
# One example in one mode


@dataclass(frozen=True)
class GenerationCase:
    """One example asked in one mode: what the model is fed and what it should write.

    Attributes:
        prompt: the prompt's token ids (:func:`hf_icot.collator.encode_prompt`).
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


def _generate(
    model: torch.nn.Module,
    tokenizer: Any,
    cases: Sequence[GenerationCase],
    limit: int,
    batch_size: int,
    shifts: list[tuple[int, int]] | None,
    accelerator: Any,
) -> list[list[int]]:
    """Generations of every case in order; with several processes, each generates its share (see
    :func:`evaluate_generation`)."""
    prompts = [case.prompt for case in cases]
    empty = None
    if any(case.empty_cot_shift for case in cases):
        empty = [case.empty_cot_shift or 0 for case in cases]
    if accelerator is None or accelerator.num_processes == 1:
        if empty is not None:
            return generate_with_empty_cot_shifts(model, tokenizer, prompts, limit, empty, batch_size, shifts)
        return generate_batched(model, tokenizer, prompts, limit, batch_size, position_shifts=shifts)
    from accelerate.utils import DistributedType, gather_object

    sharded = accelerator.distributed_type in (DistributedType.FSDP, DistributedType.DEEPSPEED)
    with accelerator.split_between_processes(list(range(len(cases))), apply_padding=True) as mine:
        mine = list(mine)
        my_shifts = None if shifts is None else [shifts[i] for i in mine]
        if empty is not None:
            generated = generate_with_empty_cot_shifts(
                model, tokenizer, [prompts[i] for i in mine], limit, [empty[i] for i in mine], batch_size, my_shifts,
                synced_gpus=sharded,
            )  # fmt: skip
        else:
            generated = generate_batched(
                model, tokenizer, [prompts[i] for i in mine], limit, batch_size, position_shifts=my_shifts,
                synced_gpus=sharded,
            )  # fmt: skip
    by_index = dict(gather_object(list(zip(mine, generated))))
    return [by_index[i] for i in range(len(cases))]


def _max_new_tokens(cases: Sequence[GenerationCase]) -> int:
    # A quarter (at least 8 tokens) of slack lets a model writing a slightly longer CoT still reach its answer.
    longest = max(case.gold_length for case in cases)
    return longest + max(8, longest // 4)


def default_max_new_tokens(
    dataset: Sequence[Mapping[str, Any]], tokenizer: Any, mode: str, layout: SequenceLayout | None = None
) -> int:
    """The longest gold continuation of ``dataset`` in ``mode``, plus a quarter (at least 8 tokens) of slack so that a
    model writing a slightly longer CoT can still reach its answer."""
    return _max_new_tokens([plan_generation(example, tokenizer, mode, layout) for example in dataset])


# ---------------------------------------------------------------------------------------------------------------
# Exact match of generations


def evaluate_generation(
    model: torch.nn.Module,
    tokenizer: Any,
    dataset: Sequence[Mapping[str, Any]],
    modes: Sequence[str] = BASE_MODES,
    batch_size: int = 64,
    max_new_tokens: int | None = None,
    hint_lengths: Sequence[int] | None = None,
    layout: SequenceLayout | None = None,
    return_predictions: bool = False,
    accelerator: Any = None,
) -> dict[str, float] | tuple[dict[str, float], dict[str, list[dict[str, Any]]]]:
    """Generate greedily in each mode and score the answers (and CoTs) by exact match.

    Args:
        model: a causal LM trained on hf_icot sequences (possibly PEFT-wrapped, on any device).
        tokenizer: the model's tokenizer.
        dataset: examples of the shared schema (``question``, ``cot``, ``answer``): a ``datasets.Dataset`` or a list.
        modes: ``"implicit"``, ``"explicit"``, ``"reference"`` and/or ``"hint=k"`` (see the module docstring).
        batch_size: prompts per forward pass.
        max_new_tokens: cap on generated tokens; by default :func:`default_max_new_tokens` per mode.
        hint_lengths: adds a mode ``"hint=k"`` for each ``k``.
        layout: how the model's training sequences were laid out (``trainer.layout``, the schedule's); default: the
            plain layout (tokens dropped from the left, no hint). Under ``keep_position`` what follows a removed CoT
            keeps the positions it had with the full CoT, so implicit and hint prompts are shifted by the CoT tokens
            removed — the example's gold CoT length (fixed by the question size in the generated tasks; for free-text
            tasks such as GSM8K a deployed model would not know it). Under ``hint=k`` the model writes the ``k`` units
            a removal from ``layout.side`` keeps, counted in ``layout.unit``. See :func:`plan_generation`.
        return_predictions: also return, per mode, one record per example (question, generated and gold CoT and
            answer, whether each matched).
        accelerator: the run's ``accelerate.Accelerator``. With several processes, every process must call this:
            each generates an equal share of the examples (the last one repeated to even them out), in lockstep
            when the model is sharded (FSDP: ``synced_gpus``), and all get the same metrics from the gathered
            generations. Speeds then count the whole set over the distributed wall time.

    Returns:
        ``{f"{mode}/answer_em", f"{mode}/examples_per_s", f"{mode}/tokens_per_s"}`` for every mode, plus
        ``f"{mode}/cot_em"`` for explicit and hint modes (gold CoT: :func:`gold_cot_text`); reference mode scores
        answers only, as the reference does. Speeds count generation
        only. With ``return_predictions``, the tuple ``(metrics, predictions_by_mode)``.

    Raises:
        ValueError: an empty dataset or one without the schema's columns, an unknown mode, or a bad
            ``max_new_tokens``/``batch_size``.
    """
    examples = list(dataset)
    if not examples:
        raise ValueError("evaluate_generation got an empty dataset; pass at least one example.")
    missing = [column for column in ("question", "cot", "answer") if column not in examples[0]]
    if missing:
        raise ValueError(
            f"the evaluation examples lack the column(s) {', '.join(missing)}; hf_icot examples have question, cot "
            "and answer."
        )
    metric = load_exact_match()
    metrics: dict[str, float] = {}
    predictions: dict[str, list[dict[str, Any]]] = {}
    for mode in _expand_modes(modes, hint_lengths):
        base, _ = parse_mode(mode)
        cases = [plan_generation(example, tokenizer, mode, layout) for example in examples]
        limit = max_new_tokens if max_new_tokens is not None else _max_new_tokens(cases)
        shifts = None if cases[0].position_shift is None else [case.position_shift for case in cases]
        start = time.perf_counter()
        continuations = _generate(model, tokenizer, cases, limit, batch_size, shifts, accelerator)
        seconds = max(time.perf_counter() - start, 1e-9)

        parsed = [split_generation(ids, tokenizer, base) for ids in continuations]
        gold_answers = [ex["answer"] for ex in examples]
        predicted_answers = [answer for _, answer in parsed]
        if mode == REFERENCE_MODE:
            predicted_answers = [
                reference_answer(tokenizer.decode(ids, skip_special_tokens=True)) for ids in continuations
            ]
            gold_answers = [reference_answer(f"{ANSWER_PREFIX} {answer}") for answer in gold_answers]
        answers = metric.compute(predictions=predicted_answers, references=gold_answers, return_matches=True)
        metrics[f"{mode}/answer_em"] = answers["exact_match"]
        cot_matches = None
        if base != "implicit" and mode != REFERENCE_MODE:
            gold_cots = [case.gold_cot for case in cases]
            cots = metric.compute(predictions=[cot for cot, _ in parsed], references=gold_cots, return_matches=True)
            metrics[f"{mode}/cot_em"] = cots["exact_match"]
            cot_matches = cots["matches"]
        metrics[f"{mode}/examples_per_s"] = len(examples) / seconds
        metrics[f"{mode}/tokens_per_s"] = sum(len(ids) for ids in continuations) / seconds
        if return_predictions:
            predictions[mode] = [
                {
                    "question": ex["question"],
                    "generated_cot": cot,
                    "generated_answer": answer,
                    "gold_cot": gold_cots[i] if cot_matches is not None else "",
                    "gold_answer": ex["answer"],
                    "answer_correct": bool(answers["matches"][i]),
                    "cot_correct": bool(cot_matches[i]) if cot_matches is not None else None,
                    "generated_ids": continuations[i],
                }
                for i, (ex, (cot, answer)) in enumerate(zip(examples, parsed))
            ]
    return (metrics, predictions) if return_predictions else metrics


def evaluate_splits(
    model: torch.nn.Module,
    tokenizer: Any,
    dataset_dict: Mapping[str, Sequence[Mapping[str, Any]]],
    splits: Sequence[str] | None = None,
    modes: Sequence[str] = BASE_MODES,
    **kwargs: Any,
) -> dict[str, dict[str, float]]:
    """:func:`evaluate_generation` on several splits: by default every split but ``train`` (validation, test and each
    ``test_ood_*``), each with its own default ``max_new_tokens`` (OOD splits may have longer CoTs).

    ``kwargs`` go to :func:`evaluate_generation` (``return_predictions`` excepted). :func:`flatten_split_metrics`
    turns the result into keys like ``"test_ood_p0_9/implicit/answer_em"``.

    Raises:
        ValueError: a requested split the dataset lacks (the message lists those it has), or no split to evaluate.
    """
    if kwargs.get("return_predictions"):
        raise ValueError("evaluate_splits returns metrics only; call evaluate_generation per split for predictions.")
    available = list(dataset_dict.keys())
    if splits is None:
        splits = sorted((name for name in available if name != "train"), key=split_order)
    for name in splits:
        if name not in dataset_dict:
            raise ValueError(f"split {name!r} is not in the dataset; it has: {', '.join(available)}.")
    if not splits:
        raise ValueError(f"no split to evaluate; the dataset has only: {', '.join(available) or 'nothing'}.")
    return {name: evaluate_generation(model, tokenizer, dataset_dict[name], modes=modes, **kwargs) for name in splits}


def reportable_metrics(metrics: Mapping[str, float]) -> dict[str, float]:
    """``<split>/<mode>/...`` metrics without the speeds of modes whose answers are not right (see
    :data:`SPEED_MIN_FRACTION_OF_BEST`): a mode that answers wrongly can be fast, and its speed means nothing."""
    best: dict[str, float] = {}
    for key, value in metrics.items():
        if key.endswith("/answer_em"):
            split = key.rsplit("/", 2)[0]
            best[split] = max(best.get(split, 0.0), value)
    out = {}
    for key, value in metrics.items():
        if key.endswith(("/examples_per_s", "/tokens_per_s")):
            prefix = key.rsplit("/", 1)[0]
            split = prefix.rsplit("/", 1)[0]
            answer_em = metrics.get(f"{prefix}/answer_em", 0.0)
            if answer_em <= 0 or answer_em < SPEED_MIN_FRACTION_OF_BEST * best.get(split, 0.0):
                continue
        out[key] = value
    return out


def flatten_split_metrics(results: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """``{"test": {"implicit/answer_em": x}}`` -> ``{"test/implicit/answer_em": x}`` (for loggers and cards)."""
    return {f"{split}/{key}": value for split, metrics in results.items() for key, value in metrics.items()}


# ---------------------------------------------------------------------------------------------------------------
# Teacher-forced metrics for Trainer


def preprocess_logits_for_metrics(logits: torch.Tensor | tuple, labels: torch.Tensor) -> torch.Tensor:
    """Keep only the argmax ids of the logits, so evaluation stores (B, L) ids instead of (B, L, vocab) floats."""
    if isinstance(logits, tuple):
        logits = logits[0]
    return logits.argmax(dim=-1)


def make_compute_metrics(tokenizer: Any) -> Callable[[Any], dict[str, float]]:
    """A ``compute_metrics`` for ``Trainer`` on teacher-forced hf_icot sequences.

    The returned function takes an ``EvalPrediction`` whose ``predictions`` are argmax ids (use
    :func:`preprocess_logits_for_metrics`) or logits, and whose ``label_ids`` are the collator's labels (-100 where
    no loss). The prediction at position t is for the token at t + 1. It returns:

    * ``answer_em``: fraction of examples whose answer tokens — those after the last ``####`` up to and including the
      closing ``<eos>`` — are all predicted right;
    * ``token_accuracy``: fraction of labelled tokens predicted right.

    The function raises ValueError when a labelled row holds no ``####`` (not an hf_icot sequence).
    """
    marker = encode_text(ANSWER_PREFIX, tokenizer)
    metric_holder: list[Any] = []

    def compute_metrics(eval_prediction: Any) -> dict[str, float]:
        predictions = eval_prediction.predictions
        if isinstance(predictions, tuple):
            predictions = predictions[0]
        predictions, labels = np.asarray(predictions), np.asarray(eval_prediction.label_ids)
        if predictions.ndim == 3:
            predictions = predictions.argmax(-1)
        predicted, target = predictions[:, :-1], labels[:, 1:]  # (B, L-1): prediction t is for token t + 1
        labelled = target != -100
        token_accuracy = float((predicted == target)[labelled].mean()) if labelled.any() else 0.0

        answer_predictions, answer_references = [], []
        for row in range(target.shape[0]):
            where = np.flatnonzero(labelled[row])
            if len(where) == 0:
                continue
            row_target = target[row, : where[-1] + 1].tolist()
            start = _answer_start(row_target, marker)
            if start is None:
                raise ValueError(
                    f"evaluation row {row} has no '{ANSWER_PREFIX}' among its labels; compute_metrics expects "
                    "sequences encoded by hf_icot.collator."
                )
            answer_references.append(" ".join(map(str, row_target[start:])))
            answer_predictions.append(" ".join(map(str, predicted[row, start : len(row_target)].tolist())))
        if not metric_holder:
            metric_holder.append(load_exact_match())
        answer_em = (
            metric_holder[0].compute(predictions=answer_predictions, references=answer_references)["exact_match"]
            if answer_references
            else 0.0
        )
        return {"answer_em": answer_em, "token_accuracy": token_accuracy}

    return compute_metrics


def _answer_start(tokens: list[int], marker: list[int]) -> int | None:
    """Index just after the last occurrence of ``marker`` in ``tokens``, or None."""
    for start in range(len(tokens) - len(marker), -1, -1):
        if tokens[start : start + len(marker)] == marker:
            return start + len(marker)
    return None
