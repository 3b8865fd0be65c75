"""Forward-mode and batched transforms through loops whose body closes over a traced
value (review10 #6, #7): ``jvp`` / ``jacfwd`` through a ``while_loop`` whose body reads the
differentiated value (``lambda c: c * w``: an AttributeError in forward_mode), and
``jacfwd`` / ``hessian`` / ``vmap(grad)`` of a ``fori_loop`` whose body indexes a traced
array by the loop index (``xs[i] * w``: an AttributeError in batching). Against JAX,
both dtypes."""
from __future__ import annotations

import types

import numpy as np
import pytest

import symgrad as sg

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy

SG = types.SimpleNamespace(np=sg, fori_loop=sg.fori_loop, while_loop=sg.while_loop)
JX = types.SimpleNamespace(np=jnp, fori_loop=jax.lax.fori_loop, while_loop=jax.lax.while_loop)
TOL = {np.float32: dict(rtol=2e-5, atol=2e-5), np.float64: dict(rtol=1e-11, atol=1e-11)}


# ---- while loops whose body closes over w (forward mode only, as in JAX) -------------------
def grow(m, w):
    return m.while_loop(lambda c: c.sum() < 100.0, lambda c: c * w,
                        m.np.ones(3, dtype=w.dtype)).sum()


def counted(m, w):
    def body(s):
        i, c = s
        return i + 1, c * m.np.tanh(w) + w ** 2
    _, c = m.while_loop(lambda s: s[0] < 5, body, (0, w * 0 + 0.5))
    return (c * c).sum()


def cond_reads_w(m, w):
    return m.while_loop(lambda c: c.sum() < w.sum() * 10, lambda c: c * 1.5 + m.np.sin(w),
                        w * 0 + 1).prod()


def derived(m, w):
    v = m.np.exp(w) * 0.25
    return m.while_loop(lambda c: c[0] < 50.0, lambda c: c + v * c.sum(), w + 1.0)


WHILE = {"grow": grow, "counted": counted, "cond_reads_w": cond_reads_w, "derived": derived}
W0 = np.array([1.5, 2.0, 3.0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(WHILE))
def test_jvp_through_while_closing_over_w(name, dtype):
    prog = WHILE[name]
    w, t = W0.astype(dtype), np.array([1.0, -0.5, 0.25], dtype=dtype)
    want = jax.jvp(lambda w: prog(JX, w), (jnp.asarray(w),), (jnp.asarray(t),))
    got = sg.jvp(lambda w: prog(SG, w), (sg.tensor(w),), (sg.tensor(t),))
    for g, j in zip(got, want):
        assert g.dtype == sg.as_tensor(np.asarray(j)).dtype
        np.testing.assert_allclose(np.asarray(g.tolist()), np.asarray(j), **TOL[dtype])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(WHILE))
def test_jacfwd_through_while_closing_over_w(name, dtype):
    prog = WHILE[name]
    w = W0.astype(dtype)
    want = jax.jacfwd(lambda w: prog(JX, w))(jnp.asarray(w))
    got = sg.func.jacfwd(lambda w: prog(SG, w))(sg.tensor(w))
    np.testing.assert_allclose(np.asarray(got.tolist()), np.asarray(want), **TOL[dtype])


# ---- fori loops indexing a traced array by the loop index -----------------------------------
def accumulate(m, w, xs):
    return m.fori_loop(1, 4, lambda i, h: h + xs[i] * w, w).sum()


def product(m, w, xs):
    return (m.fori_loop(0, 3, lambda i, h: h * xs[i] + m.np.sin(w), w) ** 2).sum()


def nonlinear(m, w, xs):
    return m.fori_loop(0, 4, lambda i, h: h + xs[i] * m.np.tanh(w * h), w * 0.5).sum()


def shifted(m, w, xs):
    return (m.fori_loop(0, 3, lambda i, h: h + xs[i + 1] * h * w - xs[i] * 0.5, w)
            * w).sum()


FORI = {"accumulate": accumulate, "product": product, "nonlinear": nonlinear,
        "shifted": shifted}


def _data(dtype):
    rng = np.random.default_rng(3)
    return (np.array([0.5, 1.0, -0.75], dtype=dtype),
            (rng.normal(size=(5, 3)) * 0.5).astype(dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(FORI))
def test_jacfwd_and_hessian_of_indexing_fori(name, dtype):
    prog = FORI[name]
    w, xs = _data(dtype)
    fj, fs = (lambda w, xs: prog(JX, w, xs)), (lambda w, xs: prog(SG, w, xs))
    for argnums in (0, 1):
        want = jax.jacfwd(fj, argnums=argnums)(jnp.asarray(w), jnp.asarray(xs))
        got = sg.func.jacfwd(fs, argnums=argnums)(sg.tensor(w), sg.tensor(xs))
        np.testing.assert_allclose(np.asarray(got.tolist()), np.asarray(want), **TOL[dtype])
    want = jax.hessian(fj)(jnp.asarray(w), jnp.asarray(xs))
    for hess in (sg.hessian, sg.func.hessian):
        got = hess(fs)(sg.tensor(w), sg.tensor(xs))
        np.testing.assert_allclose(np.asarray(got.tolist()), np.asarray(want), **TOL[dtype])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(FORI))
def test_vmap_grad_of_indexing_fori(name, dtype):
    prog = FORI[name]
    w, xs = _data(dtype)
    ws = np.stack([w, w * 2, -w]).astype(dtype)
    fj, fs = (lambda w, xs: prog(JX, w, xs)), (lambda w, xs: prog(SG, w, xs))
    want = jax.vmap(jax.grad(fj), in_axes=(0, None))(jnp.asarray(ws), jnp.asarray(xs))
    got = sg.vmap(sg.grad(fs), in_axes=(0, None))(sg.tensor(ws), sg.tensor(xs))
    np.testing.assert_allclose(np.asarray(got.tolist()), np.asarray(want), **TOL[dtype])
    xss = np.stack([xs, xs[::-1], xs * 0.5]).astype(dtype)      # (both batched)
    want = jax.vmap(jax.grad(fj, argnums=1))(jnp.asarray(ws), jnp.asarray(xss))
    got = sg.vmap(sg.grad(fs, argnums=1))(sg.tensor(ws), sg.tensor(xss))
    np.testing.assert_allclose(np.asarray(got.tolist()), np.asarray(want), **TOL[dtype])
