"""Lanczos on Hessian-vector products finds the exact extreme eigenvalues: of a quadratic, and of a tiny GPT-2's
loss Hessian formed in full by ``torch.autograd.functional.hessian``."""

import numpy as np
import pytest
import torch
from torch.func import functional_call

from hf_icot.diagnostics import curvature_along, extreme_eigenvalues, hessian_curvature_along, hessian_extremes
from tests.hf_icot.diagnostics.study import PAD, study_examples, tiny_gpt2


def test_quadratic_form_has_hessian_twice_its_matrix():
    rng = np.random.default_rng(0)
    m = rng.standard_normal((8, 8))
    a = torch.tensor(m + m.T)  # symmetric, indefinite
    x = torch.nn.Parameter(torch.tensor(rng.standard_normal(8)))
    exact = np.linalg.eigvalsh(2 * a.numpy())  # ascending
    found = extreme_eigenvalues(lambda: x @ a @ x, [x], k=2, tol=1e-12)
    np.testing.assert_allclose(found.top, exact[::-1][:2], rtol=1e-9)
    np.testing.assert_allclose(found.bottom, exact[:2], rtol=1e-9)
    v = torch.tensor(rng.standard_normal(8))
    expected = float(v @ (2 * a) @ v / (v @ v))
    assert curvature_along(lambda: x @ a @ x, [x], [v]) == pytest.approx(expected, rel=1e-12)


def test_parameters_the_loss_ignores_add_zero_eigenvalues():
    x, unused = torch.nn.Parameter(torch.tensor([1.0, 2.0], dtype=torch.float64)), torch.nn.Parameter(torch.zeros(2))
    found = extreme_eigenvalues(lambda: 3 * x[0] ** 2 - x[1] ** 2, [x, unused], k=1, tol=1e-12)
    np.testing.assert_allclose([found.top[0], found.bottom[0]], [6.0, -2.0])


def full_hessian(model, rows):
    """The loss Hessian in every trainable parameter, formed entry by entry (the reference)."""
    named = list(model.named_parameters())
    flat = torch.cat([p.detach().reshape(-1) for _, p in named])
    ids = torch.tensor([row["input_ids"] for row in rows])
    labels = torch.tensor([row["labels"] for row in rows])

    def loss_of(vector):
        params, offset = {}, 0
        for name, p in named:
            params[name] = vector[offset : offset + p.numel()].view_as(p)
            offset += p.numel()
        logits = functional_call(model, params, kwargs={"input_ids": ids}).logits
        return torch.nn.functional.cross_entropy(logits[:, :-1].transpose(1, 2), labels[:, 1:], ignore_index=-100)

    return torch.autograd.functional.hessian(loss_of, flat).numpy(), named


def test_tiny_gpt2_loss_hessian_matches_the_full_matrix():
    model = tiny_gpt2(seed=2, n_embd=4, n_head=2, n_layer=1, n_positions=10).double().eval()
    model.set_attn_implementation("eager")
    rows = study_examples(4, 2)
    hessian, named = full_hessian(model, rows)
    np.testing.assert_allclose(hessian, hessian.T, atol=1e-12)
    exact = np.linalg.eigvalsh(hessian)
    model.set_attn_implementation("sdpa")
    found = hessian_extremes(model, rows, pad_token_id=PAD, k=2, tol=1e-10)
    assert exact[-1] > 0 > exact[0]  # a random init sits at an indefinite point
    np.testing.assert_allclose(found.top, exact[::-1][:2], rtol=1e-9)
    np.testing.assert_allclose(found.bottom, exact[:2], rtol=1e-9)
    assert model.config._attn_implementation == "sdpa" and not model.training

    # Curvature along a direction given by parameter name; parameters it omits count as 0.
    generator = torch.Generator().manual_seed(1)
    direction = {name: torch.randn(p.shape, generator=generator, dtype=p.dtype) for name, p in named[:3]}
    vector = np.concatenate(
        [(direction[n] if n in direction else torch.zeros_like(p)).numpy().reshape(-1) for n, p in named]
    )
    expected = vector @ hessian @ vector / (vector @ vector)
    assert hessian_curvature_along(model, rows, direction, pad_token_id=PAD) == pytest.approx(expected, rel=1e-10)


def test_bad_input_is_refused():
    x = torch.nn.Parameter(torch.ones(3, dtype=torch.float64))
    with pytest.raises(ValueError, match="k=3 is not allowed; Lanczos finds between 1 and n - 1 = 2"):
        extreme_eigenvalues(lambda: (x**2).sum(), [x], k=3)
    with pytest.raises(ValueError, match="the direction is zero"):
        curvature_along(lambda: (x**2).sum(), [x], [torch.zeros(3)])
    model, rows = tiny_gpt2(n_embd=4, n_head=2, n_layer=1), study_examples(4, 2)
    with pytest.raises(ValueError, match=r"the direction names \['transformer.nope'\]"):
        hessian_curvature_along(model, rows, {"transformer.nope": torch.ones(1)}, pad_token_id=PAD)
    with pytest.raises(ValueError, match="the direction for 'transformer.wte.weight' has shape"):
        hessian_curvature_along(model, rows, {"transformer.wte.weight": torch.ones(2)}, pad_token_id=PAD)
