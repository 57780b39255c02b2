"""The speed levers of a training step: each makes the step cheaper and leaves what it computes as it was (the same
loss and gradients, bitwise or to float rounding, as each module says and its tests check).

* :mod:`~hf_icot.levers.labelled_loss` — the output layer and the loss only where a label is
  (``labelled_logits_only``, on by default where it is exact), in row chunks where the logits are large
  (``chunked_loss``);
* :mod:`~hf_icot.levers.causal_mask` — no attention mask where it cannot change the loss, so SDPA takes its causal
  kernel;
* :mod:`~hf_icot.levers.fused_gelu` — GPT-2's Python tanh GELU as torch's one kernel (``fused_gelu``);
* :mod:`~hf_icot.levers.dropout_ahead` — a CPU forward's dropout masks drawn on a helper thread, the same numbers in
  torch's order (``draw_dropout_ahead``, off unless asked for), from the C kernel of
  :mod:`~hf_icot.levers.dropout_kernel` where it is in use.

:class:`hf_icot.training.trainer.ICoTTrainer` calls them as helpers from its one ``compute_loss``; nothing here
subclasses or overrides a ``Trainer``. The room sits on the models and the data and below training.
"""
