"""Automatic dynamic shapes: a size that changes between calls becomes a runtime extent
of one shape-generic kernel (symgrad.compiler.dynamic, codegen.dynamic).  Every answer
is checked against PyTorch; compiles are counted by the cache's misses."""
import logging

import numpy as np
import pytest
import torch

import symgrad
import symgrad.nn.functional as F
from symgrad.config import settings

TOL = {np.float64: dict(rtol=1e-10, atol=1e-12), np.float32: dict(rtol=2e-4, atol=2e-5)}


def _params(dtype):
    rng = np.random.default_rng(0)
    return tuple(a.astype(dtype) for a in (rng.normal(size=(32, 64)) / 6, rng.normal(size=64) / 10,
                                           rng.normal(size=(64, 10)) / 8, rng.normal(size=10) / 10))


def _mlp(params, x, y):
    W1, b1, W2, b2 = params
    return F.cross_entropy(symgrad.tanh(x @ W1 + b1) @ W2 + b2, y)


def _torch_mlp(params, x, y):
    P = [torch.tensor(a, requires_grad=True) for a in params]
    logits = torch.tanh(torch.tensor(x) @ P[0] + P[1]) @ P[2] + P[3]
    loss = torch.nn.functional.cross_entropy(logits, torch.tensor(y))
    loss.backward()
    return loss.detach().numpy(), [p.grad.numpy() for p in P]


def _check(got, want, dtype):
    (v, g), (wv, wg) = got, want
    np.testing.assert_allclose(np.asarray(v), wv, **TOL[dtype])
    for a, b in zip(g, wg):
        assert np.asarray(a).dtype == dtype
        np.testing.assert_allclose(a, b, **TOL[dtype])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_mlp_gradient_at_many_batch_sizes_compiles_twice(dtype):
    params = _params(dtype)
    f = symgrad.value_and_grad(_mlp)
    rng = np.random.default_rng(1)
    for n in (16, 17, 2, 5, 31, 64, 100, 333):
        x = rng.normal(size=(n, 32)).astype(dtype)
        y = rng.integers(0, 10, size=n)
        _check(f(params, x, y), _torch_mlp(params, x, y), dtype)
    info = f.cache_info()
    assert info.misses == 2, f.last_miss_reason      # the first size, then the generic kernel
    assert "is now a dynamic size" in f.last_miss_reason
    generic = next(e for e in f._cache.values() if e.dynamic is not None).exe
    assert generic._compiled.light_loops              # (it serves a size only briefly)
    again = f(params, x, y)                          # a size seen before: still a hit
    _check(again, _torch_mlp(params, x, y), dtype)
    assert f.cache_info().misses == 2


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_sequence_length_dimension(dtype):
    """Batch-first sequences [B, T, D] with T varying (strides move with T): softmax and
    log_softmax over time, differences of slices along time, max and mean over any axis."""
    def loss(L, w, x):
        s = (x @ w)                                      # [B, T]
        a = L.softmax(s, 1)
        d = x[:, 1:] - x[:, :-1]                         # [B, T-1, D]
        return ((a.unsqueeze(-1) * x).sum(1).sum() + (d * d).mean()
                + L.log_softmax(s, 1).amax(1).sum() + x.amax(2).mean(0).sum())

    rng = np.random.default_rng(2)
    w = rng.normal(size=5).astype(dtype)
    f = symgrad.value_and_grad(lambda w, x: loss(symgrad, w, x), argnums=(0, 1))
    for t in (7, 9, 3, 12, 2):
        x = rng.normal(size=(4, t, 5)).astype(dtype)
        value, (gw, gx) = f(w, x)
        tw, tx = torch.tensor(w, requires_grad=True), torch.tensor(x, requires_grad=True)
        want = loss(torch, tw, tx)
        want.backward()
        np.testing.assert_allclose(np.asarray(value), want.detach().numpy(), **TOL[dtype])
        np.testing.assert_allclose(gw, tw.grad.numpy(), **TOL[dtype])
        np.testing.assert_allclose(gx, tx.grad.numpy(), **TOL[dtype])
    assert f.cache_info().misses == 2, f.last_miss_reason


def test_sizes_one_and_zero_are_specialised(caplog):
    params = _params(np.float64)
    f = symgrad.value_and_grad(_mlp)
    rng = np.random.default_rng(3)
    settings.log.add("recompiles")
    try:
        with caplog.at_level(logging.WARNING, logger="symgrad.recompiles"):
            for n in (8, 9, 1, 0, 4):
                x, y = rng.normal(size=(n, 32)), rng.integers(0, 10, size=n)
                v, g = f(params, x, y)
                wv, wg = _torch_mlp(params, x, y)
                np.testing.assert_allclose(v, wv, rtol=1e-10, equal_nan=True)   # n=0: nan
                for a, b in zip(g, wg):
                    np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12, equal_nan=True)
    finally:
        settings.log.discard("recompiles")
    assert f.cache_info().misses == 4           # 8, the generic kernel at 9, 1, 0; 4 hits it
    messages = [r.getMessage() for r in caplog.records]
    assert any("x: shape (8, 32) → (9, 32)" in m and "is now a dynamic size" in m
               for m in messages)
    assert any("(1, 32)" in m and "sizes 0 and 1 are specialised" in m for m in messages)


