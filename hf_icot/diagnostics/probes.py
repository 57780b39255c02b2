"""Linear probes: what a trained model's hidden states encode, layer by layer and position by position.

* :func:`hidden_states_at` — the residual stream of every layer (embeddings first) at chosen positions;
* :func:`linear_probe_accuracy` — held-out accuracy of a multinomial linear (softmax) probe on features;
* :func:`probe_accuracy_map` — one probe per (layer, position): a layer x position accuracy array;
* :func:`state_probe_map` — for state-tracking data (semiautomata: the CoT is the state after each input symbol),
  the layer x step map of how well the state after step t decodes from the hidden state at the t-th input symbol.

A model that computes the states step by step in its hidden states should decode them; one that found a shortcut to
the final answer need not. The probe is trained with full-batch L-BFGS on standardized features with a little L2
(so that its accuracy measures linear decodability, not the optimizer); it runs on the CPU in a fraction of a second
for a few thousand examples.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch


def _layer_count(model: Any) -> int:
    config = model.config
    for name in ("n_layer", "num_hidden_layers", "num_layers"):
        if getattr(config, name, None) is not None:
            return int(getattr(config, name))
    raise ValueError(f"{type(model).__name__} names no layer count in its config (n_layer or num_hidden_layers).")


@torch.no_grad()
def hidden_states_at(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None,
    positions: Sequence[int] | torch.Tensor,
    batch_size: int = 256,
) -> torch.Tensor:
    """The hidden states of every layer at ``positions``: ``(n_layers + 1, n, len(positions), d)`` on the CPU, float32.

    Entry 0 is the embedding output, entry l the output of block l (the last one after the final LayerNorm, as
    transformers returns it).

    Args:
        model: a causal LM that returns ``hidden_states`` (any transformers model).
        input_ids, attention_mask: ``(n, L)`` token ids and mask (None: all ones).
        positions: the same positions for every row (``(k,)``), or one set per row (``(n, k)``).
        batch_size: rows per forward pass.

    Raises:
        ValueError: ``input_ids`` not 2-D, a mask of another shape, or a position outside ``0..L-1``.
    """
    if input_ids.ndim != 2:
        raise ValueError(f"input_ids has shape {tuple(input_ids.shape)}; give a (n, length) tensor of token ids.")
    n, length = input_ids.shape
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    if attention_mask.shape != input_ids.shape:
        raise ValueError(
            f"attention_mask has shape {tuple(attention_mask.shape)}; it must match input_ids "
            f"{tuple(input_ids.shape)}."
        )
    index = torch.as_tensor(positions, dtype=torch.long)
    if index.ndim == 1:
        index = index.unsqueeze(0).expand(n, -1)
    if index.shape[0] != n or index.ndim != 2:
        raise ValueError(f"positions has shape {tuple(index.shape)}; give (k,) or ({n}, k) positions.")
    if index.numel() and (index.min() < 0 or index.max() >= length):
        raise ValueError(f"position {int(index.max())} is outside the sequences (positions 0..{length - 1}).")
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    chunks = []
    for start in range(0, n, batch_size):
        rows = slice(start, start + batch_size)
        output = model(
            input_ids=input_ids[rows].to(device),
            attention_mask=attention_mask[rows].to(device),
            output_hidden_states=True,
        )
        states = torch.stack(output.hidden_states)  # (n_layers + 1, b, L, d)
        where = index[rows].to(device)[None, :, :, None].expand(states.shape[0], -1, -1, states.shape[-1])
        chunks.append(states.gather(2, where).float().cpu())  # (n_layers + 1, b, k, d)
    model.train(was_training)
    return torch.cat(chunks, dim=1)


def linear_probe_accuracy(
    features: torch.Tensor | np.ndarray,
    labels: Sequence[Any] | np.ndarray | torch.Tensor,
    seed: int = 0,
    test_fraction: float = 0.25,
    l2: float = 1e-3,
    max_iter: int = 100,
) -> float:
    """Held-out accuracy of a multinomial logistic-regression probe from ``features`` to ``labels``.

    The rows are split at random (``seed``) into a training part and a held-out ``test_fraction``; features are
    standardized with the training part's mean and deviation; the probe ``softmax(W x + b)`` minimises cross-entropy
    plus ``l2 * |W|^2`` by full-batch L-BFGS.

    Args:
        features: ``(n, d)`` numbers.
        labels: ``n`` class labels of any hashable kind (ints, state names).
        seed, test_fraction: the split (``0 < test_fraction < 1``; both parts need at least one row).
        l2, max_iter: the penalty and the L-BFGS iteration cap.

    Returns:
        The fraction of held-out rows whose label the probe predicts.

    Raises:
        ValueError: features not 2-D, a label count that differs from the rows, a test fraction outside (0, 1) or
            one that leaves a part empty.
    """
    x = torch.as_tensor(np.asarray(features), dtype=torch.float32)
    if x.ndim != 2:
        raise ValueError(f"features have shape {tuple(x.shape)}; give an (n, d) array, one row per example.")
    labels = list(np.asarray(labels).tolist())
    if len(labels) != x.shape[0]:
        raise ValueError(f"{len(labels)} labels were given for {x.shape[0]} feature rows; give one label per row.")
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction {test_fraction} is not allowed; it must lie strictly between 0 and 1.")
    n = x.shape[0]
    n_test = int(round(n * test_fraction))
    if n_test < 1 or n_test >= n:
        raise ValueError(f"test_fraction {test_fraction} of {n} rows leaves a part empty; give more rows.")
    classes = {label: i for i, label in enumerate(sorted(set(labels), key=str))}
    y = torch.tensor([classes[label] for label in labels])
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    test, train = order[:n_test], order[n_test:]
    mean, std = x[train].mean(0), x[train].std(0, unbiased=False).clamp_min(1e-8)
    x = (x - mean) / std
    if len(classes) == 1:  # one class seen: the probe can only say it
        return float((y[test] == 0).double().mean())
    weight = torch.zeros(x.shape[1], len(classes), dtype=torch.float32, requires_grad=True)
    bias = torch.zeros(len(classes), dtype=torch.float32, requires_grad=True)
    optimizer = torch.optim.LBFGS([weight, bias], max_iter=max_iter, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(x[train] @ weight + bias, y[train]) + l2 * weight.pow(2).sum()
        loss.backward()
        return loss

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # matrices this small run several times faster without threads waiting on each other
    try:
        with torch.enable_grad():
            optimizer.step(closure)
    finally:
        torch.set_num_threads(threads)
    with torch.no_grad():
        predicted = (x[test] @ weight + bias).argmax(-1)
    return float((predicted == y[test]).double().mean())


def probe_accuracy_map(
    hidden: torch.Tensor, labels: np.ndarray | Sequence[Sequence[Any]], seed: int = 0, test_fraction: float = 0.25
) -> np.ndarray:
    """One probe per layer and position: ``hidden`` ``(n_layers + 1, n, k, d)`` (:func:`hidden_states_at`) and
    ``labels`` ``(n, k)`` (the target at each position) -> accuracy ``(n_layers + 1, k)``; the same split for all.

    Raises:
        ValueError: ``hidden`` not 4-D, or labels whose shape is not ``(n, k)``.
    """
    if hidden.ndim != 4:
        raise ValueError(f"hidden has shape {tuple(hidden.shape)}; give (n_layers + 1, n, k, d) hidden states.")
    labels = np.asarray(labels)
    if labels.shape != tuple(hidden.shape[1:3]):
        raise ValueError(
            f"labels have shape {labels.shape}; give one per example and position: {tuple(hidden.shape[1:3])}."
        )
    accuracy = np.empty((hidden.shape[0], hidden.shape[2]))
    for layer in range(hidden.shape[0]):
        for position in range(hidden.shape[2]):
            accuracy[layer, position] = linear_probe_accuracy(
                hidden[layer, :, position], labels[:, position], seed=seed, test_fraction=test_fraction
            )
    return accuracy


def state_probe_map(
    model: Any,
    tokenizer: Any,
    examples: Sequence[Mapping[str, Any]],
    steps: Sequence[int] | None = None,
    layers: Sequence[int] | None = None,
    seed: int = 0,
    test_fraction: float = 0.25,
) -> dict[str, Any]:
    """Where the states are: probe accuracy of the state after step t from layer l's hidden state at the t-th input
    symbol of the question, for state-tracking examples (the question's i-th word is input symbol i, the CoT's i-th
    step the state after it, as in the semiautomata task).

    Args:
        model, tokenizer: a trained causal LM and its tokenizer (one token per input symbol).
        examples: rows with ``question`` and ``cot`` (all questions of one length T).
        steps: the steps t (1-based, 1..T) to probe; default all.
        layers: the layers (0 = embeddings, n_layers = last block) to probe; default all.
        seed, test_fraction: the probes' split (:func:`linear_probe_accuracy`).

    Returns:
        ``{"layers": [...], "steps": [...], "accuracy": [[...]] (layers x steps), "majority": [...]}`` where
        ``majority`` is, per step, the share of the most frequent state (a probe that learned nothing gets about it).

    Raises:
        ValueError: no examples, a row without ``cot`` (no probe target), questions of different lengths or not one
            token per symbol, a step outside 1..T or beyond the CoT, or a layer beyond the model.
    """
    from hf_icot.data.encoding import encode_text

    examples = list(examples)
    if not examples:
        raise ValueError("state_probe_map got no examples; give rows with question and cot.")
    if any("cot" not in row or "question" not in row for row in examples):
        raise ValueError("the probe target is the CoT (the state after each step), but the examples lack 'cot'.")
    n_layers = _layer_count(model)
    layers = list(range(n_layers + 1)) if layers is None else [int(layer) for layer in layers]
    bad = [layer for layer in layers if not 0 <= layer <= n_layers]
    if bad:
        raise ValueError(f"probe layer {bad[0]} is beyond the model, which has layers 0..{n_layers} (0: embeddings).")
    ids = [encode_text(row["question"], tokenizer) for row in examples]
    length = len(ids[0])
    symbols = len(examples[0]["question"].split())
    if any(len(row) != length for row in ids) or length != symbols:
        raise ValueError("state_probe_map needs questions of one length with one token per input symbol.")
    shortest_cot = min(len(row["cot"]) for row in examples)
    steps = list(range(1, min(length, shortest_cot) + 1)) if steps is None else [int(t) for t in steps]
    bad = [t for t in steps if not 1 <= t <= min(length, shortest_cot)]
    if bad:
        raise ValueError(
            f"probe target step {bad[0]} is not in the data: the questions have {length} input symbols and the "
            f"shortest CoT {shortest_cot} states; give steps 1..{min(length, shortest_cot)}."
        )
    input_ids = torch.tensor(ids)
    hidden = hidden_states_at(model, input_ids, None, [t - 1 for t in steps])[layers]  # (layers, n, steps, d)
    labels = np.array([[row["cot"][t - 1] for t in steps] for row in examples])
    accuracy = probe_accuracy_map(hidden, labels, seed=seed, test_fraction=test_fraction)
    majority = [max(np.unique(labels[:, j], return_counts=True)[1]) / len(examples) for j in range(len(steps))]
    return {
        "layers": layers,
        "steps": steps,
        "accuracy": accuracy.round(4).tolist(),
        "majority": [round(float(m), 4) for m in majority],
    }
