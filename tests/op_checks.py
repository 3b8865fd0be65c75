"""One check for an op against PyTorch in every mode a user runs it in: eager values,
``grad_fn`` name and gradients (:func:`oracle.check`), a second derivative through
``create_graph=True``, and the compiled gradient (``symgrad.value_and_grad``) on the
LLVM and numpy backends -- plus the comparison of an error's type and text."""
from __future__ import annotations

import numpy as np
import torch

import symgrad as sg

from oracle import check, tol

__all__ = ["check_everywhere", "same_error", "second_derivative"]


def _weights(out_shape, dtype, seed=7):
    return np.random.default_rng(seed).standard_normal(out_shape).astype(dtype)


def _loss(m, fn, w, *xs):
    out = fn(m, *xs)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return sum(((o * o) * m.tensor(w)).sum() for o in outs[:1]) + \
        sum((o * o).sum() for o in outs[1:])


def second_derivative(fn, *arrays, rtol=None, atol=None):
    """d/dx of sum((d loss / dx)^2) for a fixed weighted square loss, symgrad's against
    torch's (both through create_graph=True)."""
    res = []
    for m in (sg, torch):
        xs = [m.tensor(a.copy(), requires_grad=True) for a in arrays]
        with np.errstate(all="ignore"):
            out = fn(m, *xs)
        first = out[0] if isinstance(out, (tuple, list)) else out
        w = _weights(tuple(first.shape), arrays[0].dtype)
        gs = m.autograd.grad(_loss(m, fn, w, *xs), xs, create_graph=True)
        hs = m.autograd.grad(sum((g * g).sum() for g in gs), xs, allow_unused=True)
        res.append([None if h is None else h.detach().numpy() for h in hs])
    d = tol(arrays[0].dtype)
    for a, b in zip(*res):
        if b is None:
            assert a is None or not np.any(a)
            continue
        np.testing.assert_allclose(a, b, rtol=rtol or d["rtol"] * 10, atol=atol or d["atol"] * 10)


def compiled_gradient(fn, *arrays, rtol=None, atol=None):
    """symgrad.value_and_grad of the weighted square loss on both backends, against
    torch's eager value and gradients."""
    xs = [torch.tensor(a.copy(), requires_grad=True) for a in arrays]
    first = fn(torch, *xs)
    first = first[0] if isinstance(first, (tuple, list)) else first
    w = _weights(tuple(first.shape), arrays[0].dtype)
    loss = _loss(torch, fn, w, *xs)
    loss.backward()
    d = tol(arrays[0].dtype)
    rtol, atol = rtol or d["rtol"] * 10, atol or d["atol"] * 10
    argnums = tuple(range(len(arrays)))
    for backend in ("llvm", "numpy"):
        value, grads = sg.value_and_grad(lambda *v: _loss(sg, fn, w, *v), argnums=argnums,
                                         backend=backend)(*arrays)
        np.testing.assert_allclose(np.asarray(value), loss.detach().numpy(), rtol=rtol,
                                   atol=atol, err_msg=backend)
        for g, x in zip(grads, xs):
            np.testing.assert_allclose(g, x.grad.numpy(), rtol=rtol, atol=atol,
                                       err_msg=backend)


def check_everywhere(fn, *arrays, second=True, compiled=True, **kw):
    """:func:`oracle.check` (eager values, names, gradients), then a second derivative and
    the compiled gradients."""
    check(fn, *arrays, **kw)
    if second:
        second_derivative(fn, *arrays)
    if compiled:
        compiled_gradient(fn, *arrays)


def same_error(snippet):
    """``snippet(m)`` raises the same exception type and text with symgrad as with torch."""
    found = []
    for m in (torch, sg):
        try:
            snippet(m)
        except Exception as e:  # noqa: BLE001 -- compared with torch's
            found.append((type(e).__name__, str(e)))
        else:
            found.append(None)
    assert found[1] == found[0], f"symgrad: {found[1]}\ntorch:   {found[0]}"
    assert found[0] is not None, "torch raised nothing"
