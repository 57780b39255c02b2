"""Batched greedy generation for ICoT models: left padding, a KV cache, and a stop after the answer.

A model sequence is ``question <eos> [hint] cot <eos> #### answer <eos>`` (see :mod:`hf_icot.collator`), so a
continuation is complete once its prompt plus continuation hold three ``<eos>``; a batch ends when all its rows are.
Models trained with ``fill="keep_position"`` get the position ids they saw in training (``position_shifts``).
:mod:`hf_icot.evaluation` builds the prompts and scores what comes back.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from hf_icot.collator import context_length

#: Number of ``<eos>`` in a full model sequence; the last one closes the answer.
EOS_PER_SEQUENCE = 3


def _unwrapped(model: torch.nn.Module) -> torch.nn.Module:
    """The model whose ``forward`` signature tells what it accepts (PEFT wrappers forward ``**kwargs`` to it)."""
    get_base_model = getattr(model, "get_base_model", None)
    return get_base_model() if callable(get_base_model) else model


def _model_device(model: torch.nn.Module) -> torch.device:
    device = getattr(model, "device", None)
    return device if isinstance(device, torch.device) else next(model.parameters()).device


@contextlib.contextmanager
def _inference(model: torch.nn.Module) -> Iterator[None]:
    """Eval mode without autograd, restoring the model's training mode afterwards (even on error)."""
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            yield
    finally:
        model.train(was_training)


class _ForwardInputs:
    """Which optional inputs the model's ``forward`` takes; transformers 5 renamed ``past_key_values`` to ``cache``."""

    def __init__(self, model: torch.nn.Module) -> None:
        parameters = inspect.signature(_unwrapped(model).forward).parameters
        self.position_ids = "position_ids" in parameters
        self.logits_to_keep = "logits_to_keep" in parameters
        self.use_cache = "use_cache" in parameters
        self.cache = next((name for name in ("cache", "past_key_values") if name in parameters), None)


def _chunks(prompts: Sequence[Sequence[int]], batch_size: int, same_length: bool) -> list[list[int]]:
    """Batches of prompt indices, shortest prompts first so that batches carry little padding; with ``same_length``
    a batch never mixes lengths (for models that cannot take the position ids left padding needs)."""
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    batches: list[list[int]] = []
    for i in order:
        fits = batches and len(batches[-1]) < batch_size
        if fits and same_length and len(prompts[batches[-1][0]]) != len(prompts[i]):
            fits = False
        if fits:
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches


def _generate_batch(
    model: torch.nn.Module,
    prompts: list[Sequence[int]],
    eos_left: list[int] | None,
    max_new_tokens: int,
    pad_id: int,
    eos_id: int,
    inputs: _ForwardInputs,
    context: int | None,
    shifts: list[tuple[int, int]] | None = None,
) -> list[list[int]]:
    device = _model_device(model)
    width = max(len(p) for p in prompts)
    if context is not None:  # a position past the model's context has no embedding
        reach = width + max((shift for _, shift in shifts or []), default=0)
        max_new_tokens = min(max_new_tokens, context - reach)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, prompt in enumerate(prompts):
        ids[row, width - len(prompt) :] = torch.tensor(prompt, dtype=torch.long)
        attention[row, width - len(prompt) :] = 1
    ids, attention = ids.to(device), attention.to(device)  # (B, T)
    # Left padding shifts each row's tokens right, so positions count real tokens only (as generate() does).
    positions = (attention.cumsum(-1) - 1).clamp(min=0)  # (B, T)
    # keep_position models saw the tokens after a removed CoT at their untruncated positions: shift from there on.
    pending_shift = torch.zeros(len(prompts), dtype=torch.long)  # added once, at generated token `shift_at`
    shift_at = torch.full((len(prompts),), -1, dtype=torch.long)
    for row, (start, shift) in enumerate(shifts or []):
        column = width - len(prompts[row]) + start
        if column < width:
            positions[row, column:] += shift
        else:  # the shift starts with a generated token
            pending_shift[row], shift_at[row] = shift, start - len(prompts[row])
    pending_shift, shift_at = pending_shift.to(device), shift_at.to(device)
    remaining = torch.tensor(eos_left if eos_left is not None else [0] * len(prompts), device=device)
    finished = torch.zeros(len(prompts), dtype=torch.bool, device=device)
    new_tokens, cache = [], None
    step_ids, step_positions = ids, positions
    for generated_index in range(max_new_tokens):
        kwargs: dict[str, Any] = {"input_ids": step_ids, "attention_mask": attention}
        if inputs.use_cache:
            kwargs["use_cache"] = True
        if inputs.position_ids:
            kwargs["position_ids"] = step_positions
        if inputs.logits_to_keep:
            kwargs["logits_to_keep"] = 1
        if inputs.cache is not None and cache is not None:
            kwargs[inputs.cache] = cache
        output = model(**kwargs)
        next_ids = output.logits[:, -1, :].argmax(dim=-1)  # (B,)
        next_ids = torch.where(finished, torch.full_like(next_ids, pad_id), next_ids)
        new_tokens.append(next_ids)
        if eos_left is not None:
            remaining = remaining - ((next_ids == eos_id) & ~finished).long()
            finished = finished | (remaining <= 0)
            if bool(finished.all()):
                break
        cache = getattr(output, inputs.cache) if inputs.cache is not None else None
        ids = torch.cat([ids, next_ids[:, None]], dim=1)
        shift_now = torch.where(shift_at == generated_index, pending_shift, 0)[:, None]  # (B, 1)
        positions = torch.cat([positions, positions[:, -1:] + 1 + shift_now], dim=1)
        attention = torch.cat([attention, torch.ones_like(attention[:, :1])], dim=1)
        # Without a KV cache the whole sequence is fed again at every step.
        step_ids, step_positions = (ids[:, -1:], positions[:, -1:]) if cache is not None else (ids, positions)
    generated = torch.stack(new_tokens, dim=1).tolist()  # (B, steps)
    if eos_left is None:
        return generated
    out = []
    for row, tokens in zip(eos_left, generated):
        seen, end = 0, len(tokens)
        for index, token in enumerate(tokens):
            seen += token == eos_id
            if seen >= row:
                end = index + 1
                break
        out.append(tokens[:end])
    return out