def test_mean_and_reductions_over_the_dynamic_axis():
    """mean's count is the runtime extent (forward and gradient)."""
    f = symgrad.value_and_grad(lambda x: (x.mean(0) ** 2).sum() + x.sum(1).amax() + x.mean())
    rng = np.random.default_rng(4)
    for n in (3, 4, 10, 25):
        x = rng.normal(size=(n, 6))
        v, g = f(x)
        t = torch.tensor(x, requires_grad=True)
        want = (t.mean(0) ** 2).sum() + t.sum(1).amax() + t.mean()
        want.backward()
        np.testing.assert_allclose(v, want.item(), rtol=1e-12)
        np.testing.assert_allclose(g, t.grad.numpy(), rtol=1e-12, atol=1e-14)
    assert f.cache_info().misses == 2, f.last_miss_reason


def test_sanitized_generic_kernel(monkeypatch):
    """Every access of the generic kernel bounds-checked (SYMGRAD_SANITIZE=1): no fault at
    any size, answers as torch's; a call whose arguments disagree on the size is refused
    before native code runs."""
    monkeypatch.setattr(settings, "sanitize", True)
    params = _params(np.float64)
    f = symgrad.value_and_grad(_mlp)
    rng = np.random.default_rng(5)
    for n in (6, 7, 2, 50):
        x, y = rng.normal(size=(n, 32)), rng.integers(0, 10, size=n)
        _check(f(params, x, y), _torch_mlp(params, x, y), np.float64)
    assert f.cache_info().misses == 2
    entry = next(e for e in f._cache.values() if e.dynamic is not None)
    with pytest.raises(ValueError, match="argument 5 is int64\\[6\\], expected int64\\[7\\]"):
        entry.exe(list(params) + [rng.normal(size=(7, 32)), np.zeros(6, np.int64)])
    for bad in (10, -1):       # (the loss's own check: PyTorch's error, no wrapping)
        with pytest.raises(IndexError, match=f"^Target {bad} is out of bounds.$"):
            entry.exe(list(params) + [rng.normal(size=(7, 32)), np.full(7, bad, np.int64)])


def test_a_non_generic_operation_compiles_per_size():
    """cat along the changing axis has no runtime-extent lowering: per-size compiles, and
    the reason says which operation."""
    def fn(L, x):
        return (L.cat([x, x * 2], 0) ** 2).sum()
    f = symgrad.value_and_grad(lambda x: fn(symgrad, x))
    rng = np.random.default_rng(6)
    for k, n in enumerate((3, 4, 5)):
        x = rng.normal(size=(n, 2))
        v, g = f(x)
        t = torch.tensor(x, requires_grad=True)
        want = fn(torch, t)
        want.backward()
        np.testing.assert_allclose(v, want.item(), rtol=1e-12)
        np.testing.assert_allclose(g, t.grad.numpy(), rtol=1e-12)
        assert f.cache_info().misses == k + 1
    assert "compiling per size" in f.last_miss_reason and "cat" in f.last_miss_reason


def test_off_switch_and_numpy_backend(monkeypatch):
    """SYMGRAD_DYNAMIC_SHAPES=0 compiles per size; the numpy backend always does (its
    compile is tracing and graph passes): the same answers."""
    params = _params(np.float64)
    rng = np.random.default_rng(7)
    data = [(rng.normal(size=(n, 32)), rng.integers(0, 10, size=n)) for n in (5, 6, 7)]
    f = symgrad.value_and_grad(_mlp, backend="numpy")
    for x, y in data:
        _check(f(params, x, y), _torch_mlp(params, x, y), np.float64)
    assert f.cache_info().misses == 3
    monkeypatch.setattr(settings, "dynamic_shapes", False)
    g = symgrad.value_and_grad(_mlp)
    for x, y in data:
        _check(g(params, x, y), _torch_mlp(params, x, y), np.float64)
    assert g.cache_info().misses == 3
    assert "dynamic shapes are off" in g.last_miss_reason


def test_two_sizes_changing_independently_compile_per_size():
    f = symgrad.compile(lambda a, b: (a.sum(0) ** 2).sum() + b.sum())
    f(np.ones((3, 2)), np.ones(5))
    f(np.ones((4, 2)), np.ones(6))
    assert f.cache_info().misses == 2
    assert f.last_miss_reason == "a: shape (3, 2) → (4, 2); b: shape (5,) → (6,)"
    np.testing.assert_allclose(f(np.ones((4, 2)), np.ones(6)), 4.0 ** 2 * 2 + 6)


