"""The search for where a compiled function finds its closed-over tensors reaches what
torch.compile's guards reach: globals read by a called module's ``forward`` or by any
user method of an object it reads, rebound helper functions (identity, as ID_MATCH),
``functools.partial`` and callable objects, attributes of Python modules and classes, deep
plain objects and tensors behind a huge object -- and says so where it cannot (a warning
when a bound hid a tensor, a debug log for a tensor reached through a call). Answers are
compared with torch computing the same function on the same tensors."""
from __future__ import annotations

import collections
import functools
import logging
import sys
import types

import numpy as np
import pytest
import torch

import symgrad as sg
from symgrad.compiler import sources

R = np.random.default_rng(5)
X = R.standard_normal(3)
A, B = R.standard_normal(3), R.standard_normal(3)
DTYPES = ["float32", "float64"]


def _tol(dtype):
    return dict(rtol=1e-6, atol=1e-6) if dtype == "float32" else dict(rtol=1e-13, atol=0)


def _t(a, dtype):
    return torch.tensor(a.astype(dtype))


BIAS = sg.tensor(A)


class _AddsGlobal(sg.nn.Module):
    def forward(self, x):
        return (x + BIAS).tanh()


@pytest.mark.parametrize("dtype", DTYPES)
def test_global_read_in_a_called_modules_forward(dtype):
    global BIAS
    BIAS = sg.tensor(A.astype(dtype))
    m = _AddsGlobal()
    f = sg.compile(lambda x: m(x) * 2)
    x = sg.tensor(X.astype(dtype))
    f(x)
    BIAS = sg.tensor(B.astype(dtype))
    np.testing.assert_allclose(f(x).numpy(), ((_t(X, dtype) + _t(B, dtype)).tanh() * 2).numpy(),
                               **_tol(dtype))
    assert "BIAS now refers to another object" in f.last_miss_reason


W_HELPER = sg.tensor(A)


def _helper(x):
    return x * W_HELPER


def _calls_helper(x):
    return _helper(x) + 1


def test_rebound_helper_function():
    global _helper
    f = sg.compile(_calls_helper)
    x = sg.tensor(X)
    np.testing.assert_allclose(f(x).numpy(), (_t(X, "float64") * _t(A, "float64") + 1).numpy())
    old = _helper
    try:
        def _helper(x):
            return x.sin()
        np.testing.assert_allclose(f(x).numpy(), (_t(X, "float64").sin() + 1).numpy())
        assert "_helper now refers to another object" in f.last_miss_reason
    finally:
        _helper = old


G = sg.tensor(A)


def _scaled_loss(x, scale):
    return (x * G).sum() * scale


class _CallableObject:
    def __call__(self, x):
        return (x * G).sum()


def test_partial_and_callable_object():
    global G
    x = sg.tensor(X)
    fp = sg.compile(functools.partial(_scaled_loss, scale=2.0))
    fo = sg.compile(_CallableObject())
    fp(x), fo(x)
    G = sg.tensor(B)
    try:
        expect = (_t(X, "float64") * _t(B, "float64")).sum()
        np.testing.assert_allclose(fp(x).item(), (expect * 2).item(), rtol=1e-13)
        np.testing.assert_allclose(fo(x).item(), expect.item(), rtol=1e-13)
    finally:
        G = sg.tensor(A)


TABLE = list(range(30_000))          # a big object read before the weight
W_LATE = sg.tensor(A)


def test_weight_read_after_a_huge_object():
    global W_LATE
    f = sg.compile(lambda x, i: TABLE[i] + x * W_LATE, static_argnums=(1,))
    x = sg.tensor(X)
    f(x, 3)
    W_LATE = sg.tensor(B)
    try:
        np.testing.assert_allclose(f(x, 3).numpy(), (3 + _t(X, "float64") * _t(B, "float64"))
                                   .numpy(), rtol=1e-13)
    finally:
        W_LATE = sg.tensor(A)


