"""Random draws inside vmap (review6 #3): ``torch.func.vmap(randomness=...)`` as torch's --
"different" gives each example its own numbers (torch's: one draw of the batched
shape), "same" one draw for all, the default "error" raises torch's error; symgrad.vmap
(JAX's API, where there is no implicit generator) draws per example by default."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg

DTYPES = ["float32", "float64"]


def _both(fn):
    """fn(lib) for torch and symgrad after the same seed, as numpy arrays."""
    out = []
    for L in (torch, sg):
        L.manual_seed(0)
        r = fn(L)
        out.append(r.detach().numpy() if hasattr(r, "detach") else np.asarray(r))
    return out


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("randomness", ["different", "same"])
@pytest.mark.parametrize("draw", ["rand_like", "randn_like", "rand", "randn_big"])
def test_func_vmap_draws_as_torch(draw, randomness, dt):
    def f(L):
        d = getattr(L, dt)
        z = L.zeros(5, 4, dtype=d)
        fn = {"rand_like": lambda x: L.rand_like(x) + x,
              "randn_like": lambda x: x * 2 + L.randn_like(x),
              "rand": lambda x: x + L.rand(4, dtype=d),
              "randn_big": lambda x: (x[:, None] + L.randn(4, 6, dtype=d)).exp(),
              }[draw]
        return L.func.vmap(fn, randomness=randomness)(z)
    want, got = _both(f)
    assert got.shape == want.shape and got.dtype == want.dtype
    tol = 1e-6 if dt == "float32" else 1e-13
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    rows = got.reshape(got.shape[0], -1)
    if randomness == "same":
        assert (rows == rows[:1]).all()
    else:
        assert len({r.tobytes() for r in rows}) == rows.shape[0]


def test_func_vmap_default_error_as_torch():
    msgs = []
    for L in (torch, sg):
        with pytest.raises(RuntimeError) as e:
            L.func.vmap(lambda x: x + L.rand(3))(L.zeros(4, 3))
        msgs.append(str(e.value))
        with pytest.raises(RuntimeError):
            L.func.vmap(lambda x: L.nn.functional.dropout(x, 0.5))(L.zeros(4, 3))
    assert msgs[0] == msgs[1]
    with pytest.raises(RuntimeError, match="Only allowed values for randomness"):
        sg.func.vmap(lambda x: x, randomness="other")


def test_dropout_masks_per_example():
    """Each example its own mask: the masks are torch's uniform stream (torch.rand of the
    batched shape) kept where u < 1 - p as torch's bernoulli_(1 - p), p=0.5 and p=0.25."""
    for p in (0.5, 0.25):
        torch.manual_seed(3)
        u = torch.rand(6, 8, dtype=torch.float64).numpy()   # (symgrad draws masks in float64)
        sg.manual_seed(3)
        got = sg.func.vmap(lambda x: sg.nn.functional.dropout(x + 1, p),
                           randomness="different")(sg.zeros(6, 8)).numpy()
        np.testing.assert_allclose(got, np.where(u < 1 - p, 1 / (1 - p), 0.0), rtol=1e-6)
        sg.manual_seed(3)
        got = sg.vmap(lambda x: sg.nn.functional.dropout(x + 1, p))(sg.zeros(6, 8)).numpy()
        np.testing.assert_allclose(got, np.where(u < 1 - p, 1 / (1 - p), 0.0), rtol=1e-6)
        sg.manual_seed(3)
        same = sg.vmap(lambda x: sg.nn.functional.dropout(x + 1, p),
                       randomness="same")(sg.zeros(6, 8)).numpy()
        np.testing.assert_allclose(same, np.broadcast_to(
            np.where(u[0] < 1 - p, 1 / (1 - p), 0.0), (6, 8)), rtol=1e-6)


@pytest.mark.parametrize("dt", DTYPES)
def test_per_example_gradients_with_noise_as_torch(dt):
    """vmap(grad) with a random draw inside (the DP-SGD / reparameterisation pattern)."""
    def f(L):
        d = getattr(L, dt)
        x = L.arange(12, dtype=d).reshape(4, 3) / 7

        def loss(v):
            return (L.sin(v) * L.rand_like(v) + v * L.randn_like(v)).sum()
        return L.func.vmap(L.func.grad(loss), randomness="different")(x)
    want, got = _both(f)
    tol = 1e-6 if dt == "float32" else 1e-13
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_compiled_vmap_draws_anew_each_call_as_torch():
    def body(L):
        return lambda z: L.func.vmap(lambda x: x + L.rand_like(x),
                                     randomness="different")(z)
    torch.manual_seed(1)
    want = [body(torch)(torch.zeros(3, 2)).numpy() for _ in range(3)]
    sg.manual_seed(1)
    f = sg.compile(body(sg))
    got = [f(sg.zeros(3, 2)).numpy() for _ in range(3)]
    for w, g in zip(want, got):
        np.testing.assert_allclose(g, w, rtol=1e-6)
    assert not np.array_equal(got[0], got[1])


def test_nested_vmap_draws_as_torch():
    def f(L):
        inner = L.func.vmap(lambda x: x + L.rand(2), randomness="different")
        return L.func.vmap(inner, randomness="different")(L.zeros(3, 4, 2))
    want, got = _both(f)
    np.testing.assert_allclose(got, want, rtol=1e-6)
