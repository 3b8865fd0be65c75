"""``torch.norm`` / ``Tensor.norm`` with ``p='nuc'`` (review5 #3: an internal TypeError):
the nuclear norm of the matrices in ``dim`` (all dims: a matrix), keepdim, the 2-tuple
error -- values and gradients eager and compiled (llvm, numpy), float32 and float64,
against PyTorch 2.13."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg

M = np.random.default_rng(3).normal(size=(2, 3, 4))
CASES = {
    "norm(A, 'nuc')": lambda T, x: T.norm(x[0], p="nuc"),
    "A.norm(nuc, (0, 1))": lambda T, x: x[1].norm(p="nuc", dim=(0, 1)),
    "A.norm(nuc, (1, 0), keepdim)": lambda T, x: x[1].norm(p="nuc", dim=(1, 0), keepdim=True),
    "batched (1, 2)": lambda T, x: T.norm(x, p="nuc", dim=(1, 2)),
    "batched (-1, 0) keepdim": lambda T, x: x.norm(p="nuc", dim=[-1, 0], keepdim=True),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("backend", ["eager", "llvm", "numpy"])
@pytest.mark.parametrize("case", list(CASES))
def test_nuclear_norm_like_torch(case, backend, dtype):
    f, x = CASES[case], M.astype(dtype)

    def loss(T, a):
        out = f(T, a)
        return (out * T.arange(1., out.numel() + 1, dtype=a.dtype).reshape(out.shape)).sum()
    t = torch.tensor(x, requires_grad=True)
    tv = loss(torch, t)
    tv.backward()
    if backend == "eager":
        s = sg.tensor(x, requires_grad=True)
        assert tuple(f(sg, s).shape) == tuple(f(torch, t).shape)
        v = loss(sg, s)
        v.backward()
        v, g = v.item(), s.grad.numpy()
    else:
        v, g = sg.value_and_grad(lambda a: loss(sg, a), backend=backend)(x)
    tol = 1e-4 if dtype == "float32" else 1e-10
    np.testing.assert_allclose(float(v), tv.item(), rtol=tol)
    np.testing.assert_allclose(np.asarray(g), t.grad.numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("kw", [dict(), dict(dim=1), dict(dim=(0, 1, 2))])
def test_nuclear_norm_needs_two_dims(kw):
    msgs = []
    for T in (torch, sg):
        with pytest.raises(RuntimeError) as e:
            T.norm(T.tensor(M), p="nuc", **kw)
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]