@pytest.mark.parametrize("depth", [4, 9])
def test_deep_plain_objects(depth):
    class Cfg:
        pass
    root = node = Cfg()
    for _ in range(depth - 2):
        node.inner = Cfg()
        node = node.inner
    node.layers = [{"w": sg.tensor(A)}]

    def read():
        n = root
        for _ in range(depth - 2):
            n = n.inner
        return n.layers[0]["w"]
    f = sg.compile(lambda x: x * read())
    x = sg.tensor(X)
    f(x)
    node.layers[0]["w"] = sg.tensor(B)
    np.testing.assert_allclose(f(x).numpy(), (_t(X, "float64") * _t(B, "float64")).numpy(),
                               rtol=1e-13)


def test_python_module_and_class_attributes():
    params = types.ModuleType("sg_test_params")
    params.inner = types.ModuleType("sg_test_params.inner")
    params.W = sg.tensor(A)
    params.inner.V = sg.tensor(A)
    sys.modules["sg_test_params"] = params

    class Consts:
        W = sg.tensor(A)

    class Derived(Consts):
        pass
    try:
        f_mod = sg.compile(lambda x: x * params.W)
        f_nested = sg.compile(lambda x: x * params.inner.V)
        f_cls = sg.compile(lambda x: x * Derived.W)
        x = sg.tensor(X)
        for f in (f_mod, f_nested, f_cls):
            f(x)
        params.W = sg.tensor(B)
        params.inner.V = sg.tensor(B)
        Consts.W = sg.tensor(B)
        expect = (_t(X, "float64") * _t(B, "float64")).numpy()
        for f in (f_mod, f_nested, f_cls):
            np.testing.assert_allclose(f(x).numpy(), expect, rtol=1e-13)
    finally:
        del sys.modules["sg_test_params"]


def test_a_bound_that_hides_a_tensor_warns(monkeypatch):
    class Cfg:
        pass
    cfg = Cfg()
    cfg.a = Cfg()
    cfg.a.b = Cfg()
    cfg.a.b.c = Cfg()
    cfg.a.b.c.d = Cfg()
    cfg.a.b.c.d.w = sg.tensor(A)
    monkeypatch.setattr(sources, "_DEEP_VISITS", 3)     # (the deep search is cut too)
    f = sg.compile(lambda x: x * cfg.a.b.c.d.w)
    with pytest.warns(RuntimeWarning, match="rebinding it will not be noticed"):
        f(sg.tensor(X))


def test_a_tensor_reached_through_a_call_is_logged(caplog):
    held = collections.deque([sg.tensor(A)])          # (a C object: not followed)
    f = sg.compile(lambda x: x * held[0])
    with caplog.at_level(logging.DEBUG, logger="symgrad.recompiles"):
        np.testing.assert_allclose(f(sg.tensor(X)).numpy(),
                                   (_t(X, "float64") * _t(A, "float64")).numpy(), rtol=1e-13)
    assert any("read as traced" in r.getMessage() for r in caplog.records)


class _ScaledByClassConstant(sg.nn.Module):
    SCALE = sg.tensor(A)

    def forward(self, x):
        return x * self.SCALE


def test_class_attribute_read_through_self():
    m = _ScaledByClassConstant()
    f = sg.compile(m)
    x = sg.tensor(X)
    f(x)
    try:
        _ScaledByClassConstant.SCALE = sg.tensor(B)
        np.testing.assert_allclose(f(x).numpy(), (_t(X, "float64") * _t(B, "float64")).numpy(),
                                   rtol=1e-13)
        m.SCALE = sg.tensor(A)                    # (an instance attribute hides it)
        np.testing.assert_allclose(f(x).numpy(), (_t(X, "float64") * _t(A, "float64")).numpy(),
                                   rtol=1e-13)
    finally:
        _ScaledByClassConstant.SCALE = sg.tensor(A)


def test_layer_without_tensors_swapped_in_a_plain_list():
    layers = [sg.nn.Tanh()]
    f = sg.compile(lambda x: layers[0](x) * 2)
    x = sg.tensor(X)
    f(x)
    layers[0] = sg.nn.Sigmoid()
    np.testing.assert_allclose(f(x).numpy(), (torch.tensor(X).sigmoid() * 2).numpy(),
                               rtol=1e-13)
    assert "layers[0] now refers to another object" in f.last_miss_reason
