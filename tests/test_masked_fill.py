"""``masked_fill`` / ``masked_fill_`` against PyTorch 2.13: a tensor ``value`` that
requires grad gets the filled positions' gradient (review5 #12: it was closed over, no
edge), eager and compiled (llvm, numpy), float32 and float64; the result keeps the
input's dtype, the value cast to it (review5 #5); the mask errors' texts."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg

A = np.array([[1., -2., 3.], [-4., 5., 6.]])
G = np.array([[1., 2., 3.], [4., 5., 6.]])
DTYPES = ["float32", "float64"]


def _fill(inplace):
    def f(a, m, v):
        return (a * 1).masked_fill_(m, v) if inplace else a.masked_fill(m, v)
    return f


def _eager(T, dtype, f, value_dtype=None, mask=lambda a: a > 0):
    dt = getattr(T, dtype)
    a = T.tensor(A, dtype=dt, requires_grad=True)
    v = T.tensor(0.5, dtype=getattr(T, value_dtype or dtype), requires_grad=True)
    out = f(a, mask(a), v)
    (out * T.tensor(G, dtype=dt)).sum().backward()
    return out, a.grad.numpy(), v.grad.numpy()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("inplace", [False, True], ids=["masked_fill", "masked_fill_"])
@pytest.mark.parametrize("value_dtype", [None, "float64"], ids=["same", "value f64"])
def test_tensor_value_gets_gradient_eager(inplace, dtype, value_dtype):
    tout, ta, tv = _eager(torch, dtype, _fill(inplace), value_dtype)
    out, a, v = _eager(sg, dtype, _fill(inplace), value_dtype)
    assert out.dtype == getattr(sg, dtype)
    assert type(out.grad_fn).__name__ == type(tout.grad_fn).__name__ == "MaskedFillBackward1"
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy())
    np.testing.assert_allclose(a, ta)
    np.testing.assert_allclose(v, tv)


def test_broadcast_mask_and_fill_from_the_input():
    def f(T):
        x = T.tensor(A, requires_grad=True)
        out = x.masked_fill(T.tensor([True, False, True]), x.min()) * T.tensor(G)
        out.sum().backward()
        return out.detach().numpy(), x.grad.numpy()
    for got, want in zip(f(sg), f(torch)):
        np.testing.assert_allclose(got, want)


@pytest.mark.parametrize("backend", ["llvm", "numpy"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("inplace", [False, True], ids=["masked_fill", "masked_fill_"])
def test_tensor_value_gradient_compiled(inplace, dtype, backend):
    f = _fill(inplace)
    _, ta, tv = _eager(torch, dtype, f)
    g = sg.grad(lambda a, v: (f(a, a > 0, v) * sg.tensor(G, dtype=a.dtype)).sum(),
                argnums=(0, 1), backend=backend)(A.astype(dtype), np.array(0.5, dtype))
    assert np.asarray(g[1]).dtype == np.dtype(dtype)
    np.testing.assert_allclose(np.asarray(g[0]), ta, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(g[1]), tv, rtol=1e-6)


NUMBER_CASES = [("int32", 2.7), ("int32", -1), ("int64", 300), ("int64", float("inf")),
                ("int32", float("nan")), ("uint8", -1), ("uint8", 300), ("uint8", 2.7),
                ("int8", 200), ("int16", -129), ("bool", 2), ("bool", 0.0),
                ("float16", 2.7), ("float32", float("inf")), ("float64", 1e300)]


def _run(T, dtype, value, inplace, compiled=False):
    x = T.tensor([[1, 0, 3], [4, 5, 0]]).to(getattr(T, dtype))
    m = T.tensor([[True, False, True], [False, True, False]])
    f = (lambda x: x.clone().masked_fill_(m, value)) if inplace else \
        (lambda x: x.masked_fill(m, value))
    try:
        out = sg.compile(f)(x) if compiled else f(x)
    except RuntimeError as e:
        return "RuntimeError", str(e)
    return str(out.dtype), np.asarray(out.numpy() if hasattr(out, "numpy") else out).tolist()


@pytest.mark.parametrize("inplace", [False, True], ids=["masked_fill", "masked_fill_"])
@pytest.mark.parametrize("dtype,value", NUMBER_CASES)
def test_number_value_keeps_the_tensor_dtype(dtype, value, inplace):
    """review5 #5: the value is converted to the tensor's dtype (torch's Scalar rules, its
    overflow error), the result keeps it; eager and compiled."""
    want = _run(torch, dtype, value, inplace)
    assert _run(sg, dtype, value, inplace) == want
    if want[0] != "RuntimeError" and dtype != "float16":
        assert _run(sg, dtype, value, inplace, compiled=True)[1] == want[1]


@pytest.mark.parametrize("mask_dtype", ["int64", "int32", "int16", "int8", "uint8",
                                        "float32", "float64"])
def test_non_bool_mask_error_text(mask_dtype):
    def err(T):
        with pytest.raises(RuntimeError) as e:
            T.zeros(3).masked_fill(T.ones(3, dtype=getattr(T, mask_dtype)), 1.0)
        return str(e.value)
    assert err(sg) == err(torch)
