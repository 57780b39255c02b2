"""Head ablation: how much the loss rises when one attention head's output is removed.

A head's output enters the attention output projection (GPT-2 ``attn.c_proj``, Llama-style ``self_attn.o_proj``)
as its slice ``[h * head_dim, (h + 1) * head_dim)`` of the projection's input, so ablating the head means replacing
that slice, by a forward pre-hook on the projection, with

* ``zero``: zeros;
* ``mean``: its mean over the examples at each position (padding excluded), which keeps what the head writes on
  average at that position and removes only what it writes for this particular example.

The loss is the mean cross-entropy over all labelled tokens of the examples (the training loss, teacher-forced);
``head_ablation`` returns ``ablated − clean`` per (layer, head).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager

import numpy as np
import torch

from hf_icot.diagnostics.token_batches import as_rows, batched_logits, evaluation_mode, require_columns

MODES = ("zero", "mean")
_PROJECTION = re.compile(r"(?:^|\.)(\d+)\.(?:attn\.c_proj|self_attn\.o_proj)$")


def attention_output_projections(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The attention output projection of each layer, in layer order.

    Raises:
        ValueError: the model has no GPT-2 ``attn.c_proj`` or Llama-style ``self_attn.o_proj`` modules.
    """
    found = {}
    for name, module in model.named_modules():
        match = _PROJECTION.search(name)
        if match:
            found[int(match.group(1))] = module
    if not found:
        raise ValueError(
            f"{type(model).__name__} has no attention output projection (GPT-2 'attn.c_proj' or Llama-style "
            "'self_attn.o_proj'); head ablation supports those architectures only."
        )
    return [found[layer] for layer in sorted(found)]


def model_shape(model: torch.nn.Module) -> tuple[int, int]:
    """``(n_layers, n_heads)`` of the model's attention."""
    return len(attention_output_projections(model)), int(model.config.num_attention_heads)


def check_heads(model: torch.nn.Module, heads: Sequence[tuple[int, int]] | None) -> list[tuple[int, int]]:
    """The (layer, head) pairs to ablate: all of them when ``heads`` is None.

    Raises:
        ValueError: a layer or head index outside the model.
    """
    n_layers, n_heads = model_shape(model)
    if heads is None:
        return [(layer, head) for layer in range(n_layers) for head in range(n_heads)]
    for layer, head in heads:
        if not (0 <= layer < n_layers and 0 <= head < n_heads):
            raise ValueError(
                f"head (layer={layer}, head={head}) is outside the model; it has layers 0..{n_layers - 1} and "
                f"heads 0..{n_heads - 1}."
            )
    return [(int(layer), int(head)) for layer, head in heads]


def zero_heads_in(hidden: torch.Tensor, heads: Sequence[int], n_heads: int) -> torch.Tensor:
    """A copy of an output projection's input ``(..., n_heads * head_dim)`` with the slices of ``heads`` set to 0:
    what those heads write is removed exactly, and no gradient flows back through them."""
    width = hidden.shape[-1] // n_heads
    hidden = hidden.clone()
    for head in heads:
        hidden[..., head * width : (head + 1) * width] = 0
    return hidden


@contextmanager
def ablate_head(
    model: torch.nn.Module, layer: int, head: int, mode: str = "zero", mean: torch.Tensor | None = None
) -> Iterator[None]:
    """Inside, head ``head`` of layer ``layer`` is ablated: its slice of the output projection's input is set to 0
    (``mode="zero"``) or to ``mean[:S, slice]`` (``mode="mean"``; ``mean`` is ``(positions, n_heads * head_dim)``,
    e.g. from :func:`mean_projection_inputs`).

    Raises:
        ValueError: an unknown ``mode``, ``mode="mean"`` without ``mean``, or a head outside the model.
    """
    if mode not in MODES:
        raise ValueError(f"mode {mode!r} is unknown; allowed: {', '.join(MODES)}.")
    if mode == "mean" and mean is None:
        raise ValueError("mode='mean' needs the mean projection input (mean=...); none was given.")
    check_heads(model, [(layer, head)])
    n_heads = int(model.config.num_attention_heads)

    def replace_slice(module, args):
        (hidden, *rest) = args  # (B, S, n_heads * head_dim)
        if mode == "zero":
            return (zero_heads_in(hidden, [head], n_heads), *rest)
        width = hidden.shape[-1] // n_heads
        hidden = hidden.clone()
        hidden[..., head * width : (head + 1) * width] = mean[: hidden.shape[1], head * width : (head + 1) * width]
        return (hidden, *rest)

    handle = attention_output_projections(model)[layer].register_forward_pre_hook(replace_slice)
    try:
        yield
    finally:
        handle.remove()


