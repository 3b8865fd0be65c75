"""MaxPool3d, AvgPool3d, AdaptiveAvgPool3d, AdaptiveMaxPool3d against PyTorch: reprs and
forward, integer inputs and PyTorch's errors for bad input to max_pool3d / avg_pool3d /
adaptive_avg_pool3d / adaptive_max_pool3d. (Values, gradients, indices, names, compiled
and second derivatives over the 3-D cases: tests/nn/test_pooling.py.)"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg

from .helpers import close, same_error

rng = np.random.default_rng(3)

def _input(shape, dtype, ties):
    x = rng.normal(size=shape)
    return (np.round(x * 2) if ties else x).astype(dtype)     # rounded: many equal maxima


def test_integer_pooling_equals_torch():
    x = rng.integers(-9, 9, (2, 2, 5, 6, 7))
    for fn in (lambda m, t: m.nn.functional.max_pool3d(t, 2, padding=1),
               lambda m, t: m.nn.functional.avg_pool3d(t, (2, 3, 2), ceil_mode=True),
               lambda m, t: m.nn.functional.avg_pool3d(t, 2, divisor_override=3)):
        a, b = fn(sg, sg.tensor(x)), fn(torch, torch.tensor(x))
        assert str(a.dtype) == str(b.dtype)
        np.testing.assert_array_equal(a.numpy(), b.numpy())


MODULES = [
    lambda m: m.nn.MaxPool3d(2),
    lambda m: m.nn.MaxPool3d((2, 3, 1), stride=1, padding=(1, 1, 0), dilation=2, ceil_mode=True),
    lambda m: m.nn.MaxPool3d(2, return_indices=True),
    lambda m: m.nn.AvgPool3d(2),
    lambda m: m.nn.AvgPool3d((2, 3, 1), stride=(1, 2, 1), padding=(1, 1, 0), ceil_mode=True,
                             count_include_pad=False, divisor_override=3),
    lambda m: m.nn.AdaptiveAvgPool3d(3), lambda m: m.nn.AdaptiveAvgPool3d((None, 2, 3)),
    lambda m: m.nn.AdaptiveMaxPool3d(2, return_indices=True),
    lambda m: m.nn.AdaptiveMaxPool3d((4, None, 3)),
]


@pytest.mark.parametrize("build", MODULES)
def test_modules_print_and_pool_as_pytorchs(build):
    s, t = build(sg), build(torch)
    assert repr(s) == repr(t)
    x = _input((2, 3, 6, 7, 8), np.float64, True)
    a, b = s(sg.tensor(x)), t(torch.tensor(x))
    for p, q in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)):
        np.testing.assert_array_equal(p.numpy(), q.numpy()) if q.dtype == torch.int64 \
            else close(p, q)


def _x(m, *shape, dtype=None):
    return m.ones(*shape, dtype=dtype or m.float32)


ERRORS = [
    lambda m: m.nn.functional.max_pool3d(_x(m, 5, 6, 7), 2),
    lambda m: m.nn.functional.max_pool3d(_x(m, 2, 5, 6, 7, 8, 9), 2),
    lambda m: m.nn.functional.max_pool3d(_x(m, 2, 3, 5, 6, 7), (2, 2)),
    lambda m: m.nn.functional.max_pool3d(_x(m, 2, 3, 5, 6, 7), 2, stride=(1, 1)),
    lambda m: m.nn.functional.max_pool3d(_x(m, 2, 3, 5, 6, 7), 2, padding=2),
    lambda m: m.nn.functional.max_pool3d(_x(m, 2, 3, 5, 6, 7), 2, padding=(1, 1)),
    lambda m: m.nn.functional.max_pool3d(_x(m, 2, 3, 5, 6, 7), 2, padding=-1),
    lambda m: m.nn.functional.max_pool3d(_x(m, 2, 3, 5, 6, 7), 0),
    lambda m: m.nn.functional.max_pool3d(_x(m, 2, 3, 5, 6, 7), 2, stride=0),
    lambda m: m.nn.functional.max_pool3d(_x(m, 2, 3, 5, 6, 7), 2, dilation=0),
    lambda m: m.nn.functional.max_pool3d(_x(m, 2, 3, 5, 6, 7), 2, dilation=(1, 2)),
    lambda m: m.nn.functional.max_pool3d(_x(m, 2, 3, 5, 6, 7), 9),
    lambda m: m.nn.functional.max_pool3d(_x(m, 2, 3, 0, 4, 5), 2),
    lambda m: m.nn.functional.max_pool3d(_x(m, 2, 3, 5, 6, 7), (3, 1, 3), padding=(1, 1, 1)),
    lambda m: m.nn.functional.avg_pool3d(_x(m, 5, 6, 7), 2),
    lambda m: m.nn.functional.avg_pool3d(_x(m, 2, 3, 5, 6, 7), (2, 2)),
    lambda m: m.nn.functional.avg_pool3d(_x(m, 2, 3, 5, 6, 7), 2, stride=(2, 2)),
    lambda m: m.nn.functional.avg_pool3d(_x(m, 2, 3, 5, 6, 7), 2, padding=(1, 1)),
    lambda m: m.nn.functional.avg_pool3d(_x(m, 2, 3, 5, 6, 7), 2, padding=2),
    lambda m: m.nn.functional.avg_pool3d(_x(m, 2, 3, 5, 6, 7), 0),
    lambda m: m.nn.functional.avg_pool3d(_x(m, 2, 3, 5, 6, 7), 9),
    lambda m: m.nn.functional.avg_pool3d(_x(m, 2, 3, 5, 6, 7), 2, divisor_override=0),
    lambda m: m.nn.functional.avg_pool3d(_x(m, 2, 3, 5, 6, 7), 2, padding=-1),
    lambda m: m.nn.functional.avg_pool3d(_x(m, 2, 3, 0, 4, 5), 2),
    lambda m: m.nn.functional.adaptive_avg_pool3d(_x(m, 2, 3, 5, 6, 7), (2, 2)),
    lambda m: m.nn.functional.adaptive_avg_pool3d(_x(m, 5, 6), 2),
    lambda m: m.nn.functional.adaptive_avg_pool3d(_x(m, 2, 0, 3, 4, 5), 2),
    lambda m: m.nn.functional.adaptive_avg_pool3d(_x(m, 2, 3, 0, 4, 5), 2),
    lambda m: m.nn.functional.adaptive_avg_pool3d(_x(m, 2, 3, 4, 5, 6), -1),
    lambda m: m.nn.functional.adaptive_avg_pool3d(_x(m, 1, 2, 3, 4, 5, dtype=m.long), 2),
    lambda m: m.nn.functional.adaptive_max_pool3d(_x(m, 2, 3, 5, 6, 7), (2, 2)),
    lambda m: m.nn.functional.adaptive_max_pool3d(_x(m, 5, 6), 2),
    lambda m: m.nn.functional.adaptive_max_pool3d(_x(m, 2, 3, 5, 6, 7), -1),
    lambda m: m.nn.functional.adaptive_max_pool3d(_x(m, 2, 3, 0, 4, 5), 2),
    lambda m: m.nn.functional.adaptive_max_pool3d(_x(m, 1, 2, 3, 4, 5, dtype=m.long), 2),
]


@pytest.mark.parametrize("build", ERRORS)
def test_bad_input_raises_pytorchs_error(build):
    same_error(build)


EMPTY_OUTPUT = [
    lambda m, x: m.nn.functional.adaptive_max_pool3d(x, (0, 2, 2)),
    lambda m, x: m.nn.functional.adaptive_max_pool3d(x[0], (2, 0, 2)),
    lambda m, x: m.nn.functional.adaptive_max_pool3d(x, (0, 2, 2), return_indices=True)[0],
    lambda m, x: m.nn.functional.adaptive_max_pool2d(x[0], (0, 2)),
    lambda m, x: m.nn.functional.adaptive_max_pool1d(x[0, 0], 0),
    lambda m, x: m.nn.functional.adaptive_avg_pool3d(x, (0, 2, 2)),
    lambda m, x: m.nn.functional.adaptive_avg_pool2d(x[0], (2, 0)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("pool", EMPTY_OUTPUT)
def test_adaptive_pooling_to_an_empty_size_backward_raises_pytorchs_error(pool, create_graph,
                                                                         dtype):
    """The forward gives an empty result; its backward raises PyTorch's RuntimeError (a
    numpy ValueError before)."""
    data = np.random.default_rng(0).normal(size=(2, 2, 4, 4, 4)).astype(dtype)
    found = []
    for m in (torch, sg):
        x = m.tensor(data, requires_grad=True)
        y = pool(m, x)
        try:
            if create_graph:
                m.autograd.grad(y.sum(), x, create_graph=True)
            else:
                y.sum().backward()
        except RuntimeError as e:
            found.append((tuple(y.shape), y.grad_fn.name(), str(e)))
    assert len(found) == 2 and found[0] == found[1], found
    idx = sg.nn.functional.adaptive_max_pool3d(sg.tensor(data), (0, 2, 2), return_indices=True)[1]
    assert tuple(idx.shape) == (2, 2, 0, 2, 2) and idx.dtype == sg.int64
