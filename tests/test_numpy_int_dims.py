"""numpy integers (np.int64 from shapes, argmax, np.random; np.int32) are accepted as
``dim`` wherever PyTorch takes an int (review5 #9: one dim normaliser): values eager and
gradients eager and compiled, against PyTorch 2.13, float32 and float64."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg

D1, D0, DN = np.int64(1), np.int32(0), np.int64(-1)
X = np.arange(24.).reshape(2, 3, 4) / 7 - 1.1
IDX = [[[0], [2], [1]], [[1], [0], [0]]]

OPS = {
    "sum": lambda T, t: t.sum(D1), "sum tuple": lambda T, t: t.sum((D0, DN)),
    "mean": lambda T, t: t.mean(D1), "std": lambda T, t: t.std(D1),
    "var": lambda T, t: t.var((D1, DN)), "cumsum": lambda T, t: t.cumsum(D1),
    "cumprod": lambda T, t: t.cumprod(DN), "sort": lambda T, t: t.sort(D1)[0],
    "max": lambda T, t: t.max(D1)[0], "min": lambda T, t: t.min(D1)[0],
    "amax": lambda T, t: t.amax(D1), "amin": lambda T, t: t.amin((D0, D1)),
    "logsumexp": lambda T, t: t.logsumexp(D1), "softmax": lambda T, t: T.softmax(t, D1),
    "log_softmax": lambda T, t: T.log_softmax(t, DN), "cat": lambda T, t: T.cat([t, t * 2], D1),
    "stack": lambda T, t: T.stack([t, t * 2], D1), "transpose": lambda T, t: t.transpose(D0, D1),
    "unsqueeze": lambda T, t: t.unsqueeze(D1), "squeeze": lambda T, t: t[:, :1].squeeze(D1),
    "roll": lambda T, t: t.roll(1, D1),
    "gather": lambda T, t: t.gather(D1, T.tensor(IDX).expand(2, 3, 4)),
    "index_select": lambda T, t: t.index_select(D1, T.tensor([0, 2])),
    "flip": lambda T, t: t.flip(D1), "topk": lambda T, t: t.topk(2, D1)[0],
    "movedim": lambda T, t: t.movedim(D0, D1), "split": lambda T, t: t.split(2, DN)[1],
    "chunk": lambda T, t: t.chunk(2, D1)[0], "prod": lambda T, t: t.prod(D1),
    "flatten": lambda T, t: t.flatten(D0, D1), "diagonal": lambda T, t: t.diagonal(0, D1, DN),
    "unflatten": lambda T, t: t.unflatten(DN, (2, 2)),
    "repeat_interleave": lambda T, t: t.repeat_interleave(2, D1),
    "vector_norm": lambda T, t: T.linalg.vector_norm(t, dim=D1),
    "argmax": lambda T, t: t.argmax(D1), "any": lambda T, t: (t > 0.5).any(D1),
}


def _grad(T, name, x):
    t = T.tensor(x, requires_grad=True)
    out = OPS[name](T, t)
    if not out.dtype.is_floating_point:
        return out.numpy(), None
    w = T.tensor(np.linspace(-1, 2, out.numel()).reshape(tuple(out.shape)), dtype=out.dtype)
    (out * w).sum().backward()
    return out.detach().numpy(), t.grad.numpy()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", list(OPS))
def test_numpy_integer_dim_eager(name, dtype):
    x = X.astype(dtype)
    for got, want in zip(_grad(sg, name, x), _grad(torch, name, x)):
        if want is not None:
            np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == "float32" else 1e-12,
                                       atol=1e-6 if dtype == "float32" else 1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("backend", ["llvm", "numpy"])
def test_numpy_integer_dim_compiled(backend, dtype):
    names = ["sum", "cumsum", "softmax", "amax", "max", "cat", "gather", "std"]
    x = X.astype(dtype)

    def f(L, t):
        return sum((OPS[n](L, t) * (i + 1)).sum() for i, n in enumerate(names))
    t = torch.tensor(x, requires_grad=True)
    tv = f(torch, t)
    tv.backward()
    v, g = sg.value_and_grad(lambda a: f(sg, a), backend=backend)(x)
    tol = 1e-4 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(float(v), tv.item(), rtol=tol)
    np.testing.assert_allclose(np.asarray(g), t.grad.numpy(), rtol=tol, atol=tol)
