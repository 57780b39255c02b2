"""Evaluate ICoT models: greedy generation, exact match of answers and CoTs per split, inference speed.

A model sequence is ``question <eos> [hint] cot <eos> #### answer <eos>`` (see :mod:`hf_icot.collator`). Each
*mode* asks the model a question in one of the ways it was trained for:

* ``"explicit"`` — prompt ``question <eos>``; the model writes ``cot <eos> #### answer <eos>``;
* ``"implicit"`` — prompt ``question <eos> <eos>`` (an empty CoT); the model writes ``#### answer <eos>``;
* ``"hint=k"`` — prompt ``question <eos> <len_k>`` for mixture models; the model writes k CoT units (the last k of
  the CoT when the mixture removed from the left, its default; the first k with ``removal_side="right"``), then
  ``<eos> #### answer <eos>``.

In every mode the answer is closed by the third ``<eos>`` of the sequence, so generation of a row stops once its
prompt plus continuation hold three; a batch ends when all its rows have stopped (:mod:`hf_icot.generation`).

Teacher-forced metrics for ``Trainer(compute_metrics=...)`` come from :func:`make_compute_metrics`. Every exact match
here is computed by the metric shipped in :mod:`hf_icot.metrics`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from hf_icot.collator import encode_prompt, encode_text, split_generation
from hf_icot.cot import ANSWER_PREFIX, TruncationSpec, cot_token_count, truncate, truncate_example
from hf_icot.generation import generate_batched
from hf_icot.metrics import load_exact_match

BASE_MODES = ("implicit", "explicit")


# ---------------------------------------------------------------------------------------------------------------
# Modes


def parse_mode(mode: str) -> tuple[str, int | None]:
    """Split a mode name into its prompt mode and hint: ``"explicit"`` -> ``("explicit", None)``,
    ``"hint=3"`` -> ``("hint", 3)``.

    Raises:
        ValueError: any other name.
    """
    if mode in BASE_MODES:
        return mode, None
    if mode.startswith("hint=") and mode[len("hint=") :].isdigit():
        return "hint", int(mode[len("hint=") :])
    raise ValueError(f"evaluation mode {mode!r} is unknown; allowed: 'implicit', 'explicit' or 'hint=k' with k >= 0.")


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
# Exact match of generations


def _hint_spec(
    example: Mapping[str, Any], tokenizer: Any, hint: int, hint_unit: str, removal_side: str = "left"
) -> TruncationSpec:
    """What a mixture model keeps under a hint of ``hint`` units: a saturated removal of ``total - hint`` units from
    ``removal_side`` (the mixture's ``side``: "left" keeps the last units, those nearest the answer)."""
    total = cot_token_count(example, tokenizer) if hint_unit == "token" else len(example["cot"])
    return TruncationSpec(unit=hint_unit, which=removal_side, count=max(total - hint, 0), saturate=True)


def gold_cot_text(
    example: Mapping[str, Any],
    tokenizer: Any,
    hint: int | None = None,
    hint_unit: str = "token",
    removal_side: str = "left",
) -> str:
    """The CoT a model should write for ``example``: all steps joined by spaces, or under a hint of ``k`` units
    (tokens or steps) the ``k`` that a removal from ``removal_side`` keeps (the last ones for "left"), as
    :func:`hf_icot.cot.truncate` keeps them."""
    if hint is None:
        return " ".join(example["cot"])
    spec = _hint_spec(example, tokenizer, hint, hint_unit, removal_side)
    return " ".join(truncate_example(example, spec, tokenizer)["cot"])


def gold_continuation_length(
    example: Mapping[str, Any], tokenizer: Any, mode: str, hint_unit: str = "token", removal_side: str = "left"
) -> int:
    """Tokens a model should generate for ``example`` in ``mode``: the CoT tokens (none in implicit mode, those of
    the ``k`` units kept under ``hint=k``), then ``<eos> #### answer <eos>`` (``#### answer <eos>`` in implicit
    mode)."""
    base, hint = parse_mode(mode)
    answer = len(encode_text(f"{ANSWER_PREFIX} {example['answer']}", tokenizer)) + 1
    if base == "implicit":
        return answer
    if hint is None:
        return cot_token_count(example, tokenizer) + 1 + answer
    return (
        truncate(example, _hint_spec(example, tokenizer, hint, hint_unit, removal_side), tokenizer).kept + 1 + answer
    )


def _removed_position_shift(
    example: Mapping[str, Any],
    prompt: Sequence[int],
    tokenizer: Any,
    hint: int | None,
    hint_unit: str,
    removal_side: str,
) -> tuple[int, int]:
    """``(start, shift)`` for :func:`generate_batched` under keep_position: an implicit prompt's closing ``<eos>``
    sits where the full CoT ended; after a hint, the tokens that follow the removed ones (the first kept CoT token
    for a left removal, the ``<eos>`` closing the kept CoT for a right one) sit where they stood with the full CoT."""
    total = cot_token_count(example, tokenizer)
    if hint is None:
        return len(prompt) - 1, total
    kept = len(truncate(example, _hint_spec(example, tokenizer, hint, hint_unit, removal_side), tokenizer).tokens)
    return len(prompt) + (kept if removal_side == "right" else 0), total - kept


def default_max_new_tokens(
    dataset: Sequence[Mapping[str, Any]],
    tokenizer: Any,
    mode: str,
    hint_unit: str = "token",
    removal_side: str = "left",
) -> int:
    """The longest gold continuation of ``dataset`` in ``mode``, plus a quarter (at least 8 tokens) of slack so that a
    model writing a slightly longer CoT can still reach its answer."""
    longest = max(gold_continuation_length(example, tokenizer, mode, hint_unit, removal_side) for example in dataset)
    return longest + max(8, longest // 4)


def evaluate_generation(
    model: torch.nn.Module,
    tokenizer: Any,
    dataset: Sequence[Mapping[str, Any]],
    modes: Sequence[str] = BASE_MODES,
    batch_size: int = 64,
    max_new_tokens: int | None = None,
    hint_lengths: Sequence[int] | None = None,
    hint_unit: str = "token",
    return_predictions: bool = False,
    keep_position: bool = False,
    removal_side: str = "left",
) -> dict[str, float] | tuple[dict[str, float], dict[str, list[dict[str, Any]]]]:
    """Generate greedily in each mode and score the answers (and CoTs) by exact match.

    Args:
        model: a causal LM trained on hf_icot sequences (possibly PEFT-wrapped, on any device).
        tokenizer: the model's tokenizer.
        dataset: examples of the shared schema (``question``, ``cot``, ``answer``): a ``datasets.Dataset`` or a list.
        modes: ``"implicit"``, ``"explicit"`` and/or ``"hint=k"`` (see the module docstring).
        batch_size: prompts per forward pass.
        max_new_tokens: cap on generated tokens; by default :func:`default_max_new_tokens` per mode.
        hint_lengths: adds a mode ``"hint=k"`` for each ``k``.
        hint_unit: what a hint counts, ``"token"`` or ``"step"`` (as the mixture model was trained).
        return_predictions: also return, per mode, one record per example (question, generated and gold CoT and
            answer, whether each matched).
        keep_position: the model was trained with ``fill="keep_position"``: what follows a removed CoT keeps the
            positions it had with the full CoT, so implicit and hint prompts are shifted by the number of CoT tokens
            removed, i.e. the length of the example's gold CoT (fixed by the question size in the generated tasks;
            for free-text tasks such as GSM8K this uses the gold length, which a deployed model would not know).
        removal_side: the side the mixture removed CoT units from (its ``side``): under ``hint=k`` the model writes
            the last ``k`` units after a "left" removal, the first ``k`` after a "right" one.

    Returns:
        ``{f"{mode}/answer_em", f"{mode}/examples_per_s", f"{mode}/tokens_per_s"}`` for every mode, plus
        ``f"{mode}/cot_em"`` for explicit and hint modes (gold CoT: :func:`gold_cot_text`). Speeds count generation
        only. With ``return_predictions``, the tuple ``(metrics, predictions_by_mode)``.

    Raises:
        ValueError: an empty dataset or one without the schema's columns, an unknown mode or hint unit, or a bad
            ``max_new_tokens``/``batch_size``.
    """
    examples = list(dataset)
    if not examples:
        raise ValueError("evaluate_generation got an empty dataset; pass at least one example.")
    if hint_unit not in ("token", "step"):
        raise ValueError(f"hint_unit {hint_unit!r} is unknown; allowed: 'token', 'step'.")
    if removal_side not in ("left", "right"):
        raise ValueError(f"removal_side {removal_side!r} is unknown; allowed: 'left', 'right'.")
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
        base, hint = parse_mode(mode)
        prompts = [encode_prompt(ex["question"], tokenizer, mode=base, hint=hint) for ex in examples]
        if max_new_tokens is None:
            limit = default_max_new_tokens(examples, tokenizer, mode, hint_unit, removal_side)
        else:
            limit = max_new_tokens
        shifts = None
        if keep_position and base != "explicit":
            shifts = [
                _removed_position_shift(ex, prompt, tokenizer, hint, hint_unit, removal_side)
                for ex, prompt in zip(examples, prompts)
            ]
        start = time.perf_counter()
        continuations = generate_batched(model, tokenizer, prompts, limit, batch_size, position_shifts=shifts)
        seconds = max(time.perf_counter() - start, 1e-9)

        parsed = [split_generation(ids, tokenizer, base) for ids in continuations]
        gold_answers = [ex["answer"] for ex in examples]
        answers = metric.compute(
            predictions=[answer for _, answer in parsed], references=gold_answers, return_matches=True
        )
        metrics[f"{mode}/answer_em"] = answers["exact_match"]
        cot_matches = None
        if base != "implicit":
            gold_cots = [gold_cot_text(ex, tokenizer, hint, hint_unit, removal_side) for ex in examples]
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


def _split_order(name: str) -> tuple[int, str]:
    rank = {"validation": 0, "test": 1}
    return rank.get(name, 2), name


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
        splits = sorted((name for name in available if name != "train"), key=_split_order)
    for name in splits:
        if name not in dataset_dict:
            raise ValueError(f"split {name!r} is not in the dataset; it has: {', '.join(available)}.")
    if not splits:
        raise ValueError(f"no split to evaluate; the dataset has only: {', '.join(available) or 'nothing'}.")
    return {name: evaluate_generation(model, tokenizer, dataset_dict[name], modes=modes, **kwargs) for name in splits}


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
