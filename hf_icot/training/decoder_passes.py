"""Decoder forward passes per training example: what a method's training step costs in passes, measured.

A token method's step runs the decoder once over its batch; Coconut's once per latent pass and once more for the rest;
CODI's and PCCoT's also run the teacher, and PCCoT its Jacobi iterations; SIM-CoT adds its decoder's pass. Rather than
a formula per method, :class:`DecoderPasses` counts the forward calls of the model's transformer (and of a method's
training-only decoder, SIM-CoT's) during each training micro-batch: every call covers the whole micro-batch, so the
calls per micro-batch are the passes per example. ``ICoTTrainer`` logs their mean since the last log as
``cot/forward_passes``, beside the answer's passes that generation reports (``forward_passes``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any


def transformer_of(model: Any) -> Any:
    """The transformer that one decoder pass runs: a causal LM's base model, under DDP and PEFT wrappers."""
    model = getattr(model, "module", model)  # DDP
    get_base_model = getattr(model, "get_base_model", None)
    model = get_base_model() if callable(get_base_model) else model  # PEFT
    return getattr(model, "base_model", model)


class DecoderPasses:
    """Counts decoder passes per training micro-batch (:meth:`watch` the modules, wrap each micro-batch in
    :meth:`step`, read and restart the window with :meth:`mean`)."""

    def __init__(self) -> None:
        self.calls = 0
        self._passes = 0
        self._micro_batches = 0
        self._handles: list[Any] = []

    def watch(self, models: Sequence[Any]) -> None:
        """Count the forward calls of each model's transformer (those watched before are let go)."""
        for handle in self._handles:
            handle.remove()
        self._handles = [transformer_of(model).register_forward_pre_hook(self._count) for model in models]

    def _count(self, module: Any, args: Any) -> None:
        self.calls += 1

    @contextlib.contextmanager
    def step(self) -> Iterator[None]:
        """One training micro-batch: the calls inside it are its passes."""
        start = self.calls
        yield
        self._passes += self.calls - start
        self._micro_batches += 1

    def mean(self) -> float | None:
        """Passes per micro-batch (per example) since the last call; None for no micro-batch."""
        value = self._passes / self._micro_batches if self._micro_batches else None
        self._passes = self._micro_batches = 0
        return value
