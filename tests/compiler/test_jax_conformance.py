"""The compiled transforms laid out as JAX's, checked against jax itself: grad /
value_and_grad with has_aux, argnums as int or tuple, vjp's function returning a tuple,
jit as compile's alias."""
from __future__ import annotations

import numpy as np
import pytest

import symgrad as sg

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy


def _same_layout(ours, theirs):
    """Same nesting (tuples / lists / dicts) and the same leaves (to 1e-12)."""
    if isinstance(theirs, (tuple, list)):
        assert isinstance(ours, tuple if isinstance(theirs, tuple) else list), (ours, theirs)
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            _same_layout(a, b)
    elif isinstance(theirs, dict):
        assert isinstance(ours, dict) and set(ours) == set(theirs)
        for k in theirs:
            _same_layout(ours[k], theirs[k])
    else:
        np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-12, atol=1e-14)


def _f(m, w, x):
    y = m.tanh(x @ w["a"]) * w["b"]
    return (y ** 2).sum(), {"mean": y.mean(), "first": y[0]}


W = {"a": np.linspace(-1, 1, 6).reshape(3, 2), "b": np.array([0.5, -2.0])}
X = np.linspace(0, 1, 12).reshape(4, 3)


@pytest.mark.parametrize("argnums", [0, (0,), (0, 1)])
def test_grad_and_value_and_grad_with_aux_match_jax(argnums):
    ours = sg.grad(lambda w, x: _f(sg, w, x), argnums=argnums, has_aux=True)(W, X)
    theirs = jax.grad(lambda w, x: _f(jnp, w, x), argnums=argnums, has_aux=True)(W, X)
    _same_layout(ours, theirs)
    ours = sg.value_and_grad(lambda w, x: _f(sg, w, x), argnums=argnums, has_aux=True)(W, X)
    theirs = jax.value_and_grad(lambda w, x: _f(jnp, w, x), argnums=argnums, has_aux=True)(W, X)
    _same_layout(ours, theirs)


@pytest.mark.parametrize("argnums", [1, (1, 0)])
def test_grad_without_aux_matches_jax(argnums):
    ours = sg.grad(lambda w, x: _f(sg, w, x)[0], argnums=argnums)(W, X)
    theirs = jax.grad(lambda w, x: _f(jnp, w, x)[0], argnums=argnums)(W, X)
    _same_layout(ours, theirs)
    ours = sg.value_and_grad(lambda w, x: _f(sg, w, x)[0], argnums=argnums)(W, X)
    theirs = jax.value_and_grad(lambda w, x: _f(jnp, w, x)[0], argnums=argnums)(W, X)
    _same_layout(ours, theirs)


@pytest.mark.parametrize("n", [1, 2])
def test_vjp_function_returns_a_tuple_like_jax(n):
    args = (np.linspace(0.1, 1, 5), np.linspace(1, 2, 5))[:n]

    def f(m):
        return lambda *a: m.sin(a[0]) * (a[-1] if n == 2 else 2.0)
    out, fn = sg.vjp(f(sg), *args)
    j_out, j_fn = jax.vjp(f(jnp), *args)
    u = np.linspace(-1, 1, 5)
    _same_layout(out, j_out)
    _same_layout(fn(u), j_fn(u))


def test_has_aux_requires_a_pair():
    with pytest.raises(TypeError, match=r"has_aux=True\) requires the function to return a pair"):
        sg.grad(lambda x: (x ** 2).sum(), has_aux=True)(np.ones(2))


def test_jit_is_compile():
    """``jit`` is the compiler's ``compile``; ``symgrad.compile`` (torch.compile's
    signature on top of it) gives the same compiled function for a function."""
    assert sg.jit is sg.compiler.api.compile
    f = sg.jit(lambda x: (x * 2).sum())
    assert float(f(np.ones(3))) == 6.0
    assert isinstance(sg.compile(lambda x: x), sg.compiler.api.Compiled)


Params = __import__("collections").namedtuple("Params", "w b")


def test_namedtuple_arguments_and_results_match_jax():
    p = Params(np.linspace(-1, 1, 3), np.array(0.5))
    x = np.linspace(0, 2, 3)

    def loss(m):
        return lambda q, xx: ((q.w * xx + q.b) ** 2).sum()
    ours = sg.grad(loss(sg))(p, x)
    theirs = jax.grad(loss(jnp))(p, x)
    assert type(ours) is Params
    _same_layout(tuple(ours), tuple(theirs))
    out = sg.compile(lambda q: Params(q.w * 2, q.b + 1))(p)
    assert type(out) is Params and out.w.tolist() == (p.w * 2).tolist()


def test_keyword_arguments_pass_through_undifferentiated_as_in_jax():
    def f(m):
        return lambda x, *, scale, shift=0.0: ((x * scale + shift) ** 2).sum()
    x = np.linspace(-1, 1, 4)
    ours = sg.value_and_grad(f(sg))(x, scale=np.float64(3.0), shift=np.float64(0.5))
    theirs = jax.value_and_grad(f(jnp))(x, scale=3.0, shift=0.5)
    _same_layout(ours, theirs)
    ours = sg.grad(f(sg))(x, scale=np.float64(2.0))
    theirs = jax.grad(f(jnp))(x, scale=2.0)
    _same_layout(ours, theirs)
