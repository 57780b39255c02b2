"""Logits only where a label is. A causal LM's training loss reads the output layer only at the positions whose *next*
token carries a label — in an ICoT sequence the CoT and the answer, not the question or the padding — yet a plain
forward computes ``(B, T, V)`` logits; with a 50,257-token vocabulary on a small model the output layer is most of
the matmul work, and with a 128 k vocabulary its logits are most of the step's memory.

:func:`predicting_positions` marks those positions, and :func:`labelled_logits` runs the model so that it computes
the ``(N, V)`` logits there only (row-major over the mask), in one of two ways (:data:`STRATEGIES`):

* ``logits_to_keep`` — the model's own argument, given the ``(B, T)`` boolean mask: transformers' causal LMs slice
  their last hidden states with it before the output layer (``slice_logits_to_keep``);
* ``output_layer`` — for a model without that argument: a forward pre-hook on its output layer
  (``get_output_embeddings()``) gathers the hidden states at the masked positions before the layer applies. The model
  is still called whole, so the DDP, FSDP and PEFT wrappers see an ordinary forward.

:func:`causal_lm_loss` is transformers' causal-LM loss (``ForCausalLMLoss``: float32 cross entropy, a mean, or a sum
over ``num_items_in_batch``) on those logits. Neither way is exact for every model (one may ignore the argument, apply
its output layer twice, or compute another loss), so :func:`exact_strategies` checks them on a real batch against the
model's own full forward.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

import torch

from hf_icot.data.encoding import IGNORE_INDEX

#: The ways to compute logits at the labelled positions only, in the order they are preferred.
STRATEGIES = ("logits_to_keep", "output_layer")


def predicting_positions(labels: torch.Tensor) -> torch.Tensor:
    """``(B, T)`` bool: the positions whose next token is labelled (the last position predicts nothing)."""
    positions = torch.zeros_like(labels, dtype=torch.bool)
    positions[:, :-1] = labels[:, 1:] != IGNORE_INDEX
    return positions


def labelled_targets(labels: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """``(N,)``: the token each of the ``positions`` predicts, in the row-major order of the logits."""
    return labels[:, 1:][positions[:, :-1]]


@contextlib.contextmanager
def _gathered_output_layer(output_layer: torch.nn.Module, positions: torch.Tensor) -> Iterator[None]:
    def gather(module: torch.nn.Module, args: tuple) -> tuple:
        hidden = args[0]  # (B, T, H)
        if hidden.shape[:2] != positions.shape:
            raise ValueError(f"the output layer got hidden states {tuple(hidden.shape)}, not (B, T, H)")
        return (hidden[positions.to(hidden.device)], *args[1:])  # (N, H)

    handle = output_layer.register_forward_pre_hook(gather)
    try:
        yield
    finally:
        handle.remove()


def labelled_logits(
    model: Any,
    inputs: Mapping[str, Any],
    positions: torch.Tensor,
    strategy: str,
    output_layer: torch.nn.Module | None = None,
) -> Any:
    """``model(**inputs)`` with logits ``(N, V)`` at the ``positions`` only (``inputs`` without ``labels``).

    Args:
        model: the causal LM as the caller runs it (possibly wrapped by DDP, FSDP or PEFT).
        positions: :func:`predicting_positions` of the batch's labels.
        strategy: one of :data:`STRATEGIES`.
        output_layer: the model's output layer, for ``"output_layer"``.

    Raises:
        ValueError: an unknown strategy, or ``"output_layer"`` without the layer.
    """
    if strategy == "logits_to_keep":
        return model(**inputs, logits_to_keep=positions.to(inputs["input_ids"].device))
    if strategy == "output_layer":
        if output_layer is None:
            raise ValueError("the output_layer strategy needs the model's output layer (get_output_embeddings()).")
        with _gathered_output_layer(output_layer, positions):
            return model(**inputs)
    raise ValueError(f"strategy {strategy!r} is unknown; choose one of {', '.join(STRATEGIES)}.")


def causal_lm_loss(
    logits: torch.Tensor,
    labels: torch.Tensor,
    positions: torch.Tensor,
    num_items_in_batch: torch.Tensor | int | None = None,
) -> torch.Tensor:
    """The causal-LM cross entropy of the ``(N, V)`` logits at ``positions``: their mean, or with
    ``num_items_in_batch`` their sum divided by it (gradient accumulation's scaling), as transformers computes it.
    Logits below float32 are raised to it; float64 logits stay float64."""
    targets = labelled_targets(labels, positions).to(logits.device)
    logits = logits.to(torch.promote_types(logits.dtype, torch.float32))
    if num_items_in_batch is None:
        return torch.nn.functional.cross_entropy(logits, targets)
    loss = torch.nn.functional.cross_entropy(logits, targets, reduction="sum")
    if torch.is_tensor(num_items_in_batch):
        num_items_in_batch = num_items_in_batch.to(loss.device)
    return loss / num_items_in_batch


@contextlib.contextmanager
def first_rows_in_evaluation(model: Any, inputs: Mapping[str, Any], rows: int) -> Iterator[dict[str, Any]]:
    """The first ``rows`` rows of a batch (every tensor whose first dimension is the batch's), with ``model`` in
    evaluation mode (no dropout) until the block ends, then back in the mode it was in: where the checks of a way to
    compute the loss run it beside the model's own forward, whose full logits stay small on a few rows."""
    batch_size = inputs["input_ids"].shape[0]
    was_training = model.training
    model.eval()
    try:
        yield {
            name: value[:rows] if torch.is_tensor(value) and value.dim() and value.shape[0] == batch_size else value
            for name, value in inputs.items()
        }
    finally:
        model.train(was_training)


@torch.no_grad()
def exact_strategies(
    model: Any, inputs: Mapping[str, Any], output_layer: torch.nn.Module | None = None, rows: int = 2
) -> dict[str, bool]:
    """Which :data:`STRATEGIES` give, on the first ``rows`` rows of this batch (``inputs`` with ``labels``; a few rows
    keep the full logits computed for the check small), the logits and the loss of the model's own full forward (to
    float rounding), in evaluation mode (no dropout; the mode is restored after).

    Every strategy is tried whatever the others give (one forward each), so processes that check their own batches
    run the same forwards."""
    with first_rows_in_evaluation(model, inputs, rows) as inputs:
        labels = inputs["labels"]
        forward_inputs = {name: value for name, value in inputs.items() if name != "labels"}
        positions = predicting_positions(labels)
        full = model(**inputs)
        logits, loss = full.get("logits"), full.get("loss")
        expected = logits[positions.to(logits.device)] if logits is not None and logits.dim() == 3 else None
        del full, logits
        verdicts = {}
        for strategy in STRATEGIES:
            try:
                ours = labelled_logits(model, forward_inputs, positions, strategy, output_layer)["logits"]
            except Exception:  # noqa: BLE001  (a model that cannot be split this way: any error says so)
                verdicts[strategy] = False
                continue
            verdicts[strategy] = bool(
                expected is not None
                and loss is not None
                and ours.shape == expected.shape
                and torch.allclose(ours.float(), expected.float(), rtol=1e-4, atol=1e-5)
                and torch.allclose(
                    causal_lm_loss(ours.float(), labels, positions), loss.float(), 1e-5, 1e-6, equal_nan=True
                )
            )
            del ours
        return verdicts
