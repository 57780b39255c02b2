"""What a trained theory model attends to: each node's attention row with every CoT position padded (the layout it
answers in), its true children, and whether the two largest weights are on them.

:func:`children_report` is what a run records (``attention.json``) so that the results scripts need no weights; the
secret support comes from the task (``datasets_builder.tasks.parity.secret_support``), which the library does not
import: the recipe passes it in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from results.parity.theory.log_icot_parity import tree_levels

#: A node counts as attending to its children when they are its two largest weights and hold this share of the
#: row's (absolute) weight.
CHILD_MASS = 0.9


def node_children(model_type: str, n_bits: int, k: int, support: Sequence[int]) -> dict[int, list[int]]:
    """Position of each CoT node -> the positions of its two children in the canonical layout.

    * tree (``log_icot_parity``): level-1 node i pairs secret bits 2i and 2i + 1; a level-l node pairs two
      consecutive level-(l - 1) nodes;
    * chain (``linear_attention_parity``): step 1 pairs the first two secret bits; step j the step before it and
      secret bit j + 1.
    """
    if model_type == "log_icot_parity":
        levels = tree_levels(n_bits, k).tolist()
        below = list(support)
        children = {}
        for level in range(1, max(levels) + 1):
            nodes = [p for p, lv in enumerate(levels) if lv == level]
            for index, node in enumerate(nodes):
                children[node] = [below[2 * index], below[2 * index + 1]]
            below = nodes
        return children
    first = n_bits + 1
    children = {first: [support[0], support[1]]}
    for j in range(1, k - 1):
        children[first + j] = [first + j - 1, support[j + 1]]
    return children


@torch.no_grad()
def padded_attention(model: Any, seed: int = 0) -> torch.Tensor:
    """(L, T, T) attention of ``model`` on one random question with every CoT position padded."""
    c = model.config
    T = c.n_bits + c.k + 4
    generator = torch.Generator().manual_seed(seed)
    ids = torch.full((1, T), c.placeholder_token_id)
    bits = torch.randint(0, 2, (c.n_bits,), generator=generator)
    ids[0, : c.n_bits] = torch.where(bits == 1, c.one_token_id, c.zero_token_id)
    attention = model.compute(ids.to(next(model.parameters()).device))["attention"].cpu()
    return attention[:, 0] if attention.dim() == 4 else attention  # (L, T, T)


def children_report(model: Any, support: Sequence[int], seed: int = 0) -> dict[str, Any]:
    """Per node: its layer, true children, top-2 attended positions and the share of the row's weight on them;
    per layer: how many nodes attend to their children (top-2 = children, share >= :data:`CHILD_MASS`); and the
    attention maps themselves (``maps``: L x T x T, for the plots)."""
    c = model.config
    maps = padded_attention(model, seed)
    children = node_children(c.model_type, c.n_bits, c.k, support)
    levels = tree_levels(c.n_bits, c.k).tolist() if c.model_type == "log_icot_parity" else None
    nodes, found = [], {}
    for node, want in children.items():
        layer = levels[node] if levels is not None else 1
        row = maps[layer - 1, node].abs()
        top = torch.topk(row, 2)
        share = float(top.values.sum() / row.sum().clamp(min=1e-12))
        hit = sorted(top.indices.tolist()) == sorted(want) and share >= CHILD_MASS
        nodes.append({"node": node, "layer": layer, "children": want, "top2": top.indices.tolist(),
                      "share": share, "found": hit})  # fmt: skip
        total, hits = found.get(layer, (0, 0))
        found[layer] = (total + 1, hits + int(hit))
    layers = [{"layer": layer, "nodes": total, "found": hits} for layer, (total, hits) in sorted(found.items())]
    return {"nodes": nodes, "layers": layers, "maps": maps.round(decimals=4).tolist()}
