"""The arena a shape-generic kernel keeps between calls (codegen.dynamic.lower,
_take_arena): sizes growing and shrinking, concurrent calls at different sizes, a
forked child -- every answer torch's; the kept block is freed when the code goes."""
from __future__ import annotations

import gc
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import symgrad
from tests.codegen.test_arena import count_releases
from tests.compiler.test_dynamic_shapes import _check, _mlp, _params, _torch_mlp

SIZES = (16, 17, 300, 2, 1000, 5, 999, 64)


def _batch(rng, n, dtype):
    return rng.normal(size=(n, 32)).astype(dtype), rng.integers(0, 10, size=n)


def _generic(dtype):
    f = symgrad.value_and_grad(_mlp)
    params = _params(dtype)
    rng = np.random.default_rng(1)
    for n in (16, 17):
        f(params, *_batch(rng, n, dtype))
    assert any(e.dynamic is not None for e in f._cache.values())
    return f, params


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_sizes_growing_and_shrinking_reuse_the_arena(dtype):
    f, params = _generic(dtype)
    rng = np.random.default_rng(2)
    for n in SIZES + SIZES[::-1]:
        x, y = _batch(rng, n, dtype)
        _check(f(params, x, y), _torch_mlp(params, x, y), dtype)
    assert f.cache_info().misses == 2


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_concurrent_calls_at_different_sizes(dtype):
    f, params = _generic(dtype)
    rng = np.random.default_rng(3)
    batches = [_batch(rng, n, dtype) for n in (3, 700, 40, 1500)]
    want = [_torch_mlp(params, x, y) for x, y in batches]

    def work(i):
        for _ in range(10):
            _check(f(params, *batches[i]), want[i], dtype)
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(work, range(4)))


def test_unloading_a_generic_kernel_frees_its_arena(monkeypatch):
    released = count_releases(monkeypatch)
    f, params = _generic(np.float64)
    x, y = _batch(np.random.default_rng(4), 50, np.float64)
    _check(f(params, x, y), _torch_mlp(params, x, y), np.float64)
    del f
    gc.collect()
    assert len(released) >= 1
