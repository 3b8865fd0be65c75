"""Masked partials at every order (review 4 findings 1, 3, 10): pow's partials are 0 where
PyTorch's pow backward masks them, and so are the partials of those partials (x ** 1's
second derivative at 0 is 0, not NaN); atan2's gradient at the origin is 0; ELU's gradient
is 1 where exp(x) overflows. First derivatives and second derivatives (eager double
backward, compiled hessian on both backends) against PyTorch (autograd.grad with
create_graph, torch.func.hessian), both dtypes."""
import numpy as np
import pytest
import torch

import symgrad as sg
import symgrad.nn.functional as SF

DTYPES = ("float32", "float64")
BACKENDS = ("llvm", "numpy")


def _close(got, want):
    got, want = np.asarray(got), np.asarray(want)
    tol = 1e-5 if got.dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)    # NaN / inf positions equal


def _eager_d1_d2(fn, lib, arrays):
    """First partials of sum(fn) and the gradient of the sum of the first partial w.r.t.
    argument 0, with respect to every argument (double backward)."""
    ts = [lib.tensor(a, requires_grad=True) for a in arrays]
    g = lib.autograd.grad(fn(lib, *ts).sum(), ts, create_graph=True)
    h = lib.autograd.grad(g[0].sum(), ts, allow_unused=True)
    return ([v.detach().numpy() for v in g],
            [np.zeros_like(a) if v is None else v.detach().numpy() for v, a in zip(h, arrays)])


def _check_eager(fn, arrays):
    got = _eager_d1_d2(fn, sg, arrays)
    want = _eager_d1_d2(fn, torch, arrays)
    for gs, ws in zip(got, want):
        for g, w in zip(gs, ws):
            _close(g, w)


def _check_hessian(fn, x, backend):
    got = sg.hessian(lambda v: fn(sg, v).sum(), backend=backend)(x)
    want = torch.func.hessian(lambda v: fn(torch, v).sum())(torch.tensor(x)).numpy()
    _close(got, want)


POW_FNS = {
    "x**1": lambda lib, x: x ** 1,
    "x**1.0": lambda lib, x: x ** 1.0,
    "abs(x)**1": lambda lib, x: x.abs() ** 1,
    "x.pow(2)": lambda lib, x: x.pow(2),
    "x**2.5": lambda lib, x: x ** 2.5,
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(POW_FNS))
def test_pow_number_exponent_second_derivative_at_zero(name, dtype):
    x = np.array([0.0, 1e-300 if dtype == "float64" else 1e-40, 2.0, 0.5], dtype)
    fn = POW_FNS[name]
    _check_eager(fn, [x])
    for be in BACKENDS:
        _check_hessian(fn, x, be)


