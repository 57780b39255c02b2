"""The forward pass of continuous thought: each ``<|latent|>`` slot's input embedding is the last hidden state of the
position before it (through CODI's projection where there is one), so a sequence with ``n`` latent columns takes
``n + 1`` passes of the decoder, each reusing the KV cache of the ones before (Coconut's ``Coconut.forward``, CODI's
loop over ``num_latent``).

Batches come left-aligned on their ``<|start-latent|>`` marker (:mod:`hf_icot.methods.latent_batches`), so pass ``i``
fills the ``i``-th latent column of every row at once; rows with fewer slots simply have an ordinary token there.
Gradients flow through the fed-back hidden states and the cache, as in both methods' code.

PCCoT's forward (:func:`jacobi_hidden_states`) computes every slot at once instead: a pass over the prompt with its
slots as ``<|latent|>`` tokens, then ``num_iterations`` Jacobi passes over all the slots together, each slot fed the
state the previous pass left at the position before it, then the answer's pass; ``num_iterations + 2`` passes
whatever the number of thoughts. :func:`thought_hidden_states` picks one of the two forwards.

The model stays an ordinary ``transformers`` causal LM (``save_pretrained`` / ``from_pretrained`` / PEFT / the
Trainer's DDP wrapping all see it as before): :func:`enable_latent_forward` gives it a forward that, when called with
``icot_latent=True``, runs the method's whole loss in the one call DDP expects — every other call is its own forward.
CODI's projection (:class:`LatentProjection`) hangs on the model as ``latent_projection`` so the optimizer and DDP see
it, is left out of ``model.safetensors`` and saved beside it (:func:`save_projection`, :func:`load_projection`).
"""

from __future__ import annotations

import json
import os
from typing import Any, NamedTuple

import torch
from torch import nn
from transformers import DynamicCache

PROJECTION_WEIGHTS = "latent_projection.safetensors"
PROJECTION_CONFIG = "latent_projection.json"
PROJECTION_ATTRIBUTE = "latent_projection"


class LatentProjection(nn.Sequential):
    """CODI's ``prj``: Dropout → Linear(hidden, width) → GELU → Linear(width, hidden) [→ LayerNorm(hidden)]."""

    def __init__(self, hidden_size: int, width: int, dropout: float = 0.0, layer_norm: bool = True) -> None:
        super().__init__(nn.Dropout(dropout), nn.Linear(hidden_size, width), nn.GELU(), nn.Linear(width, hidden_size))
        if layer_norm:
            self.add_module("ln", nn.LayerNorm(hidden_size))
        self.settings = {"hidden_size": hidden_size, "width": width, "dropout": dropout, "layer_norm": layer_norm}


class LatentStates(NamedTuple):
    """What :func:`latent_hidden_states` computes over a latent batch."""

    #: ``(B, T, H)``: the last hidden state of every position.
    hidden: torch.Tensor
    #: The last pass's per-layer states (embeddings first), each ``(B, T_last, H)`` from the last latent column; or
    #: None unless asked for.
    layers: tuple[torch.Tensor, ...] | None
    #: The KV cache (None without latent columns unless asked for).
    cache: DynamicCache | None
    #: ``(B, T, H)``: the input embeddings the decoder read, each latent slot's the thought fed there.
    embeds: torch.Tensor


def causal_lm_of(model: nn.Module) -> nn.Module:
    """The ``transformers`` causal LM under DDP / PEFT wrappers (LoRA layers live inside it)."""
    model = getattr(model, "module", model)  # DDP
    get_base_model = getattr(model, "get_base_model", None)
    return get_base_model() if callable(get_base_model) else model


