"""Sanitized mode (SYMGRAD_SANITIZE=1): every load and store of a planned buffer is
bounds-checked in the generated IR; an out-of-range access is not made and the call
raises RuntimeError instead of touching memory (an injected off-by-2^24 index would
otherwise crash the process)."""
import numpy as np
import pytest
import torch

import symgrad as sg
from symgrad.config import settings


@pytest.fixture
def sanitized(monkeypatch):
    monkeypatch.setattr(settings, "sanitize", True)
    monkeypatch.setattr(settings, "disk_cache", False)   # never store an injected kernel


def test_an_out_of_bounds_index_raises_instead_of_crashing(sanitized, monkeypatch):
    import codegen.lower.fused_loop as FL
    real = FL.FusedLoop.offset

    def off_by_a_lot(self, a):
        v = real(self, a)
        return self.b.add(v, v.type(1 << 24))
    monkeypatch.setattr(FL.FusedLoop, "offset", off_by_a_lot)
    f = sg.grad(lambda x: (x.sin() * x).sum())
    with pytest.raises(RuntimeError, match="out-of-bounds load or store"):
        f(np.linspace(0, 1, 100))
    with pytest.raises(RuntimeError, match="out-of-bounds"):     # every call, not only once
        f(np.linspace(0, 1, 100))


def test_sanitized_kernels_compute_the_right_answers(sanitized):
    from tests.fuzz.programs import check, generate
    failures = [f"seed {s}: {w}" for s in range(1000, 1040) if (w := check(generate(s)))]
    assert not failures, "\n".join(failures)
    x = np.random.default_rng(0).normal(size=(70, 65))
    w = np.random.default_rng(1).normal(size=(65, 9))
    v, (gx, gw) = sg.value_and_grad(lambda x, w: (x @ w).tanh().sum(), argnums=(0, 1))(x, w)
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    want = torch.autograd.grad((tx @ tw).tanh().sum(), [tx, tw])
    np.testing.assert_allclose(gx, want[0].numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gw, want[1].numpy(), rtol=1e-10, atol=1e-12)


def test_the_disk_cache_keeps_sanitized_and_plain_code_apart(monkeypatch):
    from codegen import cache
    monkeypatch.setattr(settings, "sanitize", False)
    plain = cache.environment()
    monkeypatch.setattr(settings, "sanitize", True)
    assert cache.environment() != plain


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_shorter_reduction_in_a_longer_loop_stays_in_its_rows(sanitized, dtype):
    # v [1, 9] broadcast to [5, 9]: the gradient's row sums of v's [1, 9] cotangent share
    # the [5, 9] loop with the full sum; the rows 1..4 segment combined their (empty)
    # register accumulators into out[1..4] of a 1-element output (fuzz seed 2027000098)
    w = np.random.default_rng(1).normal(size=(5, 9)).astype(dtype)
    x, s = np.linspace(-1, 1, 9).astype(dtype), np.array(0.3, dtype)

    def f(L, a, b):
        v = a + b.reshape(1, -1)
        return ((v.sum(0, keepdim=True) * v.sin()).expand(5, 9) * L.tensor(w)).sum()
    v, (gx, gs) = sg.value_and_grad(lambda a, b: f(sg, a, b), argnums=(0, 1))(x, s)
    tx, ts = torch.tensor(x, requires_grad=True), torch.tensor(s, requires_grad=True)
    want = f(torch, tx, ts)
    want.backward()
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(v, want.item(), rtol=tol)
    np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(gs, ts.grad.numpy(), rtol=tol, atol=tol)