def _labelled_loss(model, sequences, rows, pad_token_id, batch_size, length) -> float:
    """Mean cross-entropy over every labelled token of ``rows`` (inputs ``sequences``)."""
    total, count = 0.0, 0
    for indices, outputs in batched_logits(model, sequences, pad_token_id, batch_size, length):
        labels = torch.full(outputs.logits.shape[:2], -100, dtype=torch.long)
        for batch_row, i in enumerate(indices):
            labels[batch_row, : len(rows[i]["labels"])] = torch.as_tensor(rows[i]["labels"])
        labels = labels[:, 1:].to(outputs.logits.device)  # labels[i] is predicted at position i - 1
        logits = outputs.logits[:, :-1].double()
        total += torch.nn.functional.cross_entropy(logits.transpose(1, 2), labels, reduction="sum").item()
        count += int((labels != -100).sum())
    return total / count


@torch.no_grad()
def mean_projection_inputs(
    model: torch.nn.Module, sequences: Sequence[Sequence[int]], pad_token_id: int, batch_size: int = 64
) -> list[torch.Tensor]:
    """Per layer, the output projection's input averaged over the sequences at each position (padding excluded):
    ``(max length, n_heads * head_dim)`` tensors, zero at positions no sequence reaches."""
    length = max(len(s) for s in sequences)
    projections = attention_output_projections(model)
    captured: dict[int, torch.Tensor] = {}
    handles = [
        projection.register_forward_pre_hook(lambda module, args, layer=layer: captured.__setitem__(layer, args[0]))
        for layer, projection in enumerate(projections)
    ]
    sums = [0.0] * len(projections)
    counts = torch.zeros(length, 1, dtype=torch.float64)
    try:
        for indices, _ in batched_logits(model, sequences, pad_token_id, batch_size, length):
            mask = torch.zeros(len(indices), length, 1, dtype=torch.float64)  # (B, S, 1): 1 on real tokens
            for row, i in enumerate(indices):
                mask[row, : len(sequences[i])] = 1
            counts += mask.sum(0)
            for layer, hidden in captured.items():  # (B, S, D)
                sums[layer] = sums[layer] + (hidden.double() * mask.to(hidden.device)).sum(0)
    finally:
        for handle in handles:
            handle.remove()
    return [(total / counts.clamp(min=1).to(total.device)).float() for total in sums]


def head_ablation(
    model: torch.nn.Module,
    examples: Iterable[dict],
    *,
    pad_token_id: int,
    heads: Sequence[tuple[int, int]] | None = None,
    modes: Sequence[str] = MODES,
    batch_size: int = 64,
) -> dict[str, np.ndarray]:
    """Loss increase from ablating each head, per mode: ``{mode: (n_layers, n_heads) float64 array}``.

    Args:
        heads: the (layer, head) pairs to ablate; all when None (the others are NaN in the arrays).
        modes: any of ``"zero"``, ``"mean"``.

    Raises:
        ValueError: malformed examples, a head outside the model, an unknown mode, or a model without attention
            output projections.
    """
    rows = as_rows(examples)
    require_columns(rows, [], "head_ablation")
    pairs = check_heads(model, heads)
    for mode in modes:
        if mode not in MODES:
            raise ValueError(f"mode {mode!r} is unknown; allowed: {', '.join(MODES)}.")
    sequences = [row["input_ids"] for row in rows]
    length = max(len(s) for s in sequences)
    n_layers, n_heads = model_shape(model)
    increases = {mode: np.full((n_layers, n_heads), np.nan) for mode in modes}
    with evaluation_mode(model), torch.no_grad():
        clean = _labelled_loss(model, sequences, rows, pad_token_id, batch_size, length)
        means = mean_projection_inputs(model, sequences, pad_token_id, batch_size) if "mean" in modes else None
        for mode in modes:
            for layer, head in pairs:
                mean = means[layer] if means is not None else None
                with ablate_head(model, layer, head, mode, mean):
                    ablated = _labelled_loss(model, sequences, rows, pad_token_id, batch_size, length)
                increases[mode][layer, head] = ablated - clean
    return increases
