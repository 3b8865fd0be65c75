"""The per-call guards written out as one generated function (symgrad.compiler.guard_code)
see every change the walked guards see, on the native fast path (numpy arguments, where
they are the only check before native code): a rebound global, a closure cell, an
attribute of a plain object, a class attribute shadowed later by an instance's, an
attribute of a bound method's ``self``, of a default argument, of a user's Python module,
an item of a dict holding a tensor. Each answer after a change is checked against PyTorch
on the new values; and for every change the generated check and the walking code agree."""
import sys
import types

import numpy as np
import pytest
import torch

import symgrad

X = np.array([1.0, -2.0, 0.5], np.float32)
gain = 2.0


def _guards(f):
    """The guards of the program that ran last (past the native fast path where numpy
    arguments take it: programs reading a closed-over tensor check it in Python)."""
    entry = type(f).__dict__.get("_native_for") or next(reversed(f._cache.values()))
    return entry.closure_paths


def _calls(f, value, times=3):
    for _ in range(times):               # (a native fast path installs after a call)
        got = np.asarray(f(X))
        np.testing.assert_array_equal(got, (torch.tensor(X) * value).numpy())


def _agree(f):
    guards = _guards(f)
    hold = guards.per_call()
    assert hold is not None
    assert hold() == (guards._walked() is None)


def _scaled_by_global(x):
    return x * gain


class Config:
    factor = 3.0                          # read through the class until an instance has it


class Scaler:
    def __init__(self, factor):
        self.factor = factor

    def __call__(self, x):
        return x * self.factor


@pytest.fixture
def restore_gain():
    yield
    global gain
    gain = 2.0


def test_global(restore_gain):
    global gain
    f = symgrad.compile(_scaled_by_global)
    for value in (2.0, 5.0, -1.5):
        gain = value
        _calls(f, value)
        _agree(f)
    gain = 2.0
    _agree(f)


def test_closure_cell_and_plain_object_attribute():
    cfg = types.SimpleNamespace(factor=2.0)
    k = 1.0

    def loss(x):
        return x * cfg.factor * k

    f = symgrad.compile(loss)
    _calls(f, 2.0)
    cfg.factor = 4.0
    _agree(f)
    _calls(f, 4.0)
    k = 0.5
    _agree(f)
    _calls(f, 2.0)
    cfg = types.SimpleNamespace(factor=-1.0)      # the cell rebound to another object
    _calls(f, -0.5)


def test_class_attribute_then_instance_attribute():
    cfg = Config()

    def loss(x):
        return x * cfg.factor

    f = symgrad.compile(loss)
    _calls(f, 3.0)
    Config.factor = 6.0
    try:
        _agree(f)
        _calls(f, 6.0)
        cfg.factor = 0.25                           # the instance now shadows the class
        _agree(f)
        _calls(f, 0.25)
    finally:
        Config.factor = 3.0


def test_bound_self_and_default_argument():
    s = Scaler(2.0)
    f = symgrad.compile(s.__call__)
    _calls(f, 2.0)
    s.factor = -3.0
    _calls(f, -3.0)

    def loss(x, cfg=types.SimpleNamespace(factor=1.5)):
        return x * cfg.factor

    g = symgrad.compile(loss)
    _calls(g, 1.5)
    loss.__defaults__[0].factor = 2.5
    _agree(g)
    _calls(g, 2.5)


def test_attribute_of_a_user_module(monkeypatch):
    params = types.ModuleType("guard_code_params")
    params.factor = 2.0
    monkeypatch.setitem(sys.modules, "guard_code_params", params)
    ns = {"params": params}
    exec("def loss(x):\n    return x * params.factor\n", ns)
    f = symgrad.compile(ns["loss"])
    _calls(f, 2.0)
    params.factor = 7.0
    _agree(f)
    _calls(f, 7.0)


def test_tensor_in_a_dict_rebound():
    weights = {"w": symgrad.tensor(np.float32(2.0))}

    def loss(x):
        return x * weights["w"]

    f = symgrad.compile(loss)
    _calls(f, 2.0)
    weights["w"] = symgrad.tensor(np.float32(-4.0))
    _agree(f)
    _calls(f, -4.0)
    weights.clear()                      # the path leads nowhere: a clear error, not stale
    assert _guards(f).per_call()() is False
    with pytest.raises(KeyError):
        f(X)
