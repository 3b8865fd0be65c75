"""Values, gradients and second derivatives at thresholds and signed zeros, against
PyTorch 2.13 (eager double backward and torch.func.hessian), eager and compiled (llvm,
numpy), both dtypes (issue 13, review4 #2 / #12 / #17):

* softplus: PyTorch's double backward is ``s (1 - s) (beta x < threshold)``, so the second
  derivative is 0 at the threshold itself (its backward's mask is ``beta x > threshold``),
  0 where the float32 sigmoid rounds to 1, NaN at NaN; also with beta / threshold given;
* erfinv(-0.0) is -0.0 (and its second derivative -0.0);
* clamp / hardtanh / relu6 keep the input's zero sign at a bound (relu6(-0.0) is -0.0);
* hardtanh / relu6's gradient at NaN: PyTorch is not consistent -- its scalar loop passes
  the gradient (1), its vectorised loop does not (0), so the same NaN gets 1 in a short
  tensor or a tail and 0 elsewhere; symgrad passes it everywhere (the scalar loop's
  ``x <= min || x >= max ? 0 : g``), compared here with PyTorch's scalar loop."""
import numpy as np
import pytest
import torch

import symgrad as sg
import symgrad.nn.functional as SF
import torch.nn.functional as TF

DTYPES = ["float32", "float64"]


def _fn(name):
    return {
        "softplus": lambda L, F, x: F.softplus(x),
        "softplus_beta": lambda L, F, x: F.softplus(x, beta=2.0, threshold=10.0),
        "erfinv": lambda L, F, x: L.erfinv(x),
        "relu6": lambda L, F, x: F.relu6(x),
        "hardtanh": lambda L, F, x: F.hardtanh(x, 0.0, 1.0),
        "clamp": lambda L, F, x: L.clamp(x, -0.0, 6.0),
    }[name]


POINTS = {
    "softplus": [20.0, 20.0001, 19.99999, 25.0, 0.5, -3.0, -100.0, -1000.0, -np.inf, np.inf,
                 np.nan],
    "softplus_beta": [5.0, 5.001, 7.0, 0.5, -3.0, -100.0, -np.inf, np.inf, np.nan],
    "erfinv": [-0.0, 0.0, 0.5, -0.5, 0.999, -1.0, 1.0, np.nan],
    "relu6": [-0.0, 0.0, 6.0, 3.0, -2.0, 7.0],
    "hardtanh": [-0.0, 0.0, 1.0, 0.5, -2.0],
    "clamp": [-0.0, 0.0, 6.0, 3.0, -2.0, 7.0],
}


def _check(got, want, what, dtype):
    got, want = np.asarray(got), np.asarray(want)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=what)
    zero = want == 0
    np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(want[zero]),
                                  err_msg=what + " (sign of zero)")
    # (atol: the smallest normal -- llvm's sigmoid keeps float32 subnormals torch flushes)
    tiny = np.finfo(dtype).tiny
    np.testing.assert_allclose(got, want, rtol=2e-6 if dtype == "float32" else 1e-12,
                               atol=tiny, equal_nan=True, err_msg=what)


def _torch_d12(fn, x0):
    x = torch.tensor(x0, requires_grad=True)
    (g,) = torch.autograd.grad(fn(torch, TF, x).sum(), x, create_graph=True)
    h = torch.autograd.grad(g.sum(), x, allow_unused=True)[0] if g.requires_grad else None
    return g.detach().numpy(), (np.zeros_like(x0) if h is None else h.numpy())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(POINTS))
def test_value_gradient_second_derivative_match_torch(name, dtype):
    fn = _fn(name)
    x0 = np.array(POINTS[name], dtype=dtype)
    tv = fn(torch, TF, torch.tensor(x0)).numpy()
    tg, th = _torch_d12(fn, x0)
    thess = torch.func.hessian(lambda v: fn(torch, TF, v).sum())(torch.tensor(x0))
    np.testing.assert_array_equal(np.diagonal(thess.numpy()), th)   # torch agrees with itself
    x = sg.tensor(x0, requires_grad=True)
    sv = fn(sg, SF, x)
    (sgr,) = sg.autograd.grad(sv.sum(), x, create_graph=True)
    sh = sg.autograd.grad(sgr.sum(), x, allow_unused=True)[0] if sgr.requires_grad else None
    _check(sv.detach().numpy(), tv, "eager value", dtype)
    _check(sgr.detach().numpy(), tg, "eager gradient", dtype)
    _check(np.zeros_like(x0) if sh is None else sh.numpy(), th, "eager double backward", dtype)
    for backend in ("llvm", "numpy"):
        f = sg.compile(lambda v: fn(sg, SF, v), backend=backend)
        g = sg.compile(sg.grad(lambda v: fn(sg, SF, v).sum()), backend=backend)
        h = sg.hessian(lambda v: fn(sg, SF, v).sum(), backend=backend)
        _check(f(x0), tv, f"{backend} value", dtype)
        _check(g(x0), tg, f"{backend} gradient", dtype)
        _check(np.diagonal(np.asarray(h(x0))), th, f"{backend} hessian", dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["relu6", "hardtanh"])
def test_gradient_at_nan_is_pytorchs_scalar_loops(name, dtype):
    fn = _fn(name)
    x0 = np.array([np.nan], dtype=dtype)      # one element: PyTorch's scalar loop
    tg, th = _torch_d12(fn, x0)
    x = sg.tensor(x0, requires_grad=True)
    (g,) = sg.autograd.grad(fn(sg, SF, x).sum(), x)
    np.testing.assert_array_equal(g.numpy(), tg)
    for backend in ("llvm", "numpy"):
        got = sg.compile(sg.grad(lambda v: fn(sg, SF, v).sum()), backend=backend)(x0)
        np.testing.assert_array_equal(np.asarray(got), tg)
