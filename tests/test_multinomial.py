"""``multinomial`` (function and method) and ``exponential_`` against PyTorch's CPU
generator after the same seed: the same indices, with and without replacement, one or
many samples, 1-D and 2-D, both dtypes, zero-probability categories; the generator's
state afterwards (the next ``rand``) the same; PyTorch's errors. ``exponential_``:
float32 bit for bit, float64 within an ulp or two (PyTorch's own ``log1p``)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg

DTYPES = (np.float32, np.float64)
CASES = [(1, False), (1, True), (2, False), (3, True), (40, True), ("all", False)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5,), (3, 7), (4, 300)])
@pytest.mark.parametrize("n,replacement", CASES)
def test_same_indices_as_torch(shape, n, replacement, dtype):
    rng = np.random.default_rng(sum(shape))
    n = shape[-1] if n == "all" else n
    for seed in range(6):
        p = rng.random(shape).astype(dtype)
        if seed % 2:
            p[..., 1] = 0                              # a category never drawn first
        torch.manual_seed(seed)
        want = torch.multinomial(torch.tensor(p), n, replacement)
        after = torch.rand(4)
        sg.manual_seed(seed)
        got = sg.multinomial(sg.tensor(p), n, replacement)
        assert got.dtype == sg.int64 and tuple(got.shape) == tuple(want.shape)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        np.testing.assert_array_equal(sg.rand(4).numpy(), after.numpy())


def test_method_and_generator():
    p = np.array([[0.1, 0.5, 0.4], [3.0, 1.0, 0.0]], np.float32)
    g, tg = sg.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    got = sg.tensor(p).multinomial(5, replacement=True, generator=g)
    want = torch.tensor(p).multinomial(5, replacement=True, generator=tg)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    np.testing.assert_array_equal(sg.tensor(p).multinomial(2, generator=g).numpy(),
                                  torch.tensor(p).multinomial(2, generator=tg).numpy())


ERRORS = [
    (lambda L: L.multinomial(L.tensor([1, 2]), 1)),
    (lambda L: L.multinomial(L.ones(2, 2, 2), 1)),
    (lambda L: L.multinomial(L.tensor(1.0), 1)),
    (lambda L: L.multinomial(L.ones(3), 0)),
    (lambda L: L.multinomial(L.ones(3), 4)),
    (lambda L: L.multinomial(L.tensor([1.0, -1.0]), 1)),
    (lambda L: L.multinomial(L.tensor([1.0, -1.0]), 2, True)),
    (lambda L: L.multinomial(L.tensor([1.0, float("nan")]), 1)),
    (lambda L: L.multinomial(L.tensor([1.0, float("inf")]), 2, True)),
    (lambda L: L.multinomial(L.tensor([0.0, 0.0]), 1)),
    (lambda L: L.multinomial(L.tensor([0.0, 0.0]), 2, True)),
    (lambda L: L.multinomial(L.tensor([[1.0, 0.0], [0.0, 0.0]]), 1)),
    (lambda L: L.zeros(3, dtype=L.long).exponential_()),
    (lambda L: L.zeros(3).exponential_(0.0)),
    (lambda L: L.zeros(3).exponential_(-1.5)),
]


@pytest.mark.parametrize("case", range(len(ERRORS)))
def test_errors_as_torch(case):
    with pytest.raises(Exception) as want:
        ERRORS[case](torch)
    with pytest.raises(type(want.value)) as got:
        ERRORS[case](sg)
    assert str(got.value) == str(want.value)


def test_empty_rows():
    assert tuple(sg.multinomial(sg.ones(0, 3), 2).shape) == (0, 2)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lambd", [1.0, 0.3, 2.5])
def test_exponential_(lambd, dtype):
    for seed in range(3):
        torch.manual_seed(seed)
        want = torch.empty(500, dtype=getattr(torch, np.dtype(dtype).name)).exponential_(lambd)
        sg.manual_seed(seed)
        got = sg.empty(500, dtype=getattr(sg, np.dtype(dtype).name)).exponential_(lambd)
        if dtype == np.float32:
            np.testing.assert_array_equal(got.numpy(), want.numpy())
        else:
            # PyTorch's vectorised log1p is an ulp off numpy's for some values; the
            # division by lambd can double that
            np.testing.assert_array_max_ulp(got.numpy(), want.numpy(),
                                            maxulp=1 if lambd == 1.0 else 2)
        np.testing.assert_array_equal(sg.rand(3).numpy(), torch.rand(3).numpy())
