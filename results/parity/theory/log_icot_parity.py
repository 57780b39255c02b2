"""Model A: the gated multi-layer Log-ICoT transformer for k-sparse parity with a binary-tree CoT.

After "Transformers Provably Learn to Internalize Chain of Thought" (Huang, Zhu, Wang, Jiao, Russell, Sojoudi, Mei;
arXiv 2605.28600), as the hf_icot issue describes it; the study's code was not available to us, so this is our
reading. One layer per tree level (L = log2 k). Layer l computes the level-l nodes::

    h^0_i   = x_i                                   token value: bit "0" -> +1, "1" -> -1, placeholder/other -> 0
    A^l     = softmax_j( E W^KQ_l E^T + level mask ) E = [one-hot position (T) | value (1)], only W^KQ[:T, :T] trained
    z^l_i   = phi( sum_j A^l_ij h^{l-1}_j )         phi(t) = -cos(pi t): mean of two ±1 values -> their product
    h^l_i   = g^l_i z^l_i + (1 - g^l_i) h^{l-1}_i   gate g^l_i = 1 iff position i is a level-l node *and* padded

Assumptions where the description is silent (also in results/parity/README.md):

* The structure comes from the config (n_bits, k fixed per model) and the canonical layout of
  :mod:`results.parity.theory.parity_layout`: the CoT steps are the tree nodes level by level, root last, as
  datasets_builder's ``tree`` layout writes them; an implicit prompt (CoT dropped) is read as every node padded.
* Value map fixed to the value coordinate (W^V = e_value), hidden state one scalar per position; W^KQ starts at 0
  (uniform attention over the allowed positions).
* Gates: a visible CoT token keeps its value (teacher forcing), a padded one (value 0) takes the layer's output.
  This is "set by the tree structure" and isolates each level: layer l's gradient comes only from the loss of the
  level-l nodes (or, once those are padded, from the levels above).
* Level mask: level-l positions attend to the positions of levels 0 .. l-1 (bits are level 0); rows of other
  positions are unused (their gate is closed).
* Loss: the prediction of node i is emitted at position i - 1 (causal LM shift; z_i reads only lower levels, which
  come earlier); placeholder labels are ignored; <eos> and #### are emitted by rule; the answer is read from the
  root's state. P("0") = sigmoid(readout_scale * value) with a fixed readout_scale.
* Rounding (:class:`results.parity.theory.rounding.RoundingCallback`) rounds W^KQ's trainable block to integers after
every
  update; with Adam (scale-free steps of about the learning rate) an entry moves only when its gradient is
  consistent, and a learned layer, whose gradient vanishes, stays where it is.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from transformers import GenerationMixin, PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import CausalLMOutput

from results.parity.theory.parity_layout import (
    TOKEN_FIELDS,
    canonicalize,
    next_token_logits,
    parity_lm_loss,
    sequence_length,
    token_values,
)


class LogICoTParityConfig(PretrainedConfig):
    """n_bits, k (a power of two), num_layers (= log2 k), readout_scale; the token ids come from the tokenizer
    (``token_fields``, filled by :func:`hf_icot.modeling.loading.scratch_config`)."""

    model_type = "log_icot_parity"
    token_fields = TOKEN_FIELDS

    def __init__(
        self,
        n_bits: int = 8,
        k: int = 4,
        num_layers: int | None = None,
        readout_scale: float = 8.0,
        vocab_size: int = 16,
        zero_token_id: int = 0,
        one_token_id: int = 1,
        marker_token_id: int = 2,
        placeholder_token_id: int = 3,
        **kwargs,
    ) -> None:
        if not isinstance(k, int) or k < 2 or k & (k - 1):
            raise ValueError(f"k={k!r} is not a power of two >= 2; the Log-ICoT tree pairs nodes up to one root.")
        if not isinstance(n_bits, int) or n_bits < k:
            raise ValueError(f"n_bits={n_bits!r} is below k={k}; the k secret positions are among the n bits.")
        levels = int(math.log2(k))
        num_layers = levels if num_layers is None else num_layers
        if num_layers != levels:
            raise ValueError(f"num_layers={num_layers} does not match log2(k)={levels}; one layer computes one level.")
        self.n_bits, self.k, self.num_layers, self.readout_scale = n_bits, k, num_layers, float(readout_scale)
        self.vocab_size = vocab_size
        self.zero_token_id, self.one_token_id = zero_token_id, one_token_id
        self.marker_token_id, self.placeholder_token_id = marker_token_id, placeholder_token_id
        self.n_positions = sequence_length(n_bits, k)  # what hf_icot's context check reads
        self.num_hidden_layers = num_layers  # the name generation utilities look for
        kwargs.setdefault("use_cache", False)
        super().__init__(**kwargs)


def one_step_learning_rate(n_bits: int, k: int, readout_scale: float = 8.0, target_score: float = 8.0) -> float:
    """The plain-GD learning rate at which one step from W^KQ = 0, on the full-CoT layout, gives the children of
    the deepest node a score of about ``target_score`` (the papers' one step per stage, set from the model's scale).

    At W = 0 a node's attention is uniform over its m allowed positions, the attended mean ``mu`` of the ±1 values
    is O(1/sqrt(m)) and phi'(mu) = pi sin(pi mu) ~ pi^2 mu: the first gradient is second order. For a node whose
    target is the product of two of those values, the expected descent direction on its row is, up to a shift that
    the softmax ignores, ``readout_scale * pi^2 / (2 m^2 N)`` on each child and 0 elsewhere, where N = k + 3 is the
    number of labelled tokens the loss averages over (k - 1 nodes, <eos>, ####, the answer, <eos>). The deepest node
    has the most positions, m = n_bits + k - 2 (the bits and every node below it), so the step that gives it
    ``target_score`` gives every shallower node more. A score of 8 puts >= 99% of a row's attention on its two
    children for m <= 44 (2 e^8 / (2 e^8 + m - 2)); rounding then keeps the largest scores where they are. Measured
    at n = 30, k = 16 on a batch of 8,000: 0.0016-0.0018 (layer 1) and 0.0009 (layer 4) per child against the formula's
    0.0023 and 0.0011.
    """
    m, labelled = n_bits + k - 2, k + 3
    return target_score * 2 * m**2 * labelled / (readout_scale * math.pi**2)


def phi(t: torch.Tensor) -> torch.Tensor:
    """-cos(pi t): phi(0) = -1, phi(±1) = 1, phi'(0) = phi'(±1) = 0, so phi((a + b) / 2) = a * b for a, b = ±1."""
    return -torch.cos(math.pi * t)


def tree_levels(n_bits: int, k: int) -> torch.Tensor:
    """(T,) level of each canonical position: 0 for bits, 1 .. log2 k for the CoT nodes, -1 for the rest."""
    T = sequence_length(n_bits, k)
    level = torch.full((T,), -1, dtype=torch.long)
    level[:n_bits] = 0
    position, width, current = n_bits + 1, k // 2, 1
    while width >= 1:
        level[position : position + width] = current
        position, width, current = position + width, width // 2, current + 1
    return level


def level_mask(levels: torch.Tensor) -> torch.Tensor:
    """(T, T) bool: position i may attend to j iff i is a node of level l >= 1 and 0 <= level(j) < l."""
    return (levels[:, None] >= 1) & (levels[None, :] >= 0) & (levels[None, :] < levels[:, None])


class TreeAttentionLayer(nn.Module):
    """One level: single-head softmax attention with a positional key-query block and a fixed value map."""

    def __init__(self, T: int) -> None:
        super().__init__()
        self.T = T
        self.w_kq_pos = nn.Parameter(torch.zeros(T, T))  # the trainable top T x T block of W^KQ

    def key_query_matrix(self) -> torch.Tensor:
        """(T+1, T+1) W^KQ: the trainable positional block, zeros for every entry touching the value coordinate."""
        return F.pad(self.w_kq_pos, (0, 1, 0, 1))  # the fixed part is zeros, built here, never a parameter

    def attention(self, allowed: torch.Tensor) -> torch.Tensor:
        """(T, T) attention of this level's rows. The scores E W^KQ E^T reduce to the trained positional block,
        because W^KQ is zero wherever it touches the value coordinate: they are the same for every sequence, so the
        softmax is taken once, not once per example (the same numbers as the per-example (B, T, T) form)."""
        scores = self.w_kq_pos.masked_fill(~allowed, float("-inf"))  # (T, T): e_i W^KQ e_j for positions i, j
        # Rows with nothing allowed (bits, separators) would be all -inf; they are gated out, so make them finite.
        return torch.softmax(scores.masked_fill(~allowed.any(-1, keepdim=True), 0.0), dim=-1)

    def forward(self, h: torch.Tensor, allowed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        attention = self.attention(allowed)  # (T, T), shared by the batch
        mean = h @ attention.T  # (B, T): fixed value map, the scalar state of each position
        return phi(mean), attention


class LogICoTParityModel(PreTrainedModel, GenerationMixin):
    """The Log-ICoT theory transformer as a causal LM over hf_icot parity sequences (see the module docstring)."""

    # The loss is a mean over this micro-batch, blind to num_items_in_batch: without this, Trainer (which reads
    # **kwargs in forward as taking it) would skip its division by the accumulation steps, and a step of G
    # micro-batches would move the weights G times too far.
    accepts_loss_kwargs = False
    config_class = LogICoTParityConfig
    main_input_name = "input_ids"
    _supports_cache_class = False

    def __init__(self, config: LogICoTParityConfig) -> None:
        super().__init__(config)
        T = sequence_length(config.n_bits, config.k)
        self.layers = nn.ModuleList(TreeAttentionLayer(T) for _ in range(config.num_layers))
        # The structure is a function of (n_bits, k), rebuilt in compute(): non-persistent buffers would come back
        # uninitialised from from_pretrained (transformers builds the model on the meta device).
        self.post_init()
        if self.generation_config is not None:
            self.generation_config.use_cache = False  # no KV cache: generate() re-reads the whole sequence

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, TreeAttentionLayer):
            nn.init.zeros_(module.w_kq_pos)  # uniform attention over the allowed positions

    def get_input_embeddings(self) -> nn.Module | None:
        return None  # tokens are read as fixed ±1 values, there is no embedding table to resize

    def rounded_parameters(self) -> list[nn.Parameter]:
        """What :class:`~results.parity.theory.rounding.RoundingCallback` rounds: the trainable W^KQ blocks."""
        return [layer.w_kq_pos for layer in self.layers]

    def _token_ids(self) -> dict[str, int]:
        c = self.config
        return {"0": c.zero_token_id, "1": c.one_token_id, "<eos>": c.eos_token_id, "####": c.marker_token_id}

    def compute(self, ids: torch.Tensor) -> dict[str, torch.Tensor]:
        """The canonical computation on (B, T) ids: node predictions z (B, T), final states h (B, T) and each layer's
        attention (L, T, T), the same for every sequence (see :meth:`TreeAttentionLayer.attention`)."""
        c = self.config
        x = token_values(ids, c.zero_token_id, c.one_token_id)  # (B, T)
        padded = ids == c.placeholder_token_id  # (B, T)
        levels = tree_levels(c.n_bits, c.k).to(ids.device)  # (T,)
        allowed_all = level_mask(levels)  # (T, T)
        h, z, maps = x, torch.zeros_like(x), []
        for level, layer in enumerate(self.layers, start=1):
            allowed = allowed_all & (levels == level)[:, None]  # (T, T) only this level's rows
            out, attention = layer(h, allowed)  # (B, T), (T, T)
            node = levels == level  # (T,)
            z = torch.where(node, out, z)
            h = torch.where(node & padded, out, h)  # gate: a padded level-l node takes the layer's value
            maps.append(attention)
        return {"z": z, "h": h, "attention": torch.stack(maps)}

    def forward(
        self,
        input_ids: torch.LongTensor,
        attention_mask: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,  # accepted for generate(); the layout fixes positions
        **kwargs,
    ) -> CausalLMOutput:
        c = self.config
        canonical = canonicalize(input_ids, attention_mask, c.n_bits, c.k, c.eos_token_id, c.placeholder_token_id)
        out = self.compute(canonical.ids)
        root = sequence_length(c.n_bits, c.k) - 5  # the last CoT position
        logits = next_token_logits(
            out["z"], out["h"][:, root], canonical, c.n_bits, c.k, c.vocab_size, self._token_ids(), c.readout_scale
        )  # (B, S, V)
        loss = None if labels is None else parity_lm_loss(logits, labels, c.placeholder_token_id)
        return CausalLMOutput(loss=loss, logits=logits)

    def prepare_inputs_for_generation(self, input_ids, attention_mask=None, **kwargs):
        # No KV cache: every step reads the whole sequence (T is about 50 tokens).
        return {"input_ids": input_ids, "attention_mask": attention_mask}