def generate_batched(
    model: torch.nn.Module,
    tokenizer: Any,
    prompts: Sequence[Sequence[int]],
    max_new_tokens: int,
    batch_size: int = 64,
    stop_after_answer: bool = True,
    position_shifts: Sequence[tuple[int, int]] | None = None,
) -> list[list[int]]:
    """Greedy continuations of token-id prompts, generated in left-padded batches with a KV cache.

    Args:
        model: a causal LM (``transformers`` model, possibly PEFT-wrapped, on any device); put in eval mode during
            generation and restored afterwards.
        tokenizer: gives ``eos_token_id`` and ``pad_token_id`` (``eos`` when None).
        prompts: token ids per prompt, e.g. from :func:`hf_icot.collator.encode_prompt`.
        max_new_tokens: at most this many tokens per continuation.
        batch_size: prompts per forward pass.
        stop_after_answer: stop a row at the ``<eos>`` that closes the answer (the third of the sequence, see the
            module docstring); otherwise every continuation has ``max_new_tokens`` tokens.
        position_shifts: per prompt, ``(start, shift)``: the tokens from index ``start`` on get position ids
            ``shift`` higher, as a model trained with ``fill="keep_position"`` saw them after a removed CoT. Indices
            count the prompt, then the continuation: ``start = len(prompt) + j`` shifts from the j-th generated
            token on.

    Returns:
        For each prompt, in order, the generated ids (the closing ``<eos>`` included when reached), without padding.

    Raises:
        ValueError: an empty prompt list or prompt, a non-positive ``max_new_tokens`` or ``batch_size``, a tokenizer
            without an eos token, or (with ``stop_after_answer``) a prompt already holding three ``<eos>``.
    """
    if not prompts:
        raise ValueError("generate_batched got no prompts; pass at least one list of token ids.")
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens {max_new_tokens!r} is not allowed; it must be an integer >= 1.")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size {batch_size!r} is not allowed; it must be an integer >= 1.")
    eos_id = tokenizer.eos_token_id
    if eos_id is None:
        raise ValueError("the tokenizer has no eos_token_id; hf_icot sequences use <eos> as separator, so set one.")
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos_id
    eos_left = None
    if stop_after_answer:
        eos_left = [EOS_PER_SEQUENCE - list(p).count(eos_id) for p in prompts]
        for index, left in enumerate(eos_left):
            if left < 1:
                raise ValueError(
                    f"prompt {index} already holds {EOS_PER_SEQUENCE - left} <eos> tokens, so its answer is closed; "
                    "a prompt ends before the answer (see hf_icot.collator.encode_prompt)."
                )
    if position_shifts is not None and len(position_shifts) != len(prompts):
        raise ValueError(
            f"position_shifts has {len(position_shifts)} entries for {len(prompts)} prompts; give one each."
        )
    context = context_length(model)
    for index, prompt in enumerate(prompts):
        if len(prompt) == 0:
            raise ValueError(f"prompt {index} is empty; every prompt needs at least one token.")
        reach = len(prompt) + (position_shifts[index][1] if position_shifts is not None else 0)
        if context is not None and reach >= context:
            raise ValueError(
                f"prompt {index} reaches position {reach} but the model's context is {context}; "
                "prompts must end before the context to leave room for generation."
            )

    inputs = _ForwardInputs(model)
    results: list[list[int]] = [[] for _ in prompts]
    with _inference(model):
        for batch in _chunks(prompts, batch_size, same_length=not inputs.position_ids):
            continuations = _generate_batch(
                model,
                [prompts[i] for i in batch],
                [eos_left[i] for i in batch] if eos_left is not None else None,
                max_new_tokens,
                pad_id,
                eos_id,
                inputs,
                context,
                [position_shifts[i] for i in batch] if position_shifts is not None else None,
            )
            for i, continuation in zip(batch, continuations):
                results[i] = continuation
    return results
