"""Eager fast paths (numpy kernels chosen by size, fused recording of hot ops) against
PyTorch: values bit for bit where PyTorch's are exact, special values, both dtypes."""
import numpy as np
import pytest
import torch

import symgrad

DTYPES = (np.float32, np.float64)
SPECIAL = [-0.0, 0.0, np.nan, -np.nan, np.inf, -np.inf, 1e-40, -1e-40, -1.5, 2.5]


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("n", [10, 4095, 4096, 50000])
def test_relu_bits(dt, n):
    """relu's forward on large arrays (a bit mask, not numpy's where) keeps -0.0 and
    NaNs (with their sign) as torch does, both below and above the size switch."""
    x = np.random.default_rng(n).normal(size=n).astype(dt)
    x[:len(SPECIAL)] = SPECIAL
    a = symgrad.tensor(x).relu().numpy()
    b = torch.tensor(x).relu().numpy()
    assert a.dtype == b.dtype
    assert np.array_equal(a.view(np.uint8), b.view(np.uint8))
    xs, xt = symgrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    g = np.random.default_rng(1).normal(size=n).astype(dt)
    xs.relu().backward(symgrad.tensor(g))
    xt.relu().backward(torch.tensor(g))
    assert np.array_equal(xs.grad.numpy().view(np.uint8), xt.grad.numpy().view(np.uint8))


@pytest.mark.parametrize("dt", DTYPES)
def test_relu_strided_large(dt):
    x = np.random.default_rng(0).normal(size=(130, 70)).astype(dt)
    a = symgrad.tensor(x).t().relu().numpy()
    b = torch.tensor(x).t().relu().numpy()
    assert np.array_equal(a, b)
