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