def check_latent_model(lm: nn.Module) -> None:
    """Check that ``lm`` can take continuous thoughts: a decoder that takes ``inputs_embeds``, hidden states as wide as
    its input embeddings, and logits that are its output layer applied to the decoder's last hidden states (checked
    on a probe of four tokens).

    Raises:
        ValueError: naming the model class and what it lacks.
    """
    name = type(lm).__name__
    try:
        decoder, embeddings, head = lm.get_decoder(), lm.get_input_embeddings(), lm.get_output_embeddings()
    except (AttributeError, NotImplementedError):
        decoder = embeddings = head = None
    if decoder is None or embeddings is None or head is None or decoder is lm:
        raise ValueError(
            f"{name} cannot take latent thoughts: it has no separate decoder, input embeddings and output layer "
            "(get_decoder, get_input_embeddings, get_output_embeddings); use a transformers causal LM."
        )
    device = embeddings.weight.device
    probe = torch.arange(min(4, embeddings.weight.shape[0]), device=device)[None, :]
    was_training = lm.training
    lm.eval()
    try:
        with torch.no_grad():
            mask = torch.ones_like(probe)  # no padding (without it transformers warns the ids may be padded)
            hidden = decoder(input_ids=probe, attention_mask=mask).last_hidden_state  # (1, 4, H)
            full = lm(input_ids=probe, attention_mask=mask).logits.float()
            split = head(hidden).float()
    finally:
        lm.train(was_training)
    if hidden.shape[-1] != embeddings.weight.shape[-1]:
        raise ValueError(
            f"{name} cannot take latent thoughts: its hidden states ({hidden.shape[-1]} wide) cannot be fed back as "
            f"input embeddings ({embeddings.weight.shape[-1]} wide)."
        )
    if not torch.allclose(full, split, atol=1e-4, rtol=1e-4):
        raise ValueError(
            f"{name} cannot take latent thoughts here: its logits are not its output layer applied to its decoder's "
            "last hidden states (a scaled or soft-capped head), so the latent loss would differ from its own."
        )


def latent_hidden_states(
    lm: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    position_ids: torch.Tensor,
    latent_id: int,
    projection: nn.Module | None = None,
    all_layers: bool = False,
    keep_cache: bool = False,
) -> LatentStates:
    """Run ``lm``'s decoder over a latent batch, feeding back one latent column per pass.

    Args:
        input_ids, attention_mask, position_ids: ``(B, T)``, rows aligned on their latent columns.
        latent_id: the ``<|latent|>`` id; its slots' embeddings become the hidden state before them.
        projection: applied to each fed-back hidden state (CODI's ``use_prj``).
        all_layers: also return every layer's output (embeddings first) for the positions of the last pass.
        keep_cache: return a KV cache even without latent columns (generation continues from it).

    Returns:
        :class:`LatentStates`: the last hidden states, the last pass's per-layer states or None, the KV cache, and
        the input embeddings with the thoughts fed back (what SIM-CoT's decoder reads,
        :mod:`hf_icot.methods.simcot`).
    """
    decoder = lm.get_decoder()
    embeds = lm.get_input_embeddings()(input_ids)  # (B, T, H)
    is_latent = input_ids == latent_id  # (B, T)
    columns = torch.nonzero(is_latent.any(dim=0)).flatten().tolist()
    cache = DynamicCache(config=lm.config) if columns or keep_cache else None
    pieces, start = [], 0
    for column in columns:
        out = decoder(
            inputs_embeds=embeds[:, start:column],
            attention_mask=attention_mask[:, :column],
            position_ids=position_ids[:, start:column],
            cache=cache,
            use_cache=True,
        )
        pieces.append(out.last_hidden_state)
        thought = out.last_hidden_state[:, -1]  # (B, H): the hidden state at column - 1
        if projection is not None:
            thought = projection(thought)
        rows = torch.nonzero(is_latent[:, column]).flatten()
        # Out of place: the embeddings of earlier passes are in the autograd graph.
        embeds = embeds.index_put((rows, torch.full_like(rows, column)), thought[rows].to(embeds.dtype))
        start = column
    out = decoder(
        inputs_embeds=embeds[:, start:],
        attention_mask=attention_mask,
        position_ids=position_ids[:, start:],
        cache=cache,
        use_cache=cache is not None,
        output_hidden_states=all_layers,
    )
    pieces.append(out.last_hidden_state)
    hidden = torch.cat(pieces, dim=1) if len(pieces) > 1 else pieces[0]
    return LatentStates(hidden, out.hidden_states if all_layers else None, cache, embeds)


