"""Loop bodies compile in a background thread while the program holding them compiles
(codegen.loops.prefetch); answers against a reference written in numpy; a body whose
background compile fails is compiled again where its loop runs."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import symgrad as sg
from codegen import backend, jit, loops
from symgrad.graph.node import toposort

THREAD = "symgrad-loop-bodies"


def _rnn(xs, w, scale=1.0):
    def step(h, x):
        h = sg.tanh(h @ w + x * scale)     # scale: a constant of the body
        return h, h.sum()
    h, ys = sg.scan(step, sg.zeros(w.shape[0], dtype=w.dtype), xs)
    return h.sum() + (ys * ys).sum()


def _reference(xs, w):
    """Value and gradient wrt ``w``, by hand in numpy (forward, then the reverse sweep)."""
    hs = [np.zeros(w.shape[0])]
    for x in xs:
        hs.append(np.tanh(hs[-1] @ w + x))
    ys = np.array([h.sum() for h in hs[1:]])
    value = hs[-1].sum() + (ys * ys).sum()
    gw, gh = np.zeros_like(w), np.ones(w.shape[0])        # d value / d h_T
    for t in range(len(xs), 0, -1):
        gh = gh + 2 * ys[t - 1]                             # through y_t = sum(h_t)
        gpre = gh * (1 - hs[t] ** 2)
        gw += np.outer(hs[t - 1], gpre)
        gh = w @ gpre
    return value, gw


def _inputs(seed):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(7, 5)), rng.normal(size=(5, 5)) / 3


def _wait_for_bodies():
    for _ in range(600):
        with loops._LOCK:
            pending = [done for _, done in loops._PENDING.values()]
        if not pending:
            return
        for event in pending:
            event.wait(1)


def test_bodies_compile_in_the_background_and_answers_match(monkeypatch):
    threads = []
    real = jit.compile_module

    def recording(*a, **k):
        threads.append(threading.current_thread().name)
        return real(*a, **k)
    monkeypatch.setattr(jit, "compile_module", recording)
    xs, w = _inputs(0)
    scale = 1.0 + 2 ** -20          # a body no other test compiled
    f = sg.value_and_grad(lambda xs, w: _rnn(xs, w, scale), argnums=1, backend="llvm")
    value, gw = f(xs, w)
    want_value, want_gw = _reference(xs * scale, w)
    np.testing.assert_allclose(float(value), want_value, rtol=1e-12)
    np.testing.assert_allclose(gw, want_gw, rtol=1e-10, atol=1e-12)
    assert THREAD in threads                  # at least one body compiled there
    assert threads.count("MainThread") >= 1   # the program itself


def test_a_body_failing_in_the_background_is_compiled_again_where_it_runs(monkeypatch):
    real = backend.compile_program
    failed = []

    def flaky(*a, **k):
        if threading.current_thread().name == THREAD:
            failed.append(1)
            raise RuntimeError("injected failure in the background")
        return real(*a, **k)
    monkeypatch.setattr(backend, "compile_program", flaky)
    xs, w = _inputs(1)
    scale = 1.0 - 2 ** -21          # a body no other test compiled
    f = sg.value_and_grad(lambda xs, w: _rnn(xs, w, scale), argnums=1, backend="llvm")
    value, gw = f(xs, w)
    _wait_for_bodies()
    assert failed                               # the background compile did fail
    want_value, want_gw = _reference(xs * scale, w)
    np.testing.assert_allclose(float(value), want_value, rtol=1e-12)
    np.testing.assert_allclose(gw, want_gw, rtol=1e-10, atol=1e-12)


def test_prefetch_ignores_other_nodes_and_bodies_already_compiled():
    loops.prefetch([], backend.make_target())
    with loops._LOCK:
        before = dict(loops._PENDING)
    xs, w = _inputs(2)
    lowered = sg.compile(lambda xs, w: _rnn(xs, w), backend="llvm").lower(xs, w)
    lowered.compile()
    _wait_for_bodies()
    nodes = toposort(lowered.optimized.outputs)
    assert any(n.op in loops.RUNNERS for n in nodes)
    loops.prefetch(nodes, backend.make_target())    # nothing new: no thread, nothing pending
    with loops._LOCK:
        assert dict(loops._PENDING) == before == {}


@pytest.fixture(autouse=True)
def _drain():
    yield
    _wait_for_bodies()
