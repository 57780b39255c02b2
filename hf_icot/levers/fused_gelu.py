"""GPT-2's GELU in one kernel: the same function, a seventh of the operations.

GPT-2 (``activation_function: gelu_new``) and the models that copied it compute the tanh approximation of GELU in
Python, ``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))``: seven tensor operations forward, more backward,
each a pass over the MLP's ``(B, T, 4d)`` activations. torch has the same approximation as one kernel
(``gelu(x, approximate="tanh")``, transformers' ``GELUTanh``) with its own backward. On the stepwise reference's 4x4
setting (4 layers, 128 wide, CPU) the Python form is ~15% of a training step.

:func:`fuse_tanh_gelu` swaps the modules in place. Nothing else changes: the activation has no weights, the model's
config still names ``gelu_new`` (a saved model is the same file), dropout draws the same random numbers, and the
function agrees to float rounding (the loss within 1e-6, ``tests/hf_icot/test_fused_gelu.py``).
"""

from __future__ import annotations

from torch import nn


def _python_tanh_gelus() -> tuple[type[nn.Module], ...]:
    from transformers.activations import FastGELUActivation, NewGELUActivation

    return NewGELUActivation, FastGELUActivation


def fuse_tanh_gelu(model: nn.Module) -> int:
    """Replace, in place, every transformers ``NewGELUActivation`` and ``FastGELUActivation`` (the tanh GELU written
    as tensor operations) inside ``model`` by ``GELUTanh`` (torch's one-kernel tanh GELU); returns how many were
    replaced. Other activations are left alone."""
    from transformers.activations import GELUTanh

    python_forms = _python_tanh_gelus()
    targets = [
        (parent, name)
        for parent in model.modules()
        for name, child in parent.named_children()
        if type(child) in python_forms
    ]
    for parent, name in targets:
        setattr(parent, name, GELUTanh())
    return len(targets)
