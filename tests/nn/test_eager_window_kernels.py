"""The eager kernels of max pooling, convolution and batch norm
(symgrad/nn/window_kernels.py, functions/kernels.batch_norm_kernel) against PyTorch:
values, gradients (signs of zeros included), grad_fn names, both dtypes."""
import numpy as np
import pytest
import torch

import symgrad

F, TF = symgrad.nn.functional, torch.nn.functional
TOL = {np.float32: 2e-5, np.float64: 1e-12}
DTYPES = (np.float32, np.float64)


def _close(a, b, tol):
    a, b = a.detach().numpy(), b.detach().numpy()
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape,k,s,p,d,cm", [
    ((2, 3, 8, 8), 2, 2, 0, 1, False), ((2, 3, 9, 7), 3, 2, 1, 1, True),
    ((3, 7, 7), 3, 1, 1, 2, False), ((1, 2, 6, 6), (2, 3), (1, 2), (1, 1), 1, False),
    ((2, 2, 5, 5), 2, None, 0, 1, True)])
@pytest.mark.parametrize("ri", [False, True])
def test_max_pool2d(dt, shape, k, s, p, d, cm, ri):
    rng = np.random.default_rng(0)
    xn = rng.normal(size=shape).astype(dt)
    xn.flat[3] = xn.flat[4] = xn.flat[5]             # ties: the first maximal element
    xs, xt = symgrad.tensor(xn, requires_grad=True), torch.tensor(xn, requires_grad=True)
    ys, yt = F.max_pool2d(xs, k, s, p, d, cm, ri), TF.max_pool2d(xt, k, s, p, d, cm, ri)
    if ri:
        (ys, i_s), (yt, i_t) = ys, yt
        assert np.array_equal(i_s.numpy(), i_t.numpy())
    assert ys.grad_fn.name() == yt.grad_fn.name() == "MaxPool2DWithIndicesBackward0"
    assert np.array_equal(ys.detach().numpy(), yt.detach().numpy())
    gn = rng.normal(size=tuple(yt.shape)).astype(dt)
    ys.backward(symgrad.tensor(gn))
    yt.backward(torch.tensor(gn))
    _close(xs.grad, xt.grad, TOL[dt])


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("k,s,p", [(2, 2, 0), (3, 2, 1), (3, 1, 1)])
def test_max_pool2d_zero_signs_and_inf(dt, k, s, p):
    """Unchosen elements get +0 (not -0 from a negative cotangent), an inf cotangent
    reaches only its element. (The eager kernel's backward: it runs whenever no
    saved-tensor hooks are set, whatever hooks were set earlier in the process.)"""
    rng = np.random.default_rng(1)
    xn = rng.normal(size=(2, 2, 6, 6)).astype(dt)
    xs, xt = symgrad.tensor(xn, requires_grad=True), torch.tensor(xn, requires_grad=True)
    ys, yt = F.max_pool2d(xs, k, s, p), TF.max_pool2d(xt, k, s, p)
    gn = -np.abs(rng.normal(size=tuple(yt.shape))).astype(dt)
    gn.flat[0], gn.flat[1] = np.inf, -0.0
    ys.backward(symgrad.tensor(gn))
    yt.backward(torch.tensor(gn))
    a, b = xs.grad.numpy(), xt.grad.numpy()
    assert np.array_equal(a, b, equal_nan=True)
    assert np.array_equal(np.signbit(a), np.signbit(b))


def test_max_pool2d_nan_window():
    """Several NaNs in a window: PyTorch's kernel (val > max || isnan(val)) ends on the
    last one; index and gradient go there."""
    xn = np.array([[[[np.nan, 1.0], [np.nan, 2.0]]]])
    grads = []
    for lib, fn in ((symgrad, F), (torch, TF)):
        x = lib.tensor(xn, requires_grad=True)
        y = fn.max_pool2d(x, 2)
        y.sum().backward()
        assert np.isnan(y.item())
        grads.append(x.grad.numpy().tolist())
    assert grads[0] == grads[1] == [[[[0.0, 0.0], [1.0, 0.0]]]]