@pytest.mark.parametrize("dtype", DTYPES)
def test_pow_tensor_exponent_second_derivatives_at_zero(dtype):
    # (not x = y = 0: there PyTorch's d2/dxdy is NaN, 0 * inf inside its masked_fill's
    # backward; symgrad's mask gives 0)
    x = np.array([0.0, 0.0, 0.0, 0.0, 2.0, 0.0], dtype)
    y = np.array([1.0, 2.0, 3.0, 2.5, 1.0, -1.0], dtype)
    _check_eager(lambda lib, a, b: a ** b, [x, y])

    def joint(lib, v):                   # x and y in one vector: the full 2x2 blocks
        n = v.shape[0] // 2
        return v[:n] ** v[n:]
    # (not x = 0, y = -1 in the joint Hessian: its infinite partial times the one-hot
    # tangent's zeros makes the other rows NaN, where torch.func.hessian gives 0)
    xy = np.concatenate([x[:5], y[:5]])
    # (d2/dy2 at x = 0, y > 0: 0 as torch.func.hessian's -- x**y is 0 near there -- where
    # torch's double backward gives NaN, 0 * log(0)**2 inside its masked_fill's backward)
    want = torch.func.hessian(lambda v: joint(torch, v).sum())(torch.tensor(xy)).numpy()
    for be in BACKENDS:
        _close(sg.hessian(lambda v: joint(sg, v).sum(), backend=be)(xy), want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_atan2_gradient_at_origin(dtype):
    tiny = 1e-40 if dtype == "float32" else 1e-170
    y = np.array([0.0, 0.0, tiny, 3.0, -0.0], dtype)
    x = np.array([0.0, tiny, tiny, 4.0, 0.0], dtype)
    fn = lambda lib, a, b: lib.atan2(a, b)               # noqa: E731
    want = _eager_d1_d2(fn, torch, [y, x])[0]
    # (first order: the second derivatives at the origin are NaN in PyTorch's double
    # backward, 0 here -- a singular point either way)
    for g, w in zip(_eager_d1_d2(fn, sg, [y, x])[0], want):
        _close(g, w)
        np.testing.assert_array_equal(np.signbit(g), np.signbit(w))
    for be in BACKENDS:
        got = sg.grad(lambda a, b: sg.atan2(a, b).sum(), argnums=(0, 1), backend=be)(y, x)
        for g, w in zip(got, want):
            _close(g, w)
            np.testing.assert_array_equal(np.signbit(g), np.signbit(w))


@pytest.mark.parametrize("dtype", DTYPES)
def test_elu_gradient_where_exp_overflows(dtype):
    x = np.array([1.0, 100.0, 300.0, 800.0, np.inf, -1.0, 0.5], dtype)
    fn = lambda lib, v: (SF if lib is sg else torch.nn.functional).elu(v)    # noqa: E731
    want = _eager_d1_d2(fn, torch, [x])[0][0]
    v = sg.tensor(x, requires_grad=True)
    fn(sg, v).sum().backward()
    _close(v.grad.numpy(), want)
    for be in BACKENDS:
        _close(sg.grad(lambda t: SF.elu(t).sum(), backend=be)(x), want)
    # the linear branch's second derivative is 0 (no 0 * inf) where exp overflows
    big = np.array([100.0, 800.0], dtype)
    for be in BACKENDS:
        h = sg.hessian(lambda t: SF.elu(t).sum(), backend=be)(big)
        _close(h, np.zeros((2, 2), dtype))


SIGMOID_SHAPED = {      # partials 1 / (1 + e^-x): second derivatives for very negative x
    "softplus": (lambda lib, v: (SF if lib is sg else torch.nn.functional).softplus(v)),
    "bce_with_logits": (lambda lib, v: (SF if lib is sg else torch.nn.functional)
                        .binary_cross_entropy_with_logits(v, v.detach() * 0 + 0.25,
                                                          reduction="none")),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(SIGMOID_SHAPED))
def test_sigmoid_shaped_second_derivative_for_very_negative_inputs(name, dtype):
    """review 4 findings 2 and 9: NaN (eager, numpy) / inf (llvm) below ~-89 (float32) /
    ~-710 (float64) -- e^-x / (1 + e^-x)^2 = inf / inf; PyTorch 0 (or the tiny exact
    value)."""
    x = np.array([-np.inf, -1e4, -800.0, -100.0, -30.0, 0.5, 3.0, 30.0], dtype)
    if name == "bce_with_logits":       # (torch.func.hessian's row at -inf is NaN)
        x = x[1:]
    fn = SIGMOID_SHAPED[name]
    _check_eager(fn, [x])
    for be in BACKENDS:
        _check_hessian(fn, x, be)


STD_CASES = {
    "std(dim=1)": lambda T, a: a.std(dim=1),
    "std()": lambda T, a: a[0].std(),
    "std(correction=0)": lambda T, a: a.std(dim=1, correction=0),
    "std(dim=0, keepdim)": lambda T, a: a[:, :2].std(dim=0, keepdim=True),
    "std * weights": lambda T, a: a.std(dim=1) * T.tensor([2., 3.], dtype=a.dtype),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", list(STD_CASES))
def test_std_of_a_constant_slice_has_zero_gradient(case, dtype):
    """review5 #2: torch's std_backward masks std == 0 (gradient 0 there, not NaN); the
    other rows' gradient unchanged. Eager and compiled value_and_grad, both backends."""
    fn = STD_CASES[case]
    x = np.array([[1., 1., 1.], [1., 2., 4.]], dtype=dtype)
    t = torch.tensor(x, requires_grad=True)
    tv = fn(torch, t).sum()
    tv.backward()
    s = sg.tensor(x, requires_grad=True)
    sv = fn(sg, s).sum()
    sv.backward()
    _close(sv.detach().numpy(), tv.detach().numpy())
    _close(s.grad.numpy(), t.grad.numpy())
    for backend in BACKENDS:
        v, g = sg.value_and_grad(lambda a: fn(sg, a).sum(), backend=backend)(x)
        _close(v, tv.detach().numpy())
        _close(g, t.grad.numpy())
