"""conv1d / conv2d / conv3d and Conv1d / Conv2d / Conv3d against PyTorch: values and gradients (input,
weight, bias) over strides, paddings (numbers, 'same', 'valid', asymmetric 'same'),
dilations, groups and odd sizes in float32 and float64; eager and compiled
(``value_and_grad`` / ``grad`` on the LLVM and numpy backends); second derivatives;
grad_fn names; modules (repr, state dict, initialisation, padding modes); PyTorch's
errors for bad input."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import symgrad as sg

from .helpers import (DTYPES, close, compiled_matches, eager_matches, kaiming_default_holds,
                      module_eager_matches, same_error, second_derivatives_match, twin)

rng = np.random.default_rng(0)

# (input shape, weight shape, keyword arguments)
CONV2D = [
    ((2, 3, 8, 7), (4, 3, 3, 3), {}),
    ((2, 3, 9, 8), (5, 3, 3, 2), dict(stride=2, padding=1)),
    ((1, 2, 11, 10), (3, 2, 2, 4), dict(stride=(3, 2), padding=(2, 1), dilation=(2, 3))),
    ((2, 4, 9, 7), (6, 2, 3, 3), dict(stride=(2, 1), padding=(1, 2), dilation=(2, 1), groups=2)),
    ((3, 6, 7, 7), (6, 1, 3, 3), dict(padding=1, groups=6)),               # depthwise
    ((2, 4, 9, 7), (4, 2, 2, 3), dict(padding="same", dilation=(1, 2), groups=2)),
    ((2, 3, 8, 8), (4, 3, 2, 2), dict(padding="same")),                    # asymmetric 'same'
    ((2, 3, 6, 5), (4, 3, 3, 3), dict(padding="valid", stride=(1, 2))),
    ((2, 3, 5, 5), (2, 3, 5, 5), {}),                                      # one position
    ((1, 1, 13, 1), (1, 1, 4, 1), dict(stride=3, padding=(2, 0))),
    ((3, 8, 8), (4, 3, 3, 3), dict(padding=1)),                            # unbatched
]
CONV1D = [
    ((2, 4, 11), (4, 4, 3), dict(stride=3, padding=2, dilation=2)),
    ((3, 2, 9), (6, 1, 4), dict(groups=2, padding="same")),
    ((4, 10), (5, 4, 3), dict(stride=2)),                                  # unbatched
    ((2, 3, 7), (2, 3, 7), dict(padding=(0,))),
]
CONV3D = [
    ((2, 4, 5, 6, 7), (6, 2, 3, 2, 3), dict(stride=(1, 2, 1), padding=(1, 0, 2), dilation=(1, 1, 2),
                                          groups=2)),
    ((3, 4, 5, 6), (2, 3, 3, 3, 3), dict(padding="same")),                  # unbatched
    ((1, 2, 4, 4, 4), (3, 2, 2, 2, 2), dict(stride=2)),
]
CASES = [("conv2d", *c) for c in CONV2D] + [("conv1d", *c) for c in CONV1D] + \
    [("conv3d", *c) for c in CONV3D]


def _arrays(xs, ws, dtype, bias=True):
    x = rng.normal(size=xs).astype(dtype)
    w = rng.normal(size=ws).astype(dtype)
    b = rng.normal(size=ws[0]).astype(dtype) if bias else None
    return x, w, b


def _run(lib, name, x, w, b, kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")           # 'same' with an even kernel warns
        return getattr(lib.nn.functional, name)(x, w, b, **kw)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name, xs, ws, kw", CASES)
@pytest.mark.parametrize("bias", [True, False])
def test_eager_values_and_gradients_equal_torch(name, xs, ws, kw, dtype, bias):
    eager_matches(lambda lib, *t: _run(lib, name, *t, kw), _arrays(xs, ws, dtype, bias), dtype,
                  rng)


@pytest.mark.parametrize("backend", ["llvm", "numpy"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name, xs, ws, kw", [CASES[i] for i in (0, 1, 2, 3, 6, 11, 12, 15, 16)])
def test_compiled_gradients_equal_torch(name, xs, ws, kw, dtype, backend):
    x, w, b = _arrays(xs, ws, dtype)
    (_, tw, _), loss = compiled_matches(lambda lib, *t: _run(lib, name, *t, kw), (x, w, b),
                                        dtype, rng, backend)
    only_w = sg.grad(lambda wv: loss(sg.tensor(x), wv, sg.tensor(b)), backend=backend)(w)
    close(np.asarray(only_w), tw.grad, dtype, "grad weight alone", factor=10)


@pytest.mark.parametrize("name, xs, ws, kw", [CASES[i] for i in (1, 3, 11, 15)])
def test_second_derivatives_equal_torch(name, xs, ws, kw):
    """d/d(x, w) of <grad_x(<conv(x, w)^2, c>), v>: the gradient is differentiable."""
    x, w, _ = _arrays(xs, ws, np.float64)
    second_derivatives_match(lambda lib, xv, wv: _run(lib, name, xv, wv, None, kw), x, w, rng)


def test_same_padding_warning_is_pytorchs():
    x, w = sg.ones(1, 1, 4, 4), sg.ones(1, 1, 2, 2)
    with pytest.warns(UserWarning, match=r"^Using padding='same' with even kernel lengths and "
                                         r"odd dilation may require a zero-padded copy"):
        sg.nn.functional.conv2d(x, w, padding="same")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sg.nn.functional.conv2d(x, sg.ones(1, 1, 3, 3), padding="same")


def test_integer_convolution_equals_torch():
    x = rng.integers(-5, 5, size=(2, 3, 6, 6))
    w = rng.integers(-3, 3, size=(4, 3, 3, 3))
    got = sg.nn.functional.conv2d(sg.tensor(x), sg.tensor(w), stride=2, padding=1)
    want = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), stride=2, padding=1)
    assert got.dtype == sg.int64
    np.testing.assert_array_equal(got.numpy(), want.numpy())


# ---- modules ---------------------------------------------------------------------------------
REPRS = [
    lambda m: m.nn.Conv2d(3, 16, 3, padding=1),
    lambda m: m.nn.Conv2d(3, 16, 3),
    lambda m: m.nn.Conv2d(3, 16, (3, 5), stride=(2, 1), padding=(1, 2), dilation=2, groups=1,
                          bias=False),
    lambda m: m.nn.Conv2d(4, 8, 3, padding="same", dilation=2, groups=4),
    lambda m: m.nn.Conv2d(3, 16, (3, 5), padding="valid"),
    lambda m: m.nn.Conv2d(3, 6, 3, padding=1, padding_mode="reflect"),
    lambda m: m.nn.Conv1d(4, 8, 5, stride=2, groups=2, padding_mode="circular"),
    lambda m: m.nn.Conv1d(4, 8, 3),
    lambda m: m.nn.Conv3d(3, 4, 3, padding=1, padding_mode="reflect"),
    lambda m: m.nn.Conv3d(4, 8, (1, 2, 3), stride=(2, 1, 1), dilation=2, groups=2, bias=False),
    lambda m: m.nn.ConvTranspose3d(3, 4, (1, 2, 3), stride=2, output_padding=1),
    lambda m: m.nn.ConvTranspose2d(4, 6, 3),
    lambda m: m.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2,
                                   dilation=2, bias=False),
    lambda m: m.nn.ConvTranspose2d(16, 3, (2, 4), stride=(2, 1)),
    lambda m: m.nn.ConvTranspose1d(4, 6, 3),
    lambda m: m.nn.ConvTranspose1d(4, 8, 5, stride=3, output_padding=2, groups=4),
]


@pytest.mark.parametrize("build", REPRS)
def test_module_repr_state_dict_and_shapes_are_pytorchs(build):
    s, t = build(sg), build(torch)
    assert repr(s) == repr(t)
    assert list(s.state_dict()) == list(t.state_dict())
    for (ks, vs), (kt, vt) in zip(s.named_parameters(), t.named_parameters()):
        assert ks == kt and tuple(vs.shape) == tuple(vt.shape) and vs.requires_grad
    assert s.transposed == t.transposed and s.output_padding == t.output_padding


def test_default_initialisation_is_pytorchs():
    """kaiming_uniform_(a=sqrt(5)): weights uniform in ±1/sqrt(fan_in), bias too, with
    fan_in = in_channels / groups * prod(kernel)."""
    sg.manual_seed(0)
    m = sg.nn.Conv2d(32, 64, (3, 5), groups=4)
    kaiming_default_holds(m, 32 // 4 * 15, 0.02)                       # 7680 draws
    one = sg.nn.Conv1d(3, 2, 4, dtype=sg.float64)
    assert one.weight.dtype == sg.float64 and one.bias.dtype == sg.float64


MODES = [("zeros", 1), ("reflect", 2), ("replicate", (2, 1)), ("circular", 3), ("zeros", "same"),
         ("circular", "same"), ("reflect", "valid")]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", ["zeros", "reflect", "replicate", "circular"])
def test_conv3d_module_with_each_padding_mode(mode, dtype):
    tm, sm = twin(lambda m: m.nn.Conv3d(2, 3, (3, 2, 3), padding=(1, 1, 2), padding_mode=mode),
                  dtype)
    module_eager_matches(tm, sm, rng.normal(size=(2, 2, 4, 5, 5)).astype(dtype), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode, padding", MODES)
def test_module_forward_and_backward_with_each_padding_mode(mode, padding, dtype):
    def build(m):
        return m.nn.Conv2d(3, 4, (3, 2), padding=padding, padding_mode=mode)
    tm, sm = twin(build, dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module_eager_matches(tm, sm, rng.normal(size=(2, 3, 6, 5)).astype(dtype), dtype)


def test_conv1d_module_with_reflect_padding_on_unbatched_input():
    tm, sm = twin(lambda m: m.nn.Conv1d(3, 2, 3, padding=2, padding_mode="reflect"), np.float32)
    x = rng.normal(size=(3, 8)).astype(np.float32)
    close(sm(sg.tensor(x)), tm(torch.tensor(x)), np.float32)


# ---- errors ----------------------------------------------------------------------------------
def _x(m, *shape, dtype=None):
    return m.ones(*shape, dtype=dtype)


ERRORS = [
    lambda m: m.nn.functional.conv2d(_x(m, 2, 3, 8, 8), _x(m, 4, 2, 3, 3)),       # channels
    lambda m: m.nn.functional.conv2d(_x(m, 2, 3, 8, 8), _x(m, 4, 3, 9, 9)),       # kernel
    lambda m: m.nn.functional.conv2d(_x(m, 2, 3, 4, 8), _x(m, 4, 3, 3, 3), padding=(0, 2),
                                     dilation=(2, 1)),
    lambda m: m.nn.functional.conv2d(_x(m, 2, 3, 8, 8), _x(m, 4, 3, 3, 3), padding="same",
                                     stride=2),
    lambda m: m.nn.functional.conv2d(_x(m, 2, 3, 8, 8), _x(m, 4, 3, 3, 3), padding="foo"),
    lambda m: m.nn.functional.conv2d(_x(m, 2, 3, 8, 8), _x(m, 4, 3, 3, 3), stride=[1, 1, 1],
                                     padding="same"),
    lambda m: m.nn.functional.conv2d(_x(m, 3, 8), _x(m, 4, 3, 3, 3)),              # input dims
    lambda m: m.nn.functional.conv1d(_x(m, 2, 3, 8, 4), _x(m, 4, 3, 3)),
    lambda m: m.nn.functional.conv1d(_x(m, 2, 3, 8), _x(m, 4, 3, 3, 3)),           # weight dims
    lambda m: m.nn.functional.conv2d(_x(m, 2, 3, 8, 8), _x(m, 4, 3, 3)),
    lambda m: m.nn.functional.conv3d(_x(m, 3, 5, 5), _x(m, 4, 3, 3, 3, 3)),
    lambda m: m.nn.functional.conv3d(_x(m, 2, 3, 5, 5, 5), _x(m, 4, 2, 3, 3, 3)),
    lambda m: m.nn.functional.conv3d(_x(m, 2, 3, 5, 5, 5), _x(m, 4, 3, 3, 6, 3)),
    lambda m: m.nn.functional.conv2d(_x(m, 2, 3, 8, 8), _x(m, 4, 3, 3, 3), _x(m, 5)),
    lambda m: m.nn.functional.conv2d(_x(m, 2, 3, 8, 8), _x(m, 4, 3, 3, 3), _x(m, 4, 1)),
    lambda m: m.nn.functional.conv2d(_x(m, 2, 3, 8, 8), _x(m, 4, 3, 3, 3), stride=0),
    lambda m: m.nn.functional.conv2d(_x(m, 2, 3, 8, 8), _x(m, 4, 3, 3, 3), padding=-1),
    lambda m: m.nn.functional.conv2d(_x(m, 2, 3, 8, 8), _x(m, 4, 3, 3, 3), dilation=0),
    lambda m: m.nn.functional.conv2d(_x(m, 2, 3, 8, 8), _x(m, 4, 3, 3, 3), dilation=-1),
    lambda m: m.nn.functional.conv2d(_x(m, 2, 3, 8, 8), _x(m, 4, 3, 3, 3), groups=0),
    lambda m: m.nn.functional.conv2d(_x(m, 2, 3, 8, 8), _x(m, 4, 3, 3, 3), groups=2),
    lambda m: m.nn.functional.conv2d(_x(m, 2, 4, 8, 8), _x(m, 5, 2, 3, 3), groups=2),
    lambda m: m.nn.functional.conv2d(_x(m, 2, 4, 8, 8), _x(m, 1, 2, 3, 3), groups=2),
    lambda m: m.nn.functional.conv2d(_x(m, 2, 3, 8, 8), _x(m, 4, 3, 3, 3), stride=(1, 2, 3)),
    lambda m: m.nn.functional.conv2d(_x(m, 2, 3, 8, 8), _x(m, 4, 3, 3, 3), padding=(1, 2, 3)),
    lambda m: m.nn.functional.conv2d(_x(m, 2, 3, 8, 8, dtype=m.float64), _x(m, 4, 3, 3, 3)),
    lambda m: m.nn.functional.conv2d(_x(m, 2, 3, 8, 8), _x(m, 4, 3, 3, 3, dtype=m.float64)),
    lambda m: m.nn.functional.conv2d(_x(m, 2, 3, 8, 8), _x(m, 4, 3, 3, 3),
                                     _x(m, 4, dtype=m.float64)),
    lambda m: m.nn.functional.conv2d(_x(m, 2, 3, 8, 8, dtype=m.float64),
                                     _x(m, 4, 3, 9, 9, dtype=m.float64), _x(m, 4)),
    lambda m: m.nn.Conv2d(3, 4, 3, groups=2),
    lambda m: m.nn.Conv2d(4, 3, 3, groups=2),
    lambda m: m.nn.Conv2d(4, 4, 3, groups=0),
    lambda m: m.nn.Conv2d(3, 4, 3, padding="foo"),
    lambda m: m.nn.Conv2d(3, 4, 3, padding="same", stride=2),
    lambda m: m.nn.Conv2d(3, 4, 3, padding_mode="foo"),
    lambda m: m.nn.Conv2d(3, 4, 3)(_x(m, 2, 5, 8, 8)),
    lambda m: m.nn.Conv2d(3, 4, 3)(_x(m, 2, 3, 8, 8, dtype=m.float64)),
    lambda m: m.nn.Conv2d(3, 4, 3, padding=9, padding_mode="reflect")(_x(m, 2, 3, 8, 8)),
    lambda m: m.nn.Conv2d(3, 4, 3, padding=(9, 1), padding_mode="reflect")(_x(m, 2, 3, 8, 8)),
    lambda m: m.nn.Conv2d(3, 4, 3, padding=9, padding_mode="circular")(_x(m, 2, 3, 8, 8)),
    lambda m: m.nn.Conv1d(3, 4, 3, padding=8, padding_mode="reflect")(_x(m, 2, 3, 8)),
]


@pytest.mark.parametrize("build", ERRORS)
def test_bad_input_raises_pytorchs_error(build):
    same_error(build)
