"""The fixed sequence layout the parity theory models read their structure from (shared by models A and B).

An hf_icot parity sequence for n bits and k secret positions is, position by position (T = n + k + 4)::

    0 .. n-1    the bits b_1 .. b_n        ("0"/"1")
    n           <eos>
    n+1 .. n+k-1  the k - 1 CoT steps, in step order (tree: level by level, the root last; chain: step 1 .. k-1),
                each a value ("0"/"1") or the placeholder <cot_pad> once the curriculum padded it
    n+k         <eos>
    n+k+1       ####
    n+k+2       the answer ("0"/"1")
    n+k+3       <eos>

The theory models are defined on this *canonical* layout, with (n, k) fixed in their config: which position is
which bit, node or level is a function of the position alone. :func:`canonicalize` maps what ``ICoTTrainer`` and
``model.generate`` feed them onto it: it removes left padding (generation prompts are left-padded) and treats a CoT
dropped entirely (the implicit prompt ``question <eos> <eos>``, or ``NoCoT`` training) as k - 1 placeholders, the
CoT the model computes in its hidden states. Any other CoT length (tokens dropped, a length hint) is refused.

Token values follow the studies' ±1 convention: bit "0" -> +1, "1" -> -1, so that XOR is a product; the
placeholder and every other token have value 0 ("the padding value (0)").
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

#: The token ids a theory model's config holds (config field -> token), filled from the tokenizer by
#: :func:`hf_icot.modeling.loading.scratch_config`.
TOKEN_FIELDS = {
    "zero_token_id": "0",
    "one_token_id": "1",
    "marker_token_id": "####",
    "placeholder_token_id": "<cot_pad>",
}
NEG = -1.0e4  # logit of a token that cannot come next: effectively probability 0, yet finite for the loss


def sequence_length(n_bits: int, k: int) -> int:
    """T, the length of the canonical sequence."""
    return n_bits + k + 4


@dataclass
class Canonical:
    """A batch laid onto the canonical layout.

    Attributes:
        ids: (B, T) token ids in canonical positions; positions the batch does not reach yet (during generation)
            hold the placeholder.
        position: (B, S) the canonical position of each input position (-1 for left padding).
        dropped: (B,) whether the row's CoT was dropped (implicit layout).
    """

    ids: torch.Tensor
    position: torch.Tensor
    dropped: torch.Tensor


def canonicalize(
    input_ids: torch.Tensor, attention_mask: torch.Tensor | None, n_bits: int, k: int, eos_id: int, placeholder_id: int
) -> Canonical:
    """Lay ``input_ids`` (B, S) onto the canonical layout of (n_bits, k) (see the module docstring).

    Raises:
        ValueError: a row whose CoT is neither k - 1 tokens long (values or placeholders) nor dropped entirely, or a
            sequence longer than the canonical one.
    """
    B, S = input_ids.shape
    T = sequence_length(n_bits, k)
    device = input_ids.device
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    offset = (attention_mask.cumsum(-1) == 0).sum(-1)  # (B,) left padding of each row
    rel = torch.arange(S, device=device)[None, :] - offset[:, None]  # (B, S) position within the row
    at = (offset + n_bits + 1).clamp(max=S - 1)  # where a dropped CoT puts its closing <eos>
    dropped = (offset + n_bits + 1 < S) & (input_ids.gather(1, at[:, None])[:, 0] == eos_id)  # (B,)
    position = rel + (k - 1) * (dropped[:, None] & (rel >= n_bits + 1)).long()  # (B, S)
    real = (rel >= 0) & (attention_mask > 0)
    if (position[real] >= T).any():
        raise ValueError(
            f"a sequence is longer than the {T} tokens of an n_bits={n_bits}, k={k} parity sequence; give the data "
            "this model was configured for (question, k - 1 CoT steps, answer)."
        )
    close = (offset + n_bits + k).clamp(max=S - 1)  # the <eos> after a full-length CoT
    reaches = offset + n_bits + k < S
    full = input_ids.gather(1, close[:, None])[:, 0] == eos_id
    if (reaches & ~dropped & ~full).any():
        raise ValueError(
            f"a CoT is neither {k - 1} steps long nor dropped; these parity models take the CoT padded with "
            "placeholders (removal_fill pad) or removed entirely (no_cot, implicit prompts), not tokens dropped."
        )
    position = torch.where(real, position, torch.full_like(position, -1))
    ids = torch.full((B, T), placeholder_id, dtype=input_ids.dtype, device=device)
    rows = torch.arange(B, device=device)[:, None].expand(B, S)
    keep = position >= 0
    ids[rows[keep], position[keep]] = input_ids[keep]
    return Canonical(ids=ids, position=position, dropped=dropped)


def token_values(ids: torch.Tensor, zero_id: int, one_id: int) -> torch.Tensor:
    """(B, T) ±1 values: bit "0" -> +1, "1" -> -1 (XOR becomes a product), every other token 0."""
    return (ids == zero_id).float() - (ids == one_id).float()


def next_token_logits(
    node_values: torch.Tensor,
    answer_value: torch.Tensor,
    canonical: Canonical,
    n_bits: int,
    k: int,
    vocab_size: int,
    token_ids: dict[str, int],
    readout_scale: float,
) -> torch.Tensor:
    """Causal-LM logits (B, S, V) of the input positions from the model's canonical predictions.

    Args:
        node_values: (B, T) the model's prediction in [-1, 1] for each CoT position (others ignored); it must depend
            only on earlier positions, as it is emitted one position earlier (the causal LM shift).
        answer_value: (B,) the model's value for the answer.
        token_ids: ids of ``"0"``, ``"1"``, ``"<eos>"`` and ``"####"``.

    A value prediction v gives logits ±readout_scale·v/2 to "0"/"1" (P("0") = sigmoid(readout_scale·v)); the
    structural tokens (<eos>, ####) are emitted by rule, with logit ``-NEG`` margin, since the layout is fixed.
    """
    B, T = node_values.shape
    device = node_values.device
    logits = torch.zeros(B, T, vocab_size, device=device)  # (B, T, V) canonical: position c predicts token c + 1
    value = node_values.roll(-1, dims=1)  # (B, T) value of position c + 1
    value[:, n_bits + k + 1] = answer_value  # the answer follows ####
    is_value = torch.zeros(T, dtype=torch.bool, device=device)
    is_value[n_bits : n_bits + k - 1] = True  # predicting the CoT steps
    is_value[n_bits + k + 1] = True  # predicting the answer
    structural = {n_bits - 1: "<eos>", n_bits + k - 1: "<eos>", n_bits + k: "####"}
    for c in range(n_bits + k + 2, T):
        structural[c] = "<eos>"
    scale = readout_scale / 2
    logits[:, is_value] = NEG
    logits[:, is_value, token_ids["0"]] = scale * value[:, is_value]
    logits[:, is_value, token_ids["1"]] = -scale * value[:, is_value]
    for c, name in structural.items():
        logits[:, c] = NEG
        logits[:, c, token_ids[name]] = 0.0
    # Back to the input positions; after a dropped CoT, the first <eos> is followed by the second one.
    position = canonical.position.clamp(min=0)  # (B, S)
    out = logits.gather(1, position[..., None].expand(*position.shape, vocab_size))  # (B, S, V)
    first_eos = canonical.dropped[:, None] & (canonical.position == n_bits)  # (B, S)
    eos_row = torch.full((vocab_size,), NEG, device=device)
    eos_row[token_ids["<eos>"]] = 0.0
    out = torch.where(first_eos[..., None], eos_row, out)
    return torch.where((canonical.position >= 0)[..., None], out, torch.zeros_like(out))


def parity_lm_loss(logits: torch.Tensor, labels: torch.Tensor, placeholder_id: int) -> torch.Tensor:
    """Next-token cross-entropy, ignoring -100 and placeholder labels: a padded position is not predicted (its
    value is computed in the hidden state), so nothing asks the model to guess which stage a position is in."""
    target = labels[:, 1:].clone()  # (B, S-1)
    target[target == placeholder_id] = -100
    return torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]), target.reshape(-1), ignore_index=-100
    )
