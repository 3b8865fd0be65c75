"""``linspace`` and ``logspace`` bit for bit as PyTorch's CPU kernels (random ranges,
sizes and dtypes), so printed tutorial output agrees; errors as PyTorch's."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg

DTYPES = ["float32", "float64", "int64", "int32"]


def _cases(seed, n):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        a, b = rng.normal(scale=10.0 ** rng.integers(-3, 4), size=2)
        yield float(a), float(b), int(rng.integers(0, 1200))


@pytest.mark.parametrize("dtype", DTYPES)
def test_linspace_is_torchs_bit_for_bit(dtype):
    for a, b, n in _cases(1, 400):
        if dtype.startswith("int"):
            a, b = int(a), int(b)
        want = torch.linspace(a, b, n, dtype=getattr(torch, dtype)).numpy()
        got = sg.linspace(a, b, n, dtype=getattr(sg, dtype)).numpy()
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want, err_msg=f"linspace({a}, {b}, {n})")


@pytest.mark.parametrize("dtype", DTYPES)
def test_logspace_is_torchs_bit_for_bit(dtype):
    rng = np.random.default_rng(2)
    for a, b, n in _cases(3, 150):
        a, b, n = a % 7 - 3.5, b % 7 - 3.5, n % 300
        base = float(rng.choice([10.0, 2.0, np.e, 3.5, 0.5]))
        want = torch.logspace(a, b, n, base=base, dtype=getattr(torch, dtype)).numpy()
        got = sg.logspace(a, b, n, base=base, dtype=getattr(sg, dtype)).numpy()
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want, err_msg=f"logspace({a}, {b}, {n}, {base})")


def test_default_dtype_printing_and_errors():
    assert repr(sg.logspace(0, 2, 5)) == repr(torch.logspace(0, 2, 5))
    assert repr(sg.linspace(-1.3, 2.7, 9)) == repr(torch.linspace(-1.3, 2.7, 9))
    for fn in ("linspace", "logspace"):
        with pytest.raises(RuntimeError) as want:
            getattr(torch, fn)(0, 1, -1)
        with pytest.raises(RuntimeError) as got:
            getattr(sg, fn)(0, 1, -1)
        assert str(got.value) == str(want.value)


def _arange_cases(seed, n):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        start = float(rng.choice([0.0, 1.0, -3.0, 0.1, rng.uniform(-100, 100), rng.uniform(-1e6, 1e6)]))
        step = float(rng.choice([0.1, 0.3, 1 / 3, -0.25, rng.uniform(1e-3, 2), -rng.uniform(1e-3, 2),
                                 rng.uniform(1, 1000)]))
        count = int(rng.choice([0, 1, 7, 15, 16, 17, 31, 32, 33, 100, rng.integers(1, 3000)]))
        yield start, start + step * count + float(rng.uniform(-0.5, 0.5)) * step, step


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_arange_is_torchs_bit_for_bit(dtype):
    """torch's arange_kernel: start + step * i in double, with its vectorised blocks'
    own rounding (a vector's first element rounded to the dtype, then + k * step)."""
    for start, end, step in _arange_cases(4, 1500):
        try:
            want = torch.arange(start, end, step, dtype=getattr(torch, dtype)).numpy()
        except RuntimeError as e:         # (an empty range the wrong way round)
            with pytest.raises(RuntimeError, match=str(e)):
                sg.arange(start, end, step, dtype=getattr(sg, dtype))
            continue
        got = sg.arange(start, end, step, dtype=getattr(sg, dtype)).numpy()
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8),
                                      err_msg=f"arange({start}, {end}, {step})")


@pytest.mark.parametrize("threads", [1, 2])
def test_arange_split_over_threads_and_default_dtype(threads):
    """Past at::parallel_for's grain (32768 elements) each thread's range starts its own
    vector blocks: the same split for the same thread count."""
    before = (torch.get_num_threads(), sg.get_num_threads())
    torch.set_num_threads(threads)
    sg.set_num_threads(threads)
    try:
        for start, end, step in [(0.1, 0.1 + 0.37 * 70001, 0.37), (-5.0, 40000.0, 0.999),
                                 (3.0, -1e4, -0.3)]:
            for dt in ("float32", "float64"):
                want = torch.arange(start, end, step, dtype=getattr(torch, dt)).numpy()
                got = sg.arange(start, end, step, dtype=getattr(sg, dt)).numpy()
                np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    finally:
        torch.set_num_threads(before[0])
        sg.set_num_threads(before[1])
    for args in [(0.5, 7), (1, 2.5, 0.1), (10,), (0, 1, 0.125)]:
        want, got = torch.arange(*args), sg.arange(*args)
        assert str(got.dtype) == str(want.dtype)
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_linspace_logspace_endpoint_errors_and_negative_base():
    """review 4 finding 16: integer endpoints that do not fit the dtype (or are NaN / inf)
    raise PyTorch's overflow error instead of wrapping; bool has no kernel; a negative
    base gives NaN where the power is not an integer (was math's ValueError)."""
    T, S = torch, sg
    cases = [lambda L: L.linspace(0, 255, 7, dtype=L.int8),
             lambda L: L.linspace(-1e30, 1e30, 3, dtype=L.int32),
             lambda L: L.linspace(0, 1e10, 3, dtype=L.int16),
             lambda L: L.linspace(float("nan"), 1, 3, dtype=L.int64),
             lambda L: L.linspace(float("inf"), 1, 3, dtype=L.int64),
             lambda L: L.linspace(0, 300, 3, dtype=L.uint8),
             lambda L: L.linspace(0, 1, 3, dtype=L.bool),
             lambda L: L.logspace(0, 300, 3, dtype=L.int8),
             lambda L: L.logspace(0, 1, 3, dtype=L.bool)]
    for case in cases:
        try:
            case(T)
        except Exception as e:           # noqa: BLE001
            want = e
        try:
            case(S)
        except Exception as e:           # noqa: BLE001
            got = e
        else:
            raise AssertionError(f"no error; torch: {want!r}")
        assert type(got) is type(want) and str(got) == str(want), (got, want)
    for case in (lambda L: L.linspace(0, 127, 3, dtype=L.int8),
                 lambda L: L.logspace(0, 3, 3, dtype=L.int8),
                 lambda L: L.logspace(0, 1, 5, base=-2),
                 lambda L: L.logspace(0, 2, 3, base=-2.0, dtype=L.float64)):
        want, got = case(T).numpy(), case(S).numpy()
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
