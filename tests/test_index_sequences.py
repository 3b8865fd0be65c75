"""Index forms PyTorch 2.13 accepts that d2l and older code use (review8 #7, #8, #13): a
``range`` as an index, a list holding sequences / slices / None read as a tuple (with
PyTorch's deprecation warning), ``x.type('torch.DoubleTensor')``. Compared with torch."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import symgrad


def _pair(dtype="float64"):
    a = np.arange(24.0).reshape(4, 2, 3)
    return torch.tensor(a, dtype=getattr(torch, dtype)), symgrad.tensor(a, dtype=getattr(symgrad, dtype))


KEYS = [
    lambda: (range(2), [0, 1]),
    lambda: [[1, 0], [0, 0]],
    lambda: [slice(None), 0],
    lambda: [range(2)],
    lambda: [1, 0],
    lambda: [[1, 0], [0, 1], [2, 0]],
    lambda: [None, 1],
    lambda: [Ellipsis, 1],
    lambda: range(3),
]


def _get(x, key):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = x[key()]
    return out, [str(m.message) for m in w]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("k", range(len(KEYS)))
def test_getitem_and_setitem_as_torch(k, dtype):
    t, s = _pair(dtype)
    want, said = _get(t, KEYS[k])
    got, ours = _get(s, KEYS[k])
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert [m.split(" (Triggered")[0] for m in said] == ours
    t[KEYS[k]()] = -1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s[KEYS[k]()] = -1.0
    np.testing.assert_array_equal(s.numpy(), t.numpy())


def test_d2l_cross_entropy_with_a_range_index():
    y_hat = [[0.1, 0.3, 0.6], [0.3, 0.2, 0.5]]
    y = [0, 2]
    want = -torch.log(torch.tensor(y_hat)[range(2), torch.tensor(y)])
    got = -symgrad.log(symgrad.tensor(y_hat)[range(2), symgrad.tensor(y)])
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


@pytest.mark.parametrize("name", ["torch.DoubleTensor", "torch.FloatTensor", "torch.LongTensor",
                                  "torch.IntTensor", "torch.BoolTensor", "torch.HalfTensor"])
def test_type_by_legacy_tensor_type_name(name):
    want = torch.tensor([1.5, -2.0, 0.0]).type(name)
    got = symgrad.tensor([1.5, -2.0, 0.0]).type(name)
    assert str(got.dtype) == str(want.dtype) and got.type() == want.type() == name
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_type_by_an_unknown_name():
    for lib in (torch, symgrad):
        with pytest.raises(ValueError, match=r"invalid type: 'torch.FooTensor'"):
            lib.ones(2).type("torch.FooTensor")
