"""Batching rules of the dense solvers (inv, solve, det, slogdet, cholesky, svdvals / svd):
symgrad.vmap batches their graph (no per-example fallback) and agrees with torch.func.vmap
(and jax.vmap for svdvals); per-example gradients under vmap, eager and compiled; jacobians
and hessians through them are one batched graph (symgrad.compiler.batching), compared with
torch.autograd.functional on both backends."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.autograd.functional import hessian as t_hessian
from torch.autograd.functional import jacobian as t_jacobian

import symgrad as sg
import importlib
import warnings

from symgrad.compiler import batching, transforms

vmap_module = importlib.import_module("symgrad.compiler.vmap")

R = np.random.default_rng(3)
MATS = R.standard_normal((4, 3, 3)) + 3 * np.eye(3)          # well conditioned
SPD = MATS @ np.swapaxes(MATS, -1, -2)
B = R.standard_normal((4, 3, 2))
ONE_B = R.standard_normal((3, 2))
TALL = R.standard_normal((4, 5, 3))


@pytest.fixture(autouse=True)
def _no_fallback(monkeypatch):
    """Every case here must be batched as one graph."""
    def refuse(*a, **k):
        raise AssertionError("vmap fell back to one call per example")
    monkeypatch.setattr(vmap_module, "_per_example", refuse)


def _sv_invariants(m, a):
    u, s, vh = m.linalg.svd(a, full_matrices=False)
    return (u @ vh) * s.sum() + u.abs().sum()


def _deprecated_cholesky(upper):
    """torch.cholesky (deprecated, with a warning): its node has an attribute named ``op``,
    which the batching rule once passed as a second value for ``mk``'s ``op``."""
    def fn(m, a):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return m.cholesky(a, upper=upper) * 2
    return fn


CASES = {
    "inv": ((lambda m, a: m.linalg.inv(a)), (MATS,), (0,)),
    "solve": ((lambda m, a, b: m.linalg.solve(a, b)), (MATS, B), (0, 0)),
    "solve_shared_matrix": ((lambda m, a, b: m.linalg.solve(a, b)), (MATS[0], B), (None, 0)),
    "solve_shared_rhs": ((lambda m, a, b: m.linalg.solve(a, b)), (MATS, ONE_B), (0, None)),
    "solve_vector": ((lambda m, a, b: m.linalg.solve(a, b)), (MATS, B[..., 0]), (0, 0)),
    "det": ((lambda m, a: m.linalg.det(a)), (MATS,), (0,)),
    "slogdet": ((lambda m, a: m.linalg.slogdet(-a)[1] * m.linalg.slogdet(-a)[0]), (MATS,), (0,)),
    "cholesky": ((lambda m, a: m.linalg.cholesky(a)), (SPD,), (0,)),
    "cholesky_upper": ((lambda m, a: m.linalg.cholesky(a, upper=True)), (SPD,), (0,)),
    "torch_cholesky": (_deprecated_cholesky(False), (SPD,), (0,)),
    "torch_cholesky_upper": (_deprecated_cholesky(True), (SPD,), (0,)),
    "svdvals": ((lambda m, a: m.linalg.svdvals(a)), (TALL,), (0,)),
    "svd": (_sv_invariants, (TALL,), (0,)),
    "nuclear_norm_axis1": ((lambda m, a: m.linalg.matrix_norm(a, "nuc")), (TALL,), (1,)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_vmap_as_torch_func_vmap(name):
    fn, arrays, axes = CASES[name]
    ours = sg.vmap(lambda *a: fn(sg, *a), in_axes=axes)(*(sg.tensor(a) for a in arrays))
    theirs = torch.func.vmap(lambda *a: fn(torch, *a), in_dims=axes)(
        *(torch.tensor(a) for a in arrays))
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-10, atol=1e-12)


def test_vmap_svdvals_as_jax_vmap():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    ours = sg.vmap(sg.linalg.svdvals)(sg.tensor(TALL))
    theirs = jax.vmap(jax.numpy.linalg.svd, in_axes=(0, None, None))(TALL, False, False)
    np.testing.assert_allclose(ours.numpy(), np.asarray(theirs), rtol=1e-12)


@pytest.mark.parametrize("name", ["inv", "solve", "det", "cholesky", "svd", "slogdet"])
def test_per_example_gradients_as_torch(name):
    """vmap of a compiled gradient, and of an eager autograd.grad, against torch.func."""
    fn, arrays, axes = CASES[name]

    def loss(m, *a):
        out = fn(m, *a)
        return (out * out).sum()
    theirs = torch.func.vmap(torch.func.grad(lambda *a: loss(torch, *a)), in_dims=axes)(
        *(torch.tensor(a) for a in arrays))
    for backend in ("llvm", "numpy"):
        per_example = sg.vmap(sg.grad(lambda *a: loss(sg, *a), backend=backend), in_axes=axes)
        got = per_example(*(sg.tensor(a) for a in arrays))
        np.testing.assert_allclose(np.asarray(got), theirs.numpy(), rtol=1e-9, atol=1e-10)

    def eager_grad(*a):
        a = [a[0].detach().requires_grad_()] + list(a[1:])
        with sg.enable_grad():
            return sg.autograd.grad(loss(sg, *a), a[0])[0]
    got = sg.func.vmap(eager_grad, in_dims=axes)(*(sg.tensor(a) for a in arrays))
    np.testing.assert_allclose(got.numpy(), theirs.numpy(), rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("backend", ["llvm", "numpy"])
def test_jacobian_and_hessian_are_one_batched_graph(backend, monkeypatch):
    calls = []
    real = batching.batch_graph

    def counting(*a, **k):
        out = real(*a, **k)
        calls.append(out is not None)
        return out
    monkeypatch.setattr(transforms, "batch_graph", counting)
    a0, s0, t0 = MATS[0], SPD[0], TALL[0]

    def f(m, a, s, t):
        return (m.linalg.solve(a, m.linalg.inv(a) @ s)[0] * m.linalg.det(a)
                + m.linalg.cholesky(s)[:, 1] + m.linalg.svdvals(t) * m.linalg.slogdet(a)[1])
    got = sg.jacobian(lambda *v: f(sg, *v), argnums=(0, 1, 2), backend=backend)(a0, s0, t0)
    want = t_jacobian(lambda *v: f(torch, *v), tuple(torch.tensor(v) for v in (a0, s0, t0)))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-9, atol=1e-10)
    h = sg.hessian(lambda a: f(sg, a, s0, t0).sum(), backend=backend)(a0)
    ht = t_hessian(lambda a: f(torch, a, torch.tensor(s0), torch.tensor(t0)).sum(),
                   torch.tensor(a0))
    np.testing.assert_allclose(h, ht.numpy(), rtol=1e-8, atol=1e-9)
    assert calls and all(calls)
