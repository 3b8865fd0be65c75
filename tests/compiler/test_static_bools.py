"""Python bools passed to ``symgrad.compile`` / ``jit`` are static, as torch.compile
specialises on them (review6 #9): ``if flag:`` and ``model(x, return_hidden=True)`` run,
each value its own program; ``jit(static_argnames=)`` as JAX's. References: torch eager
(what torch.compile returns) and jax.jit."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy

DTYPES = [("float32", 1e-6), ("float64", 1e-14)]


def _fn(L):
    def f(x, flag, w, *, square=False):
        y = L.tanh(x * w) if flag else x * w + 1
        return (y * y).sum() if square else y.sum()
    return f


@pytest.mark.parametrize("dt,tol", DTYPES)
def test_bool_arguments_specialised_as_torch(dt, tol):
    f = sg.compile(_fn(sg))
    x0, w0 = np.array([0.5, -1.5, 2.0]), np.array([1.0, 0.25, -0.5])
    for flag, square in ((True, False), (False, False), (True, True), (False, True),
                         (True, False)):
        xt = torch.tensor(x0, dtype=getattr(torch, dt), requires_grad=True)
        wt = torch.tensor(w0, dtype=getattr(torch, dt))
        want = _fn(torch)(xt, flag, wt, square=square)
        want.backward()
        xs = sg.tensor(x0, dtype=getattr(sg, dt), requires_grad=True)
        got = f(xs, flag, sg.tensor(w0, dtype=getattr(sg, dt)), square=square)
        got.backward()
        np.testing.assert_allclose(got.item(), want.item(), rtol=tol)
        np.testing.assert_allclose(xs.grad.numpy(), xt.grad.numpy(), rtol=tol)


def test_each_bool_value_compiled_once():
    def f(x, flag):
        return x * 2 if flag else x * 3
    g = sg.compile(f)
    x = sg.ones(2)
    for flag in (True, False, True, False, True):
        np.testing.assert_array_equal(g(x, flag).numpy(), np.full(2, 2.0 if flag else 3.0))
    info = g._bool_variants[(1,)].cache_info()       # traced once per value, then cached
    assert (info.misses, info.hits, info.entries) == (2, 3, 2)


@pytest.mark.parametrize("dt,tol", DTYPES)
def test_compiled_module_with_a_bool_keyword_as_torch(dt, tol):
    def make(L):
        class M(L.nn.Module):
            def __init__(s):
                super().__init__()
                s.l = L.nn.Linear(3, 2)

            def forward(s, x, return_hidden=False):
                h = s.l(x)
                return (L.relu(h), h) if return_hidden else L.relu(h)
        return M()
    torch.manual_seed(0)
    tm = make(torch).to(getattr(torch, dt))
    sm = make(sg).to(getattr(sg, dt))
    sm.load_state_dict({k: sg.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    cm = sg.compile(sm)
    x = np.linspace(-1, 1, 12).reshape(4, 3)
    for hidden in (True, False):
        outs_t = tm(torch.tensor(x, dtype=getattr(torch, dt)), return_hidden=hidden)
        outs_s = cm(sg.tensor(x, dtype=getattr(sg, dt)), return_hidden=hidden)
        if hidden:
            assert isinstance(outs_s, tuple) and len(outs_s) == 2
            outs_t, outs_s = outs_t[0] + outs_t[1] * 2, outs_s[0] + outs_s[1] * 2
        outs_t.sum().backward()
        outs_s.sum().backward()
        np.testing.assert_allclose(outs_s.detach().numpy(), outs_t.detach().numpy(), rtol=tol,
                                   atol=tol)
        for (k, pt), (_, ps) in zip(tm.named_parameters(), sm.named_parameters()):
            np.testing.assert_allclose(ps.grad.numpy(), pt.grad.numpy(), rtol=tol, atol=tol)


def test_jit_static_argnames_as_jax():
    def f(m):
        return lambda x, n=1, mode="sum": (x ** n).sum() if mode == "sum" else (x ** n).max()
    x = np.array([1.0, -2.0, 3.0])
    for n, mode in ((2, "sum"), (3, "max"), (2, "max")):
        want = jax.jit(f(jnp), static_argnames=("n", "mode"))(x, n=n, mode=mode)
        got = sg.jit(f(sg), static_argnames=("n", "mode"))(x, n=n, mode=mode)
        np.testing.assert_allclose(got, want, rtol=1e-14)
    with pytest.raises(TypeError, match="hashable"):
        sg.jit(lambda x, opts=None: x, static_argnames="opts")(x, opts=[1])
