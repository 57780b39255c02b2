"""Model B: one-layer linear attention with a fixed non-linear MLP, for k-sparse parity with the chain CoT.

After the theory part of "Learning through Internalization" (Tsilivis, Joshi, Medvedev, Kempe, Srebro; arXiv
2606.20937). Its exact algorithm ("Algorithm 2": initialisation and rounding steps) was not available to us; this
is the closest version of the description we could write, and every choice below is ours::

    u_i = sum_{j < i} W[i, j] v_j      linear attention (no softmax), positional key-query W (T x T), causal
    z_i = phi(u_i) = -cos(pi u_i)      the fixed MLP: turns a sum with weights 1/2 into a parity
    v_j = x_j for bits and CoT values (bit "0" -> +1, "1" -> -1), 0 for placeholders, 1 for the <eos> after the
          question (a constant input, so W[i, n] acts as a bias)

z_i predicts CoT step i (emitted at position i - 1, the causal LM shift); the answer is read from the state of the
last step (its value when visible, z when padded). With weights 1/2 on a set S of ±1 inputs and -(|S| - 2)/2 on the
constant, phi gives their product for any |S|, so one layer can express every step after any left removal: step j
from step j - 1 and one bit while the CoT is there, from j + 1 bits once the steps before it are removed.

Assumptions (also in results/parity/README.md):

* Removal from the left with placeholders (``Stepwise``, ``removal_fill: pad``): positions stay where they were,
  the removed values read 0. A one-layer model reads only input values, so a padded step contributes nothing.
* Initialisation: row i of W puts 1 / (number of value positions before i) on each bit and earlier CoT position,
  0 on the constant; as a softmax at zero scores would, and away from the saddle of phi at u = 0.
* Rounding steps: :class:`results.parity.theory.rounding.RoundingCallback` with ``grid=0.5`` at every stage end (each
  CoT removal), snapping W onto the grid its solutions lie on before the next removal.
"""

from __future__ import annotations

import math

import torch
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

REMOVED_READS = ("zero", "computed")
INITS = ("uniform", "chain")


class LinearAttentionParityConfig(PretrainedConfig):
    """n_bits, k (k - 1 chain steps), readout_scale, what a removed step's position reads (``removed_reads``) and
    the initialisation (``init``); token ids from the tokenizer (``token_fields``).

    * ``removed_reads="zero"``: a removed step reads 0 (the first round's reading); ``"computed"``: it reads the
      model's own output at that position, computed left to right, as the gates of model A carry a layer's output
      into the positions of the removed nodes (see the README's reasoning for Algorithm 2).
    * ``init="uniform"``: every row puts 1 / (its value positions) on each; ``"chain"``: step 1 is uniform over the
      bits, every later step puts 1/2 on the step before it (which gives its missing bit a first-order gradient).
    """

    model_type = "linear_attention_parity"
    token_fields = TOKEN_FIELDS

    def __init__(
        self,
        n_bits: int = 8,
        k: int = 3,
        readout_scale: float = 8.0,
        removed_reads: str = "zero",
        init: str = "uniform",
        vocab_size: int = 16,
        zero_token_id: int = 0,
        one_token_id: int = 1,
        marker_token_id: int = 2,
        placeholder_token_id: int = 3,
        **kwargs,
    ) -> None:
        if not isinstance(k, int) or k < 2:
            raise ValueError(f"k={k!r} is not allowed; the chain CoT needs k >= 2 secret positions.")
        if not isinstance(n_bits, int) or n_bits < k:
            raise ValueError(f"n_bits={n_bits!r} is below k={k}; the k secret positions are among the n bits.")
        if removed_reads not in REMOVED_READS:
            raise ValueError(f"removed_reads={removed_reads!r} is unknown; allowed: {', '.join(REMOVED_READS)}.")
        if init not in INITS:
            raise ValueError(f"init={init!r} is unknown; allowed: {', '.join(INITS)}.")
        self.n_bits, self.k, self.readout_scale, self.vocab_size = n_bits, k, float(readout_scale), vocab_size
        self.removed_reads, self.init = removed_reads, init
        self.zero_token_id, self.one_token_id = zero_token_id, one_token_id
        self.marker_token_id, self.placeholder_token_id = marker_token_id, placeholder_token_id
        self.n_positions = sequence_length(n_bits, k)
        self.num_hidden_layers = 1  # the name generation utilities look for
        kwargs.setdefault("use_cache", False)
        super().__init__(**kwargs)


def chain_learning_rate(k: int, readout_scale: float = 8.0) -> float:
    """The plain-GD learning rate at which one step from the ``chain`` initialisation gives every step j >= 2 its
    missing bit a weight of 1/2, the value of its solution.

    With 1/2 on the step before it, step j's attended sum is u = ±1/2, where phi = 0 and phi' = ±pi (its steepest):
    the expected descent direction on the weight of bit j + 1 is readout_scale * pi / (2 N), N = k + 3 labelled tokens
    averaged over, and 0 on every other bit (E[y s_(j-1) x_b] = [b = j + 1] for the step's target y = s_(j-1) x_(j+1)).
    A step of 1/2 then takes eta = N / (readout_scale * pi). Step 1 (a parity of two unknown bits) has only a
    second-order gradient from its uniform start and takes many such steps; the other steps sit at their solution,
    where phi' = 0, meanwhile.
    """
    return (k + 3) / (readout_scale * math.pi)


