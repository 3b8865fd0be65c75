"""torch.fmod / Tensor.fmod / fmod_ (the ``fmod`` elementwise primitive) against torch
2.13: values (exact, signs of zeros too), grad_fn names and gradients (1 and
-trunc(x/y)) in float32 and float64, broadcasting, integer and bool rules with PyTorch's
errors, eager and compiled on the llvm and numpy backends."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg

from oracle import check, same_as_torch

R = np.random.default_rng(15)
X = np.concatenate([R.uniform(-20, 20, 40), [-7.5, 7.5, -0.0, 0.0, 1e30, -1e30, 3.0, -3.0,
                                              np.inf, np.nan, 5.0]])
Y = np.concatenate([R.uniform(0.3, 5, 40) * R.choice([-1, 1], 40),
                    [2.0, -2.0, 3.0, -3.0, 3.0, 7.0, 1.5, 1.5, 2.0, 2.0, 0.0]])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tensor_divisor_values_and_gradients(dtype):
    check(lambda m, x, y: m.fmod(x, y), X.astype(dtype), Y.astype(dtype), rtol=0, atol=0,
          grad_rtol=0, grad_atol=0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("divisor", [2, -2.5, 0.3, 1e-3, 0.0])
def test_scalar_divisor_values_and_gradients(dtype, divisor):
    check(lambda m, x: x.fmod(divisor), X.astype(dtype), rtol=0, atol=0, grad_rtol=0,
          grad_atol=0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_broadcasting_and_signed_zeros(dtype):
    x = R.uniform(-6, 6, (3, 1, 4)).astype(dtype)
    x[0, 0, :2] = [-4.0, 4.0]
    y = np.array([[2.0], [-2.0], [1.5]], dtype=dtype)
    s, t = check(lambda m, a, b: m.fmod(a, b), x, y, rtol=0, atol=0)    # (grads: sum order)
    np.testing.assert_array_equal(np.signbit(s.detach().numpy()), np.signbit(t.detach().numpy()))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_second_derivative_as_torch(dtype):
    x0, y0 = X[:40].astype(dtype), Y[:40].astype(dtype)
    out = []
    for m in (torch, sg):
        x, y = m.tensor(x0, requires_grad=True), m.tensor(y0, requires_grad=True)
        gx, gy = m.autograd.grad((m.fmod(x, y) * x).sum(), (x, y), create_graph=True)
        hx, hy = m.autograd.grad((gx * gx + gy).sum(), (x, y))
        out.append([v.detach().numpy() for v in (gx, gy, hx, hy)])
    for a, b in zip(*out):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("backend", ["llvm", "numpy"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_values_and_gradients(backend, dtype):
    x0, y0 = X[:48].astype(dtype), Y[:48].astype(dtype)
    w = R.standard_normal(48).astype(dtype)

    def f(m, x, y):
        return (m.fmod(x * 1.5, y) * m.tensor(w) + x.fmod(2.5) * 0.5).sum()

    xt, yt = torch.tensor(x0, requires_grad=True), torch.tensor(y0, requires_grad=True)
    want = f(torch, xt, yt)
    want.backward()
    v, (gx, gy) = sg.value_and_grad(lambda x, y: f(sg, x, y), argnums=(0, 1),
                                    backend=backend)(x0, y0)
    np.testing.assert_allclose(v, want.item(), rtol=1e-5 if dtype == np.float32 else 1e-12)
    np.testing.assert_array_equal(gx, xt.grad.numpy())
    np.testing.assert_array_equal(gy, yt.grad.numpy())
    fc = sg.compile(lambda x, y: sg.fmod(x, y), backend=backend)
    got = fc(sg.tensor(X.astype(dtype)), sg.tensor(Y.astype(dtype)))
    np.testing.assert_array_equal(got.numpy(), torch.fmod(torch.tensor(X.astype(dtype)),
                                                          torch.tensor(Y.astype(dtype))).numpy())


INTS = [
    lambda m: m.fmod(m.tensor([5, -7, 3, -9, 0]), 2),
    lambda m: m.fmod(m.tensor([5, -7, 3, -9, 0]), -3),
    lambda m: m.fmod(m.tensor([5, -7, 3]), m.tensor([2, -3, 3])),
    lambda m: m.fmod(m.tensor([5, -7, 3], dtype=m.int32), m.tensor([[2], [-4]])),
    lambda m: m.fmod(m.tensor([5, -7, 3]), 0),
    lambda m: m.fmod(m.tensor([5, -7, 3]), m.tensor([1, 0, 2])),
    lambda m: m.fmod(m.tensor([5, -7, 3]), 2.5),
    lambda m: m.fmod(m.tensor([5.0, -7.0]), m.tensor([2, 3])),
    lambda m: m.fmod(m.tensor([5, 250], dtype=m.uint8), 7),
    lambda m: m.fmod(m.tensor([-9223372036854775808, 7]), -1),
    lambda m: m.fmod(m.tensor([True, False]), True),
    lambda m: m.fmod(m.tensor([True, False]), m.tensor([True, True])),
    lambda m: m.fmod(5, m.tensor([2.0])),
    lambda m: m.fmod(m.tensor([5.0]), "2"),
    lambda m: m.tensor([5, -7]).fmod_(2),
    lambda m: m.tensor([5, -7]).fmod_(2.5),
    lambda m: m.tensor([5.0, -7.5]).fmod_(m.tensor([2.0, 2.0])),
    lambda m: m.tensor([5.0, -7.0]).fmod_(m.tensor([[2.0], [3.0]])),
    lambda m: m.tensor([5.0, -7.0], requires_grad=True).fmod_(2.0),
    lambda m: m.tensor([5.0, -7.0], requires_grad=True).clone().fmod_(2.0),
]


@pytest.mark.parametrize("snippet", INTS)
def test_integers_bool_errors_and_in_place_as_torch(snippet):
    same_as_torch(snippet)


@pytest.mark.parametrize("op", ["fmod", "remainder", "floor_divide"])
@pytest.mark.parametrize("backend", ["llvm", "numpy"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_compiled_integers_and_zero_divisor(backend, dtype, op):
    """Compiled integer division checks its divisor at every call (PyTorch's error)."""
    fc = sg.compile(lambda x, y: getattr(sg, op)(x, y) * 2, backend=backend)
    x = np.array([5, -7, 3, -9, np.iinfo(dtype).min if op == "fmod" else 8, 11], dtype=dtype)
    y = np.array([2, -3, 3, 4, -1, -4], dtype=dtype)
    want = getattr(torch, op)(torch.tensor(x), torch.tensor(y)) * 2
    np.testing.assert_array_equal(fc(sg.tensor(x), sg.tensor(y)).numpy(), want.numpy())
    y[2] = 0
    with pytest.raises(RuntimeError) as got:
        fc(sg.tensor(x), sg.tensor(y))
    with pytest.raises(RuntimeError) as ref:
        getattr(torch, op)(torch.tensor(x), torch.tensor(y))
    assert str(got.value) == str(ref.value)
