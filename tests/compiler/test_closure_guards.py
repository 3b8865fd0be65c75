"""A compiled function whose closed-over tensor is replaced (a global rebound, a module's
parameter reassigned, an attribute, a list item, a closure cell) answers for the new
tensor, as torch.compile's guards make it; in-place updates of the same tensor still need
no recompile. Answers are compared with torch computing the same function on the same
weights."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg

R = np.random.default_rng(7)
X = R.standard_normal((4, 3))
W0, W1 = R.standard_normal((3, 2)), R.standard_normal((3, 2))


def _expect(x, w):
    return (torch.tensor(x) @ torch.tensor(w)).tanh().sum(0).numpy()


W = sg.tensor(W0)


def _uses_global(x):
    return sg.tanh(x @ W).sum(0)


def test_rebound_global():
    global W
    f = sg.compile(lambda x: _uses_global(x))      # (found through the function it calls)
    np.testing.assert_allclose(f(X), _expect(X, W0), rtol=1e-12)
    W = sg.tensor(W1)
    np.testing.assert_allclose(f(X), _expect(X, W1), rtol=1e-12)
    assert "W now refers to another object" in f.last_miss_reason
    W = sg.tensor(W0)


def test_in_place_update_needs_no_recompile():
    w = sg.tensor(W0)
    f = sg.compile(lambda x: sg.tanh(x @ w).sum(0))
    f(X)
    misses = f.cache_info().misses
    with sg.no_grad():
        w.copy_(sg.tensor(W1))
    np.testing.assert_allclose(f(X), _expect(X, W1), rtol=1e-12)
    assert f.cache_info().misses == misses


def test_rebound_cell_attribute_and_item():
    w = sg.tensor(W0)

    class Holder:
        pass
    h = Holder()
    h.w = sg.tensor(W0)
    ws = [sg.tensor(W0)]
    f_cell = sg.compile(lambda x: sg.tanh(x @ w).sum(0))
    f_attr = sg.compile(lambda x: sg.tanh(x @ h.w).sum(0))
    f_item = sg.compile(lambda x: sg.tanh(x @ ws[0]).sum(0))
    for f in (f_cell, f_attr, f_item):
        np.testing.assert_allclose(f(X), _expect(X, W0), rtol=1e-12)
    w = sg.tensor(W1)     # noqa: F841 -- read by f_cell through its cell
    h.w = sg.tensor(W1)
    ws[0] = sg.tensor(W1)
    for f in (f_cell, f_attr, f_item):
        np.testing.assert_allclose(f(X), _expect(X, W1), rtol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_reassigned_module_parameter_gradients(dtype):
    sg.manual_seed(0)
    model = sg.nn.Sequential(sg.nn.Linear(3, 4), sg.nn.Tanh(), sg.nn.Linear(4, 1)).to(
        getattr(sg, dtype))
    x = X.astype(dtype)
    loss = sg.compile(lambda x: model(x).sum())
    g = sg.grad(lambda x: model(x).sum())
    loss(x), g(x)
    new = R.standard_normal((4, 3)).astype(dtype)
    model[0].weight = sg.nn.Parameter(sg.tensor(new))

    tm = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    tm = tm.to(getattr(torch, dtype))
    with torch.no_grad():
        params = dict(model.named_parameters())
        for name, tp in tm.named_parameters():
            tp.copy_(torch.tensor(params[name].detach().numpy()))
    tx = torch.tensor(x, requires_grad=True)
    tl = tm(tx).sum()
    tl.backward()
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(loss(x), tl.item(), rtol=tol)
    np.testing.assert_allclose(g(x), tx.grad.numpy(), rtol=tol, atol=tol)


def test_compiled_module_itself():
    sg.manual_seed(1)
    lin = sg.nn.Linear(3, 2).double()
    f = sg.compile(lin)
    f(X)
    lin.bias = sg.nn.Parameter(sg.zeros(2, dtype=sg.float64))
    expect = torch.tensor(X) @ torch.tensor(lin.weight.detach().numpy()).T
    np.testing.assert_allclose(f(X), expect.numpy(), rtol=1e-12)


def test_dynamic_sizes_read_the_new_tensor():
    class Holder:
        pass
    h = Holder()
    h.w = sg.tensor(W0)
    f = sg.compile(lambda x: sg.tanh(x @ h.w).sum(0))
    for n in (4, 5, 6):                      # (a dynamic size from the third on)
        np.testing.assert_allclose(f(X[:1].repeat(n, 0)), _expect(X[:1].repeat(n, 0), W0),
                                   rtol=1e-12)
    h.w = sg.tensor(W1)
    for n in (6, 7, 8, 9):
        xs = X[:1].repeat(n, 0)
        np.testing.assert_allclose(f(xs), _expect(xs, W1), rtol=1e-12)
