"""Max pooling where the choice of element is delicate (review 4 findings 4, 5, 6), as
PyTorch's CPU kernels choose: a window whose maximum is -inf next to the padding takes
its first in-bounds element (never a padding cell: indices stay valid, the gradient
stays in the input); a window with several NaNs takes the last; -0 / +0 ties keep the
first element's sign. Values, indices and gradients against PyTorch, both dtypes, 1-D
and 2-D: eager (the eager kernel, and the primitives' path that runs while saved-tensor
hooks are set -- and the kernel again after them) and compiled on both backends."""
import numpy as np
import pytest
import torch

import symgrad as sg

F, TF = sg.nn.functional, torch.nn.functional
DTYPES = ("float32", "float64")
BACKENDS = ("llvm", "numpy")
NINF, NAN = -np.inf, np.nan

CASES = {       # name: (input, max_pool args (kernel, stride, padding))
    "ninf_pad_2d": (np.full((1, 1, 4, 4), NINF), (3, 2, 1)),
    "ninf_some_pad_2d": (np.array([[[[NINF, NINF, 1.0], [NINF, NINF, NINF],
                                     [2.0, NINF, NINF]]]]), (3, 2, 1)),
    "ninf_pad_1d": (np.array([[[NINF, NINF, 1.0, NINF, NINF]]]), (3, 2, 1)),
    "nan_2d": (np.array([[[[NAN, 1.0, NAN, 0.5], [NAN, 2.0, 3.0, NAN]]]]), (2, 2, 0)),
    "nan_pad_2d": (np.array([[[[NAN, 1.0, NAN], [NAN, 2.0, NAN], [4.0, NAN, 1.0]]]]),
                   (3, 1, 1)),
    "nan_1d": (np.array([[[NAN, 1.0, NAN, 2.0, 5.0, NAN]]]), (3, 3, 0)),
    "zeros_2d": (np.array([[[[-0.0, 0.0], [0.0, -0.0]], [[0.0, -0.0], [-0.0, -0.0]]]]),
                 (2, 2, 0)),
    "zeros_pad_1d": (np.array([[[-0.0, 0.0, -0.0, 0.0]]]), (3, 2, 1)),
}


def _pool(fn_mod, x, args, return_indices=False):
    k, s, p = args
    f = fn_mod.max_pool1d if x.dim() == 3 else fn_mod.max_pool2d
    return f(x, k, s, p, return_indices=return_indices)


def _torch(xn, args):
    x = torch.tensor(xn, requires_grad=True)
    y, i = _pool(TF, x, args, True)
    g = torch.arange(1.0, y.numel() + 1, dtype=x.dtype).reshape(y.shape)
    y.backward(g)
    return y.detach().numpy(), i.numpy(), x.grad.numpy(), g.numpy()


def _eq(got, want):
    got = np.asarray(got)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    assert np.array_equal(np.signbit(got), np.signbit(want))


def _eager(xn, args, g):
    x = sg.tensor(xn, requires_grad=True)
    y, i = _pool(F, x, args, True)
    y.backward(sg.tensor(g))
    return y.detach().numpy(), i.numpy(), x.grad.numpy()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_eager(name, dtype):
    xn, args = CASES[name]
    xn = xn.astype(dtype)
    y, i, gx, g = _torch(xn, args)
    for hooks in (False, True, False):       # kernel, primitives (hooks set), kernel again
        if hooks:
            with sg.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
                got = _eager(xn, args, g)
        else:
            got = _eager(xn, args, g)
        for a, b in zip(got, (y, i, gx)):
            _eq(a, b)
        x = sg.tensor(xn, requires_grad=True)      # without return_indices: the same
        out = _pool(F, x, args)
        out.backward(sg.tensor(g))
        _eq(out.detach().numpy(), y)
        _eq(x.grad.numpy(), gx)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_compiled(name, dtype, backend):
    xn, args = CASES[name]
    xn = xn.astype(dtype)
    y, i, gx, g = _torch(xn, args)
    f = sg.compile(lambda v: _pool(F, v, args, True), backend=backend)
    got_y, got_i = f(sg.tensor(xn))
    _eq(got_y.numpy(), y)
    _eq(got_i.numpy(), i)
    grad = sg.grad(lambda v: (_pool(F, v, args) * sg.tensor(g)).sum(), backend=backend)(xn)
    _eq(np.asarray(grad), gx)
