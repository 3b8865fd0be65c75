"""max_pool1d/2d/3d, avg_pool1d/2d/3d (and, among the cases, adaptive_avg_pool3d /
adaptive_max_pool3d) and their modules against PyTorch: values and input
gradients over kernel sizes, strides, paddings, dilations, ceil_mode, count_include_pad
and divisor_override in float32 and float64 (ties included: the gradient goes to each
window's first maximum, as PyTorch's), return_indices, eager and compiled, second
derivatives, grad_fn names, reprs and PyTorch's errors for bad input."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg

from .helpers import (DTYPES, close, pooling_compiled_matches, pooling_eager_matches,
                      pooling_indices_match, pooling_second_derivatives_match, same_error)

rng = np.random.default_rng(1)

MAX2D = [
    ((2, 3, 8, 7), dict(kernel_size=2)),
    ((2, 3, 9, 9), dict(kernel_size=3, stride=2, padding=1)),
    ((2, 3, 8, 7), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ((1, 2, 10, 9), dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 1), dilation=(2, 3))),
    ((2, 2, 7, 7), dict(kernel_size=2, stride=1)),                              # overlapping
    ((2, 2, 5, 6), dict(kernel_size=(2, 3), stride=(3, 2), ceil_mode=True)),
    ((3, 9, 7), dict(kernel_size=2)),                                          # unbatched
    ((2, 1, 4, 4), dict(kernel_size=4)),
]
AVG2D = [
    ((2, 3, 8, 7), dict(kernel_size=2)),
    ((2, 3, 9, 9), dict(kernel_size=3, stride=2, padding=1)),
    ((2, 3, 8, 7), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ((2, 3, 8, 7), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True,
                        count_include_pad=False)),
    ((2, 3, 8, 7), dict(kernel_size=(3, 2), stride=(2, 3), padding=(1, 1), divisor_override=5)),
    ((2, 2, 7, 7), dict(kernel_size=3, stride=1, padding=1, count_include_pad=False)),
    ((3, 9, 7), dict(kernel_size=2, ceil_mode=True)),                          # unbatched
    ((2, 2, 5, 6), dict(kernel_size=(2, 3), stride=(3, 2), ceil_mode=True)),
]
MAX1D = [((2, 3, 11), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
         ((3, 10), dict(kernel_size=2)), ((2, 2, 9), dict(kernel_size=3, dilation=2))]
AVG1D = [((2, 3, 11), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True,
                           count_include_pad=False)),
         ((3, 10), dict(kernel_size=2)), ((2, 2, 9), dict(kernel_size=(4,), stride=(3,)))]
CASES = ([("max_pool2d", *c) for c in MAX2D] + [("avg_pool2d", *c) for c in AVG2D]
         + [("max_pool1d", *c) for c in MAX1D] + [("avg_pool1d", *c) for c in AVG1D])
# 3-D pooling (and 3-D adaptive pooling): appended, so the indices above stay
CASES3D = [
    ("max_pool3d", (2, 2, 5, 6, 7), dict(kernel_size=2)),
    ("max_pool3d", (2, 2, 6, 7, 7), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ("max_pool3d", (1, 2, 7, 8, 9), dict(kernel_size=(2, 3, 2), stride=(1, 2, 2),
                                         padding=(1, 1, 0), dilation=(2, 1, 3))),
    ("max_pool3d", (2, 5, 6, 5), dict(kernel_size=(2, 2, 3), stride=1)),            # unbatched
    ("avg_pool3d", (2, 2, 5, 6, 7), dict(kernel_size=2)),
    ("avg_pool3d", (2, 2, 6, 7, 7), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ("avg_pool3d", (2, 2, 6, 7, 7), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True,
                                         count_include_pad=False)),
    ("avg_pool3d", (1, 2, 7, 8, 9), dict(kernel_size=(2, 3, 2), stride=(1, 2, 3),
                                         padding=(1, 1, 0), divisor_override=5)),
    ("avg_pool3d", (2, 5, 6, 5), dict(kernel_size=(3, 2, 2), stride=(2, 1, 2))),     # unbatched
    ("adaptive_avg_pool3d", (2, 2, 5, 6, 7), dict(output_size=(2, 4, 3))),
    ("adaptive_avg_pool3d", (2, 2, 6, 6, 8), dict(output_size=(3, 2, 4))),          # tiling
    ("adaptive_avg_pool3d", (2, 5, 6, 7), dict(output_size=(5, None, 3))),
    ("adaptive_avg_pool3d", (2, 2, 5, 6, 7), dict(output_size=1)),
    ("adaptive_max_pool3d", (2, 2, 5, 6, 7), dict(output_size=(2, 4, 3))),
    ("adaptive_max_pool3d", (2, 2, 6, 6, 8), dict(output_size=(3, 2, 4))),          # tiling
    ("adaptive_max_pool3d", (2, 5, 6, 7), dict(output_size=(None, 4, 7))),
]
CASES += CASES3D



def _input(shape, dtype, ties):
    x = rng.normal(size=shape)
    return (np.round(x * 2) if ties else x).astype(dtype)     # rounded: many equal maxima


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name, shape, kw", CASES)
def test_eager_values_and_gradients_equal_torch(name, shape, kw, dtype, ties):
    x = _input(shape, dtype, ties)
    out_shape = tuple(getattr(torch.nn.functional, name)(torch.tensor(x), **kw).shape)
    pooling_eager_matches(name, x, kw, rng.normal(size=out_shape).astype(dtype))


@pytest.mark.parametrize("name, shape, kw", [c for c in CASES if "max" in c[0]])
def test_return_indices_equal_torch(name, shape, kw):
    pooling_indices_match(name, _input(shape, np.float64, True), kw)


@pytest.mark.parametrize("backend", ["llvm", "numpy"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name, shape, kw", [CASES[i] for i in (1, 2, 3, 9, 10, 11, 12, 16)]
                         + [CASES3D[i] for i in (1, 2, 6, 7, 9, 13)])
def test_compiled_gradients_equal_torch(name, shape, kw, dtype, backend):
    x = _input(shape, dtype, True)
    out_shape = tuple(getattr(torch.nn.functional, name)(torch.tensor(x), **kw).shape)
    c = rng.uniform(0.5, 1.5, size=out_shape).astype(dtype)     # (no cancellation)
    pooling_compiled_matches(name, x, kw, c, backend)


@pytest.mark.parametrize("name, shape, kw", [CASES[i] for i in (2, 3, 10, 11)]
                         + [CASES3D[i] for i in (2, 6, 9, 13)])
def test_second_derivatives_equal_torch(name, shape, kw):
    x = _input(shape, np.float64, False)
    c = rng.normal(size=tuple(getattr(torch.nn.functional, name)(torch.tensor(x), **kw).shape))
    pooling_second_derivatives_match(name, x, kw, c, rng.normal(size=shape))


def test_integer_pooling_equals_torch():
    x = rng.integers(-20, 20, size=(2, 3, 7, 7))
    for name, kw in (("max_pool2d", dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
                     ("avg_pool2d", dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
                     ("avg_pool2d", dict(kernel_size=2, count_include_pad=False))):
        got = getattr(sg.nn.functional, name)(sg.tensor(x), **kw)
        want = getattr(torch.nn.functional, name)(torch.tensor(x), **kw)
        assert got.dtype == sg.int64
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_nan_propagates_through_max_pooling():
    x = rng.normal(size=(1, 1, 4, 4))
    x[0, 0, 1, 2] = np.nan
    got = sg.nn.functional.max_pool2d(sg.tensor(x), 2)
    want = torch.nn.functional.max_pool2d(torch.tensor(x), 2)
    np.testing.assert_array_equal(np.isnan(got.numpy()), np.isnan(want.numpy()))
    np.testing.assert_array_equal(got.numpy()[~np.isnan(got.numpy())],
                                  want.numpy()[~np.isnan(want.numpy())])


MODULES = [
    lambda m: m.nn.MaxPool2d(2),
    lambda m: m.nn.MaxPool2d((2, 3), stride=1, padding=1, ceil_mode=True),
    lambda m: m.nn.MaxPool2d(3, 2, 1, 2, return_indices=True),
    lambda m: m.nn.MaxPool1d(3, 2, 1, 2, True, True),
    lambda m: m.nn.MaxPool1d(4),
    lambda m: m.nn.AvgPool2d(3),
    lambda m: m.nn.AvgPool2d((2, 3), (1, 2), ceil_mode=True, count_include_pad=False),
    lambda m: m.nn.AvgPool2d(3, padding=1, divisor_override=2),
    lambda m: m.nn.AvgPool1d(3, 2, 1),
    lambda m: m.nn.AvgPool1d(2),
]


@pytest.mark.parametrize("build", MODULES)
def test_modules_print_and_pool_as_pytorchs(build):
    s, t = build(sg), build(torch)
    assert repr(s) == repr(t)
    assert list(s.state_dict()) == list(t.state_dict()) == []
    shape = (2, 3, 9, 8) if "2d" in type(t).__name__ else (2, 3, 11)
    x = _input(shape, np.float32, True)
    got, want = s(sg.tensor(x)), t(torch.tensor(x))
    if isinstance(want, tuple):
        np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())
        got, want = got[0], want[0]
    close(got, want, np.float32)


def _x(m, *shape):
    return m.ones(*shape)


ERRORS = [
    lambda m: m.nn.functional.max_pool2d(_x(m, 8, 8), 2),
    lambda m: m.nn.functional.max_pool2d(_x(m, 2, 3, 0, 8), 2),
    lambda m: m.nn.functional.max_pool2d(_x(m, 2, 0, 8, 8), 2),
    lambda m: m.nn.functional.max_pool2d(_x(m, 2, 3, 8, 8), 0),
    lambda m: m.nn.functional.max_pool2d(_x(m, 2, 3, 8, 8), -1),
    lambda m: m.nn.functional.max_pool2d(_x(m, 2, 3, 8, 8), (2, 2, 2)),
    lambda m: m.nn.functional.max_pool2d(_x(m, 2, 3, 8, 8), []),
    lambda m: m.nn.functional.max_pool2d(_x(m, 2, 3, 8, 8), 2, stride=(1, 1, 1)),
    lambda m: m.nn.functional.max_pool2d(_x(m, 2, 3, 8, 8), 2, padding=(1, 1, 1)),
    lambda m: m.nn.functional.max_pool2d(_x(m, 2, 3, 8, 8), 2, dilation=(1, 1, 1)),
    lambda m: m.nn.functional.max_pool2d(_x(m, 2, 3, 8, 8), 2, padding=-1),
    lambda m: m.nn.functional.max_pool2d(_x(m, 2, 3, 8, 8), 2, stride=-1),
    lambda m: m.nn.functional.max_pool2d(_x(m, 2, 3, 8, 8), 2, dilation=0),
    lambda m: m.nn.functional.max_pool2d(_x(m, 2, 3, 8, 8), 3, padding=2),
    lambda m: m.nn.functional.max_pool2d(_x(m, 2, 3, 8, 8), 3, padding=2, dilation=2),
    lambda m: m.nn.functional.max_pool2d(_x(m, 2, 3, 8, 8), 9),
    lambda m: m.nn.functional.max_pool2d(_x(m, 2, 3, 8, 8), 3, dilation=4),
    lambda m: m.nn.functional.max_pool2d(_x(m, 2, 3, 1, 1), 2),
    lambda m: m.nn.functional.avg_pool2d(_x(m, 8, 8), 2),
    lambda m: m.nn.functional.avg_pool2d(_x(m, 2, 3, 0, 8), 2),
    lambda m: m.nn.functional.avg_pool2d(_x(m, 2, 3, 8, 8), 0),
    lambda m: m.nn.functional.avg_pool2d(_x(m, 2, 3, 8, 8), (2, 2, 2)),
    lambda m: m.nn.functional.avg_pool2d(_x(m, 2, 3, 8, 8), 2, stride=(1, 1, 1)),
    lambda m: m.nn.functional.avg_pool2d(_x(m, 2, 3, 8, 8), 2, padding=-1),
    lambda m: m.nn.functional.avg_pool2d(_x(m, 2, 3, 8, 8), 3, padding=2),
    lambda m: m.nn.functional.avg_pool2d(_x(m, 2, 3, 8, 8), 9),
    lambda m: m.nn.functional.avg_pool2d(_x(m, 2, 3, 8, 8), 2, divisor_override=0),
    lambda m: m.nn.functional.max_pool1d(_x(m, 2, 3, 8, 4), 2),
    lambda m: m.nn.functional.max_pool1d(_x(m, 8), 2),
    lambda m: m.nn.functional.max_pool1d(_x(m, 2, 3, 0), 2),
    lambda m: m.nn.functional.max_pool1d(_x(m, 2, 3, 8), 0),
    lambda m: m.nn.functional.max_pool1d(_x(m, 2, 3, 8), (2, 2)),
    lambda m: m.nn.functional.max_pool1d(_x(m, 2, 3, 8), 2, stride=(1, 1)),
    lambda m: m.nn.functional.max_pool1d(_x(m, 2, 3, 8), 2, stride=0),
    lambda m: m.nn.functional.max_pool1d(_x(m, 2, 3, 8), 2, padding=(1, 1)),
    lambda m: m.nn.functional.max_pool1d(_x(m, 2, 3, 8), 2, padding=-1),
    lambda m: m.nn.functional.max_pool1d(_x(m, 2, 3, 8), 2, dilation=(1, 1)),
    lambda m: m.nn.functional.max_pool1d(_x(m, 2, 3, 8), 2, dilation=0),
    lambda m: m.nn.functional.max_pool1d(_x(m, 3, 8), 3, padding=2),
    lambda m: m.nn.functional.max_pool1d(_x(m, 3, 8), 9),
    lambda m: m.nn.functional.avg_pool1d(_x(m, 2, 3, 8, 4), 2),
    lambda m: m.nn.functional.avg_pool1d(_x(m, 8), 2),
    lambda m: m.nn.functional.avg_pool1d(_x(m, 2, 3, 8), (2, 2)),
    lambda m: m.nn.functional.avg_pool1d(_x(m, 2, 3, 8), 0),
    lambda m: m.nn.functional.avg_pool1d(_x(m, 2, 3, 0), 2),
    lambda m: m.nn.functional.avg_pool1d(_x(m, 3, 8), 9),
    lambda m: m.nn.functional.avg_pool1d(_x(m, 3, 8), 3, padding=2),
    lambda m: m.nn.MaxPool2d(2)(_x(m, 8, 8)),
    lambda m: m.nn.AvgPool2d(2)(_x(m, 2, 3, 1, 1)),
]


@pytest.mark.parametrize("build", ERRORS)
def test_bad_input_raises_pytorchs_error(build):
    same_error(build)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("pool, shape", [
    (lambda m, t: m.nn.functional.max_pool1d(t, 2, return_indices=True), (2, 4, 4)),
    (lambda m, t: m.nn.functional.max_pool2d(t, 2, return_indices=True), (1, 2, 4, 4)),
    (lambda m, t: m.nn.functional.max_pool3d(t, (1, 2, 2), return_indices=True), (1, 1, 2, 4, 4)),
    (lambda m, t: m.nn.functional.adaptive_max_pool1d(t, 2, return_indices=True), (2, 4, 4)),
    (lambda m, t: m.nn.functional.adaptive_max_pool2d(t, 2, return_indices=True), (1, 2, 4, 4)),
    (lambda m, t: m.nn.functional.adaptive_max_pool3d(t, (1, 2, 2), return_indices=True),
     (1, 1, 2, 4, 4))])
def test_returned_indices_changed_in_place_before_backward_raise_as_torch(pool, shape, dtype):
    """The backward reads the indices max pooling returns: PyTorch saves them, so an
    in-place update before backward raises its version-counter error (same text and
    the shape of the tensor it saved); untouched indices backpropagate as torch."""
    x = rng.normal(size=shape).astype(dtype)
    outcomes = []
    for m in (torch, sg):
        t = m.tensor(x, requires_grad=True)
        v, i = pool(m, t)
        i.add_(1)
        outcomes.append(same_error_outcome(lambda: v.sum().backward()))
        t2 = m.tensor(x, requires_grad=True)
        pool(m, t2)[0].sum().backward()
        outcomes.append(np.asarray(t2.grad))
    assert outcomes[0] == outcomes[2] and isinstance(outcomes[0], tuple)
    np.testing.assert_array_equal(outcomes[1], outcomes[3])


def same_error_outcome(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 -- compared with torch's
        return type(e).__name__, str(e)
    return None
