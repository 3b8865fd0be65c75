"""The sliding-window view: the ``shear`` primitive and ``lax.windows`` against index
loops written out (the independent reference), its VJP by the adjoint identity
<u, J v> = <J^T u, v> against the same loops, compiled code (LLVM, sanitized: every
access bounds-checked) equal to eager, batching, ``torch.Tensor.unfold``'s windows, and
the codegen defect it exposed (an opaque op reading a materialised view)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

import symgrad as sg
from symgrad.config import settings
from symgrad.ops import lax

rng = np.random.default_rng(0)


def _shear_loops(x, pairs):
    """out[.., p, .., j, ..] = x[.., stride*p + coef*j + offset, .., j, ..], by loops."""
    shape = list(x.shape)
    for axis, by, stride, coef, offset, size in pairs:
        shape[axis] = size
    out = np.empty(shape, x.dtype)
    for idx in itertools.product(*map(range, shape)):
        src = list(idx)
        for axis, by, stride, coef, offset, size in pairs:
            src[axis] = stride * idx[axis] + coef * idx[by] + offset
        out[idx] = x[tuple(src)]
    return out


def _shear_transpose_loops(g, in_shape, pairs):
    """The adjoint of the shear: every element of g added where it was read."""
    out = np.zeros(in_shape, g.dtype)
    for idx in itertools.product(*map(range, g.shape)):
        src = list(idx)
        for axis, by, stride, coef, offset, size in pairs:
            src[axis] = stride * idx[axis] + coef * idx[by] + offset
        out[tuple(src)] += g[idx]
    return out


SHEARS = [
    ((7, 3), [(0, 1, 1, 1, 0, 5)]),                      # unit windows
    ((9, 3), [(0, 1, 2, 2, 0, 3)]),                      # stride 2, dilation 2
    ((11, 3), [(0, 1, 1, -2, 4, 5)]),                    # reversed (the VJP's own shape)
    ((2, 3, 10, 9), [(2, 0, 3, 1, 1, 3), (3, 1, 2, -3, 6, 2)]),
    ((4, 3, 12, 2), [(2, 1, 2, 3, 0, 2), (3, 1, 1, 0, 0, 2)]),   # two axes share one "by"
]


@pytest.mark.parametrize("shape, pairs", SHEARS)
def test_shear_reads_what_the_index_loops_read(shape, pairs):
    x = rng.normal(size=shape)
    got = lax.shear(sg.tensor(x), pairs)
    np.testing.assert_array_equal(got.numpy(), _shear_loops(x, pairs))


@pytest.mark.parametrize("shape, pairs", SHEARS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_shear_vjp_is_the_adjoint(shape, pairs, dtype):
    x = sg.tensor(rng.normal(size=shape).astype(dtype), requires_grad=True)
    y = lax.shear(x, pairs)
    u = rng.normal(size=tuple(y.shape)).astype(dtype)
    y.backward(sg.tensor(u))
    want = _shear_transpose_loops(u.astype(np.float64), shape, pairs)
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-6 if dtype == np.float32 else 1e-13,
                               atol=1e-6 if dtype == np.float32 else 1e-13)
    # <u, J v> = <J^T u, v> with the loops as J
    v = rng.normal(size=shape)
    lhs = np.vdot(u, _shear_loops(v, pairs))
    assert abs(lhs - np.vdot(x.grad.numpy().astype(np.float64), v)) < 1e-4 * max(1, abs(lhs))


@pytest.mark.parametrize("shape, pairs", SHEARS)
def test_second_derivative_through_the_shear(shape, pairs):
    """The VJP is made of primitives (pad_slice, shear): differentiating it again gives
    the shear back (d/du <J^T u, w> = J w)."""
    u = sg.tensor(rng.normal(size=tuple(lax.shear(sg.zeros(shape), pairs).shape)),
                  requires_grad=True)
    x = sg.tensor(np.zeros(shape), requires_grad=True)
    (gx,) = sg.autograd.grad(lax.shear(x, pairs), x, u, create_graph=True)
    w = rng.normal(size=shape)
    (gu,) = sg.autograd.grad((gx * sg.tensor(w)).sum(), u)
    np.testing.assert_allclose(gu.numpy(), _shear_loops(w, pairs), rtol=1e-12, atol=1e-12)


@pytest.fixture
def sanitized(monkeypatch):
    monkeypatch.setattr(settings, "sanitize", True)
    monkeypatch.setattr(settings, "disk_cache", False)


@pytest.mark.parametrize("shape, pairs", SHEARS)
def test_compiled_shear_and_its_gradient_equal_eager(shape, pairs, sanitized):
    x = rng.normal(size=shape)
    w = rng.normal(size=tuple(lax.shear(sg.tensor(x), pairs).shape))

    def f(v):
        return (lax.shear(v, pairs) ** 3 * sg.tensor(w)).sum()
    xs = sg.tensor(x, requires_grad=True)
    f(xs).backward()
    for backend in ("llvm", "numpy"):
        value, grad = sg.value_and_grad(f, backend=backend)(x)
        np.testing.assert_allclose(value, float(f(sg.tensor(x))), rtol=1e-12)
        np.testing.assert_allclose(grad, xs.grad.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kernel, stride, dilation", [((3, 2), (1, 1), (1, 1)),
                                                     ((3, 3), (2, 1), (2, 1)),
                                                     ((2, 2), (2, 2), (1, 1)),   # tiles
                                                     ((3, 2), (3, 2), (1, 1))])  # tiles, sliced
def test_windows_are_torch_unfolds(kernel, stride, dilation):
    """lax.windows over (N, C, H, W) = Tensor.unfold along H then W (for unit dilation),
    kernel axes before the positions."""
    x = rng.normal(size=(2, 3, 10, 9))
    got = lax.windows(sg.tensor(x), (2, 3), kernel, stride, dilation).numpy()
    t = torch.tensor(x)
    if dilation == (1, 1):
        want = t.unfold(2, kernel[0], stride[0]).unfold(3, kernel[1], stride[1])
        want = want.permute(0, 1, 4, 5, 2, 3).numpy()              # N C KH KW OH OW
    else:
        span = [d * (k - 1) + 1 for k, d in zip(kernel, dilation)]
        want = t.unfold(2, span[0], stride[0]).unfold(3, span[1], stride[1])
        want = want[..., ::dilation[0], ::dilation[1]].permute(0, 1, 4, 5, 2, 3).numpy()
    np.testing.assert_array_equal(got, want)


def test_jacobian_of_windows_is_batched():
    """jacobian batches the gradient graph over the rows of an identity: the shear has a
    batching rule, so the rows are one program (checked against the loops)."""
    pairs = [(0, 1, 2, 1, 0, 3)]
    x = rng.normal(size=(7, 2))
    jac = sg.jacobian(lambda v: lax.shear(v, pairs).sum(1))(x)
    want = np.zeros((3, 7, 2))
    for p, j in itertools.product(range(3), range(2)):
        want[p, 2 * p + j, j] = 1
    np.testing.assert_array_equal(np.asarray(jac), want)


def test_matmul_of_a_permuted_reshape_compiles():
    """A matmul operand that is a reshape of a permuted view must be materialised and
    read as such (compiling it crashed: the planner skipped the materialised view)."""
    x, w = rng.normal(size=(2, 3, 4)), rng.normal(size=(5, 6))
    got = sg.compile(lambda a, b: b @ a.permute(1, 0, 2).reshape(6, 4))(x, w)
    np.testing.assert_allclose(got, w @ x.transpose(1, 0, 2).reshape(6, 4), rtol=1e-12)


# ---- the windows view and col2im (windows along the last axes, one primitive each) -------
# (input shape, kernel, stride, dilation): 1-D to 3-D, strides and dilations, odd sizes,
# windows that leave the end unread, one window, kernel 1
LAST_AXES = [
    ((2, 3, 11), (3,), (2,), (2,)),
    ((2, 3, 9, 8), (3, 3), (1, 1), (1, 1)),
    ((1, 2, 13, 10), (2, 4), (3, 2), (2, 3)),
    ((3, 7, 7), (5, 5), (1, 1), (1, 1)),
    ((2, 5, 6), (5, 6), (1, 1), (1, 1)),
    ((2, 1, 9, 9), (1, 1), (2, 3), (1, 1)),
    ((2, 2, 5, 6, 7), (3, 2, 3), (1, 2, 1), (1, 1, 2)),
]


def _torch_windows(t, kernel, stride, dilation):
    """The windows of ``t``'s last axes as torch's as_strided: kernel axes, then positions."""
    r = len(kernel)
    size, st = t.shape[-r:], t.stride()
    spots = [(n - d * (k - 1) - 1) // s + 1 for n, k, s, d in zip(size, kernel, stride, dilation)]
    shape = tuple(t.shape[:-r]) + tuple(kernel) + tuple(spots)
    strides = st[:-r] + tuple(d * x for d, x in zip(dilation, st[-r:])) + \
        tuple(s * x for s, x in zip(stride, st[-r:]))
    return t.as_strided(shape, strides)


def _col2im_torch(g, shape, kernel, stride, dilation):
    """col2im by torch's autograd: the gradient of the windows (as_strided) view."""
    x = torch.zeros(shape, dtype=torch.float64, requires_grad=True)
    (_torch_windows(x, kernel, stride, dilation) * torch.tensor(g, dtype=torch.float64)).sum().backward()
    return x.grad.numpy()


