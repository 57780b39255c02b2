"""Model sizes: the context a model takes (:func:`context_length`) and the width for a depth at a parameter budget
(GPT-2 models of different shapes with, nearly, the same size).

The count is the real one — the parameters of the GPT-2 causal LM the config builds, tied input and output
embeddings counted once, as ``model.num_parameters()`` reports — obtained by building the model on PyTorch's
``meta`` device (no memory, no initialisation), so every GPT-2 field (``n_inner``, ``n_positions``,
``vocab_size``, …) counts as it would in the trained model. The search between widths uses the closed form
:func:`gpt2_formula_count` (fast); the count returned is always the built model's. Example::

    n_embd, count = width_for_budget(depth=4, budget=200_000, n_head=4, vocab_size=30, n_positions=64)
"""

from __future__ import annotations

from typing import Any

#: How far the real count may lie from the budget (a fraction of the budget).
BUDGET_TOLERANCE = 0.05


def context_length(model: Any) -> int | None:
    """The longest sequence ``model`` takes (``n_positions``, ``max_position_embeddings`` or ``n_ctx``), or None."""
    config = getattr(model, "config", None)
    for name in ("n_positions", "max_position_embeddings", "n_ctx"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def gpt2_parameter_count(**gpt2_fields: Any) -> int:
    """Parameters of ``GPT2LMHeadModel(GPT2Config(**gpt2_fields))``, built on the meta device.

    Raises:
        ValueError: a field that ``GPT2Config`` does not have.
    """
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    known = set(GPT2Config().to_dict()) | set(GPT2Config.attribute_map)
    unknown = sorted(set(gpt2_fields) - known)
    if unknown:
        raise ValueError(f"{unknown[0]!r} is not a GPT2Config field; give GPT-2 fields such as n_head, vocab_size.")
    # Token ids only matter for generation; ids inside the vocabulary keep the config from warning about them.
    fields = {"bos_token_id": 0, "eos_token_id": 0, **gpt2_fields}
    with torch.device("meta"):
        model = GPT2LMHeadModel(GPT2Config(**fields))
    return model.num_parameters()


def gpt2_formula_count(
    n_layer: int,
    n_embd: int,
    vocab_size: int = 50257,
    n_positions: int = 1024,
    n_inner: int | None = None,
    tie_word_embeddings: bool = True,
    **_: Any,
) -> int:
    """The GPT-2 parameter count in closed form (the other fields do not change it): token and position embeddings,
    per block two LayerNorms, the attention's qkv and output projections and the MLP (``n_inner``, default 4 x
    width), the final LayerNorm, and an output head only when it is not tied to the token embeddings."""
    d, inner = n_embd, n_inner or 4 * n_embd
    block = 2 * 2 * d + (3 * d * d + 3 * d) + (d * d + d) + (2 * d * inner + inner + d)
    head = 0 if tie_word_embeddings else vocab_size * d
    return (vocab_size + n_positions) * d + n_layer * block + 2 * d + head


def width_for_budget(depth: int, budget: int, step: int | None = None, **gpt2_fields: Any) -> tuple[int, int]:
    """The width ``n_embd`` (a multiple of ``step``) whose ``depth``-layer GPT-2 has the real parameter count closest
    to ``budget``, and that count.

    Args:
        depth: transformer blocks (``n_layer``), >= 1.
        budget: target number of parameters (all of them, embeddings included), >= 1.
        step: widths tried are its multiples; default ``n_head`` (GPT-2 needs ``n_embd % n_head == 0``).
        gpt2_fields: the other ``GPT2Config`` fields (``n_head``, ``vocab_size``, ``n_positions``, ``n_inner``, …);
            not ``n_layer`` or ``n_embd``, which this sets.

    Returns:
        ``(n_embd, real_count)`` with ``|real_count - budget| <= 5%`` of the budget.

    Raises:
        ValueError: a depth or budget below 1, a step that is not a positive multiple of ``n_head``, ``n_layer`` or
            ``n_embd`` among the fields, or no width within 5% of the budget (a budget too small for the depth, or
            one between two widths' counts).
    """
    from transformers import GPT2Config

    if not isinstance(depth, int) or depth < 1:
        raise ValueError(f"depth {depth!r} is not allowed; a GPT-2 needs at least 1 layer.")
    if not isinstance(budget, int) or budget < 1:
        raise ValueError(f"parameter budget {budget!r} is not allowed; give a positive number of parameters.")
    taken = sorted({"n_layer", "n_embd", "num_hidden_layers", "hidden_size"} & set(gpt2_fields))
    if taken:
        raise ValueError(f"{taken[0]!r} is set by width_for_budget from depth and budget; leave it out.")
    n_head = int(gpt2_fields.get("n_head", GPT2Config().n_head))
    step = n_head if step is None else step
    if not isinstance(step, int) or step < 1 or step % n_head:
        raise ValueError(f"width step {step!r} is not allowed; use a positive multiple of n_head ({n_head}).")

    defaults = {"vocab_size": GPT2Config().vocab_size, "n_positions": GPT2Config().n_positions}

    def count(multiple: int) -> int:
        return gpt2_formula_count(n_layer=depth, n_embd=multiple * step, **{**defaults, **gpt2_fields})

    smallest = count(1)
    if smallest > budget * (1 + BUDGET_TOLERANCE):
        raise ValueError(
            f"a parameter budget of {budget:,} is too small for depth {depth}: its narrowest GPT-2 (width {step}) "
            f"already has {smallest:,} parameters; raise the budget or lower the depth."
        )
    # The count grows with the width: double until past the budget, then bisect to the two widths around it.
    low, high = 1, 2
    while count(high) < budget:
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if count(middle) < budget else (low, middle)
    candidates = [(abs(count(m) - budget), m) for m in (low, high)]
    _, best = min(candidates)
    real = gpt2_parameter_count(n_layer=depth, n_embd=best * step, **gpt2_fields)
    if abs(real - budget) > BUDGET_TOLERANCE * budget:
        raise ValueError(
            f"no width for depth {depth} comes within 5% of the budget {budget:,}: widths {low * step} and "
            f"{high * step} give {count(low):,} and {count(high):,} parameters; change the budget or the step."
        )
    return best * step, real
