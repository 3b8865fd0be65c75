"""``clip_grad_norm_`` for every norm order as torch's (review6 #6): -inf is the smallest
|g| (was 1.0 whatever the gradients), 0 the count of gradients with a nonzero element
(was a ZeroDivisionError); the coefficient rounded as torch rounds it."""
import math

import numpy as np
import pytest
import torch

import symgrad as sg

ORDERS = [2.0, 1.0, 3.0, 0.5, -1.0, math.inf, -math.inf, 0.0]


def _clip(L, grads, dt, max_norm, p):
    params = []
    for g in grads:
        w = L.nn.Parameter(L.zeros(g.shape, dtype=dt))
        w.grad = L.tensor(g, dtype=dt)
        params.append(w)
    n = L.nn.utils.clip_grad_norm_(params, max_norm=max_norm, norm_type=p)
    return n.item(), [w.grad.numpy() for w in params]


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("p", ORDERS)
@pytest.mark.parametrize("max_norm", [0.5, 1e3])
def test_orders_as_torch(p, dt, max_norm):
    rng = np.random.default_rng(int(abs(p) * 10) % 7 if math.isfinite(p) else 11)
    grads = [rng.normal(size=(3, 4)) * 3, np.array([0.0, 0.0]), rng.normal(size=5)]
    want_n, want = _clip(torch, grads, getattr(torch, dt), max_norm, p)
    got_n, got = _clip(sg, grads, getattr(sg, dt), max_norm, p)
    tol = 4e-7 if dt == "float32" else 1e-14
    np.testing.assert_allclose(got_n, want_n, rtol=tol)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=tol, atol=0)


@pytest.mark.parametrize("p", [-math.inf, 0.0])
def test_review_examples_bit_for_bit(p):
    for grads, max_norm in (([np.array([3.0, -4.0, 12.0])], 0.5), ([np.array([3.0, 4.0])], 1.0)):
        want_n, want = _clip(torch, grads, torch.float32, max_norm, p)
        got_n, got = _clip(sg, grads, sg.float32, max_norm, p)
        assert got_n == want_n
        np.testing.assert_array_equal(got[0], want[0])


def test_negative_order_of_an_empty_gradient_raises_as_torch():
    msgs = []
    for L in (torch, sg):
        w = L.nn.Parameter(L.zeros(0))
        w.grad = L.zeros(0)
        with pytest.raises(RuntimeError) as e:
            L.nn.utils.clip_grad_norm_([w], 1.0, norm_type=-math.inf)
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("p", ORDERS)
def test_get_total_norm_and_clip_grads_with_norm_as_torch(p, dt):
    rng = np.random.default_rng(5)
    arrays = [rng.normal(size=(2, 3)), np.zeros(4), rng.normal(size=7) * 10]
    tol = 4e-7 if dt == "float32" else 1e-14
    results = []
    for L in (torch, sg):
        ts = [L.tensor(a, dtype=getattr(L, dt)) for a in arrays]
        n = L.nn.utils.get_total_norm(ts, p)
        params = []
        for a in arrays:
            w = L.nn.Parameter(L.zeros(a.shape, dtype=getattr(L, dt)))
            w.grad = L.tensor(a, dtype=getattr(L, dt))
            params.append(w)
        L.nn.utils.clip_grads_with_norm_(params, 0.75, n)
        results.append((n.item(), str(n.dtype), [w.grad.numpy() for w in params]))
    (tn, tdt, tg), (sn, sdt, sgr) = results
    assert tdt == sdt
    np.testing.assert_allclose(sn, tn, rtol=tol)
    for a, b in zip(sgr, tg):
        np.testing.assert_allclose(a, b, rtol=tol)
