"""Gradients through a traced cond / lax.cond / switch / torch.cond are the taken
branch's, even when the branch not taken has an infinite derivative that a reduction
meets (``sqrt(v).sum()`` at v < 0, ``(1 / v).sum()`` at 0): review6 #4, where the
select's zero cotangent times inf gave NaN. Operands and closed-over values alike;
checked against JAX (jit(grad), vmap) and torch (torch.cond eager backward)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy

DTYPES = [(np.float32, 1e-6), (np.float64, 1e-14)]
pytestmark = pytest.mark.filterwarnings("ignore:divide by zero")


def _cases(L, lax, sqrt):
    """name -> (function of x, x); the untaken branch is singular at x."""
    return {
        "operand_sqrt": (lambda x: lax.cond(x.sum() > 0, lambda v: sqrt(v).sum(),
                                            lambda v: (v ** 2).sum(), x), [-1.0, -2.0]),
        "operand_reciprocal": (lambda x: lax.cond(x[0] != 0, lambda v: (1 / v).sum(),
                                                  lambda v: v.sum() * 3, x), [0.0, 0.0]),
        "closure_sqrt": (lambda x: lax.cond(x.sum() > 0, lambda: sqrt(x).sum(),
                                            lambda: (x ** 3).sum()), [-1.0, -0.5]),
        "mixed": (lambda x: lax.cond(x.sum() < 0, lambda v: (v * x).sum(),
                                     lambda v: sqrt(v).sum() + (1 / x).sum(), x * 2),
                  [-1.0, 0.0]),
        "nested": (lambda x: lax.cond(
            x[0] > 0, lambda v: sqrt(v).sum(),
            lambda v: lax.cond(x[1] > 0, lambda w: (1 / (w - w)).sum(),
                               lambda w: (w * w).sum(), v), x), [-1.0, -3.0]),
        "switch": (lambda x: lax.switch(
            (x[0] > 0) * 1 + (x[0] > 1) * 1,
            [lambda v: (v ** 2).sum(), lambda v: sqrt(-v).sum(), lambda v: (1 / v).sum()],
            x), [-2.0, 0.0]),
    }


@pytest.mark.parametrize("dt,tol", DTYPES)
@pytest.mark.parametrize("name", sorted(_cases(None, sg.lax, sg.sqrt)))
def test_grad_through_traced_cond_as_jax(name, dt, tol):
    ours, x = _cases(sg, sg.lax, sg.sqrt)[name]
    theirs, _ = _cases(jnp, jax.lax, jnp.sqrt)[name]
    x = np.array(x, dtype=dt)
    want = np.asarray(jax.jit(jax.grad(theirs))(x))
    assert np.isfinite(want).all()
    np.testing.assert_allclose(sg.grad(ours)(x), want, rtol=tol)
    v, g = sg.value_and_grad(ours)(x)
    np.testing.assert_allclose(g, want, rtol=tol)
    np.testing.assert_allclose(v, np.asarray(theirs(x)), rtol=tol)


@pytest.mark.parametrize("name", ["operand_sqrt", "closure_sqrt", "switch"])
def test_vmapped_grad_through_cond_as_jax(name):
    ours, x = _cases(sg, sg.lax, sg.sqrt)[name]
    theirs, _ = _cases(jnp, jax.lax, jnp.sqrt)[name]
    xs = np.array([x, [2.0, 3.0], [0.5, 0.25], [-4.0, 1.0]])
    want = np.asarray(jax.vmap(jax.grad(theirs))(xs))
    np.testing.assert_allclose(sg.vmap(sg.grad(ours))(xs), want, rtol=1e-14)


@pytest.mark.parametrize("dt,tol", DTYPES)
def test_compiled_torch_cond_backward_as_torch(dt, tol):
    def f(L, W):
        def g(x):
            return L.cond(x.sum() > 0, lambda v: L.sqrt(v).sum() + (1 / W).sum(),
                          lambda v: (v ** 2 * W).sum(), (x,))
        return g
    for x0, w0 in (([-1.0, -2.0], [0.0, 2.0]), ([4.0, 1.0], [0.5, 2.0])):
        xt = torch.tensor(x0, dtype=getattr(torch, np.dtype(dt).name), requires_grad=True)
        Wt = torch.tensor(w0, dtype=xt.dtype, requires_grad=True)
        f(torch, Wt)(xt).backward()
        xs = sg.tensor(np.array(x0, dt), requires_grad=True)
        Ws = sg.tensor(np.array(w0, dt), requires_grad=True)
        out = sg.compile(f(sg, Ws))(xs)
        out.backward()
        np.testing.assert_allclose(xs.grad.numpy(), xt.grad.numpy(), rtol=tol)
        np.testing.assert_allclose(Ws.grad.numpy(), Wt.grad.numpy(), rtol=tol)
