"""conv_transpose1d/2d/3d and ConvTranspose1d/2d/3d against PyTorch: values and
gradients (input, weight, bias) over strides, paddings, output_padding, dilations,
groups, kernels that tile the output (stride = kernel) and unbatched inputs in float32
and float64; eager and compiled (``value_and_grad`` on the
LLVM and numpy backends, a module through ``functional_call``); second derivatives;
grad_fn names; modules (reprs and weight shapes: tests/nn/test_conv.py; default
initialisation's bounds, ``output_size``); PyTorch's errors for bad input."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg

from .helpers import (DTYPES, close, compiled_matches, eager_matches, kaiming_default_holds,
                      module_compiled_matches, module_eager_matches, same_error,
                      second_derivatives_match, twin)

rng = np.random.default_rng(5)

# (name, input shape, weight shape, keyword arguments)
CASES = [
    ("conv_transpose2d", (2, 4, 5, 5), (4, 3, 3, 3), {}),
    ("conv_transpose2d", (2, 4, 5, 6), (4, 3, 2, 2), dict(stride=2)),                  # tiles
    ("conv_transpose2d", (2, 3, 4, 5), (3, 2, 3, 3), dict(stride=2, padding=1, output_padding=1)),
    ("conv_transpose2d", (2, 4, 5, 6), (4, 2, 3, 2),
     dict(stride=(2, 3), padding=(1, 2), output_padding=(1, 2), groups=2, dilation=(2, 1))),
    ("conv_transpose2d", (1, 6, 4, 4), (6, 1, 3, 3), dict(groups=6, padding=1)),       # depthwise
    ("conv_transpose2d", (2, 2, 3, 4), (2, 3, 2, 3), dict(stride=1, dilation=3, output_padding=2)),
    ("conv_transpose2d", (2, 3, 5, 4), (3, 2, 4, 4), dict(stride=2, padding=3)),
    ("conv_transpose2d", (3, 4, 5), (3, 2, 3, 3), dict(padding=2, dilation=2, output_padding=1)),
    ("conv_transpose1d", (2, 4, 7), (4, 3, 3), dict(stride=3, padding=1, output_padding=2)),
    ("conv_transpose1d", (2, 4, 6), (4, 2, 4), dict(groups=2, dilation=2)),
    ("conv_transpose1d", (3, 5), (3, 2, 2), dict(stride=2)),                           # unbatched
    ("conv_transpose3d", (2, 4, 3, 4, 5), (4, 3, 3, 2, 3),
     dict(stride=(2, 1, 2), padding=(1, 0, 1), output_padding=(1, 0, 1))),
    ("conv_transpose3d", (4, 2, 3, 3), (4, 1, 2, 2, 2), dict(stride=2, groups=2, dilation=1)),
]


def _arrays(name, xs, ws, kw, dtype, bias=True):
    x = rng.normal(size=xs).astype(dtype)
    w = rng.normal(size=ws).astype(dtype)
    b = rng.normal(size=ws[1] * kw.get("groups", 1)).astype(dtype) if bias else None
    return x, w, b


def _run(lib, name, x, w, b, kw):
    return getattr(lib.nn.functional, name)(x, w, b, **kw)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name, xs, ws, kw", CASES)
def test_eager_values_and_gradients_equal_torch(name, xs, ws, kw, dtype, bias):
    eager_matches(lambda lib, *t: _run(lib, name, *t, kw),
                  _arrays(name, xs, ws, kw, dtype, bias), dtype, rng)


@pytest.mark.parametrize("backend", ["llvm", "numpy"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name, xs, ws, kw", [CASES[i] for i in (1, 2, 3, 5, 8, 10, 11)])
def test_compiled_gradients_equal_torch(name, xs, ws, kw, dtype, backend):
    compiled_matches(lambda lib, *t: _run(lib, name, *t, kw), _arrays(name, xs, ws, kw, dtype),
                     dtype, rng, backend)


@pytest.mark.parametrize("name, xs, ws, kw", [CASES[i] for i in (2, 3, 8, 11)])
def test_second_derivatives_equal_torch(name, xs, ws, kw):
    """d/d(x, w) of <grad_x(<convT(x, w)^2, c>), v>: the gradient is differentiable."""
    x, w, _ = _arrays(name, xs, ws, kw, np.float64)
    second_derivatives_match(lambda lib, xv, wv: _run(lib, name, xv, wv, None, kw), x, w, rng)


def test_zero_batch_and_integer_inputs_equal_torch():
    got = sg.nn.functional.conv_transpose2d(sg.ones(0, 4, 5, 5), sg.ones(4, 3, 3, 3), stride=2)
    want = torch.nn.functional.conv_transpose2d(torch.ones(0, 4, 5, 5), torch.ones(4, 3, 3, 3),
                                                stride=2)
    assert tuple(got.shape) == tuple(want.shape)
    x, w = rng.integers(-4, 4, size=(2, 3, 4, 4)), rng.integers(-3, 3, size=(3, 2, 3, 3))
    got = sg.nn.functional.conv_transpose2d(sg.tensor(x), sg.tensor(w), stride=2, padding=1)
    want = torch.nn.functional.conv_transpose2d(torch.tensor(x), torch.tensor(w), stride=2,
                                                padding=1)
    assert got.dtype == sg.int64
    np.testing.assert_array_equal(got.numpy(), want.numpy())


# ---- modules ---------------------------------------------------------------------------------
def test_default_initialisation_is_pytorchs():
    """kaiming_uniform_(a=sqrt(5)) with PyTorch's fan_in of a transposed weight
    (out_channels / groups x prod(kernel)); the bias uniform in the same bound."""
    sg.manual_seed(0)
    m = sg.nn.ConvTranspose2d(64, 32, (3, 5), groups=4)
    t = torch.nn.ConvTranspose2d(64, 32, (3, 5), groups=4)
    fan_in = torch.nn.init._calculate_fan_in_and_fan_out(t.weight)[0]
    assert fan_in == 32 // 4 * 15
    kaiming_default_holds(m, fan_in, 0.03)                             # 7680 draws
    one = sg.nn.ConvTranspose1d(3, 2, 4, dtype=sg.float64)
    assert one.weight.dtype == sg.float64 and one.bias.dtype == sg.float64


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("xs, size", [((2, 4, 5, 5), (12, 12)), ((2, 4, 5, 5), (11, 12)),
                                      ((4, 5, 5), (6, 12, 11)), ((2, 4, 5, 5), [2, 6, 11, 11])])
def test_module_forward_with_output_size_equals_torch(xs, size, dtype):
    tm, sm = twin(lambda m: m.nn.ConvTranspose2d(4, 6, 3, stride=2), dtype)
    module_eager_matches(tm, sm, rng.normal(size=xs).astype(dtype), dtype, output_size=size)


@pytest.mark.parametrize("dtype", DTYPES)
def test_compiled_decoder_through_functional_call_equals_torch(dtype):
    def build(m):
        return m.nn.Sequential(m.nn.ConvTranspose2d(4, 3, 2, stride=2), m.nn.ReLU(),
                               m.nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1,
                                                    output_padding=1, groups=1),
                               m.nn.Tanh(), m.nn.Flatten(), m.nn.Linear(2 * 12 * 12, 3))
    module_compiled_matches(build, rng.normal(size=(2, 4, 3, 3)).astype(dtype), dtype)


# ---- errors ----------------------------------------------------------------------------------
def _x(m, *shape, dtype=None):
    return m.ones(*shape, dtype=dtype)


def _d(m, *shape):
    return m.ones(*shape, dtype=m.float64)


def _ct2(m, *a, **k):
    return m.nn.functional.conv_transpose2d(*a, **k)


ERRORS = [
    lambda m: _ct2(m, _x(m, 2, 4, 5, 5), _x(m, 4, 3, 3, 3), stride=2, output_padding=2),
    lambda m: _ct2(m, _x(m, 2, 4, 5, 5), _x(m, 4, 3, 3, 3), output_padding=1),
    lambda m: _ct2(m, _x(m, 2, 4, 5, 5), _x(m, 4, 3, 3, 3), stride=2, output_padding=(1, 2)),
    lambda m: _ct2(m, _x(m, 2, 4, 5, 5), _x(m, 5, 3, 3, 3)),
    lambda m: _ct2(m, _x(m, 2, 4, 5, 5), _x(m, 4, 3, 3, 3), groups=3),
    lambda m: _ct2(m, _x(m, 2, 4, 5, 5), _x(m, 4, 3, 3, 3), groups=5),
    lambda m: _ct2(m, _x(m, 2, 4, 5, 5), _x(m, 4, 3, 3, 3), groups=0),
    lambda m: _ct2(m, _x(m, 2, 4, 5, 5), _x(m, 4, 3, 3, 3), _x(m, 4)),
    lambda m: _ct2(m, _x(m, 2, 4, 5, 5), _x(m, 4, 3, 3, 3), _x(m, 3), groups=2),
    lambda m: _ct2(m, _x(m, 2, 4, 5, 5), _x(m, 4, 3, 3, 3), _x(m, 3, 1)),
    lambda m: _ct2(m, _x(m, 2, 4, 5, 5), _x(m, 4, 3, 3, 3), padding=-1),
    lambda m: _ct2(m, _x(m, 2, 4, 5, 5), _x(m, 4, 3, 3, 3), stride=0),
    lambda m: _ct2(m, _x(m, 2, 4, 5, 5), _x(m, 4, 3, 3, 3), output_padding=-1),
    lambda m: _ct2(m, _x(m, 2, 4, 5, 5), _x(m, 4, 3, 3, 3), dilation=-1),
    lambda m: _ct2(m, _x(m, 2, 4, 5, 5), _x(m, 4, 3, 3, 3), stride=(1, 2, 3)),
    lambda m: _ct2(m, _x(m, 2, 4, 5, 5), _x(m, 4, 3, 3, 3), padding="same"),
    lambda m: _ct2(m, _x(m, 5, 5), _x(m, 4, 3, 3, 3)),
    lambda m: _ct2(m, _x(m, 2, 4, 5, 5), _x(m, 4, 3, 3)),
    lambda m: _ct2(m, _x(m, 2, 4, 0, 5), _x(m, 4, 3, 3, 3)),
    lambda m: _ct2(m, _d(m, 2, 4, 5, 5), _x(m, 4, 3, 3, 3)),
    lambda m: _ct2(m, _x(m, 2, 4, 5, 5), _d(m, 4, 3, 3, 3)),
    lambda m: _ct2(m, _x(m, 2, 4, 5, 5), _x(m, 4, 3, 3, 3), _d(m, 3)),
    # the checks of PyTorch's native kernel (float32 goes to oneDNN, whose texts differ)
    lambda m: _ct2(m, _d(m, 2, 4, 5, 5), _d(m, 4, 3, 3, 3), padding=6),
    lambda m: _ct2(m, _d(m, 2, 4, 5, 5), _d(m, 4, 3, 3, 3), padding=(4, 1)),
    lambda m: _ct2(m, _d(m, 2, 4, 5, 5), _d(m, 4, 3, 3, 3), dilation=0),
    lambda m: _ct2(m, _d(m, 2, 4, 5, 5), _d(m, 4, 3, 3, 3), dilation=(1, 0)),
    lambda m: m.nn.functional.conv_transpose1d(_d(m, 2, 4, 5), _d(m, 4, 3, 3), padding=6),
    lambda m: m.nn.functional.conv_transpose1d(_d(m, 2, 4, 5), _d(m, 4, 3, 3), dilation=0),
    lambda m: m.nn.functional.conv_transpose1d(_d(m, 2, 4, 5), _d(m, 4, 3, 3), stride=2,
                                               output_padding=2),
    lambda m: m.nn.functional.conv_transpose1d(_x(m, 2, 4, 5, 4), _x(m, 4, 3, 3)),
    lambda m: m.nn.functional.conv_transpose1d(_x(m, 2, 4, 5), _x(m, 4, 3, 3), stride=(1, 2)),
    lambda m: m.nn.functional.conv_transpose3d(_d(m, 2, 4, 3, 5, 5), _d(m, 4, 3, 3, 3, 3),
                                               padding=6),
    lambda m: m.nn.functional.conv_transpose3d(_d(m, 2, 4, 3, 5, 5), _d(m, 4, 3, 3, 3, 3),
                                               dilation=0),
    lambda m: m.nn.functional.conv_transpose3d(_d(m, 2, 4, 3, 5, 5), _d(m, 4, 3, 3, 3, 3),
                                               stride=2, output_padding=2),
    lambda m: m.nn.ConvTranspose3d(4, 6, 3, stride=2)(_x(m, 4, 3, 5, 5), output_size=(9, 9)),
    lambda m: m.nn.ConvTranspose2d(4, 6, 3, padding_mode="reflect"),
    lambda m: m.nn.ConvTranspose1d(4, 6, 3, padding_mode="zero"),
    lambda m: m.nn.ConvTranspose2d(3, 4, 3, groups=2),
    lambda m: m.nn.ConvTranspose2d(4, 6, 3, stride=2)(_x(m, 1, 4, 5, 5), output_size=(13, 12)),
    lambda m: m.nn.ConvTranspose2d(4, 6, 3, stride=2)(_x(m, 1, 4, 5, 5), output_size=(1, 2, 3)),
    lambda m: m.nn.ConvTranspose2d(4, 6, 3, stride=2)(_x(m, 4, 5, 5), output_size=(9, 9)),
    lambda m: m.nn.ConvTranspose2d(4, 6, 3)(_x(m, 1, 3, 5, 5)),
]


@pytest.mark.parametrize("build", ERRORS)
def test_bad_input_raises_pytorchs_error(build):
    same_error(build)


def test_float64_input_takes_a_float32_bias_as_torch():
    x, w, b = (rng.normal(size=s) for s in ((2, 4, 5, 5), (4, 3, 3, 3), (3,)))
    got = sg.nn.functional.conv_transpose2d(sg.tensor(x), sg.tensor(w),
                                            sg.tensor(b.astype(np.float32)))
    want = torch.nn.functional.conv_transpose2d(torch.tensor(x), torch.tensor(w),
                                                torch.tensor(b.astype(np.float32)))
    close(got, want, np.float64)
