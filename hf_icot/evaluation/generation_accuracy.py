"""Generation accuracy, the one way to evaluate an ICoT model: greedy generation in each mode, exact match of answers
and CoTs per split, inference speed.

:func:`evaluate_generation` is the entry point; :meth:`hf_icot.training.trainer.ICoTTrainer.evaluate_generation` calls
it with a run's settings, and :class:`hf_icot.training.generation_eval.GenerationEvalCallback` calls that during
training.

A model sequence is ``question <eos> [hint] cot <eos> #### answer <eos>`` (see :mod:`hf_icot.data.encoding`). Each
*mode* asks the model a question in one of the ways it was trained for:

* ``"explicit"`` — prompt ``question <eos>``; the model writes ``cot <eos> #### answer <eos>``;
* ``"implicit"`` — prompt ``question <eos> <eos>`` (an empty CoT); the model writes ``#### answer <eos>``;
* ``"hint=k"`` — prompt ``question <eos> <len_k>`` for mixture models; the model writes k CoT units (the last k of
  the CoT when the mixture removed from the left, its default; the first k with ``removal_side="right"``), then
  ``<eos> #### answer <eos>``;
* ``"latent"`` / ``"latent=k"`` — continuous-thought models (Coconut, CODI, PCCoT): prompt ``question <eos>
  <|start-latent|> <|latent|>×n <|end-latent|>`` (n from the run's layout, or k), each slot fed the hidden state
  before it, one pass per slot or by the layout's ``latent_iterations`` Jacobi passes over all of them
  (:mod:`hf_icot.methods.generation`); the model writes what CoT is left, ``<eos> #### answer <eos>``. In
  the layout's ``coconut`` or ``codi`` format the prompt, where the continuation ends and how its answer is read are
  that method's (:mod:`hf_icot.data.latent_formats`).
  ``latent/forward_passes`` is the mean number of decoder passes an answer took (its thoughts and its tokens);
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
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

import torch

from hf_icot.cot import ANSWER_PREFIX
from hf_icot.curriculum.layout import LATENT_TOKEN, SequenceLayout
from hf_icot.data.encoding import reference_answer, split_generation
from hf_icot.data.latent_formats import LatentFormat
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
    scores_cot,
)

#: A mode's speed is reported (card, ``eval_results.json``) only when its answers are right: its answer exact match on
#: the split is above 0 and at least this fraction of the split's best mode's, so speeds compare modes that work.
SPEED_MIN_FRACTION_OF_BEST = 0.5


def generate_in_mode(
    model: torch.nn.Module,
    tokenizer: Any,
    mode: str,
    cases: Sequence[GenerationCase],
    max_new_tokens: int,
    batch_size: int,
    synced_gpus: bool | None = None,
    layout: SequenceLayout | None = None,
) -> list[list[int]]:
    """The continuations of ``cases``, each one example asked in ``mode``: the one place a mode chooses how it
    generates.

    Token modes (implicit, explicit, reference, ``hint=k``) feed their prompts to ``model.generate``
    (:func:`~hf_icot.evaluation.generation.generate_batched`, with the kept positions of ``keep_position`` models). A
    mode whose model is fed something other than tokens (latent thoughts fed back as embeddings) adds a branch here on
    its prompt mode (:func:`parse_mode`) and returns, as these do, the generated token ids per case in order, ending
    at the ``<eos>`` that closes the answer; scoring is shared.

    Args:
        synced_gpus: keep every process stepping until all are done (FSDP, DeepSpeed ZeRO-3); None: ``generate``
            decides.
        layout: the run's layout; in latent mode its text format says where a continuation ends (default: ``hf_icot``)
            and how its slots are computed (``latent_iterations``).
    """
    prompts = [case.prompt for case in cases]
    if parse_mode(mode)[0] == "latent":
        iterations = layout.latent_iterations if layout is not None else None
        return _generate_latent(
            model, latent_format(tokenizer, layout), prompts, max_new_tokens, batch_size, iterations
        )
    shifts = None if cases[0].position_shift is None else [case.position_shift for case in cases]
    sync = {} if synced_gpus is None else {"synced_gpus": synced_gpus}
    if any(case.empty_cot_shift for case in cases):
        empty = [case.empty_cot_shift or 0 for case in cases]
        return generate_with_empty_cot_shifts(
            model, tokenizer, prompts, max_new_tokens, empty, batch_size, shifts, **sync
        )
    return generate_batched(model, tokenizer, prompts, max_new_tokens, batch_size, position_shifts=shifts, **sync)


def latent_format(tokenizer: Any, layout: SequenceLayout | None) -> LatentFormat:
    """The text format latent mode asks and reads in: the layout's (``hf_icot`` for a layout without latent
    thoughts)."""
    return LatentFormat.of(tokenizer, layout) if layout is not None and layout.latent else LatentFormat(tokenizer)


def _generate_latent(
    model: torch.nn.Module,
    fmt: LatentFormat,
    prompts: list[list[int]],
    max_new_tokens: int,
    batch_size: int,
    iterations: int | None = None,
) -> list[list[int]]:
    """Latent prompts through :func:`hf_icot.methods.generation.generate_latent` (latent passes, then greedy decoding
    from the KV cache), each continuation ending where its format closes the answer."""
    from hf_icot.data.encoding import token_id
    from hf_icot.methods.generation import generate_latent

    tokenizer = fmt.tokenizer
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else fmt.eos
    latent = token_id(tokenizer, LATENT_TOKEN)
    return generate_latent(
        model,
        prompts,
        latent,
        fmt.eos,
        pad,
        max_new_tokens,
        batch_size,
        eos_to_write=fmt.eos_to_write,
        never_generated=fmt.never_generated,
        iterations=iterations,
    )


def _shared_between_processes(
    cases: Sequence[GenerationCase],
    accelerator: Any,
    generate: Callable[..., list[list[int]]],
) -> list[list[int]]:
    """``generate(cases)`` of every case in order; with several processes, each generates its share (with
    ``synced_gpus=True`` when the model is sharded, so all step together) and all get every generation (see
    :func:`evaluate_generation`)."""
    if accelerator is None or accelerator.num_processes == 1:
        return generate(list(cases))
    from accelerate.utils import DistributedType, gather_object

    sharded = accelerator.distributed_type in (DistributedType.FSDP, DistributedType.DEEPSPEED)
    with accelerator.split_between_processes(list(range(len(cases))), apply_padding=True) as mine:
        mine = list(mine)
        generated = generate([cases[i] for i in mine], synced_gpus=sharded)
    by_index = dict(gather_object(list(zip(mine, generated))))
    return [by_index[i] for i in range(len(cases))]


def evaluate_generation(
    model: torch.nn.Module,
    tokenizer: Any,
    dataset: Sequence[Mapping[str, Any]] | Mapping[str, Sequence[Mapping[str, Any]]],
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
        dataset: examples of the shared schema (``question``, ``cot``, ``answer``): a ``datasets.Dataset`` or a list;
            or a mapping of split name -> examples (a ``DatasetDict``): then every split but ``train`` is evaluated,
            each with its own default ``max_new_tokens`` (OOD splits may have longer CoTs).
        modes: ``"implicit"``, ``"explicit"``, ``"reference"`` and/or ``"hint=k"`` (see the module docstring;
            :func:`hf_icot.evaluation.prompts.parse_mode` reads the names).
        batch_size: prompts per forward pass.
        max_new_tokens: cap on generated tokens; by default the longest gold continuation per mode plus a quarter
            (:func:`hf_icot.evaluation.prompts.default_max_new_tokens`).
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
        ``f"{mode}/cot_em"`` where the model writes a CoT (:func:`hf_icot.evaluation.prompts.scores_cot`; reference
        mode scores answers only, as the reference does). Speeds count generation only. For a mapping of splits the
        keys are ``f"{split}/{mode}/..."``. With ``return_predictions``, the tuple ``(metrics, predictions)``, the
        predictions keyed as the metrics are without their last part (``mode``, or ``split/mode``).

    Raises:
        ValueError: an empty dataset or one without the schema's columns, a mapping with no split but ``train``, an
            unknown mode, or a bad ``max_new_tokens``/``batch_size``.
    """
    settings = {
        "modes": modes,
        "batch_size": batch_size,
        "max_new_tokens": max_new_tokens,
        "hint_lengths": hint_lengths,
        "layout": layout,
        "accelerator": accelerator,
    }
    if not isinstance(dataset, Mapping):
        metrics, predictions = _evaluate_split(model, tokenizer, dataset, return_predictions, **settings)
        return (metrics, predictions) if return_predictions else metrics
    splits = sorted((name for name in dataset if name != "train"), key=split_order)
    if not splits:
        raise ValueError(f"no split to evaluate; the dataset has only: {', '.join(dataset) or 'nothing'}.")
    metrics, predictions = {}, {}
    for name in splits:
        split_metrics, split_predictions = _evaluate_split(
            model, tokenizer, dataset[name], return_predictions, **settings
        )
        metrics.update({f"{name}/{key}": value for key, value in split_metrics.items()})
        predictions.update({f"{name}/{key}": value for key, value in split_predictions.items()})
    return (metrics, predictions) if return_predictions else metrics