def jacobi_hidden_states(
    lm: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    position_ids: torch.Tensor,
    latent_id: int,
    iterations: int,
    projection: nn.Module | None = None,
    all_layers: bool = False,
    keep_cache: bool = False,
) -> tuple[torch.Tensor, tuple[torch.Tensor, ...] | None, DynamicCache | None]:
    """Run ``lm``'s decoder over a latent batch, computing all its latent slots together by Jacobi iteration (PCCoT's
    ``forward``, ``whyNLP/PCCoT`` ``models/modeling_gpt2.py``).

    The prompt's pass runs up to the last slot with the slots as ``<|latent|>`` tokens; each of ``iterations`` passes
    then runs over the slots alone, on the question's KV cache, slot ``j`` fed the state the previous pass left at
    position ``j - 1`` (the first slot: the state at ``<|start-latent|>``, fixed after the prompt's pass), through
    ``projection`` where given; the rest of the sequence runs on the cache of the last iteration. After ``k``
    iterations the first ``k`` slots hold the values one pass per thought gives them (:func:`latent_hidden_states`), so
    as many iterations as slots give that forward exactly. Gradients flow through every pass, as in PCCoT's code.

    Args:
        input_ids, attention_mask, position_ids: ``(B, T)``, every row's latent slots in the same contiguous columns
            (rows left-aligned on ``<|start-latent|>`` with as many slots each, as PCCoT's plan renders them).
        iterations: Jacobi passes over the slots (PCCoT's ``num_iterations``; 0: the slots stay ``<|latent|>``).
        projection, all_layers, keep_cache: as :func:`latent_hidden_states`.

    Returns:
        As :func:`latent_hidden_states`: the last hidden states ``(B, T, H)`` (the slots' from the last iteration),
        the last pass's per-layer states (from the column after the last slot) or None, and the KV cache.

    Raises:
        ValueError: latent slots that are not the same contiguous columns of every row.
    """
    decoder = lm.get_decoder()
    embeds = lm.get_input_embeddings()(input_ids)  # (B, T, H)
    is_latent = input_ids == latent_id  # (B, T)
    columns = torch.nonzero(is_latent.any(dim=0)).flatten()
    cache = DynamicCache(config=lm.config) if columns.numel() or keep_cache else None
    if not columns.numel():
        out = decoder(inputs_embeds=embeds, attention_mask=attention_mask, position_ids=position_ids, cache=cache,
                      use_cache=cache is not None, output_hidden_states=all_layers)  # fmt: skip
        return out.last_hidden_state, (out.hidden_states if all_layers else None), cache
    first, end = int(columns[0]), int(columns[-1]) + 1
    if end - first != columns.numel() or not bool(is_latent[:, first:end].all()):
        raise ValueError(
            "PCCoT's Jacobi forward needs every row's latent slots in the same contiguous columns; render the batch "
            "with one number of slots per batch, rows aligned on <|start-latent|> (LatentRenderer does)."
        )

    def project(states: torch.Tensor) -> torch.Tensor:
        return (projection(states) if projection is not None else states).to(embeds.dtype)

    # The prompt's pass, its slots as <|latent|> tokens: the question's cache and the iterations' starting point.
    out = decoder(inputs_embeds=embeds[:, :end], attention_mask=attention_mask[:, :end],
                  position_ids=position_ids[:, :end], cache=cache, use_cache=True)  # fmt: skip
    before = out.last_hidden_state[:, :first]  # (B, first, H)
    fed = project(out.last_hidden_state[:, first - 1 : end - 1])  # (B, L, H): slot j gets the state before it
    slots = out.last_hidden_state[:, first:end]  # (B, L, H)
    for iteration in range(iterations):
        if iteration:  # the first slot's input never changes: the state at <|start-latent|>
            fed = torch.cat([fed[:, :1], project(slots[:, :-1])], dim=1)
        cache.crop(first - end)  # back to the question's cache: the slots are recomputed from it
        out = decoder(inputs_embeds=fed, attention_mask=attention_mask[:, :end],
                      position_ids=position_ids[:, first:end], cache=cache, use_cache=True)  # fmt: skip
        slots = out.last_hidden_state
    out = decoder(inputs_embeds=embeds[:, end:], attention_mask=attention_mask, position_ids=position_ids[:, end:],
                  cache=cache, use_cache=True, output_hidden_states=all_layers)  # fmt: skip
    hidden = torch.cat([before, slots, out.last_hidden_state], dim=1)
    return hidden, (out.hidden_states if all_layers else None), cache


