"""The sign of a NaN (and of a zero) computed inside compiled code is PyTorch's: a negation
flips it, ``x * -1``, ``x / -1`` and ``-0.0 - x`` keep it (IEEE hardware propagates a NaN
operand as it is), so ``signbit`` and ``1 / x`` of the result are torch's -- neither the
graph rewrites nor LLVM (to which the sign of a NaN result is unspecified) may move a
negation into a constant or turn a product by -1 into a negation. (Where two NaNs meet
in one operation, which one propagates is not promised -- PyTorch's add is an FMA
``a + alpha * b`` that keeps b's, numpy and LLVM's operand order keep another -- so every
program here makes or reads one NaN per element.)"""
import numpy as np
import pytest
import torch

import symgrad as sg

# NaNs made inside the program (inf * 0, 0 / 0, inf - inf) and given as inputs, both signs
VALUES = [1.0, -1.0, 0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 3e-39, -2.5]

PROGRAMS = {
    "neg_of_inf_times_0": lambda L, v: L.signbit(-(v / 0 * 0)),
    "neg_of_product_by_0": lambda L, v: L.signbit(-(v * 0)),
    "negated_times_0": lambda L, v: L.signbit((-v) * 0),
    "times_minus_1": lambda L, v: L.signbit(v * -1),
    "minus_1_times": lambda L, v: L.signbit(-1 * v),
    "over_minus_1": lambda L, v: L.signbit(v / -1),
    "minus_zero_minus": lambda L, v: L.signbit(-0.0 - v),
    "zero_minus": lambda L, v: L.signbit(0.0 - v),
    "minus_negated": lambda L, v: L.signbit(1.0 - (-(v * 0))),
    "plus_negated": lambda L, v: L.signbit(1.0 + (-(v * 0))),
    "neg_of_quotient": lambda L, v: L.signbit(-(v * 0 / 2)),
    "neg_of_reciprocal": lambda L, v: L.signbit(-(2 / (v * 0))),
    "negated_squared": lambda L, v: L.signbit((-(v * 0)) * (-(v * 0))),
    "neg_of_nan_difference": lambda L, v: L.signbit(-(v * np.inf - v * np.inf)),
    "neg_of_zero_over_zero": lambda L, v: L.signbit(-((v - v) / (v - v))),
    # float results: the bits are compared (NaN sign included)
    "neg_out": lambda L, v: -(v / 0 * 0),
    "times_minus_1_out": lambda L, v: v * -1,
    "minus_zero_minus_out": lambda L, v: -0.0 - v,
    "reciprocal_of_negated_zero": lambda L, v: 1 / (-(v * 0)),
    "atan2_negated": lambda L, v: L.atan2(-(v * 0), -(v * 0) + 1),
}


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype == bool:
        return a
    return np.stack([np.isnan(a), np.signbit(a), np.where(np.isnan(a), 0, a)])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_sign_of_nan_and_zero_matches_torch(name, dtype):
    fn = PROGRAMS[name]
    x = np.array(VALUES, dtype=dtype)
    want = _bits(fn(torch, torch.tensor(x)).numpy())
    got = {"eager": fn(sg, sg.tensor(x))}
    for backend in ("llvm", "numpy"):
        got[backend] = sg.compile(lambda v: fn(sg, v), backend=backend)(sg.tensor(x))
    for where, value in got.items():
        np.testing.assert_array_equal(_bits(np.asarray(value)), want, err_msg=where)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("backend", ["llvm", "numpy"])
def test_gradients_through_sign_keeping_products_match_torch(backend, dtype):
    """``x * -1``, ``-0.0 - x`` and a negated product stay what they are written as; their
    gradients (and the hessian's zeros) are torch's, NaN signs included."""
    def f(L, v):
        return ((v * -1) * v + (-0.0 - v) * 3 - (v * 2) * v.sin()).sum()
    x = np.array([0.5, -0.0, 0.0, np.nan, -np.nan, 2.0], dtype=dtype)
    xt = torch.tensor(x, requires_grad=True)
    (gt,) = torch.autograd.grad(f(torch, xt), [xt])
    ht = torch.func.hessian(lambda v: f(torch, v))(torch.tensor(x))
    g = sg.compile(sg.grad(lambda v: f(sg, v)), backend=backend)(x)
    h = sg.compile(sg.hessian(lambda v: f(sg, v)), backend=backend)(x)
    np.testing.assert_array_equal(np.isnan(np.asarray(g)), np.isnan(gt.numpy()))
    np.testing.assert_allclose(np.asarray(g), gt.numpy(), rtol=1e-6, equal_nan=True)
    np.testing.assert_allclose(np.asarray(h), ht.numpy(), rtol=1e-6, equal_nan=True)
