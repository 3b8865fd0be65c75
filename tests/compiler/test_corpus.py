"""Compiled values and gradients of the corpus equal torch's (float64 and float32), on
every backend; compiled == eager symgrad too."""
import numpy as np
import pytest
import torch

import symgrad
from tests.compiler.corpus import CASES

TOL = {np.float64: dict(rtol=1e-9, atol=1e-10)}


def _cast(args, dtype):
    return tuple(a.astype(dtype) if a.dtype.kind == "f" else a for a in args)


def torch_value_and_grad(case, args):
    ts = [torch.tensor(a, requires_grad=(i in case.argnums)) for i, a in enumerate(args)]
    out = case.fn(torch, *ts)
    grads = torch.autograd.grad(out, [ts[i] for i in case.argnums])
    return out.detach().numpy(), [g.numpy() for g in grads]


def _compiled(case, backend):
    return symgrad.value_and_grad(lambda *a: case.fn(symgrad, *a), argnums=case.argnums,
                                  backend=backend)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_value_and_grad_matches_torch_f64(case, backend):
    args = case.args(np.random.default_rng(1))
    value, grads = _compiled(case, backend)(*args)
    want_v, want_g = torch_value_and_grad(case, args)
    np.testing.assert_allclose(value, want_v, **TOL[np.float64])
    assert np.asarray(value).dtype == np.float64
    for g, w in zip(grads, want_g):
        assert g.dtype == np.float64 and g.shape == w.shape
        np.testing.assert_allclose(g, w, **TOL[np.float64])


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_value_and_grad_f32_as_accurate_as_torch_f32(case, backend):
    """float32 results are compared with torch float64 on the same (f32-rounded) inputs:
    symgrad's error must be within a small multiple of torch float32's own error (rounding
    differences are amplified by chaotic programs such as the 10-step chain, so a fixed
    tolerance against torch float32 would test the wrong thing)."""
    args32 = _cast(case.args(np.random.default_rng(1)), np.float32)
    value, grads = _compiled(case, backend)(*args32)
    ref_v, ref_g = torch_value_and_grad(case, _cast(args32, np.float64))
    t32_v, t32_g = torch_value_and_grad(case, args32)
    assert np.asarray(value).dtype == np.float32
    for got, ref, t32 in zip([value, *grads], [ref_v, *ref_g], [t32_v, *t32_g]):
        assert np.asarray(got).dtype == np.float32
        scale = np.abs(ref).max() + 1e-30
        ours = np.abs(np.asarray(got, np.float64) - ref).max() / scale
        torch_err = np.abs(np.asarray(t32, np.float64) - ref).max() / scale
        assert ours <= 8 * torch_err + 4 * np.finfo(np.float32).eps, (ours, torch_err)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_compiled_equals_eager(case, backend):
    args = case.args(np.random.default_rng(2))
    compiled = symgrad.compile(lambda *a: case.fn(symgrad, *a), backend=backend)
    got = compiled(*[symgrad.tensor(a) for a in args])
    eager = case.fn(symgrad, *[symgrad.tensor(a) for a in args])
    assert isinstance(got, symgrad.Tensor)
    np.testing.assert_allclose(got.numpy(), eager.numpy(), rtol=1e-12, atol=1e-12)


def test_backward_inside_compiled_function(backend):
    """loss.backward() inside fn, returning w.grad: the gradient graph is traced."""
    w = symgrad.tensor([0.5, -1.0, 2.0], requires_grad=True)

    @symgrad.compile(backend=backend)
    def step(x):
        loss = ((x @ w).tanh() ** 2).sum()
        loss.backward()
        return loss, w.grad

    x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    loss, g = step(symgrad.tensor(x))
    wt = torch.tensor([0.5, -1.0, 2.0], requires_grad=True, dtype=torch.float32)
    lt = ((torch.tensor(x, dtype=torch.float32) @ wt).tanh() ** 2).sum()
    lt.backward()
    np.testing.assert_allclose(loss.numpy(), lt.item(), rtol=1e-5)
    np.testing.assert_allclose(g.numpy(), wt.grad.numpy(), rtol=1e-5)
    # the call set w.grad, as PyTorch's eager backward does (tests/compiler/test_train_step.py)
    np.testing.assert_allclose(w.grad.numpy(), wt.grad.numpy(), rtol=1e-5)


def test_closed_over_parameters_are_inputs(backend):
    """Updating a closed-over tensor in place changes results without recompiling."""
    w = symgrad.tensor([1.0, 2.0])
    f = symgrad.compile(lambda x: (x * w).sum(), backend=backend)
    x = np.array([3.0, 4.0], dtype=np.float32)
    assert float(f(x)) == 11.0
    with symgrad.no_grad():
        w.mul_(2)
    assert float(f(x)) == 22.0
    assert f.cache_info().misses == 1 and f.cache_info().hits == 1
