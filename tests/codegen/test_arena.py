"""The heap arena a compiled function keeps between calls (codegen.module, _Builder.arena):
repeated and concurrent calls give torch's answers, the arena is freed when the code is
unloaded; both dtypes."""
from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch

import symgrad
from codegen.executable import heap_arena

TOL = {np.float64: dict(rtol=1e-10, atol=1e-12), np.float32: dict(rtol=2e-5, atol=2e-5)}


def _loss(L, x, w):
    """Temporaries far larger than the stack arena: a product and elementwise work on it."""
    h = L.tanh(x @ w)
    return (h * h.sin()).sum() + (L.exp(-x) * x).mean()


def _torch(x, w):
    xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    v = _loss(torch, xt, wt)
    gx, gw = torch.autograd.grad(v, [xt, wt])
    return v.item(), gx.numpy(), gw.numpy()


def _check(got, want, dtype):
    v, (gx, gw) = got
    np.testing.assert_allclose(float(v), want[0], **TOL[dtype])
    np.testing.assert_allclose(np.asarray(gx), want[1], **TOL[dtype])
    np.testing.assert_allclose(np.asarray(gw), want[2], **TOL[dtype])


def _compiled():
    return symgrad.compile(symgrad.value_and_grad(lambda x, w: _loss(symgrad, x, w), (0, 1)))


def _inputs(rng, dtype, n=193, k=71, m=129):
    return (rng.normal(size=(n, k)).astype(dtype), (rng.normal(size=(k, m)) / 9).astype(dtype))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_repeated_calls_reuse_the_arena_and_stay_right(dtype):
    rng = np.random.default_rng(0)
    f = _compiled()
    args = [_inputs(rng, dtype) for _ in range(4)]
    lowered = f.lower(*args[0])
    assert heap_arena(lowered.compile().interface.arena_size)
    for x, w in args + args[::-1]:         # the kept arena holds the last call's values
        _check(f(x, w), _torch(x, w), dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_concurrent_calls_each_get_an_arena(dtype):
    rng = np.random.default_rng(1)
    f = _compiled()
    args = [_inputs(rng, dtype) for _ in range(4)]
    want = [_torch(x, w) for x, w in args]
    f(*args[0])

    def work(i):
        for _ in range(15):
            _check(f(*args[i]), want[i], dtype)
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(work, range(4)))         # re-raises a failed check


def count_releases(monkeypatch) -> list:
    """The addresses of the arena release functions called from now on (each also runs)."""
    from codegen import executable
    released = []

    def release(address):
        released.append(address)
        real(address)
    real = executable._release_arena
    monkeypatch.setattr(executable, "_release_arena", release)
    return released


def test_unloading_the_code_frees_its_arena(monkeypatch):
    """The arena kept by an executable's code is released (once) when that code is
    unloaded."""
    released = count_releases(monkeypatch)
    rng = np.random.default_rng(2)
    x, w = _inputs(rng, np.float64)
    lowered = _compiled().lower(x, w)
    exe = lowered.compile()
    v, gx, gw = exe([x, w])
    _check((v, (gx, gw)), _torch(x, w), np.float64)
    del exe, lowered
    gc.collect()
    assert len(released) == 1


def test_a_forked_child_uses_its_copy_of_the_kept_arena():
    """After a call the module's slot holds the arena; a forked child (which inherits the
    slot and a copy of the memory) and the parent both keep computing torch's answers."""
    code = textwrap.dedent("""
        import os, sys, numpy as np, symgrad, torch
        sys.path.insert(0, %r)
        from test_arena import _compiled, _inputs, _torch, _check
        rng = np.random.default_rng(4)
        args = [_inputs(rng, np.float64) for _ in range(3)]
        want = [_torch(x, w) for x, w in args]
        f = _compiled()
        _check(f(*args[0]), want[0], np.float64)
        pid = os.fork()
        if pid == 0:
            try:
                for i in (1, 2, 0, 1):
                    _check(f(*args[i]), want[i], np.float64)
            except BaseException:
                os._exit(1)
            os._exit(0)
        for i in (2, 1, 0):
            _check(f(*args[i]), want[i], np.float64)
        _, status = os.waitpid(pid, 0)
        print("ok" if os.waitstatus_to_exitcode(status) == 0 else "child failed")
    """ % os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "ok"
