"""Training with attention heads removed: :class:`HeadAblationCallback` zeroes what chosen heads write, from a given
step to the end of training, so that a run shows what the model learns without them (does the transition wait?).

transformers 5 dropped GPT-2's ``head_mask``, so the heads are removed the way :mod:`~hf_icot.diagnostics.ablation`
removes them after training: a forward pre-hook on each layer's attention output projection (GPT-2 ``attn.c_proj``,
Llama-style ``self_attn.o_proj``) sets the heads' slices of its input to 0 (:func:`ablation.zero_heads_in`). Their
contribution to every forward pass is then exactly 0 — in training steps and in the diagnostics' measurements alike
— and no gradient reaches their query, key and value weights through the loss (weight decay and, for a removal
after step 0, Adam's momentum still move those weights, which no longer matter). At the end of training the
projection's weights that read the removed heads are set to 0 and the hooks removed, so the saved model *is* the
trained one: loaded without the callback it computes what the run trained. Checkpoints saved during the run hold the
heads' live weights; ``run.json`` names the heads and the step.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import torch
from transformers import TrainerCallback
from transformers.pytorch_utils import Conv1D

from hf_icot.diagnostics.ablation import attention_output_projections, check_heads, zero_heads_in

_HEAD = re.compile(r"^(\d+):(\d+)$")


def parse_heads(specs: Sequence[str]) -> list[tuple[int, int]]:
    """``["0:3", "1:0"]`` -> ``[(0, 3), (1, 0)]`` (``layer:head``, 0-based).

    Raises:
        ValueError: a spec that is not two non-negative integers joined by a colon.
    """
    heads = []
    for spec in specs:
        match = _HEAD.match(str(spec).strip())
        if not match:
            raise ValueError(f"head {spec!r} is not 'layer:head' (two 0-based integers, e.g. '0:3').")
        heads.append((int(match.group(1)), int(match.group(2))))
    return heads


class HeadAblationCallback(TrainerCallback):
    """Zero the outputs of ``heads`` from global step ``from_step`` on (see the module docstring).

    The removal holds for the update of step ``from_step + 1`` onwards and for every measurement at a step >=
    ``from_step``; put this callback before any measuring callback, so that it switches first.

    Args:
        model: the model being trained (its hooks are registered here).
        heads: (layer, head) pairs, 0-based.
        from_step: the first global step (completed optimiser steps) at which the heads are removed; 0: from the
            start.

    Raises:
        ValueError: no heads, a head outside the model, a negative ``from_step``, or a model without attention
            output projections.
    """

    def __init__(self, model: torch.nn.Module, heads: Sequence[tuple[int, int]], from_step: int = 0) -> None:
        if not heads:
            raise ValueError("heads is empty; name at least one (layer, head) to remove during training.")
        if from_step < 0:
            raise ValueError(f"from_step={from_step} is not allowed; give 0 (from the start) or a later step.")
        self.heads, self.from_step, self.active = check_heads(model, heads), from_step, False
        self.model, self.n_heads = model, int(model.config.num_attention_heads)
        self.projections = attention_output_projections(model)
        by_layer: dict[int, list[int]] = {}
        for layer, head in self.heads:
            by_layer.setdefault(layer, []).append(head)
        self.by_layer = by_layer
        self.handles = [self.projections[layer].register_forward_pre_hook(self._hook(removed))
                        for layer, removed in by_layer.items()]  # fmt: skip

    def _hook(self, removed: list[int]):
        def zero(module, args):
            if not self.active:
                return None
            (hidden, *rest) = args  # (B, S, n_heads * head_dim)
            return (zero_heads_in(hidden, removed, self.n_heads), *rest)

        return zero

    def _switch(self, state: Any) -> None:
        self.active = state.global_step >= self.from_step

    def on_train_begin(self, args, state, control, **kwargs):
        self._switch(state)

    def on_step_begin(self, args, state, control, **kwargs):
        self._switch(state)

    def on_step_end(self, args, state, control, **kwargs):
        self._switch(state)

    def on_train_end(self, args, state, control, **kwargs):
        if self.active:
            self.bake()
        self.remove()  # a run that ended before ``from_step`` never removed the heads

    @torch.no_grad()
    def bake(self) -> None:
        """Set the projection weights that read the removed heads to 0 and drop the hooks: the model alone now
        computes what it computed with the heads removed."""
        for layer, removed in self.by_layer.items():
            projection = self.projections[layer]
            weight = projection.weight
            width = (weight.shape[0] if isinstance(projection, Conv1D) else weight.shape[1]) // self.n_heads
            for head in removed:
                span = slice(head * width, (head + 1) * width)
                if isinstance(projection, Conv1D):  # GPT-2's Conv1D weight is (in, out)
                    weight[span, :] = 0
                else:  # nn.Linear's is (out, in)
                    weight[:, span] = 0
        self.remove()

    def remove(self) -> None:
        """Drop the hooks (the heads write again unless baked)."""
        for handle in self.handles:
            handle.remove()
        self.handles, self.active = [], False