def thought_hidden_states(
    lm: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    position_ids: torch.Tensor,
    latent_id: int,
    iterations: int | None = None,
    **options: Any,
) -> tuple[torch.Tensor, tuple[torch.Tensor, ...] | None, DynamicCache | None]:
    """:func:`jacobi_hidden_states` with ``iterations`` (PCCoT), else :func:`latent_hidden_states` (one pass per
    thought); ``options`` go to either (``projection``, ``all_layers``, ``keep_cache``)."""
    if iterations is None:
        return latent_hidden_states(lm, input_ids, attention_mask, position_ids, latent_id, **options)
    return jacobi_hidden_states(lm, input_ids, attention_mask, position_ids, latent_id, iterations, **options)


def enable_latent_forward(model: nn.Module, loss: Any) -> nn.Module:
    """Give the causal LM inside ``model`` a forward that computes ``loss(lm, batch)`` when called with
    ``icot_latent=True`` (every other call runs its own forward). Idempotent; returns ``model``.

    ``loss`` is a callable ``(lm, **batch) -> ModelOutput`` (:mod:`hf_icot.methods.losses`).
    """
    lm = causal_lm_of(model)
    plain = getattr(lm, "_icot_plain_forward", None) or lm.forward

    def forward(*args: Any, icot_latent: bool = False, **kwargs: Any) -> Any:
        if not icot_latent:
            return plain(*args, **kwargs)
        return loss(lm, **{name: value for name, value in kwargs.items() if value is not None})

    lm._icot_plain_forward = plain
    lm.forward = forward
    return model


def attach_projection(model: nn.Module, projection: LatentProjection) -> None:
    """Hang ``projection`` on the causal LM inside ``model`` (trained and wrapped with it), out of its
    ``model.safetensors``."""
    lm = causal_lm_of(model)
    embeddings = lm.get_input_embeddings().weight
    lm.add_module(PROJECTION_ATTRIBUTE, projection.to(device=embeddings.device, dtype=embeddings.dtype))
    keys = {f"{PROJECTION_ATTRIBUTE}.{name}" for name in projection.state_dict()}
    lm._keys_to_ignore_on_save = set(lm._keys_to_ignore_on_save or ()) | keys


def projection_of(model: nn.Module) -> LatentProjection | None:
    """The projection :func:`attach_projection` hung on ``model``, or None."""
    return getattr(causal_lm_of(model), PROJECTION_ATTRIBUTE, None)


def save_projection(model: nn.Module, folder: str) -> bool:
    """Write ``model``'s projection as ``latent_projection.safetensors`` + ``.json`` into ``folder``; False if none."""
    from safetensors.torch import save_file

    projection = projection_of(model)
    if projection is None:
        return False
    state = {name: tensor.detach().cpu().contiguous() for name, tensor in projection.state_dict().items()}
    save_file(state, os.path.join(folder, PROJECTION_WEIGHTS), metadata={"format": "pt"})
    with open(os.path.join(folder, PROJECTION_CONFIG), "w", encoding="utf-8") as stream:
        json.dump(projection.settings, stream, indent=2, sort_keys=True)
    return True


def load_projection(folder: str, model: nn.Module | None = None) -> LatentProjection | None:
    """The projection saved in ``folder`` (None if there is none), attached to ``model`` when given (its weights
    replacing an attached one's).

    Raises:
        ValueError: a weights file without its settings, or weights that do not fit them.
    """
    from safetensors.torch import load_file

    weights, config = os.path.join(folder, PROJECTION_WEIGHTS), os.path.join(folder, PROJECTION_CONFIG)
    if not os.path.exists(weights):
        return None
    if not os.path.exists(config):
        raise ValueError(f"{weights} has no {PROJECTION_CONFIG} beside it; save the projection with save_projection.")
    with open(config, encoding="utf-8") as stream:
        projection = LatentProjection(**json.load(stream))
    try:
        projection.load_state_dict(load_file(weights))
    except RuntimeError as error:
        raise ValueError(f"{weights} does not fit its {PROJECTION_CONFIG}: {str(error).splitlines()[0]}") from None
    if model is not None:
        attached = projection_of(model)
        if attached is not None:
            attached.load_state_dict(projection.state_dict())
            return attached
        attach_projection(model, projection)
    return projection
