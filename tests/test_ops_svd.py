"""torch.linalg.svd (full_matrices True / False), torch.svd (some=, compute_uv=, V),
Tensor.svd, svdvals and the deprecated torch.cholesky (upper=) against torch 2.13: values,
grad_fn names, gradients in float32 and float64 over tall / wide / batched matrices,
second derivatives, the compiled gradient on both backends, errors -- and that one
factorisation serves the forward and every backward pass.

The signs of singular vectors are LAPACK's choice (numpy's OpenBLAS and torch's MKL
differ), so the functions compared are invariant to them: U Vᵀ, |U|, |Vᵀ|, S, and the
projector onto the complement a full U / Vᵀ adds (torch's gradient ignores those extra
columns: it narrows the cotangent)."""
from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch

import symgrad as sg

from op_checks import check_everywhere, same_error
from oracle import check_vjp_fd

R = np.random.default_rng(5)
TALL, WIDE, BATCH, SQUARE = (R.standard_normal(s) for s in ((4, 3), (3, 5), (2, 4, 3), (3, 3)))


def _thin(m, a):
    u, s, vh = m.linalg.svd(a, full_matrices=False)
    return u @ vh, s, u.abs(), vh.abs()


def _full(m, a):
    u, s, vh = m.linalg.svd(a)
    k = min(a.shape[-2:])
    rest_u, rest_v = u[..., k:], vh[..., k:, :]
    return (u[..., :k] @ vh[..., :k, :], s, rest_u @ rest_u.mT, rest_v.mT @ rest_v,
            u[..., :k].abs())


def _torch_svd(some):
    def fn(m, a):
        u, s, v = m.svd(a, some=some)
        k = min(a.shape[-2:])
        return u[..., :k] @ v[..., :k].mT, s, v[..., :k].abs()
    return fn


OPS = {
    "svd_thin_tall": (_thin, TALL), "svd_thin_wide": (_thin, WIDE),
    "svd_thin_batch": (_thin, BATCH), "svd_thin_square": (_thin, SQUARE),
    "svd_full_tall": (_full, TALL), "svd_full_wide": (_full, WIDE),
    "svd_full_batch": (_full, BATCH),
    "torch_svd": (_torch_svd(True), BATCH), "torch_svd_full": (_torch_svd(False), WIDE),
    "svd_method": (lambda m, a: (lambda r: (r.S, r.U @ r.V.mT))(a.svd()), TALL),
    "svd_values_only": (lambda m, a: m.svd(a, compute_uv=False), BATCH),
    "svdvals": (lambda m, a: m.linalg.svdvals(a), WIDE),
    "svd_s_only_of_full": (lambda m, a: m.linalg.svd(a).S * 2, TALL),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(OPS))
def test_svd_as_torch(name, dtype):
    fn, a = OPS[name]
    loose = dict(rtol=1e-4, atol=1e-5, grad_rtol=1e-3, grad_atol=1e-4) \
        if dtype == np.float32 else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_everywhere(fn, a.astype(dtype), **loose)


def test_grad_fn_names_and_result_types_as_torch():
    for m in (sg, torch):
        a = m.tensor(TALL, requires_grad=True)
        r = m.linalg.svd(a)
        t = m.svd(a)
        names = [x.grad_fn.name() for x in (*r, *t)]
        kinds = (type(r).__name__, type(t).__name__, r.Vh is r[2], t.V is t[2])
        z = m.svd(a, compute_uv=False)
        shapes = [tuple(x.shape) for x in (*r, *z)] + [z.U.requires_grad, z.V.requires_grad]
        if m is sg:
            ours = (names, kinds, shapes)
    assert ours == (names, kinds, shapes)


def test_svd_of_empty_matrices_as_torch():
    for shape in ((0, 3), (3, 0), (2, 0, 3)):
        for full in (True, False):
            a, b = sg.linalg.svd(sg.ones(*shape), full), torch.linalg.svd(torch.ones(*shape), full)
            for x, y in zip(a, b):
                assert tuple(x.shape) == tuple(y.shape)
                np.testing.assert_allclose(x.numpy(), y.numpy())


