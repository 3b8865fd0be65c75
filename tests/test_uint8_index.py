"""A uint8 index tensor is a (deprecated) mask, as in PyTorch 2.13 (review5 #7): getitem
selects like a bool mask and warns; setitem / index_put_ with a one-element value refuse
it with masked_fill_'s error (larger values: a mask, with the warning); a 0-d uint8
index is a 0-d mask; ``where`` takes a uint8 condition with PyTorch's warning (eager and
compiled). Values, gradients, warnings and errors against torch."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import symgrad as sg

A = np.arange(15.).reshape(3, 5)


def _u8(T, v):
    return T.tensor(v, dtype=T.uint8)


CASES = {
    "a[m]": lambda T, a: a[_u8(T, [1, 0, 1])],
    "a[m, 1]": lambda T, a: a[_u8(T, [1, 0, 1]), 1],
    "a[:, m]": lambda T, a: a[:, _u8(T, [1, 0, 0, 0, 2])],
    "a[0-d 1]": lambda T, a: a[_u8(T, 1)],
    "a[0-d 0]": lambda T, a: a[_u8(T, 0)],
    "a[2-d mask]": lambda T, a: a[(a > 5).to(T.uint8)],
    "b[m] = -1": lambda T, a: a.clone().__setitem__(_u8(T, [1, 0, 1]), -1.0),
    "b[m] = 0-d": lambda T, a: a.clone().__setitem__(_u8(T, [1, 0, 1]), T.tensor(-1.)),
    "b[m, 1] = -1": lambda T, a: a.clone().__setitem__((_u8(T, [1, 0, 1]), 1), -1.0),
    "b[m] = row": lambda T, a: (lambda b: (b.__setitem__(_u8(T, [1, 0, 1]), T.zeros(5, dtype=b.dtype)), b)[1])(
        a.clone()),
    "where(u8)": lambda T, a: T.where(_u8(T, [1, 0, 0, 0, 2]), a, 0.),
}


def _run(T, name):
    a = T.tensor(A, requires_grad=True)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            out = CASES[name](T, a)
        except RuntimeError as e:
            return ("error", str(e)), []
        msgs = [str(x.message) for x in w if x.category is UserWarning]
        if out is None:
            return None, msgs
        (out * T.arange(1., out.numel() + 1, dtype=out.dtype).reshape(out.shape)).sum().backward()
    return (out.detach().numpy().tolist(), list(out.shape), a.grad.numpy().tolist()), msgs


@pytest.mark.parametrize("name", list(CASES))
def test_uint8_index_like_torch(name):
    got, got_w = _run(sg, name)
    want, want_w = _run(torch, name)
    assert got == want
    if name != "where(u8)":         # (where warns once per process, in both)
        assert got_w == want_w


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("backend", ["llvm", "numpy"])
def test_compiled_where_with_uint8_condition(backend, dtype):
    c = np.array([1, 0, 0, 0, 2], dtype=np.uint8)
    x = A.astype(dtype)
    t = torch.tensor(x, requires_grad=True)
    torch.where(torch.tensor(c), t, 0.).sum().backward()     # (torch warns once)
    with warnings.catch_warnings():          # (warned when traced; the disk cache may skip it)
        warnings.simplefilter("ignore")
        v, g = sg.value_and_grad(lambda a, c: sg.where(c, a, 0.).sum(), backend=backend)(x, c)
    np.testing.assert_allclose(float(v), float(torch.where(torch.tensor(c), t, 0.).sum()))
    np.testing.assert_allclose(np.asarray(g), t.grad.numpy())
