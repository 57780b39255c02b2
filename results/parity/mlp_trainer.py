"""The parity study's mixture MLP (model C, :mod:`results.parity.theory.parity_mlp`) trained with the plain
``Trainer``: ``results/parity/train.py``'s training steps for a model that is a classifier, not a causal LM
(``ICoTTrainer`` renders token sequences).

Each training example's number of CoT steps shown is drawn at the optimizer step from the run's ``Mixture``
(:func:`results.parity.theory.parity_mlp.mixture_features`), so a resumed run draws what the uninterrupted one did.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hf_icot.runs.checkpoints import CheckpointedTrainer


class MixtureMLPTrainer(CheckpointedTrainer):
    """The plain ``Trainer`` (kill-safe checkpoints, resume) that turns the collator's pending training rows into MLP
    inputs at the optimizer step."""

    def __init__(self, *args: Any, schedule: Any, n_bits: int, k: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.schedule, self.n_bits, self.k = schedule, n_bits, k

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        from results.parity.theory.parity_mlp import mixture_features

        if "pending" in inputs:
            rows = inputs.pop("pending").examples
            step = self.state.global_step
            inputs["features"] = mixture_features(self.schedule, rows, step, self.n_bits, self.k).to(self.args.device)
        return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)


def train_parity_mlp(
    args: Any,
    schedule: Any,
    fields: Mapping[str, Any],
    train: Any,
    evaluation_sets: Mapping[str, Any],
    resume_from: str | None = None,
) -> tuple[dict[str, float], Any]:
    """Train the MLP under ``schedule`` (``Mixture`` with a hint, a right-side ``Staged`` curriculum (the first
    steps stay shown, fewer each stage), or ``NoCoT``: the end-to-end baseline), evaluating
    every ``args.eval_steps`` on the validation set with no CoT shown; returns the metrics (per split: accuracy with
    0 .. k - 1 steps shown) and the trainer. Saving is the recipe's.

    Raises:
        ValueError: a schedule other than mixture or no_cot, or a mixture without hints.
    """
    from results.parity.theory.parity_mlp import (
        ParityMLPCollator,
        ParityMLPConfig,
        ParityMLPForSequenceClassification,
        encode_features,
    )

    curriculum = schedule.name == "staged" and schedule.side == "right"
    mixture = schedule.name == "mixture" and schedule.layout.hint and schedule.side == "right"
    if not (mixture or curriculum or schedule.name == "no_cot"):
        raise ValueError(
            f"schedule {schedule.name!r} (side {schedule.side!r}) is not allowed for the parity MLP; use mixture "
            "with length_hint true, staged, both with removal_side right (the chain's last step is the answer), or "
            "no_cot, the end-to-end baseline."
        )
    config = ParityMLPConfig(**{key: value for key, value in fields.items() if key != "model_type"})
    n, k = config.n_bits, config.k
    train = train.map(lambda row, index: {"example_id": index}, with_indices=True)

    def shown(split: Any, count: int) -> Any:
        return split.map(lambda row: {"features": encode_features(row, count, n, k)})

    def accuracy(prediction: Any) -> dict[str, float]:
        return {"answer_acc": float((prediction.predictions.argmax(-1) == prediction.label_ids).mean())}

    args.prediction_loss_only = False  # the accuracy needs the logits
    trainer = MixtureMLPTrainer(
        model=ParityMLPForSequenceClassification(config),
        args=args,
        train_dataset=train,
        eval_dataset=shown(evaluation_sets["validation"], 0),
        data_collator=ParityMLPCollator(),
        compute_metrics=accuracy,
        schedule=schedule,
        n_bits=n,
        k=k,
    )
    trainer.train(resume_from_checkpoint=resume_from)
    metrics: dict[str, float] = {}
    for name, split in evaluation_sets.items():
        for count in range(k):
            result = trainer.evaluate(shown(split, count), metric_key_prefix="final")
            metrics[f"{name}/shown={count}/answer_acc"] = result["final_answer_acc"]
    return metrics, trainer
