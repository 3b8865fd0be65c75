"""trunc / fix / frac / sgn / round(decimals=) / equal (symgrad.functions.rounding)
against torch 2.13: values (signs of zeros too), grad_fn names, gradients in float32 and
float64, in-place forms, compiled gradients, and PyTorch's integer / bool rules."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg

VALUES = np.array([-2.5, -1.5, -0.5, 0.0, 0.5, 1.5, 2.5, -0.0, 3.7, -3.7, 1.25, 0.125, 123.456,
                   -987.654, np.inf, -np.inf, np.nan])
OPS = {
    "trunc": lambda m, x: x.trunc(), "torch.trunc": lambda m, x: m.trunc(x),
    "fix": lambda m, x: m.fix(x), "frac": lambda m, x: x.frac(),
    "torch.frac": lambda m, x: m.frac(x), "sgn": lambda m, x: x.sgn(),
    "round_1": lambda m, x: x.round(decimals=1), "round_2": lambda m, x: m.round(x, decimals=2),
    "round_-1": lambda m, x: x.round(decimals=-1), "round_-2": lambda m, x: m.round(x, decimals=-2),
    "round_0": lambda m, x: x.round(decimals=0), "round": lambda m, x: m.round(x),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(OPS))
def test_values_names_and_gradients_as_torch(name, dtype):
    f = OPS[name]
    x = VALUES.astype(dtype)
    res = []
    for m in (torch, sg):
        t = m.tensor(x, requires_grad=True)
        y = f(m, t)
        (g,) = m.autograd.grad((y * m.arange(1.0, 18.0, dtype=y.dtype)).sum(), t)
        g = torch.zeros(17) if m is torch and name == "sgn" else g   # (torch: a zero tensor
        res.append((y.detach().numpy(), g.numpy(), y.grad_fn.name()))  # with no storage)
    (ws, wg, wn), (gs, gg, gn) = res
    assert gn == wn
    np.testing.assert_array_equal(gs, ws)
    np.testing.assert_array_equal(np.signbit(gs), np.signbit(ws))
    np.testing.assert_array_equal(gg, wg)
    if name != "sgn":
        for backend in ("llvm", "numpy"):
            v, g = sg.value_and_grad(lambda a: (f(sg, a) * 3.0).sum(), backend=backend)(
                x[np.isfinite(x)])
            want = f(torch, torch.tensor(x[np.isfinite(x)])).sum() * 3.0
            np.testing.assert_allclose(v, want.item(), rtol=1e-6,      # (summation order)
                                       atol=1e-3 if dtype == np.float32 else 1e-9)
            np.testing.assert_array_equal(g, wg[np.isfinite(x)] / np.arange(1.0, 18.0)[
                np.isfinite(x)] * 3.0)


INTS = [
    lambda m: m.tensor([-7, 7, 5]).trunc(), lambda m: m.tensor([-7, 7, 5]).frac(),
    lambda m: m.tensor([-7, 0, 5]).sgn(), lambda m: m.tensor([-7, 7]).round(decimals=1),
    lambda m: m.tensor([-7, 7]).round(decimals=0), lambda m: m.tensor([-7, 7]).round(),
    lambda m: m.tensor([True]).trunc(), lambda m: m.tensor([True]).frac(),
    lambda m: m.tensor([True, False]).sgn(), lambda m: m.tensor([True]).round(decimals=1),
    lambda m: m.fix(m.tensor([-3])),
    lambda m: m.tensor([1.5, -1.5]).trunc_(), lambda m: m.tensor([1.5, -1.5]).frac_(),
    lambda m: m.tensor([1.5, -1.5]).sgn_(), lambda m: m.tensor([1.5, -1.5]).fix_(),
    lambda m: m.tensor([1.25, 2.5]).round_(decimals=1),
    lambda m: m.tensor([1.0, 2]).equal(m.tensor([1.0, 2], requires_grad=True)),
    lambda m: m.tensor([1.0, 2]).equal(m.tensor([1, 2])),
    lambda m: m.tensor([1.0, 2]).equal(m.tensor([[1.0, 2]])),
    lambda m: m.equal(m.tensor([float("nan")]), m.tensor([float("nan")])),
    lambda m: m.tensor([1.0]).equal(1), lambda m: m.equal(m.tensor([1.0]), 1),
]


@pytest.mark.parametrize("snippet", INTS)
def test_integer_bool_in_place_and_equal_as_torch(snippet):
    found = []
    for m in (torch, sg):
        try:
            y = snippet(m)
            found.append((str(getattr(y, "dtype", "")).replace("symgrad", "torch"),
                          y.tolist() if hasattr(y, "tolist") else y))
        except Exception as e:  # noqa: BLE001 -- compared with torch's
            found.append((type(e).__name__, str(e)))
    assert found[1] == found[0]


HEAVISIDE = [
    lambda m, x: m.heaviside(x, m.tensor(0.5, dtype=x.dtype)),
    lambda m, x: x.heaviside(m.ones(x.shape, dtype=x.dtype) * 3),
    lambda m, x: m.heaviside(x, m.tensor([1.0, 2.0], dtype=x.dtype)),
    lambda m, x: m.heaviside(x, m.tensor(0.5, dtype=m.float64 if x.dtype == m.float32
                                          else m.float32)),
    lambda m, x: m.heaviside(x, 0.5), lambda m, x: x.heaviside(0.5),
    lambda m, x: m.heaviside(m.tensor([-1, 0, 2]), m.tensor([7])),
    lambda m, x: m.heaviside(m.tensor([True, False]), m.tensor(True)),
    lambda m, x: x.clone().heaviside_(m.tensor(3.0, dtype=x.dtype)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("snippet", HEAVISIDE)
def test_heaviside_as_torch(snippet, dtype):
    x = VALUES.astype(dtype)
    found = []
    for m in (torch, sg):
        t = m.tensor(x, requires_grad=True)
        try:
            y = snippet(m, t)
        except Exception as e:  # noqa: BLE001 -- compared with torch's
            found.append((type(e).__name__, str(e)))
            continue
        got = [y.detach().numpy().tolist(), None if y.grad_fn is None else y.grad_fn.name()]
        if y.requires_grad:
            try:
                y.sum().backward()
            except RuntimeError as e:
                got.append(str(e))
        found.append(got)
    assert found[1] == found[0]
