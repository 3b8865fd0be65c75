"""max_pool1d/2d and avg_pool1d/2d and their modules against PyTorch: values and input
gradients over kernel sizes, strides, paddings, dilations, ceil_mode, count_include_pad
and divisor_override in float32 and float64 (ties included: the gradient goes to each
window's first maximum, as PyTorch's), return_indices, eager and compiled, second
derivatives, grad_fn names, reprs and PyTorch's errors for bad input."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg

from .helpers import DTYPES, close, pair, same_error

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


def _input(shape, dtype, ties):
    x = rng.normal(size=shape)
    return (np.round(x * 2) if ties else x).astype(dtype)     # rounded: many equal maxima


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name, shape, kw", CASES)
def test_eager_values_and_gradients_equal_torch(name, shape, kw, dtype, ties):
    sx, tx = pair(_input(shape, dtype, ties))
    s_out = getattr(sg.nn.functional, name)(sx, **kw)
    t_out = getattr(torch.nn.functional, name)(tx, **kw)
    close(s_out, t_out, dtype, "output")
    g = rng.normal(size=tuple(t_out.shape)).astype(dtype)
    s_out.backward(sg.tensor(g))
    t_out.backward(torch.tensor(g))
    close(sx.grad, tx.grad, dtype, "grad input")
    assert type(s_out.grad_fn).__name__ == type(t_out.grad_fn).__name__


@pytest.mark.parametrize("name, shape, kw", [c for c in CASES if c[0].startswith("max")])
def test_return_indices_equal_torch(name, shape, kw):
    x = _input(shape, np.float64, True)
    s_out, s_idx = getattr(sg.nn.functional, name)(sg.tensor(x), return_indices=True, **kw)
    t_out, t_idx = getattr(torch.nn.functional, name)(torch.tensor(x), return_indices=True, **kw)
    close(s_out, t_out)
    assert s_idx.dtype == sg.int64
    np.testing.assert_array_equal(s_idx.numpy(), t_idx.numpy())


@pytest.mark.parametrize("backend", ["llvm", "numpy"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name, shape, kw", [CASES[i] for i in (1, 2, 3, 9, 10, 11, 12, 16)])
def test_compiled_gradients_equal_torch(name, shape, kw, dtype, backend):
    x = _input(shape, dtype, True)
    tx = torch.tensor(x, requires_grad=True)
    t_out = getattr(torch.nn.functional, name)(tx, **kw)
    c = rng.normal(size=tuple(t_out.shape)).astype(dtype)
    t_loss = (t_out * t_out * torch.tensor(c)).sum()
    t_loss.backward()

    def loss(v):
        out = getattr(sg.nn.functional, name)(v, **kw)
        return (out * out * sg.tensor(c)).sum()
    value, grad = sg.value_and_grad(loss, backend=backend)(x)
    close(np.asarray(value), t_loss, dtype, "loss", factor=10)
    close(np.asarray(grad), tx.grad, dtype, "grad input", factor=10)


@pytest.mark.parametrize("name, shape, kw", [CASES[i] for i in (2, 3, 10, 11)])
def test_second_derivatives_equal_torch(name, shape, kw):
    x = _input(shape, np.float64, False)
    res = {}
    c = rng.normal(size=tuple(getattr(torch.nn.functional, name)(torch.tensor(x), **kw).shape))
    v = rng.normal(size=shape)
    for lib in (torch, sg):
        xv = lib.tensor(x, requires_grad=True)
        out = getattr(lib.nn.functional, name)(xv, **kw)
        gx, = lib.autograd.grad((out * out * lib.tensor(c)).sum(), xv, create_graph=True)
        res[lib], = lib.autograd.grad((gx * lib.tensor(v)).sum(), xv)
    close(res[sg], res[torch], np.float64, "second derivative")


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
