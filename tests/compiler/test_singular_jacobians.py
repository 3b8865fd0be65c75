"""Jacobians and Hessians at a singular element (1/x, log, sqrt, x**-2 at 0) as PyTorch's
transforms give them: finite entries finite, inf and NaN exactly where torch.func has
them. Forward and reverse mode agree on finite values but not on where 0 * inf makes
NaN: ``jacfwd`` (and ``hessian`` = jacfwd(jacrev)) puts a singular element's NaNs in its
row, ``jacrev`` in its column; with several arguments or outputs the others' tangents /
cotangents are zeros that take part (torch's concatenated basis). The compiled hessian
had filled the other elements' rows with NaN (reverse over reverse)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.utils._pytree as tpytree

import symgrad as sg
import symgrad.func as sfunc
from symgrad.graph import pytree

DTYPES = ["float32", "float64"]
SCALAR_FNS = {
    "reciprocal_pow": lambda L, x: (x ** -1).sum(),
    "one_over": lambda L, x: (1 / x).sum(),
    "log": lambda L, x: L.log(x).sum(),
    "sqrt": lambda L, x: L.sqrt(x).sum(),
    "pow_minus_two": lambda L, x: (x ** -2).sum(),
    "coupled": lambda L, x: (L.log(x) * x.sum() + 1 / x).sum(),
}
TWO_ARG_FNS = {
    "matvec": lambda L, x, w: (L.tanh(x @ w) / (x.abs() + 1).sum()).sum() + (1 / x).sum() * w.sum(),
    "softmax": lambda L, x, w: (L.softmax(x * w, dim=1) * L.log(x.abs())).sum(),
    "cumsum": lambda L, x, w: (L.cumsum(x, dim=1) ** 2 * w).sum() + L.sqrt(x.abs()).sum(),
    "prod": lambda L, x, w: (x.prod(dim=1) * (1 / x).sum()).sum() + (w ** -1).sum(),
}
VECTOR_FNS = {
    "one": lambda L, x, w: L.sqrt(x) * w,
    "two": lambda L, x, w: (L.log(x) * w, 1 / (x @ w)),
    "two_mixed": lambda L, x, w: (1 / x, x.sum() * w),
}


def _compare(got, want, dtype, zero_signs=True):
    """Same NaN / inf positions (inf with its sign), zeros with their sign (where the
    order of a sum of partials decides it, not compared), finite values within the
    dtype's tolerance."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype
    tol = 2e-5 if dtype == "float32" else 1e-12
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    inf = np.isinf(want)
    np.testing.assert_array_equal(np.isinf(got), inf)
    np.testing.assert_array_equal(got[inf], want[inf])
    zero = want == 0
    if zero_signs:
        np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(want[zero]))
    fin = np.isfinite(want)
    np.testing.assert_allclose(got[fin], want[fin], rtol=tol, atol=tol)


def _compare_trees(got, want, dtype, zero_signs=True):
    gl = [np.asarray(t.numpy()) for t in pytree.flatten(got)[0]]
    wl = [t.numpy() for t in tpytree.tree_leaves(want)]
    assert len(gl) == len(wl)
    for g, w in zip(gl, wl):
        _compare(g, w, dtype, zero_signs)


def _point(dtype):
    return np.array([0.0, 1.5, 2.0, 0.7, 3.0], dtype)


def _two_args(dtype):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 3))
    x[0, 1] = 0.0
    return x.astype(dtype), rng.normal(size=(3,)).astype(dtype)


@pytest.mark.parametrize("backend", ["llvm", "numpy"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(SCALAR_FNS))
def test_hessian_at_singular_element_as_torch_func(name, dtype, backend):
    f = SCALAR_FNS[name]
    x = _point(dtype)
    want = torch.func.hessian(lambda t: f(torch, t))(torch.tensor(x))
    _compare(sg.hessian(lambda t: f(sg, t), backend=backend)(sg.tensor(x)).numpy(),
             want.numpy(), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(SCALAR_FNS))
def test_func_hessian_at_singular_element_as_torch_func(name, dtype):
    f = SCALAR_FNS[name]
    x = _point(dtype)
    want = torch.func.hessian(lambda t: f(torch, t))(torch.tensor(x))
    _compare(sfunc.hessian(lambda t: f(sg, t))(sg.tensor(x)).numpy(), want.numpy(), dtype)


@pytest.mark.parametrize("backend", ["llvm", "numpy"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("argnums", [0, (0, 1)])
@pytest.mark.parametrize("name", list(TWO_ARG_FNS))
def test_hessian_of_two_arguments_at_singular_element(name, argnums, dtype, backend):
    f = TWO_ARG_FNS[name]
    x, w = _two_args(dtype)
    want = torch.func.hessian(lambda a, b: f(torch, a, b), argnums=argnums)(
        torch.tensor(x), torch.tensor(w))
    got = sg.hessian(lambda a, b: f(sg, a, b), argnums=argnums, backend=backend)(
        sg.tensor(x), sg.tensor(w))
    _compare_trees(got, want, dtype, zero_signs=False)


@pytest.mark.parametrize("backend", ["llvm", "numpy"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["reciprocal_pow", "log", "sqrt", "pow_minus_two"])
def test_jacrev_and_jacobian_at_singular_element_as_torch(name, dtype, backend):
    x = _point(dtype)

    def vec(L, t):          # the summed function's terms, elementwise
        return {"reciprocal_pow": lambda: t ** -1, "log": lambda: L.log(t),
                "sqrt": lambda: L.sqrt(t), "pow_minus_two": lambda: t ** -2}[name]()
    want = torch.func.jacrev(lambda t: vec(torch, t))(torch.tensor(x))
    _compare(sg.jacobian(lambda t: vec(sg, t), backend=backend)(sg.tensor(x)).numpy(),
             want.numpy(), dtype)
    _compare(sfunc.jacrev(lambda t: vec(sg, t))(sg.tensor(x)).numpy(), want.numpy(), dtype)




# the transform under test -> torch.func's transform it is compared with
MODES = {
    "func.jacfwd": (lambda f, n: sfunc.jacfwd(f, argnums=n), "jacfwd"),
    "func.jacrev": (lambda f, n: sfunc.jacrev(f, argnums=n), "jacrev"),
    "jacobian-llvm": (lambda f, n: sg.jacobian(f, argnums=n, backend="llvm"), "jacrev"),
    "jacobian-numpy": (lambda f, n: sg.jacobian(f, argnums=n, backend="numpy"), "jacrev"),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("argnums", [0, (0, 1)])
@pytest.mark.parametrize("name", list(VECTOR_FNS))
@pytest.mark.parametrize("mode", list(MODES))
def test_jacobians_of_several_outputs_and_arguments_as_torch(mode, name, argnums, dtype):
    """Several outputs or arguments: torch takes each basis cotangent (jacrev) / tangent
    (jacfwd) of all of them together, so another one's zero times an inf partial is NaN
    too. (Zero signs of jacrev, decided by the order of a sum of partials, not compared.)"""
    f = VECTOR_FNS[name]
    make, reference = MODES[mode]
    x, w = _two_args(dtype)
    want = getattr(torch.func, reference)(lambda a, b: f(torch, a, b), argnums=argnums)(
        torch.tensor(x), torch.tensor(w))
    got = make(lambda a, b: f(sg, a, b), argnums)(sg.tensor(x), sg.tensor(w))
    _compare_trees(got, want, dtype, zero_signs=reference == "jacfwd")
