"""Keyword arguments under vmap (review6 #5): ``symgrad.vmap`` maps them over their axis 0
as ``jax.vmap`` does; ``symgrad.func.vmap`` passes them whole as ``torch.func.vmap``."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy

DTYPES = [(np.float32, 1e-6), (np.float64, 1e-14)]


def _loss(m):
    return lambda x, y: ((x - y) ** 2).sum()


def _scaled(m):
    return lambda x, s, *, w: m.tanh(x * s) @ w["a"] + w["b"]


@pytest.mark.parametrize("dt,tol", DTYPES)
def test_keywords_mapped_as_jax(dt, tol):
    rng = np.random.default_rng(1)
    b, s = rng.standard_normal((4, 3)).astype(dt), rng.standard_normal((4, 3)).astype(dt)
    np.testing.assert_allclose(sg.vmap(_loss(sg))(b, y=s),
                               jax.vmap(_loss(jnp))(b, y=s), rtol=tol)
    w = {"a": rng.standard_normal((4, 3, 2)).astype(dt), "b": rng.standard_normal((4, 2)).astype(dt)}
    for in_axes in (0, (0, None), [1, None]):
        x = b.T if in_axes == [1, None] else b
        sc = s if in_axes == 0 else s[0]
        want = jax.vmap(_scaled(jnp), in_axes=in_axes)(x, sc, w=w)
        got = sg.vmap(_scaled(sg), in_axes=in_axes)(x, sc, w=w)
        assert tuple(got.shape) == want.shape
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_grad_of_keywords_mapped_function_as_jax():
    rng = np.random.default_rng(2)
    b, s = rng.standard_normal((5, 3)), rng.standard_normal((5, 3))
    want = jax.vmap(jax.grad(_loss(jnp)))(b, y=s)
    np.testing.assert_allclose(sg.vmap(sg.grad(_loss(sg)))(b, y=s), want, rtol=1e-14)
    want = jax.grad(lambda x: jax.vmap(_loss(jnp))(x, y=s).sum())(b)
    got = sg.grad(lambda x: sg.vmap(_loss(sg))(x, y=s).sum())(b)
    np.testing.assert_allclose(got, want, rtol=1e-14)


def test_keyword_errors_as_jax():
    with pytest.raises(ValueError, match="rank should be at least 1, but is only 0"):
        sg.vmap(lambda x, s: x * s)(np.ones((4, 3)), s=2.0)
    with pytest.raises(ValueError, match="inconsistent sizes"):
        sg.vmap(lambda x, s: x * s)(np.ones((4, 3)), s=np.ones((5, 3)))
    with pytest.raises(ValueError, match=r"len\(in_axes\)=2, len\(args\)=1"):
        sg.vmap(lambda x, s: x * s, in_axes=(0, None))(np.ones((4, 3)), s=np.ones((4, 3)))


def test_func_vmap_keywords_unmapped_as_torch():
    x, s = np.ones((4, 3)), np.arange(3.0)
    want = torch.func.vmap(lambda x, s: x * s)(torch.tensor(x), s=torch.tensor(s))
    got = sg.func.vmap(lambda x, s: x * s)(sg.tensor(x), s=sg.tensor(s))
    np.testing.assert_allclose(got.numpy(), want.numpy())


@pytest.mark.parametrize("call", [
    lambda L: L.func.vmap(lambda x, y: x + y)(L.ones(2, 3), L.ones(5, 3)),
    lambda L: L.func.vmap(lambda x: 1.0)(L.ones(2)),
    lambda L: L.func.vmap(lambda x: (x, 2))(L.ones(2)),
    lambda L: L.func.vmap(lambda x: x, in_dims=None)(L.ones(2))])
def test_func_vmap_errors_as_torch(call):
    got = []
    for L in (torch, sg):
        with pytest.raises(Exception) as e:
            call(L)
        got.append((type(e.value), str(e.value)))
    assert got[0] == got[1]