def phi(u: torch.Tensor) -> torch.Tensor:
    """The fixed MLP, -cos(pi u)."""
    return -torch.cos(math.pi * u)


def chain_masks(n_bits: int, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(T, T) ``allowed`` (row i = CoT step i reads the bits, the constant and the earlier steps) and ``values`` (the
    same without the constant: where the initial weights go)."""
    T = sequence_length(n_bits, k)
    allowed = torch.zeros(T, T, dtype=torch.bool)
    values = torch.zeros(T, T, dtype=torch.bool)
    for i in range(n_bits + 1, n_bits + k):
        values[i, :n_bits] = True
        values[i, n_bits + 1 : i] = True
        allowed[i] = values[i]
        allowed[i, n_bits] = True
    return allowed, values


class LinearAttentionParityModel(PreTrainedModel, GenerationMixin):
    """One-layer linear-attention parity model as a causal LM over hf_icot parity sequences (module docstring)."""

    accepts_loss_kwargs = False  # a mean loss, blind to num_items_in_batch (why: LogICoTParityModel's)
    config_class = LinearAttentionParityConfig
    main_input_name = "input_ids"
    _supports_cache_class = False

    def __init__(self, config: LinearAttentionParityConfig) -> None:
        super().__init__(config)
        T = sequence_length(config.n_bits, config.k)
        self.w_kq = nn.Parameter(torch.zeros(T, T))  # positional key-query: score of (i, j) is W[i, j]
        self.post_init()
        if self.generation_config is not None:
            self.generation_config.use_cache = False  # no KV cache: generate() re-reads the whole sequence

    def _init_weights(self, module: nn.Module) -> None:
        if module is not self:
            return
        c = self.config
        values = chain_masks(c.n_bits, c.k)[1].float().to(self.w_kq.device)
        weights = values / values.sum(-1, keepdim=True).clamp(min=1)
        if c.init == "chain":  # step 1 uniform over the bits; step j reads step j - 1 with weight 1/2
            first = c.n_bits + 1
            weights = torch.zeros_like(weights)
            weights[first, : c.n_bits] = 1.0 / c.n_bits
            for step in range(first + 1, c.n_bits + c.k):
                weights[step, step - 1] = 0.5
        self.w_kq.data.copy_(weights)

    def get_input_embeddings(self) -> nn.Module | None:
        return None

    def rounded_parameters(self) -> list[nn.Parameter]:
        """What :class:`~results.parity.theory.rounding.RoundingCallback` rounds: the attention weights W."""
        return [self.w_kq]

    def compute(self, ids: torch.Tensor) -> dict[str, torch.Tensor]:
        c = self.config
        v = token_values(ids, c.zero_token_id, c.one_token_id)  # (B, T)
        v[:, c.n_bits] = 1.0  # the constant input
        allowed = chain_masks(c.n_bits, c.k)[0].to(ids.device)  # rebuilt: see LogICoTParityModel.__init__
        weights = self.w_kq * allowed  # (T, T) linear attention: no normalisation
        padded = ids == c.placeholder_token_id
        if c.removed_reads == "computed":  # left to right: a removed step's position holds what the model computed
            columns = torch.arange(v.shape[1], device=v.device)
            for step in range(c.n_bits + 1, c.n_bits + c.k):
                computed = phi(v @ weights[step])  # (B,) the step from the positions before it
                here = padded[:, step : step + 1] & (columns == step)  # (B, T): this position, where removed
                v = torch.where(here, computed[:, None], v)  # out of place: earlier products keep their inputs
        u = v @ weights.T  # (B, T): u_i = sum_j W[i, j] v_j
        z = phi(u)  # (B, T)
        h = torch.where(padded, z, v)
        return {"z": z, "h": h, "attention": weights[None].expand(1, *weights.shape)}

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
        last = sequence_length(c.n_bits, c.k) - 5
        token_ids = {"0": c.zero_token_id, "1": c.one_token_id, "<eos>": c.eos_token_id, "####": c.marker_token_id}
        logits = next_token_logits(
            out["z"], out["h"][:, last], canonical, c.n_bits, c.k, c.vocab_size, token_ids, c.readout_scale
        )
        loss = None if labels is None else parity_lm_loss(logits, labels, c.placeholder_token_id)
        return CausalLMOutput(loss=loss, logits=logits)

    def prepare_inputs_for_generation(self, input_ids, attention_mask=None, **kwargs):
        return {"input_ids": input_ids, "attention_mask": attention_mask}