def test_a_size_called_often_gets_its_own_kernel(monkeypatch):
    """After SPECIALISE_AFTER calls of one size on the generic kernel, that size is
    compiled for its exact shape (one more compile); other sizes stay generic."""
    from symgrad.compiler import dynamic
    monkeypatch.setattr(dynamic, "SPECIALISE_AFTER", 5)
    params = _params(np.float64)
    f = symgrad.value_and_grad(_mlp)
    rng = np.random.default_rng(8)
    data = {n: (rng.normal(size=(n, 32)), rng.integers(0, 10, size=n)) for n in (10, 11, 12, 13)}
    f(params, *data[10])
    f(params, *data[11])
    for _ in range(7):
        _check(f(params, *data[12]), _torch_mlp(params, *data[12]), np.float64)
    assert f.cache_info().misses == 3
    assert "ran 5 times on the shape-generic kernel" in f.last_miss_reason
    assert f._fast and any(e.dynamic is None and e.key[1][4].shape == (12, 32)
                           for e in f._cache.values())
    _check(f(params, *data[13]), _torch_mlp(params, *data[13]), np.float64)
    assert f.cache_info().misses == 3


# Programs whose sizes fit an affine function of n at the sentinel sizes but not at every
# n (a review found each returning a wrong answer, reading out of bounds or corrupting the
# heap): every new size is traced and checked against the generic program before the
# generic kernel runs it; a size where they differ compiles for its own shapes.
def _size_cases():
    P = np.arange(50.0)
    return [
        ("head slice", lambda L, x: x[:10] * 2, (20, 30, 3, 12, 100)),
        ("tail slice", lambda L, x: x[-10:] * 2, (20, 30, 5, 40)),
        ("slice past", lambda L, x: x[50:] * 2, (20, 30, 100, 60)),
        ("negative size", lambda L, x: L.exp(x[20:]).sum() + L.exp(x * 2).sum() * 3,
         (30, 40, 3, 25, 90)),
        ("python branch", lambda L, x: x.sum() if x.shape[0] < 100 else x.mean(),
         (20, 30, 200, 50)),
        ("floor division", lambda L, x: x[: x.shape[0] // 50 + 1] * 2, (20, 30, 120, 7)),
        ("size as number", lambda L, x: x * (x.shape[0] // 50) + x, (20, 30, 120)),
        ("select", lambda L, x: x[5] * 2 + x[-5], (20, 30, 3, 8, 60)),
        ("static argument", lambda L, x: x + L.tensor(P)[: x.shape[0]], (5, 7, 40, 100, 50)),
        ("reshape", lambda L, x: x.reshape(-1, 2).sum(1), (4, 6, 10, 64)),
    ]


@pytest.mark.parametrize("name,fn,sizes", _size_cases(), ids=[c[0] for c in _size_cases()])
def test_sizes_outside_the_fitted_range_are_right(name, fn, sizes):
    f = symgrad.compile(lambda x: fn(symgrad, x))
    rng = np.random.default_rng(1)
    for n in sizes:
        x = rng.normal(size=n)
        try:
            want = fn(torch, torch.tensor(x)).numpy()
        except Exception as e:           # noqa: BLE001 -- torch refuses: so must we
            with pytest.raises(type(e)):
                f(x)
            continue
        got = np.asarray(f(x))
        assert got.shape == want.shape, (name, n)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=f"{name} n={n}")


def test_a_trace_failing_at_a_sentinel_compiles_per_size_once():
    f = symgrad.compile(lambda x: x.reshape(-1, 2).sum(1))
    for n in (4, 6, 10, 12):
        np.testing.assert_allclose(f(np.ones(n)), np.full(n // 2, 2.0))
    assert "tracing at size 37 failed" in f.last_miss_reason
    assert f.cache_info().misses == 4


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_convolution_windows_with_a_dynamic_batch(dtype):
    """A convolution (stride, dilation) and an average pooling read their input through
    the windows view: with a batch size that changes, one shape-generic kernel computes
    them (the view's strides over the runtime extent), equal to torch at every size."""
    rng = np.random.default_rng(5)
    w = rng.normal(size=(4, 2, 3, 3)).astype(dtype)

    def net(L, F_, x, w_):
        h = F_.relu(F_.conv2d(x, w_, padding=1, stride=(1, 2), dilation=(2, 1)))
        return F_.avg_pool2d(h, 3, 2).sum((1, 2, 3))
    f = symgrad.compile(lambda x: net(symgrad, F, x, symgrad.tensor(w)))
    for b in (3, 5, 7, 2, 9):
        x = rng.normal(size=(b, 2, 10, 11)).astype(dtype)
        want = net(torch, torch.nn.functional, torch.tensor(x), torch.tensor(w)).numpy()
        np.testing.assert_allclose(np.asarray(f(x)), want, **TOL[dtype])
    assert "dynamic size" in f.last_miss_reason
    assert f.cache_info().misses == 2
