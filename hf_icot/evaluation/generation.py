"""Batched greedy generation for ICoT models through ``model.generate``, with a stop after the answer.

A model sequence is ``question <eos> [hint] cot <eos> #### answer <eos>`` (see :mod:`hf_icot.data.collator`), so a
continuation is complete once its prompt plus continuation hold three ``<eos>`` (:class:`AnswerClosed`, a
``StoppingCriteria``); a batch ends when all its rows are. Prompts are left-padded, in batches sorted by length.
:mod:`hf_icot.evaluation` builds the prompts and scores what comes back.

Decoding is greedy under a ``GenerationConfig`` of our own; the model's ``generation_config`` (sampling, penalties, its
eos token, which would stop a row at the first ``<eos>``) is set aside during the call. Only whether to use a KV
cache comes from it (``use_cache=False`` for a model without one): that changes speed, not tokens.

**Kept positions.** Models trained with ``fill="keep_position"`` saw the tokens after a removed CoT at their
untruncated positions, and ``position_shifts`` say from which token a row's positions jump. A jump inside the prompt
(implicit mode) is in the ``position_ids`` given to ``generate``, which continues them by one per generated token. A
jump at a generated token (under ``hint=k``: the first generated token after a left removal, the ``<eos>`` after the
``k`` kept tokens of a right removal) is the one step ``generate`` cannot take, so generation then runs in segments:
a ``generate`` call makes exactly the tokens up to and including the one that jumps (``j + 1`` tokens when token
``j`` jumps), that token's position id is moved, and the next call continues the same sequences from there with the
KV cache of the first (which holds everything before the jumping token, so only it is fed again, at its new
position). Rows of one batch that jump at different tokens give one segment per distinct token.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from transformers import GenerationConfig, StoppingCriteria, StoppingCriteriaList

from hf_icot.modeling.sizing import context_length

#: Number of ``<eos>`` in a full model sequence; the last one closes the answer.
EOS_PER_SEQUENCE = 3


class AnswerClosed(StoppingCriteria):
    """Stops a row once its continuation holds the ``<eos>`` tokens it still needed to close the answer.

    Args:
        eos_token_id: the ``<eos>`` id.
        prompt_width: the (left-padded) prompt width: tokens after it are the continuation.
        eos_needed: (B,) per row, ``EOS_PER_SEQUENCE`` minus the ``<eos>`` already in its prompt.
    """

    def __init__(self, eos_token_id: int, prompt_width: int, eos_needed: torch.Tensor) -> None:
        self.eos_token_id, self.prompt_width, self.eos_needed = eos_token_id, prompt_width, eos_needed

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor | None = None, **kwargs) -> torch.Tensor:
        # Counted on the whole continuation, so a call that continues earlier tokens needs no state.
        seen = (input_ids[:, self.prompt_width :] == self.eos_token_id).sum(dim=-1)  # (B,)
        return seen >= self.eos_needed.to(seen.device)


def _unwrapped(model: torch.nn.Module) -> torch.nn.Module:
    """The transformers model under a PEFT wrapper (it holds the ``generation_config`` and the ``forward``)."""
    get_base_model = getattr(model, "get_base_model", None)
    return get_base_model() if callable(get_base_model) else model


def _model_device(model: torch.nn.Module) -> torch.device:
    device = getattr(model, "device", None)
    return device if isinstance(device, torch.device) else next(model.parameters()).device


@contextlib.contextmanager
def _greedy_inference(model: torch.nn.Module) -> Iterator[None]:
    """Eval mode without autograd and with a neutral ``generation_config``, restoring the model's training mode and
    generation config afterwards (even on error)."""
    base = _unwrapped(model)
    was_training, own_config = model.training, base.generation_config
    base.generation_config = GenerationConfig()
    model.eval()
    try:
        with torch.inference_mode():
            yield
    finally:
        base.generation_config = own_config
        model.train(was_training)


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
    eos_needed: list[int] | None,
    max_new_tokens: int,
    pad_id: int,
    eos_id: int,
    context: int | None,
    shifts: list[tuple[int, int]] | None,
    use_cache: bool,
    takes_positions: bool,
    synced_gpus: bool | None,
) -> list[list[int]]:
    width = max(len(p) for p in prompts)
    shifts = shifts or [(len(p), 0) for p in prompts]
    if context is not None:  # a position past the model's context has no embedding
        reach = max(len(prompt) + shift for prompt, (_, shift) in zip(prompts, shifts))
        max_new_tokens = min(max_new_tokens, context - reach)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, prompt in enumerate(prompts):
        ids[row, width - len(prompt) :] = torch.tensor(prompt, dtype=torch.long)
        attention[row, width - len(prompt) :] = 1
    # Left padding shifts each row's tokens right, so positions count real tokens only (as generate() does).
    positions = (attention.cumsum(-1) - 1).clamp(min=0)  # (B, T)
    jumps: dict[int, list[tuple[int, int]]] = {}  # generated token index -> [(row, shift)] (see the module docstring)
    for row, (start, shift) in enumerate(shifts):
        column = width - len(prompts[row]) + start
        if column < width:
            positions[row, column:] += shift
        elif shift and start - len(prompts[row]) + 1 < max_new_tokens:  # a jump at the last token changes nothing
            jumps.setdefault(start - len(prompts[row]), []).append((row, shift))
    device = _model_device(model)
    ids, attention, positions = ids.to(device), attention.to(device), positions.to(device)
    criteria = StoppingCriteriaList()
    if eos_needed is not None:
        criteria.append(AnswerClosed(eos_id, width, torch.tensor(eos_needed, device=device)))

    # One generate call per segment (see the module docstring). A batch whose rows all closed their answers still
    # takes its remaining segments (one step each): the number of calls never depends on the tokens, as processes
    # generating in step (synced_gpus) need.
    cache = None
    for end in sorted(index + 1 for index in jumps) + [max_new_tokens]:
        config = GenerationConfig(
            max_new_tokens=end - (ids.shape[1] - width),
            do_sample=False,
            num_beams=1,
            use_cache=use_cache,
            pad_token_id=pad_id,
            return_dict_in_generate=True,
        )
        inputs: dict[str, Any] = {"input_ids": ids, "attention_mask": attention}
        if takes_positions:
            inputs["position_ids"] = positions
        if cache is not None:
            inputs["cache"] = cache
        output = model.generate(
            **inputs, generation_config=config, stopping_criteria=criteria, synced_gpus=synced_gpus
        )
        new = output.sequences.shape[1] - ids.shape[1]
        ids, cache = output.sequences, output.get("cache")
        if ids.shape[1] - width >= max_new_tokens:  # the last segment: nothing follows
            break
        attention = torch.cat([attention, attention.new_ones((len(prompts), new))], dim=1)
        steps = torch.arange(1, new + 1, device=device)
        positions = torch.cat([positions, positions[:, -1:] + steps], dim=1)
        for row, shift in jumps.get(ids.shape[1] - width - 1, []):  # the token just generated, and all after it
            positions[row, -1] += shift

    generated = ids[:, width:].tolist()  # (B, steps)
    if eos_needed is None:
        return generated
    out = []
    for needed, tokens in zip(eos_needed, generated):  # a finished row goes on with filler until its batch ends
        eos_at = [index for index, token in enumerate(tokens) if token == eos_id]
        out.append(tokens[: eos_at[needed - 1] + 1] if len(eos_at) >= needed else tokens)
    return out


def generate_batched(
    model: torch.nn.Module,
    tokenizer: Any,
    prompts: Sequence[Sequence[int]],
    max_new_tokens: int,
    batch_size: int = 64,
    stop_after_answer: bool = True,
    position_shifts: Sequence[tuple[int, int]] | None = None,
    synced_gpus: bool | None = None,
) -> list[list[int]]:
    """Greedy continuations of token-id prompts, generated by ``model.generate`` in left-padded batches.

    Args:
        model: a causal LM with ``generate`` (a ``transformers`` model, possibly PEFT-wrapped, on any device); put in
            eval mode during generation and restored afterwards.
        tokenizer: gives ``eos_token_id`` and ``pad_token_id`` (``eos`` when None).
        prompts: token ids per prompt, e.g. from :func:`hf_icot.data.encoding.encode_prompt`.
        max_new_tokens: at most this many tokens per continuation.
        batch_size: prompts per ``generate`` call.
        stop_after_answer: stop a row at the ``<eos>`` that closes the answer (the third of the sequence, see the
            module docstring); otherwise every continuation has ``max_new_tokens`` tokens.
        position_shifts: per prompt, ``(start, shift)``: the tokens from index ``start`` on get position ids
            ``shift`` higher, as a model trained with ``fill="keep_position"`` saw them after a removed CoT. Indices
            count the prompt, then the continuation: ``start = len(prompt) + j`` shifts from the j-th generated
            token on.
        synced_gpus: passed to ``generate``: keep every process stepping until all are done, as FSDP and DeepSpeed
            ZeRO-3 need when each process generates its own prompts; None lets ``generate`` decide (on for such a
            model across processes). Every process must then make as many ``generate`` calls: the same number of
            batches and, with position jumps at generated tokens (see the module docstring), jumps at the same token
            indices.

    Returns:
        For each prompt, in order, the generated ids (the closing ``<eos>`` included when reached), without padding.

    Raises:
        ValueError: an empty prompt list or prompt, a non-positive ``max_new_tokens`` or ``batch_size``, a tokenizer
            without an eos token, (with ``stop_after_answer``) a prompt already holding three ``<eos>``, a prompt
            reaching the model's context, a position shift for a model whose ``forward`` takes no ``position_ids``,
            or a model without ``generate``.
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
    eos_needed = None
    if stop_after_answer:
        eos_needed = [EOS_PER_SEQUENCE - list(p).count(eos_id) for p in prompts]
        for index, left in enumerate(eos_needed):
            if left < 1:
                raise ValueError(
                    f"prompt {index} already holds {EOS_PER_SEQUENCE - left} <eos> tokens, so its answer is closed; "
                    "a prompt ends before the answer (see hf_icot.data.encoding.encode_prompt)."
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
    if not callable(getattr(model, "generate", None)):
        raise ValueError(
            f"{type(model).__name__} has no generate method; pass a transformers causal LM (its class inherits "
            "GenerationMixin), e.g. one loaded with AutoModelForCausalLM."
        )
    base = _unwrapped(model)
    # A forward without position_ids (generate() then passes none) would misplace left-padded tokens: such a model
    # gets batches of one prompt length, and no kept positions.
    takes_positions = "position_ids" in inspect.signature(base.forward).parameters
    if not takes_positions and any(shift for _, shift in position_shifts or []):
        raise ValueError(
            f"{type(base).__name__}.forward takes no position_ids, so the kept positions in position_shifts cannot "
            "be given to it; evaluate keep_position models that take position_ids."
        )
    use_cache = getattr(base.generation_config, "use_cache", None) is not False

    results: list[list[int]] = [[] for _ in prompts]
    with _greedy_inference(model):
        for batch in _chunks(prompts, batch_size, same_length=not takes_positions):
            continuations = _generate_batch(
                model,
                [prompts[i] for i in batch],
                [eos_needed[i] for i in batch] if eos_needed is not None else None,
                max_new_tokens,
                pad_id,
                eos_id,
                context,
                [position_shifts[i] for i in batch] if position_shifts is not None else None,
                use_cache,
                takes_positions,
                synced_gpus,
            )
            for i, continuation in zip(batch, continuations):
                results[i] = continuation
    return results


def generate_with_empty_cot_shifts(
    model: torch.nn.Module,
    tokenizer: Any,
    prompts: Sequence[Sequence[int]],
    max_new_tokens: int,
    empty_cot_shifts: Sequence[int],
    batch_size: int = 64,
    position_shifts: Sequence[tuple[int, int]] | None = None,
    synced_gpus: bool | None = None,
) -> list[list[int]]:
    """:func:`generate_batched` for free generation by ``keep_position`` models: a row whose first generated token
    is ``<eos>`` has closed an empty CoT, so that ``<eos>`` and all after it sit ``empty_cot_shifts[i]`` positions
    later, where they stood with the full CoT (as the model was trained once its CoT was gone); other rows keep
    running positions. Whether a row jumps depends on what it writes, so the first token is generated alone and the
    rest continues from it.

    Raises:
        ValueError: ``empty_cot_shifts`` without one entry per prompt, or what :func:`generate_batched` refuses.
    """
    if len(empty_cot_shifts) != len(prompts):
        raise ValueError(
            f"empty_cot_shifts has {len(empty_cot_shifts)} entries for {len(prompts)} prompts; give one each."
        )
    first = generate_batched(
        model, tokenizer, prompts, 1, batch_size, stop_after_answer=False, position_shifts=position_shifts,
        synced_gpus=synced_gpus,
    )  # fmt: skip
    if max_new_tokens == 1:
        return first
    eos = tokenizer.eos_token_id
    extended = [list(prompt) + token for prompt, token in zip(prompts, first)]
    shifts = []
    for index, (prompt, token) in enumerate(zip(prompts, first)):
        start, shift = position_shifts[index] if position_shifts is not None else (len(prompt), 0)
        if token == [eos] and empty_cot_shifts[index]:
            if shift:
                raise ValueError(f"prompt {index} already has a position shift; give it no empty_cot_shift.")
            start, shift = len(prompt), empty_cot_shifts[index]
        shifts.append((start, shift))
    rest = generate_batched(
        model, tokenizer, extended, max_new_tokens - 1, batch_size, position_shifts=shifts, synced_gpus=synced_gpus
    )
    return [token + more for token, more in zip(first, rest)]
