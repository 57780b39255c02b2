"""No ``attention_mask`` where it cannot change the loss, so that SDPA takes its causal kernel.

A rendered ICoT batch is right-padded: each row's real tokens come first, padding after, and the padding carries no
label. Under a causal mask a real token attends only to the tokens before it, which are all real, so the padding
mask changes nothing at a labelled position — but given one, transformers builds a ``(B, 1, T, T)`` mask and SDPA
leaves its ``is_causal`` path (~3 ms of each attention call for the 4x4 reference setting on CPU); without one the
reference's own script trains. :func:`needless_attention_mask` says when a batch's mask can go; everything else keeps
it: left padding or a hole (a masked token before a real one), a label on a masked token, ``position_ids`` (without
a mask, transformers reads a jump in them — ``keep_position`` — as the start of another packed sequence), and a model
that is not one of transformers' causal LMs (the parity study's theory models read the mask themselves).

The placeholders of fill ``pad`` are real tokens the model attends to (mask 1), so such a batch loses its mask too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from hf_icot.data.encoding import IGNORE_INDEX


def is_causal_lm(model: Any) -> bool:
    """Whether ``model`` (unwrapped: DDP's ``module``, PEFT's base model) is one of transformers' causal LMs, whose
    attention is causal whether or not a mask is given."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    model = getattr(model, "module", model)
    if hasattr(model, "get_base_model"):
        model = model.get_base_model()
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    return MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(model_type) == type(model).__name__


def needless_attention_mask(inputs: Mapping[str, Any]) -> bool:
    """Whether the batch's ``attention_mask`` is right padding that no label reads, without ``position_ids``: each
    row's mask is ones then zeros, and every masked position has label -100."""
    mask = inputs.get("attention_mask")
    if mask is None or "position_ids" in inputs or mask.dim() != 2:
        return False
    kept = mask.bool()
    real = torch.arange(mask.shape[1], device=mask.device)[None, :] < kept.sum(dim=1, keepdim=True)  # (B, T)
    if not torch.equal(kept, real):
        return False
    labels = inputs.get("labels")
    return labels is None or bool((labels[~real] == IGNORE_INDEX).all())


def without_needless_mask(model: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """``inputs`` without ``attention_mask`` where :func:`needless_attention_mask` and :func:`is_causal_lm` allow
    (a new dict; ``inputs`` itself is left as it is)."""
    if not needless_attention_mask(inputs) or not is_causal_lm(model):
        return inputs
    return {name: value for name, value in inputs.items() if name != "attention_mask"}
