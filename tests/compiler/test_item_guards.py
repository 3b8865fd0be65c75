"""Python numbers read from closed-over lists and dicts are guarded as torch.compile
guards them (review8 #3): changing ``cfg['alpha']`` or ``loss_weights[1]`` between calls
traces again instead of reusing the baked-in value. Compared with
``torch.compile(backend="eager")`` running the same code."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad

TOL = {"float32": 1e-5, "float64": 1e-12}


def _run(lib, program, dtype):
    lib.manual_seed(0)
    if lib is torch:
        torch._dynamo.reset()
    x = lib.randn(4, 3, dtype=getattr(lib, dtype))
    kw = {"backend": "eager"} if lib is torch else {}
    return program(lib, x, lambda f: lib.compile(f, **kw))


def _check(program, dtype):
    want = _run(torch, program, dtype)
    got = _run(symgrad, program, dtype)
    np.testing.assert_allclose(got, want, rtol=TOL[dtype], atol=TOL[dtype])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_list_item(dtype):
    def program(lib, x, compile):
        wts = [1.0, 1.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]    # (longer than short)
        k = compile(lambda x: wts[0] * x.sum() + wts[1] * x.abs().sum())
        out = []
        for w in (1.0, 0.0, 2.0):
            wts[1] = w
            out.append(k(x).item())
        return out
    _check(program, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dict_item_and_unpacked_short_list(dtype):
    def program(lib, x, compile):
        cfg = {"alpha": 0.1}
        pair = [1.0, 2.0]

        def f(x):
            a, b = pair
            return lib.nn.functional.leaky_relu(x, cfg["alpha"]).sum() * a + b
        k = compile(f)
        out = []
        for alpha, b in ((0.1, 2.0), (0.5, 2.0), (0.5, -1.0), (1.0, 3.0)):
            cfg["alpha"] = alpha
            pair[1] = b
            out.append(k(x).item())
        return out
    _check(program, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_kl_weight_in_a_compiled_step(dtype):
    def program(lib, x, compile):
        sched = {"beta": 0.0}
        model = lib.nn.Linear(3, 3, dtype=x.dtype)
        opt = lib.optim.SGD(model.parameters(), lr=0.1)

        def step(x):
            opt.zero_grad()
            out = model(x)
            loss = (out - x).pow(2).mean() + sched["beta"] * out.pow(2).mean()
            loss.backward()
            opt.step()
            return loss
        s = compile(step)
        out = []
        for ep in range(4):
            sched["beta"] = ep * 0.5
            out.append(s(x).item())
        return out
    _check(program, dtype)


def test_unchanged_items_need_no_retrace():
    cfg = {"alpha": 0.1, "unused": 1.0}
    f = symgrad.compile(lambda x: x * cfg["alpha"])
    x = symgrad.ones(3)
    for i in range(4):
        cfg["unused"] = float(i)            # (a key the function never writes: not guarded)
        f(x)
    assert f.cache_info().misses == 1
    cfg["alpha"] = 0.2
    np.testing.assert_allclose(f(x).numpy(), torch.ones(3).mul(0.2).numpy())
    assert "cfg['alpha'] changed" in f.last_miss_reason