def _same_gradients(ys, yt, S, T, rng, tol):
    """Backward of one random cotangent through ys and yt: the inputs' gradients agree."""
    gn = rng.normal(size=tuple(yt.shape)).astype(yt.detach().numpy().dtype)
    ys.backward(symgrad.tensor(gn))
    yt.backward(torch.tensor(gn))
    for a, b in zip(S, T):
        assert (a.grad is None) == (b.grad is None)
        if b.grad is not None:
            _close(a.grad, b.grad, tol)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("xshape,wshape,s,p,d,bias", [
    ((2, 3, 8, 8), (4, 3, 3, 3), 1, 1, 1, True), ((2, 3, 9, 7), (5, 3, 2, 3), 2, (1, 2), 1, False),
    ((1, 2, 10, 10), (3, 2, 3, 3), (2, 1), 0, 2, True), ((2, 4, 11), (3, 4, 3), 2, 1, 1, True),
    ((3, 6, 6), (2, 3, 3, 3), 1, "same", 1, True), ((2, 3, 6, 6), (4, 3, 2, 2), 2, 0, 1, True)])
def test_conv(dt, xshape, wshape, s, p, d, bias):
    rng = np.random.default_rng(2)
    arrays = [rng.normal(size=xshape).astype(dt), rng.normal(size=wshape).astype(dt),
              rng.normal(size=wshape[0]).astype(dt)]
    S = [symgrad.tensor(a, requires_grad=True) for a in arrays]
    T = [torch.tensor(a, requires_grad=True) for a in arrays]
    fs, ft = (F.conv1d, TF.conv1d) if len(wshape) == 3 else (F.conv2d, TF.conv2d)
    ys = fs(S[0], S[1], S[2] if bias else None, s, p, d)
    yt = ft(T[0], T[1], T[2] if bias else None, s, p, d)
    assert ys.grad_fn.name() == yt.grad_fn.name()
    _close(ys, yt, TOL[dt] * 10)
    _same_gradients(ys, yt, S, T, rng, TOL[dt] * 100)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("wants", [(False, True, True), (True, False, True), (False, False, True),
                                   (True, True, False)])
def test_conv_gradients_of_some_inputs(dt, wants):
    """The backward builds only the gradients asked for (a first layer's input has
    none): the others equal torch's, the rest stay None."""
    rng = np.random.default_rng(4)
    arrays = [rng.normal(size=(2, 3, 7, 6)).astype(dt), rng.normal(size=(4, 3, 3, 3)).astype(dt),
              rng.normal(size=4).astype(dt)]
    S = [symgrad.tensor(a, requires_grad=w) for a, w in zip(arrays, wants)]
    T = [torch.tensor(a, requires_grad=w) for a, w in zip(arrays, wants)]
    ys, yt = F.conv2d(*S, padding=1), TF.conv2d(*T, padding=1)
    _same_gradients(ys, yt, S, T, rng, TOL[dt] * 100)


