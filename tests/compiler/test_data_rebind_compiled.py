"""``w.data = w.data - lr * w.grad`` inside a compiled step (review10 #18) is the state
write ``w.data -= ...`` is: the parameter takes the new values at every call and holds
no traced tensor afterwards. Compared with ``torch.compile(backend="eager")``."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad


def _sgd(lib, dtype, reshape):
    if lib is torch:
        torch._dynamo.reset()
    kw = {"backend": "eager"} if lib is torch else {}
    dt = getattr(lib, dtype)
    w = lib.tensor([1.0, 2.0, -0.5, 4.0], dtype=dt, requires_grad=True)

    def step(x):
        loss = (x * w).sum() ** 2
        loss.backward()
        new = w.data - 0.01 * w.grad.data
        w.data = new.reshape(2, 2) if reshape else new
        w.grad.zero_()
        return loss.detach()

    f = lib.compile(step, **kw)
    out = []
    for i in range(3):
        if reshape:      # (another shape each call: flattened back first)
            w.data = w.data.reshape(-1)
        x = lib.tensor([1.0, 3.0, 0.5, -1.0], dtype=dt) * (i + 1)
        out.append(f(x).item())
        out += w.detach().reshape(-1).tolist()
    out += (w * 2).detach().reshape(-1).tolist()        # (w usable afterwards)
    return out


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("reshape", [False, True])
def test_data_rebound_in_compiled_step(dtype, reshape):
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(_sgd(symgrad, dtype, reshape), _sgd(torch, dtype, reshape),
                               rtol=tol, atol=tol)
