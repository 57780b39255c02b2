"""The output layer and the cross entropy in one pass over chunks of rows, never the whole ``(N, V)`` logits.

With logits only where a label is (:mod:`hf_icot.modeling.labelled_logits`) a GPT-2-vocabulary step still builds
``(N, V)`` float32 logits, their log-softmax, a zero-filled gradient of the same size and the log-softmax's gradient:
on the stepwise reference's 4x4 setting (N ~ 1,400 labelled positions, 50,257 tokens) four blocks of ~290 MB per
step, each written and read in full and, above glibc's mmap threshold, each faulted in afresh.
:func:`linear_cross_entropy` runs the output layer, the log-softmax and the loss on ``rows`` rows at a time (a block
of at most :data:`CHUNK_BYTES`, small enough for malloc to keep in its heap) and, in the same pass, the gradients of
the loss with respect to the hidden states, the weight and the bias (``softmax - one_hot`` times the layer's inputs);
backward only scales them by the incoming gradient. The matmuls are the same three as before; what goes is the
traffic of the big blocks.

The loss is the sum of the rows' cross entropies (accumulated in float64, cast to float32) divided by
``denominator``: the number of rows for a mean, or ``num_items_in_batch`` as transformers' ``ForCausalLMLoss``
scales a sum; it agrees with ``cross_entropy(linear(h, W, b).float(), targets)`` to float32 rounding and so do the
gradients (``tests/hf_icot/test_chunked_loss.py``). The logits are computed in the layer's dtype and the softmax in
float32, as transformers does; no autocast is applied inside.

:func:`hidden_states_at` runs a model with its output layer passed through (its forward returns its input), so the
model's "logits" are the hidden states the layer would read, at the positions
:func:`~hf_icot.modeling.labelled_logits.labelled_logits` selects; :func:`chunked_loss_is_exact` checks on two rows
of a real batch that the layer applied to them gives the model's own logits (a model that rescales or caps its logits
after the layer fails it and keeps the plain loss).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

import torch
import torch.nn.functional as F

from hf_icot.modeling.labelled_logits import (
    first_rows_in_evaluation,
    labelled_logits,
    labelled_targets,
    predicting_positions,
)

#: The largest float32 block of logits one chunk makes (below glibc's 32 MiB mmap ceiling, so it is reused).
CHUNK_BYTES = 24 << 20


def chunk_rows(vocab_size: int) -> int:
    """Rows per chunk for an output layer of ``vocab_size`` tokens: a block of at most :data:`CHUNK_BYTES`."""
    return max(1, CHUNK_BYTES // (4 * vocab_size))


class _LinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, weight, bias, targets, denominator, rows):
        want_hidden, want_weight, want_bias = ctx.needs_input_grad[:3]
        grad_hidden = torch.empty_like(hidden) if want_hidden else None
        grad_weight = torch.zeros_like(weight, dtype=torch.float32) if want_weight else None
        grad_bias = torch.zeros_like(bias, dtype=torch.float32) if want_bias else None
        total = torch.zeros((), dtype=torch.float64, device=hidden.device)
        for start in range(0, hidden.shape[0], rows):
            chunk, chunk_targets = hidden[start : start + rows], targets[start : start + rows]
            log_probs = torch.log_softmax(F.linear(chunk, weight, bias).float(), dim=-1)
            total -= log_probs.gather(1, chunk_targets[:, None]).sum(dtype=torch.float64)
            if not (want_hidden or want_weight or want_bias):
                continue
            grad_logits = log_probs.exp_()  # d(sum of cross entropies)/d(logits) = softmax - one_hot
            grad_logits[torch.arange(len(chunk_targets), device=hidden.device), chunk_targets] -= 1
            grad_logits = grad_logits.to(hidden.dtype)
            if want_hidden:
                torch.mm(grad_logits, weight, out=grad_hidden[start : start + rows])
            if want_weight:
                grad_weight.addmm_(grad_logits.T.float(), chunk.float())
            if want_bias:
                grad_bias += grad_logits.float().sum(0)
        ctx.save_for_backward(grad_hidden, grad_weight, grad_bias)
        ctx.denominator, ctx.dtypes = denominator, (weight.dtype, None if bias is None else bias.dtype)
        return total.float() / denominator

    @staticmethod
    def backward(ctx, grad_output):
        grad_hidden, grad_weight, grad_bias = ctx.saved_tensors
        scale = grad_output / ctx.denominator
        weight_dtype, bias_dtype = ctx.dtypes
        return (
            None if grad_hidden is None else grad_hidden * scale.to(grad_hidden.dtype),
            None if grad_weight is None else (grad_weight * scale).to(weight_dtype),
            None if grad_bias is None else (grad_bias * scale).to(bias_dtype),
            None,
            None,
            None,
        )


def linear_cross_entropy(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    bias: torch.Tensor | None = None,
    num_items_in_batch: torch.Tensor | int | None = None,
    rows: int | None = None,
) -> torch.Tensor:
    """``cross_entropy(linear(hidden, weight, bias).float(), targets)`` for ``(N, H)`` hidden states and ``(N,)``
    targets (every one a token id: no ignored positions), computed ``rows`` at a time (default
    :func:`chunk_rows`): the mean over the rows, or with ``num_items_in_batch`` their sum divided by it.

    Raises:
        ValueError: hidden states that are not ``(N, H)``, or targets that are not ``(N,)``.
    """
    if hidden.dim() != 2 or targets.shape != hidden.shape[:1]:
        raise ValueError(
            f"linear_cross_entropy takes (N, H) hidden states and (N,) targets, got {tuple(hidden.shape)} and "
            f"{tuple(targets.shape)}."
        )
    denominator = hidden.shape[0] if num_items_in_batch is None else num_items_in_batch
    if torch.is_tensor(denominator):
        denominator = denominator.to(hidden.device)
    return _LinearCrossEntropy.apply(
        hidden, weight, bias, targets.to(hidden.device), denominator, rows or chunk_rows(weight.shape[0])
    )


@contextlib.contextmanager
def _passed_through(output_layer: torch.nn.Module) -> Iterator[None]:
    own = output_layer.__dict__.get("forward")  # a hook library's patched forward, if any, comes back after
    output_layer.forward = lambda hidden, *args, **kwargs: hidden
    try:
        yield
    finally:
        if own is None:
            del output_layer.forward
        else:
            output_layer.forward = own


def hidden_states_at(
    model: Any, inputs: Mapping[str, Any], positions: torch.Tensor, strategy: str, output_layer: torch.nn.Module
) -> torch.Tensor:
    """The ``(N, H)`` hidden states the output layer reads at ``positions`` (``model`` run with the layer passed
    through, by ``strategy`` of :func:`~hf_icot.modeling.labelled_logits.labelled_logits`)."""
    with _passed_through(output_layer):
        return labelled_logits(model, inputs, positions, strategy, output_layer)["logits"]


@torch.no_grad()
def chunked_loss_is_exact(
    model: Any, inputs: Mapping[str, Any], output_layer: torch.nn.Module, strategy: str, rows: int = 2
) -> bool:
    """Whether the output layer applied to :func:`hidden_states_at` gives, on the first ``rows`` rows of this batch
    (``inputs`` with ``labels``), the model's own logits and loss (to float rounding), in evaluation mode (restored
    after). Only a plain ``torch.nn.Linear`` output layer is tried."""
    if type(output_layer) is not torch.nn.Linear:
        return False
    with first_rows_in_evaluation(model, inputs, rows) as inputs:
        labels = inputs.pop("labels")
        positions = predicting_positions(labels)
        full = model(**inputs, labels=labels)
        if full.get("logits") is None or full.get("loss") is None or full["logits"].dim() != 3:
            return False
        expected = full["logits"][positions.to(full["logits"].device)]
        try:
            hidden = hidden_states_at(model, inputs, positions, strategy, output_layer)
        except Exception:  # noqa: BLE001  (a model this cannot run: any error says so)
            return False
        if hidden.dim() != 2 or hidden.shape[-1] != output_layer.in_features:
            return False
        ours = output_layer(hidden)
        loss = linear_cross_entropy(
            hidden, output_layer.weight, labelled_targets(labels, positions), output_layer.bias
        )
        return bool(
            ours.shape == expected.shape
            and torch.allclose(ours.float(), expected.float(), rtol=1e-4, atol=1e-5)
            and torch.allclose(loss, full["loss"].float(), 1e-5, 1e-6)
        )