@pytest.mark.parametrize("dt", DTYPES)
def test_conv_negative_zero_cotangent(dt):
    xn = np.random.default_rng(3).normal(size=(2, 2, 6, 6)).astype(dt)
    xs, xt = symgrad.tensor(xn, requires_grad=True), torch.tensor(xn, requires_grad=True)
    w = np.ones((3, 2, 3, 3), dt)
    ys = F.conv2d(xs, symgrad.tensor(w), stride=2, padding=1)
    yt = TF.conv2d(xt, torch.tensor(w), stride=2, padding=1)
    g = np.full(tuple(yt.shape), -0.0, dt)
    ys.backward(symgrad.tensor(g))
    yt.backward(torch.tensor(g))
    assert np.array_equal(np.signbit(xs.grad.numpy()), np.signbit(xt.grad.numpy()))


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape", [(8, 3), (4, 3, 5), (4, 3, 5, 6)])
@pytest.mark.parametrize("training,running", [(True, True), (True, False), (False, True)])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm(dt, shape, training, running, affine):
    rng = np.random.default_rng(4)
    # (batch statistics are sums over N*H*W in each library's order; the gradient adds
    # three such sums, so it gets 10x / 50x the per-value tolerance)
    tol = TOL[dt]
    c = shape[1]
    arrays = [(rng.normal(size=shape) * 3 + 1).astype(dt), rng.normal(size=c).astype(dt),
              rng.normal(size=c).astype(dt)]
    stats = [rng.normal(size=c).astype(dt), rng.uniform(0.5, 2, size=c).astype(dt)]
    S = [symgrad.tensor(a, requires_grad=True) for a in arrays]
    T = [torch.tensor(a, requires_grad=True) for a in arrays]
    rs = [symgrad.tensor(a) for a in stats] if running else [None, None]
    rt = [torch.tensor(a) for a in stats] if running else [None, None]
    ys = F.batch_norm(S[0], *rs, *(S[1:] if affine else (None, None)), training, 0.1, 1e-5)
    yt = TF.batch_norm(T[0], *rt, *(T[1:] if affine else (None, None)), training, 0.1, 1e-5)
    assert ys.grad_fn.name() == yt.grad_fn.name()
    np.testing.assert_allclose(ys.detach().numpy(), yt.detach().numpy(), rtol=tol,
                               atol=tol * 10)
    if running:
        for a, b in zip(rs, rt):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=tol, atol=tol)
    gn = rng.normal(size=shape).astype(dt)
    ys.backward(symgrad.tensor(gn))
    yt.backward(torch.tensor(gn))
    for a, b in zip(S, T):
        assert (a.grad is None) == (b.grad is None)
        if b.grad is not None:
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=tol * 10,
                                       atol=tol * 50)


def test_batch_norm_double_backward():
    """create_graph runs the primitives: second derivatives as PyTorch's."""
    xn = np.random.default_rng(5).normal(size=(4, 3))
    x, xt = symgrad.tensor(xn, requires_grad=True), torch.tensor(xn, requires_grad=True)
    g, = symgrad.autograd.grad((F.batch_norm(x, None, None, training=True) ** 3).sum(), x,
                               create_graph=True)
    g.sum().backward()
    gt, = torch.autograd.grad((TF.batch_norm(xt, None, None, training=True) ** 3).sum(), xt,
                              create_graph=True)
    gt.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-9, atol=1e-9)


def _modified_before_backward(T, op):
    """(names of the saved inputs that are the inputs themselves, the error of backward
    after the input was updated in place) under the module T (torch or symgrad)."""
    F = T.nn.functional
    x = T.ones(2, 3, 6, 6, requires_grad=True)
    w = T.ones(4, 3, 3, 3, requires_grad=True)
    g = T.ones(3, requires_grad=True)
    h = x * 1
    y = {"conv": lambda: F.conv2d(h, w), "pool": lambda: F.max_pool2d(h, 2),
         "bn": lambda: F.batch_norm(h, None, None, g, None, True)}[op]()
    saved = sorted(a for a in ("_saved_self", "_saved_input", "_saved_weight")
                   if getattr(y.grad_fn, a, None) is not None
                   and any(getattr(y.grad_fn, a) is t for t in (h, w, g)))
    with T.no_grad():
        h.mul_(2)
    with pytest.raises(RuntimeError) as info:
        y.sum().backward()
    return saved, str(info.value)


@pytest.mark.parametrize("op", ["conv", "pool", "bn"])
def test_saved_inputs_are_version_checked(op):
    """ConvolutionBackward0 saves input and weight, MaxPool2DWithIndicesBackward0 self,
    NativeBatchNormBackward0 input and weight: updating one before backward raises
    PyTorch's error."""
    assert _modified_before_backward(symgrad, op) == _modified_before_backward(torch, op)
