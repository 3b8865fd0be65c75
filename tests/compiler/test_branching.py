"""Branches: symgrad.cond against torch.cond, symgrad.lax.cond / switch against JAX's --
eager, compiled on both backends, with gradients (NaN-safe through the branch not taken),
under vmap and inside scan; errors for mismatched branches and bad predicates."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg
from symgrad import lax

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy

X = np.array([0.5, -1.5, 2.0])


def f_sg(x):
    return lax.cond(x.sum() > 0, lambda x: (sg.sin(x) * x).sum(), lambda x: (x ** 3).sum(), x)


def f_jax(x):
    return jax.lax.cond(x.sum() > 0, lambda x: (jnp.sin(x) * x).sum(), lambda x: (x ** 3).sum(),
                        x)


@pytest.mark.parametrize("sign", [1.0, -1.0])
@pytest.mark.parametrize("backend", ["llvm", "numpy"])
def test_lax_cond_values_and_gradients_match_jax(sign, backend):
    x = X * sign
    np.testing.assert_allclose(float(f_sg(sg.tensor(x))), float(f_jax(x)), rtol=1e-12)
    np.testing.assert_allclose(sg.compile(f_sg, backend=backend)(x), f_jax(x), rtol=1e-12)
    np.testing.assert_allclose(sg.grad(f_sg, backend=backend)(x), jax.grad(f_jax)(x),
                               rtol=1e-12)
    t = sg.tensor(x, requires_grad=True)
    f_sg(t).backward()
    np.testing.assert_allclose(t.grad.numpy(), jax.grad(f_jax)(x), rtol=1e-12)


def test_torch_cond_matches_torch():
    for p in (True, False):
        x = torch.tensor(X, requires_grad=True)
        want = torch.cond(torch.tensor(p), lambda x: x.sin() * 2, lambda x: x.cos(), (x,))
        want.sum().backward()
        s = sg.tensor(X, requires_grad=True)
        got = sg.cond(sg.tensor(p), lambda x: x.sin() * 2, lambda x: x.cos(), (s,))
        got.sum().backward()
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-15)
        np.testing.assert_allclose(s.grad.numpy(), x.grad.numpy(), rtol=1e-15)
        compiled = sg.compile(lambda pr, x: sg.cond(pr, lambda x: x.sin() * 2,
                                                    lambda x: x.cos(), (x,)))
        np.testing.assert_allclose(compiled(np.array(p), X), want.detach().numpy(), rtol=1e-15)


def test_gradient_through_the_branch_not_taken_is_nan_safe():
    def f(m, cond, x):
        return cond(x > 0, lambda x: m.sqrt(x), lambda x: x * 0.0, x)
    want = jax.grad(lambda x: f(jnp, jax.lax.cond, x))(-1.0)
    got = sg.grad(lambda x: f(sg, lax.cond, x))(np.float64(-1.0))
    assert float(want) == 0.0 and float(got) == 0.0


def test_switch_matches_jax():
    branches_sg = [lambda x: x * 2, lambda x: sg.sin(x), lambda x: x ** 2]
    branches_j = [lambda x: x * 2, lambda x: jnp.sin(x), lambda x: x ** 2]
    for i in (-3, 0, 1, 2, 7):
        want = jax.lax.switch(i, branches_j, X)
        np.testing.assert_allclose(lax.switch(i, branches_sg, sg.tensor(X)).numpy(), want)
        got = sg.compile(lambda i, x: lax.switch(i, branches_sg, x))(np.int64(i), X)
        np.testing.assert_allclose(got, want, rtol=1e-15)
        g = sg.grad(lambda x, i: lax.switch(i, branches_sg, x).sum())(X, np.int64(i))
        np.testing.assert_allclose(g, jax.grad(lambda x: jax.lax.switch(i, branches_j, x).sum())(X),
                                   rtol=1e-15)


def test_cond_under_vmap_and_in_scan():
    xs = np.stack([X, -X, X * 0.1])
    want = jax.vmap(f_jax)(xs)
    np.testing.assert_allclose(sg.vmap(f_sg)(sg.tensor(xs)).numpy(), want, rtol=1e-12)

    def run(m, cond, scan, xs):
        return scan(lambda c, x: (cond(x.sum() > c, lambda v: v + x.sum(), lambda v: v * 0.5, c),
                                  c), xs[0, 0] * 0, xs)[1]
    want = run(jnp, jax.lax.cond, jax.lax.scan, xs)
    got = sg.compile(lambda a: run(sg, lax.cond, lax.scan, a))(xs)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_mismatched_branches_and_bad_predicates():
    with pytest.raises(TypeError, match=r"output is float64\[3\] in true_fun and float64\[\] "
                                        r"in false_fun"):
        sg.compile(lambda x: lax.cond(x.sum() > 0, lambda x: x, lambda x: x.sum(), x))(X)
    with pytest.raises(TypeError, match="same pytree structure"):
        sg.compile(lambda x: lax.cond(x.sum() > 0, lambda x: (x, x), lambda x: x, x))(X)
    with pytest.raises(RuntimeError, match="Expected pred to be bool or single-element tensor"):
        sg.cond(sg.tensor([True, False]), lambda: 1, lambda: 2)
    with pytest.raises(ValueError, match="Empty branch sequence"):
        lax.switch(0, [], 1.0)
