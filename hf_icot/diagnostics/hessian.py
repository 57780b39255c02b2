"""Extreme Hessian eigenvalues of the training loss, and its curvature along a direction, by Hessian-vector
products: the Hessian itself is never formed.

``H v`` is one double backward through the loss's gradient graph (built once per call); Lanczos
(``scipy.sparse.linalg.eigsh`` on a ``LinearOperator``) finds the ``k`` largest (``which="LA"``) and ``k`` smallest
(``which="SA"``) eigenvalues from a few dozen products. On a plateau the most negative eigenvalue says whether the
loss surface offers a descent direction (a saddle) and how steep; ``curvature_along(..., v) = vᵀHv / |v|²`` measures
it along a given direction, e.g. the parameter change between two checkpoints that leaves the plateau (the
"escape direction": ``{name: after[name] - before[name]}``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import NamedTuple

import numpy as np
import torch
from scipy.sparse.linalg import ArpackNoConvergence, LinearOperator, eigsh

from hf_icot.diagnostics.token_batches import as_rows, eager_attention, evaluation_mode, pad_right, require_columns


class HessianExtremes(NamedTuple):
    """The ``k`` largest eigenvalues (descending) and the ``k`` smallest (ascending); NaN where Lanczos did not
    converge."""

    top: np.ndarray
    bottom: np.ndarray


def hessian_vector_product(
    loss_fn: Callable[[], torch.Tensor], params: Sequence[torch.Tensor]
) -> tuple[Callable[[np.ndarray], np.ndarray], int]:
    """``(hvp, n)``: ``hvp(v)`` is ``H v`` (float64 numpy, length ``n`` = number of parameters) for the Hessian of
    ``loss_fn()`` in ``params`` at their current values. The gradient graph is built once, here."""
    params = list(params)
    loss = loss_fn()
    gradients = torch.autograd.grad(loss, params, create_graph=True, allow_unused=True)
    # Parameters the loss does not depend on, or depends on linearly, have zero Hessian rows.
    live = [i for i, g in enumerate(gradients) if g is not None and g.requires_grad]
    sizes = [p.numel() for p in params]
    offsets = np.cumsum([0, *sizes])

    def hvp(vector: np.ndarray) -> np.ndarray:
        vector = np.asarray(vector, dtype=np.float64).reshape(-1)
        result = np.zeros(offsets[-1], dtype=np.float64)
        if not live:
            return result
        pieces = [
            torch.as_tensor(
                vector[offsets[i] : offsets[i + 1]], dtype=params[i].dtype, device=params[i].device
            ).view_as(params[i])
            for i in live
        ]
        products = torch.autograd.grad(
            [gradients[i] for i in live], params, grad_outputs=pieces, retain_graph=True, allow_unused=True
        )
        for i, product in enumerate(products):
            if product is not None:
                result[offsets[i] : offsets[i + 1]] = product.detach().double().cpu().numpy().reshape(-1)
        return result

    return hvp, int(offsets[-1])


def extreme_eigenvalues(
    loss_fn: Callable[[], torch.Tensor],
    params: Sequence[torch.Tensor],
    k: int = 1,
    *,
    tol: float = 1e-6,
    maxiter: int | None = None,
    seed: int = 0,
) -> HessianExtremes:
    """The ``k`` largest and ``k`` smallest Hessian eigenvalues of ``loss_fn()`` in ``params``, by Lanczos.

    Args:
        loss_fn: recomputes the scalar loss from ``params`` (called once).
        k: eigenvalues at each end; ``1 <= k < n`` (number of parameters).
        tol: ARPACK's relative tolerance on the eigenvalues (0 = machine precision, which float32 products may
            never reach).
        maxiter: ARPACK restarts at most (default: scipy's, 10 n).
        seed: seeds Lanczos' starting vector, so repeated measurements are comparable.

    Raises:
        ValueError: ``k`` outside [1, n).
    """
    hvp, n = hessian_vector_product(loss_fn, params)
    if not 1 <= k < n:
        raise ValueError(f"k={k} is not allowed; Lanczos finds between 1 and n - 1 = {n - 1} eigenvalues per end.")
    operator = LinearOperator((n, n), matvec=hvp, dtype=np.float64)
    start = np.random.default_rng(seed).standard_normal(n)

    def largest(op: LinearOperator) -> np.ndarray:
        try:
            values = eigsh(op, k=k, which="LA", v0=start, tol=tol, maxiter=maxiter, return_eigenvectors=False)
        except ArpackNoConvergence as partial:  # keep what converged; a missing eigenvalue is NaN, not a crash
            values = np.concatenate([partial.eigenvalues, np.full(k - len(partial.eigenvalues), np.nan)])
        return np.sort(values)[::-1]

    top = largest(operator)
    # The bottom end as the top of (λ_max I − H): Lanczos finds a well-separated largest eigenvalue in a few dozen
    # products, while which="SA" among a Hessian's many near-zero eigenvalues can take thousands.
    shift = float(top[0]) if np.isfinite(top[0]) else 0.0
    shifted = LinearOperator((n, n), matvec=lambda v: shift * v - hvp(v), dtype=np.float64)
    bottom = np.sort(shift - largest(shifted))
    return HessianExtremes(top=top.copy(), bottom=bottom)


def curvature_along(
    loss_fn: Callable[[], torch.Tensor], params: Sequence[torch.Tensor], direction: Sequence[torch.Tensor]
) -> float:
    """``vᵀ H v / |v|²`` for the Hessian of ``loss_fn()`` in ``params``; ``direction`` has one tensor per parameter.

    Raises:
        ValueError: a direction of another length or shape than ``params``, or a zero direction.
    """
    params = list(params)
    if len(direction) != len(params) or any(d.shape != p.shape for d, p in zip(direction, params, strict=True)):
        raise ValueError("the direction needs one tensor per parameter, each of that parameter's shape.")
    vector = np.concatenate([d.detach().double().cpu().numpy().reshape(-1) for d in direction])
    norm2 = float(vector @ vector)
    if norm2 == 0.0:
        raise ValueError("the direction is zero; curvature is defined along a non-zero direction only.")
    hvp, _ = hessian_vector_product(loss_fn, params)
    return float(vector @ hvp(vector)) / norm2


def _trainable(model: torch.nn.Module) -> list[tuple[str, torch.nn.Parameter]]:
    return [(name, p) for name, p in model.named_parameters() if p.requires_grad]


def language_model_loss(
    model: torch.nn.Module, examples: Iterable[dict], pad_token_id: int
) -> Callable[[], torch.Tensor]:
    """The training loss of ``model`` on the examples as one fixed batch: mean cross-entropy over all labelled
    tokens, teacher-forced, ``labels[i]`` predicted at position ``i - 1``. It is computed here in the model's dtype
    (HF's own loss casts logits to float32, which would cap a float64 Hessian at float32 precision)."""
    rows = as_rows(examples)
    require_columns(rows, [], "hessian")
    ids, mask = pad_right([row["input_ids"] for row in rows], pad_token_id)
    labels, _ = pad_right([row["labels"] for row in rows], -100)
    device = next(model.parameters()).device
    ids, mask, targets = ids.to(device), mask.to(device), labels[:, 1:].to(device)

    def loss() -> torch.Tensor:
        logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1]  # (B, S - 1, V)
        return torch.nn.functional.cross_entropy(logits.transpose(1, 2), targets, ignore_index=-100)

    return loss


def hessian_extremes(
    model: torch.nn.Module,
    examples: Iterable[dict],
    *,
    pad_token_id: int,
    k: int = 1,
    tol: float = 1e-6,
    maxiter: int | None = None,
    seed: int = 0,
) -> HessianExtremes:
    """The ``k`` largest and smallest Hessian eigenvalues of the training loss (see :func:`language_model_loss`) in
    all trainable parameters, on the examples as one batch; dropout off, eager attention (double backward through
    the fused kernels is not supported everywhere). See :func:`extreme_eigenvalues` for the arguments.

    Raises:
        ValueError: malformed examples, or ``k`` outside [1, n).
    """
    loss_fn = language_model_loss(model, examples, pad_token_id)
    params = [p for _, p in _trainable(model)]
    with evaluation_mode(model), eager_attention(model):
        return extreme_eigenvalues(loss_fn, params, k, tol=tol, maxiter=maxiter, seed=seed)


def hessian_curvature_along(
    model: torch.nn.Module, examples: Iterable[dict], direction: Mapping[str, torch.Tensor], *, pad_token_id: int
) -> float:
    """``vᵀ H v / |v|²`` of the training loss on the examples as one batch, along ``direction``: a mapping from
    parameter names (as in ``model.named_parameters()`` or ``state_dict()``) to tensors, e.g. the change between two
    checkpoints. Trainable parameters it omits get 0; names of buffers or of tied duplicates (``lm_head.weight``
    tied to the embedding) are ignored.

    Raises:
        ValueError: a name the model does not have, a tensor of the wrong shape, or a zero direction.
    """
    named = _trainable(model)
    known = set(model.state_dict()) | {name for name, _ in named}
    unknown = sorted(set(direction) - known)
    if unknown:
        raise ValueError(f"the direction names {unknown[:3]}, which the model does not have.")
    vector = []
    for name, p in named:
        piece = direction.get(name)
        if piece is not None and tuple(piece.shape) != tuple(p.shape):
            raise ValueError(
                f"the direction for {name!r} has shape {tuple(piece.shape)}; the parameter's is {tuple(p.shape)}."
            )
        vector.append(torch.zeros_like(p) if piece is None else torch.as_tensor(piece).to(p))
    loss_fn = language_model_loss(model, examples, pad_token_id)
    with evaluation_mode(model), eager_attention(model):
        return curvature_along(loss_fn, [p for _, p in named], vector)
