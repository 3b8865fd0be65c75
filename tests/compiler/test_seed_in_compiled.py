"""``manual_seed`` inside a compiled function (review10 #26) is a Python effect of every
call: the stream restarts at each call, as under ``torch.compile(backend="eager")``."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad


def _calls(lib, dtype, use_generator):
    if lib is torch:
        torch._dynamo.reset()
    kw = {"backend": "eager"} if lib is torch else {}
    dt = getattr(lib, dtype)
    g = lib.Generator()

    def f(x):
        if use_generator:
            g.manual_seed(0)
            return x + lib.rand(2, generator=g, dtype=dt)
        lib.manual_seed(0)
        return x + lib.rand(2, dtype=dt)

    cf = lib.compile(f, **kw)
    out = [cf(lib.zeros(2, dtype=dt)).tolist() for _ in range(3)]
    out.append(lib.rand(2, dtype=dt).tolist() if not use_generator
               else lib.rand(2, generator=g, dtype=dt).tolist())   # (the stream goes on)
    return out


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("use_generator", [False, True])
def test_manual_seed_every_call(dtype, use_generator):
    want = _calls(torch, dtype, use_generator)
    got = _calls(symgrad, dtype, use_generator)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
