"""``nn.utils.clip_grad_norm_`` inside a compiled training step (review8 #5): the norm and
the scaling are traced tensor operations, as torch's implementation computes them; the
norms, gradients and parameters agree with ``torch.compile(backend="eager")``."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import symgrad

TOL = {"float32": 2e-6, "float64": 1e-12}


def _run(lib, dtype, norm_type, max_norm, error_if_nonfinite=False, foreach=None, scale=1.0):
    lib.manual_seed(0)
    if lib is torch:
        torch._dynamo.reset()
    dt = getattr(lib, dtype)
    m = lib.nn.Sequential(lib.nn.Linear(3, 4, dtype=dt), lib.nn.Tanh(),
                          lib.nn.Linear(4, 1, dtype=dt))
    opt = lib.optim.SGD(m.parameters(), lr=0.1)
    x = lib.randn(6, 3, dtype=dt) * scale

    def step(x):
        opt.zero_grad()
        loss = m(x).pow(2).sum()
        loss.backward()
        n = lib.nn.utils.clip_grad_norm_(m.parameters(), max_norm, norm_type=norm_type,
                                         error_if_nonfinite=error_if_nonfinite,
                                         foreach=foreach)
        opt.step()
        return n
    f = lib.compile(step, backend="eager") if lib is torch else lib.compile(step)
    norms = [f(x).item() for _ in range(3)]
    return norms + [v for p in m.parameters() for v in p.detach().reshape(-1).tolist()]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("norm_type,max_norm", [(2.0, 0.1), (1, 0.5), (math.inf, 0.2),
                                                (3.0, 100.0), ("inf", 0.3)])
def test_clip_grad_norm_in_a_compiled_step(dtype, norm_type, max_norm):
    want = _run(torch, dtype, norm_type, max_norm, foreach=True)
    got = _run(symgrad, dtype, norm_type, max_norm, foreach=True)
    np.testing.assert_allclose(got, want, rtol=TOL[dtype], atol=TOL[dtype])


def test_compiled_clip_is_traced_not_a_graph_break(caplog):
    with caplog.at_level("WARNING", logger="symgrad.compile"):
        _run(symgrad, "float64", 2.0, 0.1)
    assert not [r for r in caplog.records if r.name == "symgrad.compile"]


def test_error_if_nonfinite():
    want = _run(torch, "float64", 2.0, 0.1, error_if_nonfinite=True)
    got = _run(symgrad, "float64", 2.0, 0.1, error_if_nonfinite=True)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    errors = []
    for lib in (torch, symgrad):
        with pytest.raises(RuntimeError) as e:
            _run(lib, "float64", 2.0, 0.1, error_if_nonfinite=True, scale=math.inf)
        errors.append(str(e.value))
    assert errors[0] == errors[1]
