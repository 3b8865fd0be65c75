"""``print`` and ``warnings.warn`` inside a compiled function (review10 #17) happen at
every call with the real values, as under ``torch.compile(backend="eager")`` (a graph
break: the call runs as written)."""
from __future__ import annotations

import builtins
import contextlib
import io
import warnings

import pytest
import torch

import symgrad


def _run(lib, dtype, capsys):
    if lib is torch:
        torch._dynamo.reset()
    kw = {"backend": "eager"} if lib is torch else {}

    def f(x):
        y = x * 2
        print("inside:", y.tolist())
        warnings.warn("careful")
        return y

    cf = lib.compile(f, **kw)
    capsys.readouterr()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        outs = [cf(lib.tensor([v], dtype=getattr(lib, dtype))).tolist() for v in (1.0, 2.0, 3.0)]
    return outs, capsys.readouterr().out, len([m for m in w if "careful" in str(m.message)])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_print_and_warn_every_call(dtype, capsys):
    want = _run(torch, dtype, capsys)
    assert want[1].count("inside:") == 3 and want[2] == 3
    assert _run(symgrad, dtype, capsys) == want


def test_print_of_a_tensor_shows_values():
    def f(x):
        print(x * 2)
        return x + 1

    cf = symgrad.compile(f)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        cf(symgrad.tensor([1.0, 2.0]))
        cf(symgrad.tensor([3.0, 4.0]))
    assert buf.getvalue() == "tensor([2., 4.])\ntensor([6., 8.])\n"
    assert builtins.print is print and not hasattr(print, "__wrapped__")