def _evaluate_split(
    model: torch.nn.Module,
    tokenizer: Any,
    dataset: Sequence[Mapping[str, Any]],
    return_predictions: bool,
    modes: Sequence[str],
    batch_size: int,
    max_new_tokens: int | None,
    hint_lengths: Sequence[int] | None,
    layout: SequenceLayout | None,
    accelerator: Any,
) -> tuple[dict[str, float], dict[str, list[dict[str, Any]]]]:
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
        prompt_mode, _ = parse_mode(mode)
        cases = [plan_generation(example, tokenizer, mode, layout) for example in examples]
        limit = max_new_tokens if max_new_tokens is not None else max_new_tokens_for(cases)
        start = time.perf_counter()
        generate = partial(
            generate_in_mode, model, tokenizer, mode, max_new_tokens=limit, batch_size=batch_size, layout=layout
        )
        continuations = _shared_between_processes(cases, accelerator, generate)
        seconds = max(time.perf_counter() - start, 1e-9)

        gold_answers = [ex["answer"] for ex in examples]
        if prompt_mode == "latent":  # the CoT left to write and the answer, as the run's latent format writes them
            fmt = latent_format(tokenizer, layout)
            parsed = [fmt.read(ids) for ids in continuations]
            gold_answers = [fmt.gold_answer(answer) for answer in gold_answers]
        else:
            parsed = [split_generation(ids, tokenizer, prompt_mode) for ids in continuations]
        predicted_answers = [answer for _, answer in parsed]
        if mode == REFERENCE_MODE:
            predicted_answers = [
                reference_answer(tokenizer.decode(ids, skip_special_tokens=True)) for ids in continuations
            ]
            gold_answers = [reference_answer(f"{ANSWER_PREFIX} {answer}") for answer in gold_answers]
        answers = metric.compute(predictions=predicted_answers, references=gold_answers, return_matches=True)
        metrics[f"{mode}/answer_em"] = answers["exact_match"]
        cot_matches = None
        if scores_cot(mode):
            gold_cots = [case.gold_cot for case in cases]
            cots = metric.compute(predictions=[cot for cot, _ in parsed], references=gold_cots, return_matches=True)
            metrics[f"{mode}/cot_em"] = cots["exact_match"]
            cot_matches = cots["matches"]
        metrics[f"{mode}/examples_per_s"] = len(examples) / seconds
        metrics[f"{mode}/tokens_per_s"] = sum(len(ids) for ids in continuations) / seconds
        if prompt_mode == "latent":  # a latent thought (or a Jacobi iteration) costs a decoder pass, as a token does
            latent = tokenizer.convert_tokens_to_ids(LATENT_TOKEN)
            asked = layout or SequenceLayout()
            passes = [
                asked.latent_passes(case.prompt.count(latent)) + len(ids) for case, ids in zip(cases, continuations)
            ]
            metrics[f"{mode}/forward_passes"] = sum(passes) / len(passes)
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
    return metrics, predictions


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


def accuracy_line(metrics: Mapping[str, float]) -> str:
    """The answer exact match of every split and mode in one line, as a recipe prints it at its end:
    ``{"test/implicit/answer_em": 1.0, ...}`` -> ``"answer exact match: test implicit 1.000, explicit 1.000"``, splits
    joined by ``" | "`` in the order of ``metrics``.

    Raises:
        ValueError: no ``<split>/<mode>/answer_em`` key in ``metrics``.
    """
    by_split: dict[str, list[str]] = {}
    for key, value in metrics.items():
        parts = key.split("/")
        if len(parts) == 3 and parts[2] == "answer_em":
            by_split.setdefault(parts[0], []).append(f"{parts[1]} {value:.3f}")
    if not by_split:
        raise ValueError("accuracy_line needs '<split>/<mode>/answer_em' metrics: evaluate_generation's for splits.")
    return "answer exact match: " + " | ".join(f"{split} {', '.join(modes)}" for split, modes in by_split.items())
