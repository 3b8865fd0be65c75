"""Eager fast paths (numpy kernels chosen by size, fused recording of hot ops) against
PyTorch: values bit for bit where PyTorch's are exact, special values, both dtypes."""
import numpy as np
import pytest
import torch

import symgrad

DTYPES = (np.float32, np.float64)
SPECIAL = [-0.0, 0.0, np.nan, -np.nan, np.inf, -np.inf, 1e-40, -1e-40, -1.5, 2.5]


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("n", [10, 511, 512, 4096, 50000])
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


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("targets", ["kept", "some_ignored", "all_ignored"])
@pytest.mark.parametrize("shape", [(5, 4), (4,), (3, 4, 2), (2, 3, 2, 2), (2, 3, 2, 1, 2)])
def test_cross_entropy_targets(dt, reduction, targets, shape):
    """nll_loss's kernel with every target kept (no selects) and with ignored ones:
    values, gradients and the chain of node names as torch's (a 3-D or 5-D input is
    viewed as 4-D for the 2-d kernel, a 'none' result viewed back)."""
    rng = np.random.default_rng(7)
    xn = rng.normal(size=shape).astype(dt)
    tshape = (shape[0],) + shape[2:] if len(shape) > 1 else ()
    tn = rng.integers(0, shape[1] if len(shape) > 1 else shape[0], size=tshape)
    if targets != "kept":
        tn = np.where(rng.random(tshape) < (0.5 if targets == "some_ignored" else 2), -100, tn)
    out = []
    for T in (symgrad, torch):
        x = T.tensor(xn, requires_grad=True)
        y = T.nn.functional.cross_entropy(x, T.tensor(tn), reduction=reduction)
        g = np.ones(tuple(y.shape), dt)
        y.backward(T.tensor(g))
        names, fn = [], y.grad_fn
        while fn is not None and fn.next_functions:
            names.append(fn.name())
            fn = fn.next_functions[0][0]
        out.append((names, y.detach().numpy(), x.grad.numpy()))
    assert out[0][0] == out[1][0]
    tol = 1e-6 if dt == np.float32 else 1e-14
    for a, b in zip(out[0][1:], out[1][1:]):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


@pytest.mark.parametrize("bad", [-1, -7, 4, 2**40])
def test_nll_target_bounds(bad):
    x = np.zeros((3, 4), np.float32)
    t = np.array([0, bad, 1])
    errors = []
    for T in (symgrad, torch):
        with pytest.raises(IndexError) as e:
            T.nn.functional.cross_entropy(T.tensor(x), T.tensor(t))
        errors.append(str(e.value))
    assert errors[0] == errors[1]
    y = symgrad.nn.functional.cross_entropy(symgrad.tensor(x), symgrad.tensor(t),
                                            ignore_index=bad)
    assert np.isclose(y.item(), np.log(4))


def test_nll_loss_strided_3d_input():
    xn = np.random.default_rng(0).normal(size=(2, 4, 3)).astype(np.float32)
    got = []
    for T in (symgrad, torch):
        x = T.tensor(xn, requires_grad=True)
        xs = x.transpose(1, 2).contiguous().transpose(1, 2)
        y = T.nn.functional.nll_loss(xs, T.zeros(2, 3, dtype=T.int64), reduction="none")
        y.sum().backward()
        got.append((y.grad_fn.name(), y.grad_fn.next_functions[0][0].next_functions[0][0].name(),
                    y.detach().numpy(), x.grad.numpy()))
    assert got[0][:2] == got[1][:2]
    np.testing.assert_allclose(got[0][2], got[1][2], rtol=1e-6)
    np.testing.assert_allclose(got[0][3], got[1][3], rtol=1e-6)


