"""``x ** e`` at special values (±0, ±inf, NaN, ±1, negative bases) for every kind of
exponent -- a Python number (PyTorch's kernels: 0.5 a square root, -0.5 one over it, 2
and 3 products, -1 and -2 reciprocals), a tensor (a 0-d one too: ``pow``), a number base
(``2 ** x``) -- eager, compiled on LLVM and on the numpy backend, fused or alone, both
dtypes, values and gradients against PyTorch: specials exactly (the sign of a zero or an
infinity, NaN), finite values within a few ulp (review finding: eager ``(-0.0) ** -0.5``
was +inf, PyTorch's rsqrt gives -inf)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg

BASES = [-0.0, 0.0, -1.0, 1.0, -2.5, 2.5, float("inf"), float("-inf"), float("nan"), 0.5,
         -0.5, 1e-300]
EXPONENTS = [-0.5, 0.5, -1.0, 1.0, 2.0, -2.0, 3.0, -3.0, 0.0, -0.0, 2.5, -2.5,
             float("inf"), float("-inf"), float("nan"), 4.0, -4.0, 0.25, 2, 3, -1, -2, 0, 1]
DTYPES = ["float32", "float64"]
WAYS = {
    "eager": lambda f: f,
    "llvm": lambda f: sg.compile(f),
    "numpy": lambda f: sg.compile(f, backend="numpy"),
}


def _same(got, want, ulps=4):
    got, want = np.asarray(got), np.asarray(want)
    exact = (got == want) & (np.signbit(got) == np.signbit(want))
    both_nan = np.isnan(got) & np.isnan(want)
    with np.errstate(all="ignore"):
        close = np.isfinite(want) & np.isfinite(got) & (
            np.abs(got - want) <= ulps * np.spacing(np.abs(want)))
    bad = ~(exact | both_nan | close)
    return [(i, got[i], want[i]) for i in np.flatnonzero(bad)]


@pytest.mark.parametrize("way", list(WAYS))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["number", "tensor", "tensor0d", "number_base", "fused"])
def test_pow_values_at_special_points_as_torch(kind, dtype, way):
    tdt = getattr(torch, dtype)
    X = torch.tensor(BASES, dtype=tdt)
    x = sg.tensor(X.numpy())
    bad = []
    for e in EXPONENTS:
        if kind == "number":
            want, f, args = X ** e, (lambda a, e=e: a ** e), (x,)
        elif kind == "fused":
            want, f, args = (X * 1) ** e * 1, (lambda a, e=e: (a * 1) ** e * 1), (x,)
        elif kind == "tensor":
            E = torch.full_like(X, e)
            want, f, args = X ** E, (lambda a, b: a ** b), (x, sg.tensor(E.numpy()))
        elif kind == "tensor0d":
            E = torch.tensor(e, dtype=tdt)
            want, f, args = X ** E, (lambda a, b: a ** b), (x, sg.tensor(E.numpy()))
        else:
            want, f, args = e ** X, (lambda a, e=e: e ** a), (x,)
        got = WAYS[way](f)(*args)
        bad += [(e,) + b for b in _same(got.numpy(), want.numpy())]
    assert not bad, bad


@pytest.mark.parametrize("way", list(WAYS))
@pytest.mark.parametrize("dtype", DTYPES)
def test_pow_gradients_at_special_points_as_torch(dtype, way):
    tdt = getattr(torch, dtype)
    bad = []
    for e in EXPONENTS:
        X = torch.tensor(BASES, dtype=tdt, requires_grad=True)
        (X ** e).sum().backward()
        f = WAYS[way](lambda a, e=e: (a ** e).sum())
        x = sg.tensor(X.detach().numpy(), requires_grad=True)
        f(x).backward()
        bad += [(e,) + b for b in _same(x.grad.numpy(), X.grad.numpy())]
    assert not bad, bad


@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "int8"])
def test_integer_tensor_to_negative_integer_tensor(dtype):
    """review 4 finding 14: numpy refuses integers to negative integer powers (ValueError);
    PyTorch's kernel gives 1 ** -n = 1, (-1) ** -n = +-1, anything else 0 (only a Python
    number exponent is refused)."""
    a = np.array([2, 3, 1, -1, -1, 0, -2], dtype)
    b = np.array([-1, 2, -3, -3, -2, 2, -1], dtype)
    cases = [lambda L, u, v: u ** v, lambda L, u, v: L.pow(2, v), lambda L, u, v: u ** v[0],
             lambda L, u, v: L.pow(u, v)]
    for fn in cases:
        want = fn(torch, torch.tensor(a), torch.tensor(b)).numpy()
        got = fn(sg, sg.tensor(a), sg.tensor(b)).numpy()
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
        for be in ("llvm", "numpy"):
            f = sg.compile(lambda u, v: fn(sg, u, v), backend=be)
            got = np.asarray(f(sg.tensor(a), sg.tensor(b)).numpy())
            np.testing.assert_array_equal(got, want)


INT_DTYPES = ["int64", "int32", "int16", "int8", "uint8"]
INT_BASES = [0, 1, -1, 2, -2, 3, -3, 7, 10, 127, -128, 2 ** 31 - 1, -2 ** 31, 3 ** 39,
             2 ** 62 + 1, -2 ** 63, 2 ** 63 - 1]
INT_EXPONENTS = [0, 1, 2, 3, 4, 5, 7, 31, 32, 40, 62, 63, 64, 127, -1, -2, -3, -4, -63, -64,
                 -128, 2 ** 31 - 1, -2 ** 31, 2 ** 40 + 3, 2 ** 62 + 1, 2 ** 63 - 1, -2 ** 63]


def _int_grid(dtype):
    info = np.iinfo(dtype)
    fits = lambda v: info.min <= v <= info.max
    base = [v for v in INT_BASES if fits(v)]
    ex = [v for v in INT_EXPONENTS if fits(v)]
    a = np.array([x for x in base for _ in ex], dtype)
    b = np.array([e for _ in base for e in ex], dtype)
    return a, b, base, ex


@pytest.mark.parametrize("way", list(WAYS))
@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_integer_powers_wrap_as_torch(dtype, way):
    """An integer tensor to an integer power (a tensor, a 0-d tensor or a Python int) is
    PyTorch's integer kernel: exact squaring and multiplying that wraps as the dtype does
    (3 ** 40 in int64), a negative exponent 1 / +-1 / 0 -- the LLVM backend had computed
    it in float64 (0 ** -1 was INT_MIN, large powers the saturated minimum)."""
    a, b, base, ex = _int_grid(dtype)
    want = (torch.tensor(a) ** torch.tensor(b)).numpy()
    for name, fn in {"**": lambda u, v: u ** v, "pow": lambda u, v: sg.pow(u, v)}.items():
        got = WAYS[way](fn)(sg.tensor(a), sg.tensor(b)).numpy()
        assert got.dtype == want.dtype, name
        bad = np.flatnonzero(got != want)
        assert not bad.size, [(name, a[i], b[i], got[i], want[i]) for i in bad[:10]]
    A = torch.tensor(np.array(base, dtype))
    for e in ex:
        # a 0-d exponent tensor and a non-negative Python int exponent
        E = torch.tensor(e, dtype=getattr(torch, dtype))
        want = (A ** E).numpy()
        got = WAYS[way](lambda u, v: u ** v)(sg.tensor(A.numpy()), sg.tensor(E.numpy())).numpy()
        np.testing.assert_array_equal(got, want, err_msg=f"0-d exponent {e}")
        if 0 <= e <= 2 ** 31:
            want = (A ** e).numpy()
            got = WAYS[way](lambda u, e=e: u ** e)(sg.tensor(A.numpy())).numpy()
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want, err_msg=f"Python exponent {e}")


@pytest.mark.parametrize("way", list(WAYS))
def test_integer_power_then_float_as_torch(way):
    """An integer power consumed by float arithmetic (true division, a cast) is computed
    in integers first, as in torch (0 ** -1 is 0, so 0 / 2 and not inf)."""
    a = np.array([0, 1, -1, 2, 3, -3], "int64")
    b = np.array([-1, -2, -3, 3, 40, 41], "int64")
    fns = [lambda L, u, v: (u ** v) / 2, lambda L, u, v: (u ** v).double() * 0.5 + 1,
           lambda L, u, v: L.where(u ** v == 0, u, v)]
    for fn in fns:
        want = fn(torch, torch.tensor(a), torch.tensor(b)).numpy()
        got = WAYS[way](lambda u, v: fn(sg, u, v))(sg.tensor(a), sg.tensor(b)).numpy()
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["int16", "int8", "uint8", "float16"])
def test_identity_power_of_numpy_dtype_compiles(dtype):
    """``u ** 1`` (and ``u + 0``) of a dtype generated code does not compute on leaves a
    copy of the input into the output: the LLVM backend raised KeyError('int16')."""
    A = torch.tensor([1, 2, 3, 0], dtype=getattr(torch, dtype))
    for fn in (lambda u: u ** 1, lambda u: u + 0, lambda u: u[1:] * 1):
        want = fn(A).numpy()
        got = sg.compile(fn)(sg.tensor(A.numpy())).numpy()
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