def test_gauge_dependent_loss_runs_as_torch_in_the_real_case():
    """torch raises for a loss that depends on the singular vectors' phase only for complex
    inputs; a real U.sum() (sign-dependent) differentiates: both give the gradient of the
    vectors LAPACK chose, so it is compared with finite differences of ours."""
    check_vjp_fd(lambda a: sg.linalg.svd(a, full_matrices=False).U, [TALL])
    check_vjp_fd(lambda a: sg.linalg.svd(a, full_matrices=False).Vh, [WIDE])


def test_one_factorisation_serves_every_backward(monkeypatch):
    """Eager: the forward factorises once; a first and a second backward of the nuclear
    norm and of a loss of U, S and Vᵀ factorise nothing again. Compiled: one per call."""
    calls = []
    real = np.linalg.svd

    def counting(*args, **kw):
        calls.append(1)
        return real(*args, **kw)
    monkeypatch.setattr(np.linalg, "svd", counting)
    for loss in (lambda a: sg.linalg.matrix_norm(a, "nuc").sum(),
                 lambda a: sum((x * x).sum() for x in _thin(sg, a))):
        calls.clear()
        a = sg.tensor(BATCH, requires_grad=True)
        (g,) = sg.autograd.grad(loss(a), a, create_graph=True)
        sg.autograd.grad((g * g).sum(), a)
        assert len(calls) == 1
    for backend in ("llvm", "numpy"):
        hess = sg.compile(sg.grad(lambda a: (sg.grad(
            lambda b: sg.linalg.matrix_norm(b, "nuc").sum())(a) ** 2).sum()), backend=backend)
        hess(BATCH)
        calls.clear()
        hess(BATCH)
        assert len(calls) == 1


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_torch_cholesky_as_torch(dtype):
    a = R.standard_normal((2, 3, 3))
    spd = (a @ np.swapaxes(a, -1, -2) + 3 * np.eye(3)).astype(dtype)
    loose = dict(rtol=1e-4, atol=1e-5) if dtype == np.float32 else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for fn in (lambda m, x: m.cholesky(x), lambda m, x: m.cholesky(x, upper=True),
                   lambda m, x: x.cholesky(True)):
            check_everywhere(fn, spd, **loose)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        sg.cholesky(sg.tensor(spd))
    # torch warns once per process: its text from a fresh one
    script = ("import warnings, torch\nwith warnings.catch_warnings(record=True) as w:\n"
              "    warnings.simplefilter('always')\n    torch.cholesky(torch.eye(2))\n"
              "print(repr([str(x.message) for x in w]))")
    theirs = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            check=True).stdout.strip()
    assert repr([str(w.message) for w in seen]) == theirs


BAD = [
    lambda m: m.linalg.svd(m.ones(3)), lambda m: m.linalg.svd(m.ones(3, 3, dtype=m.long)),
    lambda m: m.svd(m.ones(3)), lambda m: m.svd(m.ones(3, 3, dtype=m.long)),
    lambda m: m.linalg.svd(m.ones(3, 3), driver="gesvd"),
    lambda m: m.linalg.svd(m.tensor([[float("nan"), 1.0], [1.0, 1.0]])),
    lambda m: m.linalg.svdvals(m.tensor([[float("nan"), 1.0], [1.0, 1.0]])),
    lambda m: m.cholesky(m.ones(3)), lambda m: m.cholesky(m.ones(3, 3, dtype=m.long)),
    lambda m: m.cholesky(m.ones(3, 3)), lambda m: m.cholesky(m.ones(2, 3)),
]


@pytest.mark.filterwarnings("ignore:torch.cholesky is deprecated")
@pytest.mark.parametrize("snippet", BAD)
def test_errors_as_torch(snippet):
    same_error(snippet)
