"""Latent generation: each prompt — the question, ``<|start-latent|> <|latent|>×n <|end-latent|>`` in the run's
text format (:meth:`hf_icot.data.latent_formats.LatentFormat.prompt`) — goes through the latent forward (one pass per
latent column, :func:`~hf_icot.methods.latent_forward.latent_hidden_states`; with ``iterations``, PCCoT's Jacobi
passes over all of them, :func:`~hf_icot.methods.latent_forward.jacobi_hidden_states`), then greedy decoding continues from its
KV cache, a batch of left-padded prompts at a time, until each row has written the ``<eos>`` that close its answer
(``hf_icot``: two, closing its CoT and its answer; Coconut's and CODI's formats: one) or ``max_new_tokens``.

Coconut's own generation takes one question at a time and recomputes the whole sequence at every token; this one
batches and caches, with the same greedy tokens. A latent thought costs a forward pass: :class:`LatentCost` counts
them beside the generated tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from hf_icot.methods.latent_forward import causal_lm_of, projection_of, thought_hidden_states
from hf_icot.modeling.sizing import context_length

#: ``<eos>`` a latent prompt's continuation needs in the ``hf_icot`` format: the one closing its CoT, the one closing
#: its answer (:attr:`hf_icot.data.latent_formats.LatentFormat.eos_to_write`).
EOS_TO_WRITE = 2


@dataclass
class LatentCost:
    """What latent generation spent: decoder passes (latent columns, or the prompt's pass and one per Jacobi
    iteration; + the prompt's last pass + one per generated token, per batch) and the tokens generated."""

    forward_passes: int = 0
    generated_tokens: int = 0


def generate_latent(
    model: Any,
    prompts: Sequence[Sequence[int]],
    latent_id: int,
    eos_id: int,
    pad_id: int,
    max_new_tokens: int,
    batch_size: int = 64,
    cost: LatentCost | None = None,
    eos_to_write: int = EOS_TO_WRITE,
    never_generated: int | None = None,
    iterations: int | None = None,
) -> list[list[int]]:
    """Greedy continuations of latent prompts (token ids: :meth:`hf_icot.data.latent_formats.LatentFormat.ask`).

    Args:
        model: the causal LM (possibly PEFT-wrapped), with CODI's projection attached if it was trained with one.
        max_new_tokens: at most this many tokens per continuation (and never past the model's context).
        batch_size: prompts per batch (sorted by length, so batches carry little padding).
        cost: filled with the passes and tokens spent, when given.
        eos_to_write: a continuation ends at its ``eos_to_write``-th ``<eos>`` (the format's
            :attr:`~hf_icot.data.latent_formats.LatentFormat.eos_to_write`).
        never_generated: a token id greedy decoding never picks (CODI's ``eot``: ``<|end-latent|>``), or None.
        iterations: PCCoT's ``num_iterations`` (the layout's ``latent_iterations``): the slots are computed together
            by that many Jacobi passes, prompts of one batch holding as many slots each; None: one pass per slot.

    Returns:
        Per prompt, in order, its generated ids up to and with the ``<eos>`` that closes the answer.

    Raises:
        ValueError: no prompts, a non-positive ``max_new_tokens`` or ``batch_size``, a negative ``iterations``, or a
            prompt that reaches the model's context (nothing left to generate).
    """
    if not prompts:
        raise ValueError("generate_latent got no prompts; pass at least one list of token ids.")
    for what, value in (
        ("max_new_tokens", max_new_tokens),
        ("batch_size", batch_size),
        ("eos_to_write", eos_to_write),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{what} {value!r} is not allowed; it must be an integer >= 1.")
    if iterations is not None and (isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 0):
        raise ValueError(f"iterations {iterations!r} is not allowed; it must be an integer >= 0, or None.")
    lm = causal_lm_of(model)
    context = context_length(lm)
    longest = max(len(prompt) for prompt in prompts)
    if context is not None and longest >= context:
        raise ValueError(
            f"a latent prompt of {longest} tokens reaches the model's context of {context}; shorten it or give fewer "
            "latent thoughts."
        )
    projection = projection_of(lm)
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    results: list[list[int]] = [[] for _ in prompts]
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            for start in range(0, len(order), batch_size):
                batch = order[start : start + batch_size]
                rows = _generate_batch(
                    lm,
                    [prompts[i] for i in batch],
                    (latent_id, eos_id, pad_id, never_generated),
                    max_new_tokens,
                    eos_to_write,
                    projection,
                    cost,
                    iterations,
                )
                for i, row in zip(batch, rows):
                    results[i] = row
    finally:
        model.train(was_training)
    return results


def _generate_batch(
    lm: Any,
    prompts: list[Sequence[int]],
    ids_of: tuple[int, int, int, int | None],
    max_new_tokens: int,
    eos_to_write: int,
    projection: Any,
    cost: LatentCost | None,
    iterations: int | None,
) -> list[list[int]]:
    latent_id, eos_id, pad_id, never_generated = ids_of
    device = lm.get_input_embeddings().weight.device
    width = max(len(prompt) for prompt in prompts)
    context = context_length(lm)
    if context is not None:  # a position past the model's context has no embedding
        max_new_tokens = min(max_new_tokens, context - max(len(prompt) for prompt in prompts))
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, prompt in enumerate(prompts):  # left padding: every prompt ends in the last column
        ids[row, width - len(prompt) :] = torch.tensor(list(prompt), dtype=torch.long)
        mask[row, width - len(prompt) :] = 1
    ids, mask = ids.to(device), mask.to(device)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)  # (B, T)
    states = thought_hidden_states(  # (hidden, layers, cache, ...) either way
        lm, ids, mask, positions, latent_id, iterations, projection=projection, keep_cache=True
    )
    hidden, cache = states[0], states[2]
    slots = int((ids == latent_id).any(dim=0).sum())
    passes = (slots if iterations is None or not slots else iterations + 1) + 1
    decoder, head, embed = lm.get_decoder(), lm.get_output_embeddings(), lm.get_input_embeddings()
    token = _greedy(head(hidden[:, -1]), never_generated)  # (B,)
    position = positions[:, -1]
    generated = [token]
    eos_seen = (token == eos_id).long()
    while len(generated) < max_new_tokens and not bool((eos_seen >= eos_to_write).all()):
        position = position + 1
        mask = torch.cat([mask, mask.new_ones((len(prompts), 1))], dim=1)
        out = decoder(
            inputs_embeds=embed(token)[:, None, :],
            attention_mask=mask,
            position_ids=position[:, None],
            cache=cache,
            use_cache=True,
        )
        passes += 1
        token = _greedy(head(out.last_hidden_state[:, -1]), never_generated)
        generated.append(token)
        eos_seen += (token == eos_id).long()
    tokens = torch.stack(generated, dim=1).tolist()  # (B, steps)
    out_rows = []
    for row in tokens:  # a finished row went on with filler until its batch ended
        eos_at = [index for index, value in enumerate(row) if value == eos_id]
        out_rows.append(row[: eos_at[eos_to_write - 1] + 1] if len(eos_at) >= eos_to_write else row)
    if cost is not None:
        cost.forward_passes += passes
        cost.generated_tokens += sum(len(row) for row in out_rows)
    return out_rows


def _greedy(logits: torch.Tensor, never_generated: int | None) -> torch.Tensor:
    """``(B, V)`` logits -> ``(B,)`` greedy tokens, never ``never_generated``."""
    if never_generated is not None:
        logits = logits.clone()
        logits[:, never_generated] = float("-inf")
    return logits.argmax(dim=-1)
