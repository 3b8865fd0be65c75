"""``remainder`` (``%``) and ``floor_divide`` (``//``) as PyTorch computes them -- from the
exact fmod, Python's sign rules, zero quotients signed as x/y, division by zero as x/y --
eager and compiled on both backends, values bit for bit and gradients, both dtypes and
integers (review2 finding: compiled ``1000 % 0.1`` was 0, ``1000 // 0.1`` 10000)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg


def _values(dtype):
    rng = np.random.default_rng(0)
    return np.concatenate([rng.normal(scale=1000, size=200), rng.normal(size=60),
                           [0.0, -0.0, 5.0, -5.0, 1e30, -1e-30, np.inf, -np.inf, np.nan, 0.3,
                            -0.3, 359.3, 1000.0, 12345.678]]).astype(dtype)


def _same(got, want):
    both_nan = np.isnan(want) & np.isnan(got)
    assert ((got == want) | both_nan).all(), (got[~((got == want) | both_nan)],
                                              want[~((got == want) | both_nan)])
    assert (np.signbit(got) == np.signbit(want))[~np.isnan(want)].all()


@pytest.mark.parametrize("backend", ["llvm", "numpy"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("b", [0.1, 2 * np.pi, -0.7, 3.0, -3.0, 1e-3, 0.0, -0.0])
def test_by_a_number_bit_for_bit(b, dtype, backend):
    x = _values(dtype)
    for op in ("remainder", "floor_divide"):
        want = getattr(torch, op)(torch.tensor(x), b).numpy()
        _same(getattr(sg, op)(sg.tensor(x), b).numpy(), want)
        f = sg.compile((lambda a: a % b) if op == "remainder" else (lambda a: a // b),
                       backend=backend)
        _same(f(sg.tensor(x)).numpy(), want)


@pytest.mark.parametrize("backend", ["llvm", "numpy"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32"])
def test_tensor_by_tensor(dtype, backend):
    rng = np.random.default_rng(1)
    if dtype.startswith("int"):
        x = rng.integers(-50, 50, size=300).astype(dtype)
        y = rng.integers(-7, 8, size=300).astype(dtype)
        y[y == 0] = 3
    else:
        x = rng.normal(scale=10, size=300).astype(dtype)
        y = rng.normal(size=300).astype(dtype)
    for op in ("remainder", "floor_divide"):
        want = getattr(torch, op)(torch.tensor(x), torch.tensor(y)).numpy()
        f = sg.compile(lambda a, c: getattr(sg, op)(a, c), backend=backend)
        got = f(sg.tensor(x), sg.tensor(y)).numpy()
        assert got.dtype == want.dtype
        _same(got, want)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_remainder_gradients(dtype):
    rng = np.random.default_rng(2)
    x0 = rng.normal(scale=100, size=50).astype(dtype)
    y0 = np.full(50, 0.1, dtype) * rng.choice([-1, 1], size=50).astype(dtype)
    out = {}
    for lib in (torch, sg):
        x, y = lib.tensor(x0, requires_grad=True), lib.tensor(y0, requires_grad=True)
        lib.remainder(x, y).sum().backward()
        out[lib.__name__] = (x.grad.numpy(), y.grad.numpy())
    g = sg.grad(lambda a, c: sg.remainder(a, c).sum(), argnums=(0, 1))(sg.tensor(x0),
                                                                      sg.tensor(y0))
    for got in (out["symgrad"], tuple(t.numpy() for t in g)):
        np.testing.assert_array_equal(got[0], out["torch"][0])
        np.testing.assert_array_equal(got[1], out["torch"][1])


@pytest.mark.parametrize("backend", ["llvm", "numpy"])
def test_int64_beyond_double_precision(backend):
    """Integer % and // exact past 2**53 (they went through double: (a*3) % 1000 gave 0
    for a = 10**17 + 3; review2 finding 12)."""
    a = np.array([2**53 + 1, 10**17 + 3, -(10**17 + 3), 2**62 + 1, 123456789012345678,
                  -(2**63) + 1], dtype=np.int64)
    for fn in (lambda t: t % 7, lambda t: t // 7, lambda t: t.remainder(t * 0 + 1000),
               lambda t: t.fmod(7), lambda t: (t // 3) % 1000, lambda t: t // -9):
        want = fn(torch.tensor(a)).numpy()
        np.testing.assert_array_equal(fn(sg.tensor(a)).numpy(), want)
        np.testing.assert_array_equal(sg.compile(fn, backend=backend)(sg.tensor(a)).numpy(),
                                      want)