INPLACE = {"iadd": lambda x, y: x.__iadd__(y), "isub": lambda x, y: x.__isub__(y),
           "imul": lambda x, y: x.__imul__(y), "add_": lambda x, y: x.add_(y),
           "sub_": lambda x, y: x.sub_(y), "mul_": lambda x, y: x.mul_(y)}


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("op", INPLACE)
@pytest.mark.parametrize("other", ["tensor", "same", "float", "int", "bigint", "row"])
def test_inplace_arith_as_torch(dt, op, other):
    """x op= y straight into x's array (nothing recorded): the same bits as torch's, the
    version bumped once, a view of x seeing the update."""
    rng = np.random.default_rng(3)
    xn = rng.normal(size=(3, 4)).astype(dt)
    xn[0, :3] = [np.inf, -0.0, np.nan]
    yn = rng.normal(size=(3, 4)).astype(dt)
    got = []
    for T in (symgrad, torch):
        x = T.tensor(xn, requires_grad=True)
        y = {"tensor": T.tensor(yn), "same": None, "float": 0.3, "int": 3, "bigint": 2 ** 60,
             "row": T.tensor(yn[:1])}[other]
        with T.no_grad():
            view = x[1]
            v0 = x._version
            r = INPLACE[op](x, x if y is None else y)
        assert r is x
        got.append((x.detach().numpy().copy(), x._version - v0, view._version - v0,
                    view.detach().numpy().copy(), x.requires_grad, x.grad_fn))
    a, b = got
    assert np.array_equal(a[0].view(np.uint8), b[0].view(np.uint8))
    assert a[1:3] == b[1:3] and a[4:] == b[4:]
    assert np.array_equal(a[3], b[3], equal_nan=True)


@pytest.mark.parametrize("op", INPLACE)
def test_inplace_arith_errors_as_torch(op):
    """The cases the short path leaves to the general one raise torch's errors: a leaf
    that requires grad in grad mode, partial overlap, inference tensors."""
    xn = np.ones((3, 3), np.float32)
    for make in (lambda T: (T.tensor(xn, requires_grad=True), 1.0),
                 lambda T: (lambda x: (x, x.t()))(T.tensor(xn)),
                 lambda T: (lambda x: (x, x.t()))(T.tensor(xn))):
        msgs = []
        for T in (symgrad, torch):
            x, y = make(T)
            with pytest.raises(RuntimeError) as e:
                INPLACE[op](x, y)
            msgs.append(str(e.value))
        assert msgs[0] == msgs[1]
    msgs = []
    for T in (symgrad, torch):
        with T.inference_mode():
            x = T.tensor(xn)
        with pytest.raises(RuntimeError) as e:
            INPLACE[op](x, 2.0)
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]


def test_inplace_arith_recorded_as_torch():
    """With grad mode on and a non-leaf requiring grad: recorded, as torch."""
    for T in (symgrad, torch):
        w = T.tensor([1.0, 2.0], requires_grad=True)
        x = w * 1
        x += T.tensor([3.0, 4.0])
        assert x.grad_fn.name() == "AddBackward0"
        x.sum().backward()
        assert w.grad.tolist() == [1.0, 1.0]


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("kind", ["max", "min"])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("shape", [(4, 5), (3, 4, 2)])
def test_extremum_dim_as_torch(dt, kind, dim, keepdim, shape):
    """max / min over a dim (matrices: a plain fancy index, else take_along_axis): values,
    indices and the gradient as torch's, ties and NaN included."""
    xn = np.random.default_rng(5).normal(size=shape).astype(dt)
    xn.flat[1] = xn.flat[0]
    xn.flat[7] = np.nan
    got = []
    for T in (symgrad, torch):
        x = T.tensor(xn, requires_grad=True)
        v, i = getattr(x, kind)(dim, keepdim)
        g = np.arange(v.numel(), dtype=dt).reshape(tuple(v.shape)) + 1
        v.backward(T.tensor(g))
        got.append((v.grad_fn.name(), v.detach().numpy(), i.numpy(), x.grad.numpy()))
    assert got[0][0] == got[1][0]
    for a, b in zip(got[0][1:], got[1][1:]):
        assert np.array_equal(a, b, equal_nan=True)
