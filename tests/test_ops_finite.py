"""isinf / isposinf / isneginf / isfinite / nan_to_num(_) / isclose / roll against torch:
values (bit for bit), dtypes, gradients and node names, eager and compiled, both float
dtypes and integers."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg
from op_checks import same_error

SPECIAL = [1.0, -np.inf, np.inf, np.nan, -0.0, 3.5, -2.0, 1e38, -1e-40]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
@pytest.mark.parametrize("name", ["isinf", "isposinf", "isneginf", "isfinite"])
def test_predicates(name, dtype):
    x0 = np.array(SPECIAL if dtype != "int64" else [1, -3, 0, 7], dtype=dtype)
    want = getattr(torch, name)(torch.tensor(x0)).numpy()
    for got in (getattr(sg, name)(sg.tensor(x0)), getattr(sg.tensor(x0), name)(),
                sg.compile(lambda a: getattr(sg, name)(a))(sg.tensor(x0))):
        assert got.dtype is sg.bool
        np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kw", [{}, {"nan": 1.5, "posinf": 9.0, "neginf": -9.0}, {"nan": -1.0}])
def test_nan_to_num(kw, dtype):
    x0 = np.array(SPECIAL, dtype=dtype)
    want = torch.nan_to_num(torch.tensor(x0), **kw).numpy()
    np.testing.assert_array_equal(sg.nan_to_num(sg.tensor(x0), **kw).numpy(), want)
    np.testing.assert_array_equal(
        sg.compile(lambda a: sg.nan_to_num(a, **kw))(sg.tensor(x0)).numpy(), want)
    a, b = torch.tensor(x0, requires_grad=True), sg.tensor(x0, requires_grad=True)
    torch.nan_to_num(a, **kw).mul(2).sum().backward()
    y = sg.nan_to_num(b, **kw)
    assert type(y.grad_fn).__name__ == "NanToNumBackward0"
    y.mul(2).sum().backward()
    np.testing.assert_array_equal(b.grad.numpy(), a.grad.numpy())
    c, d = torch.tensor(x0), sg.tensor(x0)
    c.nan_to_num_(**kw)
    d.nan_to_num_(**kw)
    np.testing.assert_array_equal(d.numpy(), c.numpy())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("equal_nan", [False, True])
def test_isclose(dtype, equal_nan):
    x0 = np.array(SPECIAL + [1.0, 100.0], dtype=dtype)
    y0 = np.array(SPECIAL[::-1] + [1.0 + 1e-6, 100.001], dtype=dtype)
    for a, b in ((x0, x0), (x0, y0), (x0, x0 + np.asarray(1e-6, dtype))):
        want = torch.isclose(torch.tensor(a), torch.tensor(b), equal_nan=equal_nan).numpy()
        got = sg.isclose(sg.tensor(a), sg.tensor(b), equal_nan=equal_nan).numpy()
        np.testing.assert_array_equal(got, want)
        got = sg.compile(lambda u, v: sg.isclose(u, v, rtol=1e-3, atol=1e-6, equal_nan=equal_nan))(
            sg.tensor(a), sg.tensor(b)).numpy()
        want = torch.isclose(torch.tensor(a), torch.tensor(b), rtol=1e-3, atol=1e-6,
                             equal_nan=equal_nan).numpy()
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "int32", "int64", "bool"])
def test_isclose_integers_do_not_wrap(dtype):
    """The error of integers is computed in the default float dtype, as PyTorch's (review 4
    finding 8: uint8 3 vs 4 was 'far', 0 vs 255 'close'; int min vs max 'close')."""
    if dtype == "bool":
        a, b = np.array([True, False, True]), np.array([False, False, True])
    else:
        i = np.iinfo(dtype)
        a = np.array([0, 255 % (i.max + 1), 3, i.min, i.max, 100, 2 ** 24 % i.max], dtype)
        b = np.array([255 % (i.max + 1), 0, 4, i.max, i.min, 110, (2 ** 24 + 1) % i.max], dtype)
    for kw in ({"atol": 2}, {"atol": 10}, {"rtol": 0.1, "atol": 0}, {"rtol": 0, "atol": 0.5},
               {"atol": 1}):
        want = torch.isclose(torch.tensor(a), torch.tensor(b), **kw).numpy()
        np.testing.assert_array_equal(sg.isclose(sg.tensor(a), sg.tensor(b), **kw).numpy(), want)
        for be in ("llvm", "numpy"):
            f = sg.compile(lambda u, v: sg.isclose(u, v, **kw), backend=be)
            np.testing.assert_array_equal(np.asarray(f(sg.tensor(a), sg.tensor(b)).numpy()), want)
        assert sg.allclose(sg.tensor(a), sg.tensor(b), **kw) == \
            torch.allclose(torch.tensor(a), torch.tensor(b), **kw)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_isclose_needs_a_finite_error(dtype):
    big = float(np.finfo(dtype).max) * 0.9
    a, b = np.array([big, 1.0, np.inf], dtype), np.array([-big, 2.0, np.inf], dtype)
    for kw in ({"atol": float("inf")}, {"rtol": float("inf")}, {}):
        want = torch.isclose(torch.tensor(a), torch.tensor(b), **kw).numpy()
        np.testing.assert_array_equal(sg.isclose(sg.tensor(a), sg.tensor(b), **kw).numpy(), want)


@pytest.mark.parametrize("args", [(1,), (-2,), ((1, 2), (0, 1)), (5, 1), ((1, -1), (1, 0)),
                                  (3, -1), (0, 0)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_roll(args, dtype):
    r = np.arange(12.0).reshape(3, 4).astype(dtype)
    want = torch.roll(torch.tensor(r), *args).numpy()
    np.testing.assert_array_equal(sg.roll(sg.tensor(r), *args).numpy(), want)
    np.testing.assert_array_equal(sg.tensor(r).roll(*args).numpy(), want)
    np.testing.assert_array_equal(sg.compile(lambda a: sg.roll(a, *args))(sg.tensor(r)).numpy(),
                                  want)
    w = np.arange(12.0).reshape(3, 4).astype(dtype) ** 2
    a, b = torch.tensor(r, requires_grad=True), sg.tensor(r, requires_grad=True)
    (torch.roll(a, *args) * torch.tensor(w)).sum().backward()
    y = sg.roll(b, *args)
    assert type(y.grad_fn).__name__ == "RollBackward0"
    (y * sg.tensor(w)).sum().backward()
    np.testing.assert_array_equal(b.grad.numpy(), a.grad.numpy())


def test_errors_as_torch():
    cases = [lambda L: L.roll(L.ones(2, 3), (1, 2), 0),
             lambda L: L.roll(L.ones(2, 3), 1, 2),
             lambda L: L.roll(L.ones(2, 3), (1, 2)),
             lambda L: L.isclose(L.ones(2), L.ones(2, dtype=L.float64)),
             lambda L: L.isclose(L.ones(2), L.ones(2), rtol=-1.0),
             # review 4 finding 17
             lambda L: L.roll(L.tensor(5.0), 2, 0), lambda L: L.roll(L.ones(2), [], []),
             lambda L: L.roll(L.ones(2), 1.5), lambda L: L.isclose(L.ones(2), 2.0),
             lambda L: L.ones(2).isclose(2.0), lambda L: L.allclose(L.ones(2), 2.0),
             lambda L: L.allclose(L.ones(2), L.ones(2, dtype=L.float64))]
    for case in cases:
        same_error(case)


@pytest.mark.parametrize("backend", ["numpy", "llvm"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fused_isnan_compiled(backend, dtype):
    """review 4 finding 11: a fused expression holding isnan raised NameError ('numpy' is
    not defined) on the numpy backend."""
    x = np.array([np.nan, np.inf, -np.inf, 1.5, -0.0], dtype)
    cases = [(lambda L, v: L.nan_to_num(v)), (lambda L, v: L.where(L.isnan(v), 0.0, v)),
             (lambda L, v: L.isnan(v * 2)), (lambda L, v: L.isnan(v).to(v.dtype) + v)]
    for fn in cases:
        want = fn(torch, torch.tensor(x)).numpy()
        got = np.asarray(sg.compile(lambda v: fn(sg, v), backend=backend)(sg.tensor(x)).numpy())
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
