"""Eager fast paths (numpy kernels chosen by size, fused recording of hot ops) against
PyTorch: values bit for bit where PyTorch's are exact, special values, both dtypes."""
import numpy as np
import pytest
import torch

import symgrad

DTYPES = (np.float32, np.float64)
SPECIAL = [-0.0, 0.0, np.nan, -np.nan, np.inf, -np.inf, 1e-40, -1e-40, -1.5, 2.5]


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("n", [10, 4095, 4096, 50000])
def test_relu_bits(dt, n):
    """relu's forward on large arrays (a bit mask, not numpy's where) keeps -0.0 and
    NaNs (with their sign) as torch does, both below and above the size switch."""
    x = np.random.default_rng(n).normal(size=n).astype(dt)
    x[:len(SPECIAL)] = SPECIAL
    a = symgrad.tensor(x).relu().numpy()
    b = torch.tensor(x).relu().numpy()
    assert a.dtype == b.dtype
    assert np.array_equal(a.view(np.uint8), b.view(np.uint8))
    xs, xt = symgrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    g = np.random.default_rng(1).normal(size=n).astype(dt)
    xs.relu().backward(symgrad.tensor(g))
    xt.relu().backward(torch.tensor(g))
    assert np.array_equal(xs.grad.numpy().view(np.uint8), xt.grad.numpy().view(np.uint8))


@pytest.mark.parametrize("dt", DTYPES)
def test_relu_strided_large(dt):
    x = np.random.default_rng(0).normal(size=(130, 70)).astype(dt)
    a = symgrad.tensor(x).t().relu().numpy()
    b = torch.tensor(x).t().relu().numpy()
    assert np.array_equal(a, b)


VIEWS = {
    "slice": lambda x: x[1:], "slice_step": lambda x: x[::2], "slice_empty": lambda x: x[5:],
    "slice_dim1": lambda x: x[:, 1:3], "select": lambda x: x[-1], "select_0d": lambda x: x[1][2],
    "expand": lambda x: x[:1].expand(3, 4), "permute": lambda x: x.permute(1, 0),
    "t": lambda x: x.t(), "transpose": lambda x: x.transpose(0, 1),
    "reshape": lambda x: x.reshape(-1), "view": lambda x: x.view(2, 6),
    "unsqueeze": lambda x: x.unsqueeze(1), "squeeze": lambda x: x.unsqueeze(0).squeeze(0)}


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("op", VIEWS)
def test_view_ops_as_torch(dt, op):
    """The view ops' short recording path: values, grad_fn names and next_functions,
    the shared version counter, a view seeing its base's in-place update, gradients."""
    xn = np.random.default_rng(0).normal(size=(3, 4)).astype(dt)
    f = VIEWS[op]
    out = []
    for T in (symgrad, torch):
        leaf = T.tensor(xn, requires_grad=True)
        x = leaf * 1
        y = f(x)
        names = []
        fn = y.grad_fn
        while fn is not None and fn.name() != "MulBackward0":
            names.append(fn.name())
            fn = fn.next_functions[0][0]
        assert fn is x.grad_fn
        v0 = y._version
        with T.no_grad():
            x.add_(1)
        seen = y.detach().numpy().copy()
        g = np.arange(y.numel(), dtype=dt).reshape(tuple(y.shape))
        y.backward(T.tensor(g))
        out.append((names, v0, y._version, y.is_leaf, seen, leaf.grad.numpy()))
    for a, b in zip(*out):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("op", VIEWS)
def test_view_ops_without_recording(op):
    """no_grad, inference mode, and a leaf that needs no grad: no history, as torch."""
    xn = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)
    f = VIEWS[op]
    for T in (symgrad, torch):
        x = T.tensor(xn, requires_grad=True)
        with T.no_grad():      # (torch's view there requires grad, symgrad's not: not
            y = f(x)            # this path's business)
        assert y.grad_fn is None
        with T.inference_mode():
            y = f(x)
        assert y.grad_fn is None and y.requires_grad and not y.is_inference()
        y = f(T.tensor(xn))
        assert y.grad_fn is None and not y.requires_grad


@pytest.mark.parametrize("op", VIEWS)
def test_view_ops_compiled(op):
    xn = np.random.default_rng(0).normal(size=(3, 4))
    f = VIEWS[op]
    got = symgrad.compile(lambda x: f(x * 2).sum())(symgrad.tensor(xn))
    assert np.allclose(got.item(), f(torch.tensor(xn) * 2).sum().item())
