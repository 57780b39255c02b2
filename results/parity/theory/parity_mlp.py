"""Model C: an MLP that internalizes the chain CoT of k-sparse parity through a mixture over CoT lengths.

After "Learning through Internalization" (Tsilivis, Joshi, Medvedev, Kempe, Srebro; arXiv 2606.20937): an MLP given
the bits plus a variable number of the chain's partial parities, with the number shown as a hint, learns to output
the parity when none is shown. Not a causal LM: the input is one fixed-size vector, the output two logits::

    features = [ bits (n, ±1) | CoT slots (k - 1: ±1 shown, 0 hidden) | hint (one-hot over 0 .. k - 1) ]
    logits   = W_out relu( ... relu(W_1 features) )          (B, 2): answer "0" / "1"

Assumptions (also in results/parity/README.md): the mixture keeps the *first* L steps (``removal_side: right``),
since the chain's last step is the answer itself and any kept suffix would show it; L is uniform over 0 .. k - 1
(``Mixture`` weights); hidden slots read 0 as Log-ICoT's padding. It trains with a plain ``transformers.Trainer``
(:mod:`results.parity.mlp_trainer`) and :class:`ParityMLPCollator`, not ``ICoTTrainer``, whose collator renders
token sequences for a causal LM; each example's L is drawn from the same :class:`hf_icot.curriculum.Mixture` at the
optimizer step (:func:`mixture_features`), as ``ICoTTrainer`` draws it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import SequenceClassifierOutput

from hf_icot.cot import PLACEHOLDER_TOKEN, TruncationSpec, truncate


class ParityMLPConfig(PretrainedConfig):
    """n_bits, k, hidden_size, num_hidden_layers."""

    model_type = "parity_mlp"

    def __init__(self, n_bits: int = 8, k: int = 3, hidden_size: int = 256, num_hidden_layers: int = 2, **kwargs):
        if not isinstance(k, int) or k < 2:
            raise ValueError(f"k={k!r} is not allowed; the chain CoT needs k >= 2 secret positions.")
        if not isinstance(n_bits, int) or n_bits < k:
            raise ValueError(f"n_bits={n_bits!r} is below k={k}; the k secret positions are among the n bits.")
        if hidden_size < 1 or num_hidden_layers < 1:
            raise ValueError(f"hidden_size={hidden_size} and num_hidden_layers={num_hidden_layers} must be >= 1.")
        self.n_bits, self.k, self.hidden_size, self.num_hidden_layers = n_bits, k, hidden_size, num_hidden_layers
        kwargs.setdefault("num_labels", 2)
        super().__init__(**kwargs)

    @property
    def input_size(self) -> int:
        return self.n_bits + 2 * (self.k - 1) + 1


class ParityMLPForSequenceClassification(PreTrainedModel):
    """The mixture MLP (module docstring); ``forward(features, labels)`` with features (B, input_size)."""

    accepts_loss_kwargs = False  # a mean loss, blind to num_items_in_batch (why: LogICoTParityModel's)
    config_class = ParityMLPConfig
    main_input_name = "features"

    def __init__(self, config: ParityMLPConfig) -> None:
        super().__init__(config)
        layers: list[nn.Module] = []
        width = config.input_size
        for _ in range(config.num_hidden_layers):
            layers += [nn.Linear(width, config.hidden_size), nn.ReLU()]
            width = config.hidden_size
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(width, 2)
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            module.reset_parameters()  # PyTorch's default (Kaiming-uniform), as a plain MLP would start

    def forward(
        self, features: torch.Tensor, labels: torch.Tensor | None = None, **kwargs
    ) -> SequenceClassifierOutput:
        logits = self.head(self.body(features))  # (B, 2)
        loss = None if labels is None else nn.functional.cross_entropy(logits, labels)
        return SequenceClassifierOutput(loss=loss, logits=logits)


def encode_features(example: Mapping[str, Any], shown: int, n_bits: int, k: int) -> list[float]:
    """The MLP input of ``example`` with its first ``shown`` CoT steps visible (the rest hidden, read as 0).

    Raises:
        ValueError: a question that is not ``n_bits`` bits, or a CoT that is not ``k - 1`` steps (a chain).
    """
    bits = example["question"].split()
    if len(bits) != n_bits or len(example["cot"]) != k - 1:
        raise ValueError(
            f"the example has {len(bits)} bits and {len(example['cot'])} CoT steps; this MLP takes n_bits={n_bits} "
            f"and a chain of k - 1 = {k - 1} steps."
        )
    spec = TruncationSpec(unit="step", which="right", count=k - 1 - shown, fill="pad", saturate=True)
    steps = truncate(example, spec).tokens  # removed steps become placeholders
    value = {"0": 1.0, "1": -1.0, PLACEHOLDER_TOKEN: 0.0}
    hint = [0.0] * k
    hint[shown] = 1.0
    return [value[b] for b in bits] + [value[s] for s in steps] + hint


def shown_steps(spec: Any, k: int) -> int:
    """How many of the chain's first steps a truncation leaves shown: all (``none``), none (``all``), or all but
    the ``count`` removed from the right."""
    if spec.which == "none":
        return k - 1
    return k - 1 - spec.count if spec.which == "right" else 0


def mixture_features(schedule: Any, rows: Sequence[Mapping[str, Any]], step: int, n_bits: int, k: int) -> torch.Tensor:
    """The MLP inputs of training ``rows`` at optimizer step ``step``: each shows the steps ``schedule`` gives it then
    (a mixture's draw, a curriculum's stage: a pure function of seed, step and example id, so a resumed run draws
    the same)."""
    specs = schedule.specs(step, [row["example_id"] for row in rows], n_steps=[k - 1] * len(rows))
    return torch.tensor([encode_features(row, shown_steps(spec, k), n_bits, k) for row, spec in zip(rows, specs)])


class ParityMLPCollator:
    """Batches for :class:`ParityMLPForSequenceClassification`: rows that carry ``features`` (evaluation sets encoded
    with :func:`encode_features`) are stacked; training rows are kept as they are
    (:class:`~hf_icot.data.collator.PendingExamples`) for the trainer to draw their CoT lengths at the optimizer step
    (:func:`mixture_features`), as ``ICoTTrainer`` truncates at the step rather than in the collator, which runs
    ahead of it."""

    def __call__(self, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        from hf_icot.data.collator import PendingExamples

        labels = torch.tensor([int(row["answer"]) for row in rows])
        if "features" in rows[0]:
            return {"features": torch.tensor([row["features"] for row in rows]), "labels": labels}
        return {"pending": PendingExamples([dict(row) for row in rows]), "labels": labels}
