"""Closed-over lists and dicts that grow or shrink after the first call (review10 #23):
the program unrolled a loop over them, so their length is guarded and a changed one traces
again, as torch.compile's list-length / dict-keys guards do. Compared with
``torch.compile(backend="eager")`` running the same code."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad

TOL = {"float32": 1e-5, "float64": 1e-12}


def _run(lib, program, dtype):
    if lib is torch:
        torch._dynamo.reset()
    kw = {"backend": "eager"} if lib is torch else {}
    return program(lib, getattr(lib, dtype), lambda f: lib.compile(f, **kw))


def _check(program, dtype):
    want = _run(torch, program, dtype)
    got = _run(symgrad, program, dtype)
    np.testing.assert_allclose(got, want, rtol=TOL[dtype], atol=TOL[dtype])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_list_of_tensors_appended(dtype):
    def program(lib, dt, compile):
        ws = [lib.ones(2, dtype=dt)]
        f = compile(lambda x: sum(w * x for w in ws))
        x = lib.ones(2, dtype=dt)
        out = [f(x).tolist()]
        ws.append(lib.full((2,), 3.0, dtype=dt))
        out.append(f(x).tolist())
        ws.pop(0)
        out.append(f(x).tolist())
        return out
    _check(program, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_list_of_numbers_and_len(dtype):
    def program(lib, dt, compile):
        ns = [1.0]
        g = compile(lambda x: x * sum(ns))
        m = [1.0, 2.0]
        h = compile(lambda x: x * len(m))
        x = lib.ones(2, dtype=dt)
        out = [g(x).tolist(), h(x).tolist()]
        ns.append(2.0)
        m.pop()
        out += [g(x).tolist(), h(x).tolist()]
        return out
    _check(program, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dict_key_added_and_long_list_of_tensors(dtype):
    def program(lib, dt, compile):
        d = {"a": lib.ones(2, dtype=dt)}
        k = compile(lambda x: sum(v * x for v in d.values()))
        long = [lib.full((2,), float(i), dtype=dt) for i in range(12)]
        s = compile(lambda x: sum(w * x for w in long))
        x = lib.ones(2, dtype=dt)
        out = [k(x).tolist(), s(x).tolist()]
        d["b"] = lib.full((2,), 2.0, dtype=dt)
        long.append(lib.full((2,), 100.0, dtype=dt))
        out += [k(x).tolist(), s(x).tolist()]
        return out
    _check(program, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_list_attribute_of_object_and_module(dtype):
    def program(lib, dt, compile):
        class Holder:
            def __init__(self):
                self.ws = [lib.ones(2, dtype=dt)]

        class M(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.ws = [lib.ones(2, dtype=dt)]

            def forward(self, x):
                return sum(w * x for w in self.ws)

        h, m = Holder(), M()
        f = compile(lambda x: sum(w * x for w in h.ws))
        cm = compile(m)
        x = lib.ones(2, dtype=dt)
        out = [f(x).tolist(), cm(x).tolist()]
        h.ws.append(lib.full((2,), 3.0, dtype=dt))
        m.ws.append(lib.full((2,), 5.0, dtype=dt))
        out += [f(x).tolist(), cm(x).tolist()]
        return out
    _check(program, dtype)


def test_unchanged_lists_need_no_retrace():
    ws = [symgrad.ones(2), symgrad.ones(2)]
    f = symgrad.compile(lambda x: sum(w * x for w in ws))
    x = symgrad.ones(2)
    for _ in range(4):
        f(x)
    assert f.cache_info().misses == 1
    ws.append(symgrad.ones(2))
    np.testing.assert_allclose(f(x).numpy(), [3.0, 3.0])
    assert "len(ws) changed" in f.last_miss_reason