def _col2im(g, size, stride, dilation):
    return lax.apply("col2im", g, size=tuple(size), stride=tuple(stride),
                     dilation=tuple(dilation))


@pytest.mark.parametrize("shape, kernel, stride, dilation", LAST_AXES)
def test_windows_of_the_last_axes_are_one_view(shape, kernel, stride, dilation):
    x = rng.normal(size=shape)
    r = len(kernel)
    axes = tuple(range(len(shape) - r, len(shape)))
    want = _torch_windows(torch.tensor(x), kernel, stride, dilation).numpy()
    np.testing.assert_array_equal(lax.windows(sg.tensor(x), axes, kernel, stride, dilation).numpy(),
                                  want)
    f = sg.compile(lambda v: lax.windows(v, axes, kernel, stride, dilation) * 2, backend="llvm")
    ops = [line.split("=")[1].split()[0] for line in f.lower(x).as_text("graph-raw").splitlines()
           if " = " in line]
    assert "windows" in ops and "shear" not in ops and "expand" not in ops
    np.testing.assert_array_equal(f(x), want * 2)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape, kernel, stride, dilation", LAST_AXES)
def test_col2im_is_torchs_window_gradient(shape, kernel, stride, dilation, dtype, sanitized):
    """col2im eager (numpy rule) and compiled (LLVM, every access bounds-checked) equal
    torch's gradient of the same windows; its own gradient is the windows again."""
    r = len(kernel)
    wshape = tuple(_torch_windows(torch.zeros(shape), kernel, stride, dilation).shape)
    g = rng.normal(size=wshape).astype(dtype)
    want = _col2im_torch(g, shape, kernel, stride, dilation)
    tol = dict(rtol=1e-12, atol=1e-12) if dtype == np.float64 else dict(rtol=1e-5, atol=1e-5)
    size = shape[-r:]
    eager = _col2im(sg.tensor(g), size, stride, dilation).numpy()
    assert eager.dtype == dtype
    np.testing.assert_allclose(eager, want, **tol)
    compiled = sg.compile(lambda v: _col2im(v, size, stride, dilation), backend="llvm")(g)
    np.testing.assert_allclose(compiled, want, **tol)
    u = rng.normal(size=shape).astype(dtype)            # <u, col2im(g)> = <windows(u), g>
    _, dg = sg.value_and_grad(lambda v: (_col2im(v, size, stride, dilation) * sg.tensor(u)).sum(),
                              backend="llvm")(g)
    np.testing.assert_allclose(dg, _torch_windows(torch.tensor(u), kernel, stride, dilation).numpy(),
                               **tol)


def test_col2im_is_batched():
    """vmap over col2im (and the windows in its gradient) is one program, equal to a loop."""
    g = rng.normal(size=(4, 2, 3, 3, 5, 5))
    f = lambda v: _col2im(v, (7, 7), (1, 1), (1, 1)).sum(0) ** 2           # noqa: E731
    got = np.asarray(sg.vmap(f)(g))
    want = np.stack([_col2im_torch(gi, (2, 7, 7), (3, 3), (1, 1), (1, 1)).sum(0) ** 2 for gi in g])
    np.testing.assert_allclose(got, want, rtol=1e-12)
    jac = np.asarray(sg.jacobian(lambda v: _col2im(v, (4,), (1,), (1,)).sum())(rng.normal(size=(2, 3))))
    np.testing.assert_array_equal(jac, np.ones((2, 3)))


def test_bad_col2im_and_windows_attributes_raise():
    with pytest.raises(ValueError, match="reach past"):
        _col2im(sg.tensor(np.ones((2, 3, 3, 5, 5))), (6, 6), (1, 1), (1, 1))
    with pytest.raises(ValueError, match="do not fit"):
        lax.apply("windows", sg.tensor(np.ones((2, 4))), kernel=(5,), stride=(1,), dilation=(1,))
