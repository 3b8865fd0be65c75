"""layer_norm on eager tensors (one numpy pass and PyTorch's closed-form backward,
symgrad.functions.kernels.layer_norm_kernel) against torch 2.13: values, grad_fn name,
gradients of input, weight and bias in float32 and float64, with and without the affine
parts, second derivatives (the recorded path) and the no-grad path."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg

from oracle import check

R = np.random.default_rng(16)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,k", [((4, 6), 1), ((2, 3, 5), 2), ((7,), 1), ((3, 2), 1)])
@pytest.mark.parametrize("affine", ["none", "weight", "both"])
def test_values_and_gradients_as_torch(dtype, shape, k, affine):
    x = (R.standard_normal(shape) * 3 + 1).astype(dtype)
    ns = shape[len(shape) - k:]
    w, b = R.standard_normal(ns).astype(dtype), R.standard_normal(ns).astype(dtype)
    if affine == "none":
        check(lambda m, a: m.nn.functional.layer_norm(a, ns), x)
    elif affine == "weight":
        check(lambda m, a, v: m.nn.functional.layer_norm(a, ns, v), x, w)
    else:
        check(lambda m, a, v, c: m.nn.functional.layer_norm(a, ns, v, c, eps=1e-3), x, w, b)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_second_derivative_and_no_grad_as_torch(dtype):
    x0 = R.standard_normal((3, 4)).astype(dtype)
    w0 = R.standard_normal(4).astype(dtype)
    out = []
    for m in (torch, sg):
        x, w = m.tensor(x0, requires_grad=True), m.tensor(w0, requires_grad=True)
        y = m.nn.functional.layer_norm(x, (4,), w)
        gx, gw = m.autograd.grad((y * y * m.tensor(x0)).sum(), (x, w), create_graph=True)
        hx, hw = m.autograd.grad((gx * gx).sum() + gw.sum(), (x, w))
        with m.no_grad():
            z = m.nn.functional.layer_norm(x, (4,), w)
        out.append([v.detach().numpy() for v in (y, gx, gw, hx, hw, z)] + [z.requires_grad])
    for a, b in zip(out[0][:-1], out[1][:-1]):
        np.testing.assert_allclose(b, a, rtol=2e-4 if dtype == np.float32 else 1e-10,
                                   atol=2e-4 if dtype == np.float32 else 1e-10)
    assert out[0][-1] == out[1][-1]
