"""The trainer's loss at the labelled positions only (``labelled_logits_only``, on by default): the output layer and
the cross entropy run where the next token carries a label (:mod:`hf_icot.modeling.labelled_logits`), with the same
loss, gradients and gradient-accumulation scaling as ``Trainer.compute_loss``'s full computation.

The way to split the model is chosen once, on the first batch that needs it: each strategy is run beside the model's
own full forward (on two of its rows, so the check's full logits stay small), every process's verdicts are combined (a
strategy is used only if it is exact on every process) and the first exact one is kept. A model neither way splits
exactly (one that computes its own loss, such as the parity theory models), a label smoother, a ``compute_loss_func``
or an evaluation that returns logits gets the full computation, said once in the log.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from hf_icot.modeling.chunked_loss import (
    CHUNK_BYTES,
    chunked_loss_is_exact,
    hidden_states_at,
    linear_cross_entropy,
)
from hf_icot.modeling.labelled_logits import (
    STRATEGIES,
    causal_lm_loss,
    exact_strategies,
    labelled_logits,
    labelled_targets,
    predicting_positions,
)

logger = logging.getLogger(__name__)

#: The output key of the ``(B, T)`` positions the ``(N, V)`` logits belong to (absent: logits at every position).
LOGITS_POSITIONS_KEY = "logits_positions"
_UNDECIDED = "undecided"


class LabelledLoss:
    """The loss at the labelled positions of a ``Trainer``'s batches (``args.labelled_logits_only``), the helper that
    :meth:`hf_icot.training.trainer.ICoTTrainer.compute_loss` calls.

    Args:
        trainer: the ``Trainer`` whose loss this computes: its ``args``, ``accelerator``, ``model`` (the output
            layer), ``label_smoother``, ``compute_loss_func`` and ``model_accepts_loss_kwargs`` are read at each call.

    ``strategy`` is the way chosen (``"logits_to_keep"`` or ``"output_layer"``), None for the full computation,
    ``"undecided"`` before the first batch; ``chunked_loss_exact`` whether the chunked loss is exact for this model
    (None: not checked yet)."""

    def __init__(self, trainer: Any) -> None:
        self.trainer = trainer
        self.strategy: str | None = _UNDECIDED
        self.chunked_loss_exact: bool | None = None
        self._told_full: set[str] = set()

    def compute(
        self, model: Any, inputs: dict[str, Any], return_outputs: bool, num_items_in_batch: Any = None
    ) -> tuple[torch.Tensor, dict[str, Any] | None] | None:
        """``(loss, outputs)`` of ``model`` on ``inputs`` with the output layer and the loss at the labelled positions
        only (``outputs`` holds the ``(N, V)`` logits and, under :data:`LOGITS_POSITIONS_KEY`, their ``(B, T)``
        positions; None unless ``return_outputs``, when the loss may run in row chunks), scaled as
        ``Trainer.compute_loss`` scales the model's own loss; None where the full computation applies (the flag off,
        no labels, a label smoother or ``compute_loss_func``, an evaluation returning logits, or a model that neither
        way splits exactly)."""
        strategy = self._labelled_strategy(model, inputs)
        if strategy is None:
            return None
        trainer, args = self.trainer, self.trainer.args
        labels = inputs["labels"]
        positions = predicting_positions(labels)  # (B, T)
        forward_inputs = {name: value for name, value in inputs.items() if name != "labels"}
        # What Trainer.compute_loss does with the model's own loss: the sum over num_items_in_batch when the model
        # takes loss kwargs (training_step then leaves the loss unscaled), else the mean of the micro-batch.
        scaled = trainer.model_accepts_loss_kwargs and num_items_in_batch is not None
        output_layer = self._output_layer()
        if not return_outputs and self._use_chunked_loss(model, inputs, strategy, output_layer, positions):
            hidden = hidden_states_at(model, forward_inputs, positions, strategy, output_layer)
            targets = labelled_targets(labels, positions)
            loss = linear_cross_entropy(
                hidden, output_layer.weight, targets, output_layer.bias, num_items_in_batch if scaled else None
            )
            outputs = None
        else:
            outputs = labelled_logits(model, forward_inputs, positions, strategy, output_layer)
            loss = causal_lm_loss(outputs["logits"], labels, positions, num_items_in_batch if scaled else None)
        if args.average_tokens_across_devices and scaled:
            tp_size = trainer.get_tp_size() if hasattr(trainer, "get_tp_size") else 1  # as Trainer.compute_loss does
            loss = loss * (trainer.accelerator.num_processes // tp_size if args.n_gpu <= 1 else args.n_gpu)
        if not return_outputs:
            return loss, None
        outputs["loss"] = loss
        outputs[LOGITS_POSITIONS_KEY] = positions
        return loss, outputs

    def _use_chunked_loss(
        self,
        model: Any,
        inputs: dict[str, Any],
        strategy: str,
        output_layer: torch.nn.Module | None,
        positions: torch.Tensor,
    ) -> bool:
        """Whether this training step's loss runs through :func:`linear_cross_entropy` (``args.chunked_loss``): if the
        model passed the check (made on the first training batch against its own forward, on every process alike,
        whatever the batch's size) and the batch's logits could fill more than one chunk (with fewer, the plain loss
        is as small and was faster in the bench)."""
        trainer, args = self.trainer, self.trainer.args
        if not args.chunked_loss or output_layer is None or not model.training:
            return False
        if trainer.is_fsdp_enabled or trainer.is_deepspeed_enabled or args.bf16 or args.fp16:
            return False  # sharded or autocast output layers keep the plain loss
        if trainer.accelerator.num_processes > 1 and not self._output_layer_is_tied(output_layer):
            return False  # DDP's search for unused parameters would not see an untied layer used outside the forward
        if self.chunked_loss_exact is None:
            exact = torch.tensor(
                [int(chunked_loss_is_exact(model, inputs, output_layer, strategy))], device=args.device
            )
            if trainer.accelerator.num_processes > 1:
                exact = trainer.accelerator.gather(exact).min()
            self.chunked_loss_exact = bool(exact.item())
            if self.chunked_loss_exact:
                logger.info("chunked_loss: the output layer and the loss run in chunks of rows")
            else:
                logger.info("chunked_loss: the output layer does not give the model's logits alone; plain loss")
        fits_one_chunk = positions.numel() * getattr(output_layer, "out_features", 0) * 4 <= CHUNK_BYTES
        return self.chunked_loss_exact and not fits_one_chunk

    def _output_layer_is_tied(self, output_layer: torch.nn.Module) -> bool:
        inputs = self.trainer.accelerator.unwrap_model(self.trainer.model).get_input_embeddings()
        return getattr(output_layer, "bias", None) is None and getattr(inputs, "weight", None) is output_layer.weight

    def _output_layer(self) -> torch.nn.Module | None:
        try:
            return self.trainer.accelerator.unwrap_model(self.trainer.model).get_output_embeddings()
        except (AttributeError, NotImplementedError):
            return None

    def _labelled_strategy(self, model: Any, inputs: dict[str, Any]) -> str | None:
        trainer = self.trainer
        if not trainer.args.labelled_logits_only or "labels" not in inputs:
            return None
        if trainer.label_smoother is not None or trainer.compute_loss_func is not None:
            self._tell_full("a label smoother or a compute_loss_func computes the loss from full logits")
            return None
        if not model.training and not trainer.args.prediction_loss_only:  # evaluation returns the logits
            return None
        if self.strategy == _UNDECIDED:
            self.strategy = self._choose_strategy(model, inputs)
        return self.strategy

    def _choose_strategy(self, model: Any, inputs: dict[str, Any]) -> str | None:
        accelerator = self.trainer.accelerator
        exact = exact_strategies(model, inputs, self._output_layer())
        verdicts = torch.tensor([int(exact[name]) for name in STRATEGIES], device=self.trainer.args.device)
        if accelerator.num_processes > 1:
            verdicts = accelerator.gather(verdicts).view(-1, len(STRATEGIES)).min(dim=0).values
        chosen = next((name for name, ok in zip(STRATEGIES, verdicts.tolist()) if ok), None)
        name = type(accelerator.unwrap_model(model)).__name__
        if chosen is None:
            self._tell_full(
                f"{name} gives other logits or another loss when its output layer runs at those positions only "
                "(neither logits_to_keep nor a gather before its output layer is exact)"
            )
        else:
            logger.info(
                "labelled_logits_only: %s computes logits and loss at the labelled positions (%s)", name, chosen
            )
        return chosen

    def _tell_full(self, reason: str) -> None:
        if reason not in self._told_full:
            logger.warning("labelled_logits_only: %s, so the loss uses logits at every position.", reason)
        self._told_full.add(reason)
