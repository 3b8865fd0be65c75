"""scatter_reduce (sum, prod, mean, amax, amin; include_self) and scatter(reduce='add' |
'multiply') against torch 2.13: values, grad_fn names and gradients in float32 and float64,
second derivatives, the compiled gradient on both backends (llvm and numpy), ties of
amax / amin (the gradient shared evenly, as torch), prod's gradient at zeros (one zero,
and torch's double-backward error for several), in-place forms, integer results and
PyTorch's errors."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import symgrad as sg

from op_checks import check_everywhere, same_error

R = np.random.default_rng(11)
# small integers as floats: amax / amin meet ties, prod meets zeros
X = R.integers(-2, 3, (3, 5)).astype(float)
S = R.integers(-2, 3, (3, 4)).astype(float)
S0 = R.integers(-2, 3, (2, 5)).astype(float)
XN = R.standard_normal((3, 5))
SN = R.standard_normal((3, 4))
IDX = [[0, 0, 2, 4], [1, 3, 3, 3], [4, 4, 0, 4]]
IDX0 = [[0, 2, 2, 1, 0], [2, 2, 1, 1, 0]]
REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")


def _reduce(red, inc, dim=1, idx=IDX):
    return lambda m, x, s: x.scatter_reduce(dim, m.tensor(idx), s, red, include_self=inc)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("inc", [True, False])
@pytest.mark.parametrize("red", REDUCTIONS)
def test_scatter_reduce_as_torch(red, inc, dtype):
    # random values: no ties, no zeros (prod's and amax's smooth cases)
    check_everywhere(_reduce(red, inc), XN.astype(dtype), SN.astype(dtype))


@pytest.mark.parametrize("inc", [True, False])
@pytest.mark.parametrize("red", REDUCTIONS)
def test_scatter_reduce_ties_and_zeros_as_torch(red, inc):
    """Ties (amax / amin share the gradient evenly, self counted when equal to the
    result), zeros (prod), along dim 0 and 1; second derivatives where torch has them."""
    x, s, s0 = X.copy(), S.copy(), S0.copy()
    if red == "prod":           # at most one zero per position: torch differentiates twice
        s[s == 0] = 1.5
        s0[s0 == 0] = 1.5
        s[0, 1], x[1, 3] = 0.0, 0.0
    for dtype in (np.float32, np.float64):
        check_everywhere(_reduce(red, inc), x.astype(dtype), s.astype(dtype))
        check_everywhere(_reduce(red, inc, 0, IDX0), x.astype(dtype), s0.astype(dtype),
                         compiled=dtype == np.float64)


def test_scatter_reduce_function_form_and_aliases():
    for fn in (lambda m, x, s: m.scatter_reduce(x, 1, m.tensor(IDX), s, "amax"),
               lambda m, x, s: m.scatter_reduce(x, 1, m.tensor(IDX), s, reduce="prod",
                                                include_self=False),
               lambda m, x, s: x.scatter_reduce(-1, m.tensor(IDX)[:, :2], s[:, 1:3], "mean")):
        check_everywhere(fn, XN, SN)
    # "max" / "min" are amax / amin (torch 2.13's backward raises on the alias: symgrad
    # differentiates them as amax / amin)
    for alias, red in (("max", "amax"), ("min", "amin")):
        check_everywhere(lambda m, x, s: x.scatter_reduce(1, m.tensor(IDX), s, alias if m is sg
                                                          else red, include_self=False), X, S)


def test_prod_with_several_zeros_at_one_position():
    """First derivative as torch's; the second raises torch's error (eager)."""
    x = np.array([[1.0, 0.0, 3.0], [4.0, 5.0, 6.0]])
    s = np.array([[0.0, 0.0, 3.0], [4.0, 5.0, 2.0]])
    idx = [[0, 0, 0], [2, 1, 1]]
    fn = _reduce("prod", True, 1, idx)
    check_everywhere(fn, x, s, second=False)
    found = []
    for m in (torch, sg):
        xs, ss = m.tensor(x, requires_grad=True), m.tensor(s, requires_grad=True)
        gx, gs = m.autograd.grad(fn(m, xs, ss).sum(), [xs, ss], create_graph=True)
        (h,) = m.autograd.grad(gx.sum(), [ss])          # through self's gradient: fine
        found.append(h.numpy())
        with pytest.raises(RuntimeError) as err:
            m.autograd.grad(gs.sum(), [xs, ss])
        found.append(str(err.value))
    np.testing.assert_allclose(found[0], found[2])
    assert found[1] == found[3]


@pytest.mark.parametrize("backend", ["llvm", "numpy"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_prod_second_derivative_compiled_checks_zeros_at_every_call(dtype, backend):
    """Compiled: the second derivative through src's gradient is torch's while each
    position gets at most one zero, and raises torch's error on a call where one gets
    several (it was silently 0); the first derivative never raises."""
    x = np.array([[1.0, 0.0, 3.0], [4.0, 5.0, 6.0]], dtype)
    idx = [[0, 0, 0], [2, 1, 1]]
    fn = _reduce("prod", True, 1, idx)
    second = sg.grad(lambda xs, ss: sg.grad(lambda ss: fn(sg, xs, ss).sum())(ss).sum(),
                     argnums=(0, 1), backend=backend)
    first = sg.grad(lambda xs, ss: fn(sg, xs, ss).sum(), argnums=(0, 1), backend=backend)
    several = np.array([[0.0, 0.0, 3.0], [4.0, 5.0, 2.0]], dtype)
    for s in (np.array([[0.0, 2.0, 3.0], [4.0, 0.0, 2.0]], dtype),
              np.array([[1.5, 2.0, 3.0], [4.0, 5.0, 2.0]], dtype), several):
        xs, ss = torch.tensor(x, requires_grad=True), torch.tensor(s, requires_grad=True)
        _, gs = torch.autograd.grad(fn(torch, xs, ss).sum(), [xs, ss], create_graph=True)
        np.testing.assert_allclose(first(x, s)[1], gs.detach().numpy(), rtol=1e-6)
        try:
            want = [h.numpy() for h in torch.autograd.grad(gs.sum(), [xs, ss])]
        except RuntimeError as e:
            with pytest.raises(RuntimeError) as err:
                second(x, s)
            assert str(err.value) == str(e)
            continue
        for got, w in zip(second(x, s), want):
            np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reduce", ["add", "multiply"])
def test_scatter_legacy_reduce_as_torch(reduce):
    """Values and grad_fn as torch's (NotImplemented: its backward raises torch's error);
    the deprecation warning for a tensor source."""
    idx = torch.tensor(IDX)
    for dtype in (np.float32, np.float64):
        for src in (SN[:, :4], 2.5):
            res = []
            for m in (torch, sg):
                x = m.tensor(XN.astype(dtype), requires_grad=True)
                s = m.tensor(src.astype(dtype)) if isinstance(src, np.ndarray) else src
                with warnings.catch_warnings(record=True) as seen:
                    warnings.simplefilter("always")
                    y = x.scatter(1, m.tensor(idx.numpy()), s, reduce=reduce)
                if m is sg:       # (torch warns once per process)
                    assert [str(w.message) for w in seen] == \
                        ([] if isinstance(src, float) else [_DEPRECATED])
                assert y.grad_fn.name() == "torch::autograd::NotImplemented"
                with pytest.raises(RuntimeError) as err:
                    y.sum().backward()
                res.append((y.detach().numpy(), str(err.value), repr(y).split("grad_fn")[1]))
            np.testing.assert_allclose(res[0][0], res[1][0], rtol=1e-6)
            assert res[0][1:] == res[1][1:]


_DEPRECATED = ("The reduce argument of torch.scatter with Tensor src is deprecated and will be "
               "removed in a future PyTorch release. Use torch.scatter_reduce instead for more "
               "reduction options. (Triggered internally at /__w/pytorch/pytorch/aten/src/ATen/"
               "native/TensorAdvancedIndexing.cpp:225.)")


@pytest.mark.filterwarnings("ignore:The reduce argument")
def test_scatter_legacy_reduce_compiled_gradient():
    """Compiled code differentiates scatter(reduce=) as scatter_reduce(include_self=True)."""
    for reduce, red in (("add", "sum"), ("multiply", "prod")):
        idx = np.array(IDX)

        def f(x, s):
            return (x.scatter(1, sg.tensor(idx), s, reduce=reduce) ** 2).sum()
        for backend in ("llvm", "numpy"):
            _, (gx, gs) = sg.value_and_grad(f, argnums=(0, 1), backend=backend)(XN, SN)
            xt, st = torch.tensor(XN, requires_grad=True), torch.tensor(SN, requires_grad=True)
            (xt.scatter_reduce(1, torch.tensor(idx), st, red) ** 2).sum().backward()
            np.testing.assert_allclose(gx, xt.grad.numpy(), rtol=1e-10)
            np.testing.assert_allclose(gs, st.grad.numpy(), rtol=1e-10)


def test_integer_and_in_place_forms_as_torch():
    xi, si = np.arange(1, 16).reshape(3, 5) - 7, np.arange(12).reshape(3, 4) - 5
    for red in REDUCTIONS:
        for inc in (True, False):
            a = sg.tensor(xi).scatter_reduce(1, sg.tensor(IDX), sg.tensor(si), red,
                                             include_self=inc)
            b = torch.tensor(xi).scatter_reduce(1, torch.tensor(IDX), torch.tensor(si), red,
                                                include_self=inc)
            assert str(a.dtype) == str(b.dtype)
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    for m in (sg, torch):
        x = m.tensor(XN, requires_grad=True)
        s = m.tensor(SN, requires_grad=True)
        y = x * 1
        out = y.scatter_reduce_(1, m.tensor(IDX), s, "amax", include_self=False)
        assert out is y
        (y * y).sum().backward()
        if m is sg:
            ours = (y.grad_fn.name(), y.detach().numpy(), x.grad.numpy(), s.grad.numpy())
    assert ours[0] == y.grad_fn.name()
    for p, q in zip(ours[1:], (y.detach().numpy(), x.grad.numpy(), s.grad.numpy())):
        np.testing.assert_allclose(p, q, rtol=1e-12)
    nan = [[float("nan"), 5.0]]
    for red in ("amax", "amin"):
        for inc in (True, False):
            a = sg.tensor([[1.0, 2.0, 3.0]]).scatter_reduce(1, sg.tensor([[0, 0]]), sg.tensor(nan),
                                                            red, include_self=inc)
            assert np.isnan(a.numpy()[0, 0]) and a.numpy()[0, 1:].tolist() == [2.0, 3.0]


BAD = [
    lambda m: m.ones(3, 4).scatter_reduce(1, m.tensor([[0]]), m.ones(3, 4), "foo"),
    lambda m: m.ones(3, 4).scatter_reduce(1, m.tensor([[0]]), m.ones(3, 4), 5),
    lambda m: m.ones(3, 4).scatter_reduce(1, m.tensor([[0]]), 2.0, "sum"),
    lambda m: m.scatter_reduce(m.ones(3, 4), 1, m.tensor([[0]]), 2.0, "sum"),
    lambda m: m.ones(3, 4).scatter_reduce(1, m.tensor([[0]]), m.ones(3, 4), "sum",
                                          include_self=1),
    lambda m: m.ones(3, 4).scatter_reduce_(1, m.tensor([[0]]), m.ones(3, 4), "sum",
                                           include_self=1),
    lambda m: m.ones(3, 4).scatter_reduce(1, m.tensor([[0.0]]), m.ones(3, 4), "sum"),
    lambda m: m.ones(3, 4).scatter_reduce(1, m.tensor([[0]]), m.ones(3, 4, dtype=m.float64),
                                          "amax"),
    lambda m: m.ones(3, 4).scatter_reduce(1, m.tensor([[7]]), m.ones(3, 4), "prod"),
    lambda m: m.ones(3, 4).scatter_reduce(1, m.zeros(4, 4, dtype=m.long), m.ones(3, 4), "mean"),
    lambda m: m.ones(3, 4, dtype=m.bool).scatter_reduce(1, m.tensor([[0]]),
                                                        m.ones(3, 4, dtype=m.bool), "mean"),
    lambda m: m.ones(3, 4).scatter(1, m.tensor([[0]]), m.ones(3, 4), reduce="mean"),
    lambda m: m.ones(3, 4).scatter(1, m.tensor([[0]]), 2.0, reduce="sum"),
    lambda m: m.ones(3, 4).scatter_(1, m.tensor([[0]]), 2.0, reduce="foo"),
    lambda m: m.ones(3, 4).scatter(1, m.tensor([[0.0]]), 2.0, reduce="add"),
]


@pytest.mark.parametrize("snippet", BAD)
def test_errors_as_torch(snippet):
    same_error(snippet)
