"""Review6 #11: hessian of a vector-valued function as jax.hessian / torch.func.hessian
(out.shape + in.shape + in.shape); jacobian of a bool / integer output refused as JAX's
jacrev and torch.func.jacrev refuse it; grad of a non-scalar or integer output raises
JAX's TypeError and text."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy

X = np.array([0.3, -1.2, 0.7])


@pytest.mark.parametrize("dt,tol", [(np.float32, 2e-6), (np.float64, 1e-13)])
@pytest.mark.parametrize("case", ["vector", "matrix", "one_element"])
def test_hessian_of_vector_valued_as_jax_and_torch(case, dt, tol):
    fns = {"vector": lambda L: lambda x: L.sin(x) * x[0],
           "matrix": lambda L: lambda x: L.outer(x, L.exp(x)) if L is not jnp else
           jnp.outer(x, jnp.exp(x)),
           "one_element": lambda L: lambda x: (x ** 3).sum().reshape(1)}
    x = X.astype(dt)
    want = np.asarray(jax.hessian(fns[case](jnp))(x))
    got = sg.hessian(fns[case](sg))(x)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    want_t = torch.func.hessian(fns[case](torch))(torch.tensor(x))
    got_t = sg.func.hessian(fns[case](sg))(sg.tensor(x))
    assert tuple(got_t.shape) == tuple(want_t.shape)
    np.testing.assert_allclose(got_t.numpy(), want_t.numpy(), rtol=tol, atol=tol)


def test_hessian_of_a_scalar_with_two_argnums_as_jax():
    f = lambda m: lambda x, y: (m.sin(x) * y ** 2).sum()   # noqa: E731
    want = jax.hessian(f(jnp), argnums=(0, 1))(X, X[::-1].copy())
    got = sg.hessian(f(sg), argnums=(0, 1))(X, X[::-1].copy())
    for i in range(2):
        for j in range(2):
            np.testing.assert_allclose(got[i][j], want[i][j], rtol=1e-13, atol=1e-15)


def _error(fn):
    with pytest.raises(Exception) as e:
        fn()
    return type(e.value), str(e.value)


def test_bool_and_int_outputs_refused_as_jax_and_torch():
    for f in (lambda m: lambda x: x > 0, lambda m: lambda x: (x * 2).astype(jnp.int64)
              if m is jnp else (x * 2).long()):
        want = _error(lambda: jax.jacrev(f(jnp))(X))
        got = _error(lambda: sg.jacobian(f(sg))(X))
        assert got[0] is want[0] is TypeError
        assert got[1].split(". For")[0] == want[1].split(". For")[0]
        want = _error(lambda: torch.func.jacrev(f(torch))(torch.tensor(X)))
        got = _error(lambda: sg.func.jacrev(f(sg))(sg.tensor(X)))
        assert got == want


def test_grad_errors_as_jax():
    want = _error(lambda: jax.grad(lambda x: x * x)(X))
    got = _error(lambda: sg.grad(lambda x: x * x)(X))
    assert got == want
    want = _error(lambda: jax.grad(lambda x: x.sum().astype(jnp.int64))(X))
    got = _error(lambda: sg.grad(lambda x: x.sum().long())(X))
    assert got[0] is want[0] is TypeError
    assert got[1].replace("int64", "INT") == want[1].replace("int64", "INT")


@pytest.mark.parametrize("call", [
    lambda m, x: m.grad(lambda x: x.sum(), argnums=2)(x),
    lambda m, x: m.grad(lambda x: x.sum(), argnums=-3)(x),
    lambda m, x: m.value_and_grad(lambda x, y: x.sum(), argnums=(0, 3))(x, x),
    lambda m, x: (m.jacrev if m is jax else m.jacobian)(lambda x: x, argnums=1)(x),
    lambda m, x: m.hessian(lambda x: x.sum(), argnums=2)(x)])
def test_argnums_errors_as_jax(call):
    assert _error(lambda: call(sg, X)) == _error(lambda: call(jax, X))


@pytest.mark.parametrize("api", ["jacfwd", "jacrev", "hessian"])
def test_integer_primal_errors_as_torch(api):
    got = []
    for L in (torch, sg):
        got.append(_error(lambda: getattr(L.func, api)(lambda x: x * 2)(L.tensor([1, 2]))))
    assert got[0] == got[1]


def test_jvp_vjp_integer_primal_errors_as_torch():
    for call in (lambda L, x: L.func.vjp(lambda v: v * 2, x),
                 lambda L, x: L.func.jvp(lambda v: v * 2, (x,), (x,))):
        got = [_error(lambda: call(L, L.tensor([1, 2]))) for L in (torch, sg)]
        assert got[0] == got[1]
