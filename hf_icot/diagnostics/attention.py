"""Attention to the selector: how much of each head's attention the position predicting the first target token
(the last prompt position) puts on the selector z's tokens.

``selector_attention(...)[l, h]`` is the attention mass of head ``h`` in layer ``l`` from that position to the
``selector_positions``, summed over those positions and averaged over examples: 0 when the head looks elsewhere, 1
when it looks only at z. In the study it rises sharply at the transition, when the model starts to read z.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import torch

from hf_icot.diagnostics.token_batches import (
    answer_span,
    as_rows,
    batched_logits,
    eager_attention,
    evaluation_mode,
    require_columns,
)

MEASUREMENT = "selector_attention"


def check_examples(rows: list[dict]) -> None:
    """Raise if the examples lack the columns the measurement reads.

    Raises:
        ValueError: a missing ``selector_positions`` column, malformed labels or selector positions (see
            :func:`~hf_icot.diagnostics.token_batches.require_columns`).
    """
    require_columns(rows, ["selector_positions"], MEASUREMENT)


@torch.no_grad()
def selector_attention(
    model: torch.nn.Module, examples: Iterable[dict], *, pad_token_id: int, batch_size: int = 64
) -> np.ndarray:
    """Attention mass to the selector, per layer and head: a float64 array ``(n_layers, n_heads)``.

    The model runs with ``output_attentions=True`` under the eager attention implementation (the fused kernels
    return no weights); its own implementation is restored afterwards.

    Raises:
        ValueError: see :func:`check_examples`.
    """
    rows = as_rows(examples)
    check_examples(rows)
    starts = [answer_span(row["labels"], i)[0] for i, row in enumerate(rows)]
    total = None
    with evaluation_mode(model), eager_attention(model):
        sequences = [row["input_ids"] for row in rows]
        for indices, outputs in batched_logits(model, sequences, pad_token_id, batch_size, output_attentions=True):
            attentions = torch.stack(outputs.attentions, dim=1)  # (B, L, H, S, S)
            for batch_row, i in enumerate(indices):
                query = starts[i] - 1  # the last prompt position predicts the first target token
                keys = torch.as_tensor(rows[i]["selector_positions"], device=attentions.device)
                mass = attentions[batch_row, :, :, query, :].index_select(-1, keys).sum(-1)  # (L, H)
                total = mass.double() if total is None else total + mass.double()
    return (total / len(rows)).cpu().numpy()
