"""Stable lowerings of formula patterns (codegen/lower/sympy_ir.py), checked against torch.

``log1p(exp(a))`` lowers to vecmath's log1pexp and ``1 / (1 + exp(-a))`` to its sigmoid:
softplus, sigmoid and binary cross-entropy on logits (values and gradients) must match
torch over the whole float range, overflow and underflow regions, infinities and NaN
included, and the logistic loss with its gradient computes one ``exp`` per element.
"""
import numpy as np
import pytest
import torch

import symgrad
import symgrad.nn.functional as F

EDGES = [-np.inf, -1e300, -1000.0, -746.0, -745.0, -710.0, -104.0, -88.0, -40.0, -30.0,
         -20.5, -20.0, -19.5, -1.0, -1e-8, -1e-300, -0.0, 0.0, 1e-300, 1e-8, 0.5, 1.0, 19.5,
         20.0, 20.5, 30.0, 40.0, 88.0, 104.0, 709.0, 710.0, 1000.0, 1e300, np.inf, np.nan]
# a few ulps of the dtype (vecmath's exp, log1p and the division are each within 2.5 ulp:
# tests/codegen/test_vecmath.py; float64 eps 2.2e-16, float32 1.2e-7)
TOL = {np.float64: dict(rtol=1e-14, atol=1e-300), np.float32: dict(rtol=2e-6, atol=1e-37)}


def inputs(dtype) -> np.ndarray:
    rng = np.random.default_rng(3)
    with np.errstate(over="ignore"):
        return np.concatenate([np.array(EDGES), rng.uniform(-50, 50, 4000),
                               rng.standard_normal(4000)]).astype(dtype)


def torch_value_and_grad(fn, *arrays):
    ts = [torch.tensor(a) for a in arrays]
    ts[0].requires_grad_(True)
    v = fn(*ts)
    v.backward()
    return v.detach().numpy(), ts[0].grad.numpy()


def assert_close(got, want, dtype):
    np.testing.assert_allclose(np.asarray(got), want, equal_nan=True, **TOL[dtype])


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("name", ["softplus", "sigmoid", "bce_logits"])
def test_stable_forms_match_torch(name, dtype):
    x = inputs(dtype)
    t = np.random.default_rng(4).random(x.size).astype(dtype)
    ours = {"softplus": lambda x, t: F.softplus(x),
            "sigmoid": lambda x, t: x.sigmoid(),
            "bce_logits": lambda x, t: F.binary_cross_entropy_with_logits(x, t, reduction="none")}
    theirs = {"softplus": lambda x, t: torch.nn.functional.softplus(x),
              "sigmoid": lambda x, t: x.sigmoid(),
              "bce_logits": lambda x, t: torch.nn.functional.binary_cross_entropy_with_logits(
                  x, t, reduction="none")}
    value = symgrad.compile(ours[name], backend="llvm")(x, t)
    with np.errstate(over="ignore", invalid="ignore"):
        assert_close(value, theirs[name](torch.tensor(x), torch.tensor(t)).numpy(), dtype)
    # gradients through a weighted sum, so every element's partial is checked
    w = np.random.default_rng(5).standard_normal(x.size).astype(dtype)
    finite = np.isfinite(x)
    xf, tf, wf = x[finite], t[finite], w[finite]
    g = symgrad.grad(lambda x, t, w: (ours[name](x, t) * w).sum(), backend="llvm")(xf, tf, wf)
    _, want = torch_value_and_grad(lambda x, t, w: (theirs[name](x, t) * w).sum(), xf, tf, wf)
    # each partial is w * (a difference of O(1) terms, e.g. sigmoid(x) - t): its rounding
    # error scales with |w|, not with the (possibly cancelled) result
    err = np.abs(np.asarray(g, dtype=np.float64) - want)
    assert (err <= TOL[dtype]["rtol"] * (np.abs(want) + np.abs(wf))).all(), err.max()


def test_logistic_loss_and_gradient_share_one_exp():
    """The loss's log1p(exp(-z)) and the gradient's 1/(1 + exp(-z)) become log1pexp and
    sigmoid (no general log1p, no second exp of the same argument after optimisation)."""
    rng = np.random.default_rng(0)
    X, y, w = rng.standard_normal((1000, 5)), (rng.random(1000) > 0.5) * 1.0, rng.standard_normal(5)
    f = symgrad.value_and_grad(
        lambda w, X, y: F.binary_cross_entropy_with_logits(X @ w, y), backend="llvm")
    exe = f.lower(w, X, y).compile()
    generated = exe.as_text("llvm")
    assert "symgrad.vm.log1pexp.f64" in generated and "symgrad.vm.sigmoid.f64" in generated
    assert "symgrad.vm.log1p.f64" not in generated
    value, (gw,) = f(w, X, y)[0], (f(w, X, y)[1],)
    want_v, want_g = torch_value_and_grad(
        lambda w, X, y: torch.nn.functional.binary_cross_entropy_with_logits(X @ w, y), w, X, y)
    assert_close(value, want_v, np.float64)
    assert_close(gw, want_g, np.float64)
