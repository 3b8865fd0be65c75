"""The compiled transforms give no gradient through casts to integer / bool dtypes nor
through ``x.data`` (review6 #2): d/dx [x.long() * x] = long(x), as JAX's grad, torch.func
and eager backward give -- never 2 long(x)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy

X = np.array([1.5, -2.5, 0.25, 3.75])

# name -> (symgrad/torch form, jax form); each maps a float vector to a float vector
FNS = {
    "long_times_x": (lambda x: x.long() * x, lambda x: x.astype(jnp.int64) * x),
    "int_squared_plus_x": (lambda x: x.int() ** 2 + x, lambda x: x.astype(jnp.int32) ** 2 + x),
    "bool_times_x": (lambda x: x.bool() * x, lambda x: x.astype(bool) * x),
    "int_round_trip": (lambda x: x.int().to(x.dtype) * x,
                       lambda x: x.astype(jnp.int32).astype(x.dtype) * x),
    "bucketised": (lambda x: (x * 3).long().sum() * x, lambda x: (x * 3).astype(int).sum() * x),
    "data": (lambda x: x.data * x, lambda x: jax.lax.stop_gradient(x) * x),
    "data_in_exp": (lambda x: x.exp() * x.data.sin(), lambda x: jnp.exp(x) * jnp.sin(
        jax.lax.stop_gradient(x))),
}
DTYPES = [(np.float32, 1e-6), (np.float64, 1e-14)]


@pytest.mark.parametrize("dt,tol", DTYPES)
@pytest.mark.parametrize("name", sorted(FNS))
def test_grad_and_jacobian_as_jax(name, dt, tol):
    ours, theirs = FNS[name]
    x = X.astype(dt)
    want_g = np.asarray(jax.grad(lambda v: theirs(v).sum())(x))
    want_j = np.asarray(jax.jacrev(theirs)(x))
    np.testing.assert_allclose(sg.grad(lambda v: ours(v).sum())(x), want_g, rtol=tol)
    val, g = sg.value_and_grad(lambda v: ours(v).sum())(x)
    np.testing.assert_allclose(g, want_g, rtol=tol)
    np.testing.assert_allclose(val, np.asarray(theirs(x).sum()), rtol=tol)
    np.testing.assert_allclose(sg.jacobian(ours)(x), want_j, rtol=tol)


@pytest.mark.parametrize("dt,tol", DTYPES)
@pytest.mark.parametrize("name", sorted(FNS))
def test_func_grad_as_torch_func(name, dt, tol):
    ours, _ = FNS[name]
    want = torch.func.grad(lambda v: ours(v).sum())(torch.tensor(X.astype(dt)))
    got = sg.func.grad(lambda v: ours(v).sum())(sg.tensor(X.astype(dt)))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=tol)
    want_j = torch.func.jacrev(ours)(torch.tensor(X.astype(dt)))
    got_j = sg.func.jacrev(ours)(sg.tensor(X.astype(dt)))
    np.testing.assert_allclose(got_j.numpy(), want_j.numpy(), rtol=tol)
    # eager backward agrees (the reference of the same program in torch)
    t = torch.tensor(X.astype(dt), requires_grad=True)
    ours(t).sum().backward()
    s = sg.tensor(X.astype(dt), requires_grad=True)
    ours(s).sum().backward()
    np.testing.assert_allclose(s.grad.numpy(), t.grad.numpy(), rtol=tol)


def test_second_order_through_a_cast_as_jax():
    h = sg.hessian(lambda v: (v.long() * v ** 2).sum())(X)
    want = jax.hessian(lambda v: (v.astype(int) * v ** 2).sum())(X)
    np.testing.assert_allclose(h, np.asarray(want), rtol=1e-14)
