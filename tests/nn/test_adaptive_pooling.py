"""adaptive_avg_pool1d/2d, adaptive_max_pool1d/2d and their modules against PyTorch:
values, gradients and indices for output sizes that divide the input (a plain pooling),
that do not (overlapping windows of different lengths), larger than the input, ``None``
entries, 1x1 (a mean), zero; batched and unbatched inputs, float32 and float64; ties
(the first maximum in row-major order gets the gradient); eager and compiled
(``value_and_grad`` on the LLVM and numpy backends, a CNN head through
``functional_call``); grad_fn names; reprs; PyTorch's errors for bad input."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg

from .helpers import (DTYPES, close, compiled_matches, eager_matches, module_compiled_matches,
                      same_error)

rng = np.random.default_rng(11)

# (functional name, input shape, output size)
CASES = [
    ("adaptive_avg_pool2d", (2, 3, 7, 9), (3, 4)),
    ("adaptive_avg_pool2d", (2, 3, 6, 8), (3, 4)),              # uniform: a plain pooling
    ("adaptive_avg_pool2d", (2, 3, 6, 8), (3, 3)),              # uniform in one axis
    ("adaptive_avg_pool2d", (2, 3, 5, 4), (7, 9)),              # larger than the input
    ("adaptive_avg_pool2d", (3, 7, 9), (None, 2)),
    ("adaptive_avg_pool2d", (2, 3, 7, 9), 1),                   # a mean
    ("adaptive_avg_pool2d", (2, 3, 7, 9), 5),
    ("adaptive_avg_pool2d", (2, 3, 7, 9), (7, 9)),
    ("adaptive_max_pool2d", (2, 3, 7, 9), (3, 4)),
    ("adaptive_max_pool2d", (2, 3, 6, 8), (3, 4)),
    ("adaptive_max_pool2d", (2, 3, 5, 4), (7, 9)),
    ("adaptive_max_pool2d", (3, 7, 9), (2, None)),
    ("adaptive_max_pool2d", (2, 3, 7, 9), 1),
    ("adaptive_max_pool2d", (1, 2, 10, 3), (4, 2)),
    ("adaptive_avg_pool1d", (2, 3, 11), 4),
    ("adaptive_avg_pool1d", (3, 12), (4,)),
    ("adaptive_max_pool1d", (2, 3, 11), 4),
    ("adaptive_max_pool1d", (3, 12), [3]),
]


def _run(lib, name, x, size):
    return getattr(lib.nn.functional, name)(x, size)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name, xs, size", CASES)
def test_eager_values_gradients_and_grad_fn_equal_torch(name, xs, size, dtype):
    eager_matches(lambda lib, x: _run(lib, name, x, size), (rng.normal(size=xs).astype(dtype),),
                  dtype, rng)


@pytest.mark.parametrize("backend", ["llvm", "numpy"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name, xs, size", [CASES[i] for i in (0, 1, 3, 8, 9, 10, 14, 16)])
def test_compiled_gradients_equal_torch(name, xs, size, dtype, backend):
    compiled_matches(lambda lib, x: _run(lib, name, x, size), (rng.normal(size=xs).astype(dtype),),
                     dtype, rng, backend)


@pytest.mark.parametrize("name, xs, size", [c for c in CASES if "max" in c[0]])
def test_max_indices_equal_torch(name, xs, size):
    x = rng.normal(size=xs)
    got, at = getattr(sg.nn.functional, name)(sg.tensor(x), size, return_indices=True)
    want, t_at = getattr(torch.nn.functional, name)(torch.tensor(x), size, return_indices=True)
    close(got, want)
    assert at.dtype == sg.int64
    np.testing.assert_array_equal(at.numpy(), t_at.numpy())


@pytest.mark.parametrize("size", [(3, 4), (2, 2), (5, 7)])
def test_ties_send_the_gradient_where_torch_does(size):
    """Few distinct values: windows hold ties; the first maximum in row-major order wins."""
    x = rng.integers(0, 3, size=(2, 2, 7, 10)).astype(np.float64)
    eager_matches(lambda lib, v: lib.nn.functional.adaptive_max_pool2d(v, size), (x,),
                  np.float64, rng)
    got = sg.nn.functional.adaptive_max_pool2d(sg.tensor(x), size, True)[1]
    want = torch.nn.functional.adaptive_max_pool2d(torch.tensor(x), size, True)[1]
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("name", ["adaptive_avg_pool2d", "adaptive_max_pool2d"])
def test_zero_output_size_and_empty_channels_equal_torch(name):
    x = rng.normal(size=(2, 3, 7, 9))
    got, want = _run(sg, name, sg.tensor(x), (0, 3)), _run(torch, name, torch.tensor(x), (0, 3))
    assert tuple(got.shape) == tuple(want.shape)
    if "avg" in name:
        empty = np.zeros((2, 0, 7, 9))
        got = _run(sg, name, sg.tensor(empty), (2, 3))
        assert tuple(got.shape) == tuple(_run(torch, name, torch.tensor(empty), (2, 3)).shape)


# ---- modules ---------------------------------------------------------------------------------
MODULES = [
    (lambda m: m.nn.AdaptiveAvgPool1d(3), (2, 3, 7)),
    (lambda m: m.nn.AdaptiveAvgPool2d(3), (2, 3, 7, 8)),
    (lambda m: m.nn.AdaptiveAvgPool2d((3, None)), (3, 7, 8)),
    (lambda m: m.nn.AdaptiveAvgPool2d([2, 4]), (2, 3, 6, 8)),
    (lambda m: m.nn.AdaptiveMaxPool1d(2), (3, 7)),
    (lambda m: m.nn.AdaptiveMaxPool2d(3), (2, 3, 7, 8)),
    (lambda m: m.nn.AdaptiveMaxPool2d((3, 4), return_indices=True), (2, 3, 7, 8)),
]


@pytest.mark.parametrize("build, xs", MODULES)
def test_module_repr_and_forward_equal_torch(build, xs):
    s, t = build(sg), build(torch)
    assert repr(s) == repr(t)
    x = rng.normal(size=xs)
    got, want = s(sg.tensor(x)), t(torch.tensor(x))
    if isinstance(want, tuple):
        np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())
        got, want = got[0], want[0]
    close(got, want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_compiled_cnn_head_through_functional_call_equals_torch(dtype):
    def build(m):
        return m.nn.Sequential(m.nn.Conv2d(2, 4, 3), m.nn.ReLU(), m.nn.AdaptiveMaxPool2d((3, 2)),
                               m.nn.Conv2d(4, 3, 1), m.nn.AdaptiveAvgPool2d((2, 1)),
                               m.nn.Flatten(), m.nn.Linear(6, 2))
    module_compiled_matches(build, rng.normal(size=(2, 2, 9, 8)).astype(dtype), dtype)


# ---- errors ----------------------------------------------------------------------------------
def _F(m):
    return m.nn.functional


ERRORS = [
    lambda m: _F(m).adaptive_avg_pool2d(m.ones(2, 3, 7, 9), (-1, 3)),
    lambda m: _F(m).adaptive_avg_pool2d(m.ones(2, 3, 7, 9), (1, 2, 3)),
    lambda m: _F(m).adaptive_avg_pool2d(m.ones(2, 3, 7, 9), (2,)),
    lambda m: _F(m).adaptive_avg_pool2d(m.ones(7, 9), (2, 3)),
    lambda m: _F(m).adaptive_avg_pool2d(m.ones(1, 2, 3, 7, 9), (2, 3)),
    lambda m: _F(m).adaptive_avg_pool2d(m.ones(2, 3, 0, 9), (2, 3)),
    lambda m: _F(m).adaptive_avg_pool2d(m.ones(2, 3, 7, 9, dtype=m.int64), (2, 3)),
    lambda m: _F(m).adaptive_avg_pool2d(m.ones(2, 3, 7, 9), 2.5),
    lambda m: _F(m).adaptive_avg_pool2d(m.ones(2, 3, 7, 9), None),
    lambda m: _F(m).adaptive_max_pool2d(m.ones(2, 3, 7, 9), (-1, 3)),
    lambda m: _F(m).adaptive_max_pool2d(m.ones(2, 3, 7, 9), (1, 2, 3)),
    lambda m: _F(m).adaptive_max_pool2d(m.ones(7, 9), (2, 3)),
    lambda m: _F(m).adaptive_max_pool2d(m.ones(1, 2, 3, 7, 9), (2, 3)),
    lambda m: _F(m).adaptive_max_pool2d(m.ones(2, 0, 7, 9), (2, 3)),
    lambda m: _F(m).adaptive_max_pool2d(m.ones(2, 3, 7, 9, dtype=m.int64), (2, 3)),
    lambda m: _F(m).adaptive_avg_pool1d(m.ones(2, 3, 7), (3, 4)),
    lambda m: _F(m).adaptive_avg_pool1d(m.ones(7), 3),
    lambda m: _F(m).adaptive_avg_pool1d(m.ones(2, 3, 7), None),
    lambda m: _F(m).adaptive_max_pool1d(m.ones(7), 3),
    lambda m: _F(m).adaptive_max_pool1d(m.ones(2, 3, 7), (3, 4)),
    lambda m: m.nn.AdaptiveAvgPool2d(None)(m.ones(2, 3, 6, 6)),
]


@pytest.mark.parametrize("build", ERRORS)
def test_bad_input_raises_pytorchs_error(build):
    same_error(build)
