"""Evaluate ICoT models: greedy generation, exact match of answers and CoTs per split, inference speed.

A model sequence is ``question <eos> [hint] cot <eos> #### answer <eos>`` (see :mod:`hf_icot.data.encoding`). Each
*mode* asks the model a question in one of the ways it was trained for:

* ``"explicit"`` — prompt ``question <eos>``; the model writes ``cot <eos> #### answer <eos>``;
* ``"implicit"`` — prompt ``question <eos> <eos>`` (an empty CoT); the model writes ``#### answer <eos>``;
* ``"hint=k"`` — prompt ``question <eos> <len_k>`` for mixture models; the model writes k CoT units (the last k of
  the CoT when the mixture removed from the left, its default; the first k with ``removal_side="right"``), then
  ``<eos> #### answer <eos>``;
* ``"reference"`` — the stepwise reference's protocol: the explicit prompt, free generation, and exact match of the
  ``#### answer`` read from the decoded continuation with commas removed
  (:func:`hf_icot.data.encoding.reference_answer`).

Explicit and reference mode let the model write as much CoT as it wants. Under ``keep_position`` a model that writes
none (its first token is ``<eos>``) has that ``<eos>`` and what follows placed where they stood with the full CoT,
as in training once the CoT was gone; in the reference format, whose positions shift from the prompt's ``<eos>`` on,
reference mode instead places the prompt's ``<eos>`` there, as the reference asks a model with its CoT removed.

In every mode the answer is closed by the third ``<eos>`` of the sequence, so generation of a row stops once its
prompt plus continuation hold three; a batch ends when all its rows have stopped
(:mod:`hf_icot.evaluation.generation`).

Teacher-forced metrics for ``Trainer(compute_metrics=...)`` come from
:func:`hf_icot.evaluation.teacher_forced.make_compute_metrics`. Every exact match here is computed by the metric
shipped in :mod:`hf_icot.evaluation.metrics`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from hf_icot.cot import ANSWER_PREFIX
from hf_icot.curriculum.layout import SequenceLayout
from hf_icot.data.encoding import reference_answer, split_generation
from hf_icot.data.loading import split_order
from hf_icot.evaluation.generation import generate_batched, generate_with_empty_cot_shifts
from hf_icot.evaluation.metrics import load_exact_match
from hf_icot.evaluation.prompts import (
    BASE_MODES,
    REFERENCE_MODE,
    GenerationCase,
    expand_modes,
    max_new_tokens_for,
    parse_mode,
    plan_generation,
)

#: A mode's speed is reported (card, ``eval_results.json``) only when its answers are right: its answer exact match on
#: the split is above 0 and at least this fraction of the split's best mode's, so speeds compare modes that work.
SPEED_MIN_FRACTION_OF_BEST = 0.5


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
    for mode in expand_modes(modes, hint_lengths):
        base, _ = parse_mode(mode)
        cases = [plan_generation(example, tokenizer, mode, layout) for example in examples]
        limit = max_new_tokens if max_new_tokens is not None else max_new_tokens_for(cases)
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


def evaluate_generation_splits(
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
        raise ValueError(
            "evaluate_generation_splits returns metrics only; call evaluate_generation per split for predictions."
        )
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
