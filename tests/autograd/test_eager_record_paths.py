"""The eager recording fast paths against torch: unary methods and binary operators
(bind_unary / bind_binary, _record_pair), stack and cat of eager tensors, nll_loss /
cross_entropy when every target is a class index, and the array-only backward loop --
values, grad_fn names, next_functions, saved operands, gradients, second derivatives
(create_graph through the same nodes), version-counter errors, hooks, retain_graph, in
both dtypes."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg

from oracle import DTYPES, assert_close, rng

D = pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])


def _x(shape, dtype, seed=0, positive=False):
    a = rng(seed).standard_normal(shape)
    if positive:
        a = np.abs(a) + 0.5
    return np.asarray(a).astype(dtype)


UNARY = ["exp", "log", "sqrt", "sin", "cos", "tanh", "sigmoid", "relu", "abs", "neg",
         "rsqrt", "expm1", "log1p", "reciprocal", "__neg__", "__abs__"]


def _both(fn, arrays, requires_grad=True):
    """fn(m, *tensors) for m in (symgrad, torch) on tensors of `arrays`."""
    out = []
    for m in (sg, torch):
        ts = [m.tensor(a, requires_grad=requires_grad) for a in arrays]
        out.append((ts, fn(m, *ts)))
    return out


@D
@pytest.mark.parametrize("op", UNARY)
def test_unary_methods(op, dtype):
    a = _x((3, 4), dtype, positive=op in ("log", "sqrt", "rsqrt", "log1p", "reciprocal"))
    g = _x((3, 4), dtype, seed=1)
    (xs, s), (xt, t) = _both(lambda m, x: getattr(x, op)(), [a])
    assert type(s.grad_fn).__name__ == type(t.grad_fn).__name__
    assert_close(s, t.detach())
    s.backward(sg.tensor(g))
    t.backward(torch.tensor(g))
    assert_close(xs[0].grad, xt[0].grad)
    # second derivative through the same node
    res = []
    for m, x in ((sg, sg.tensor(a, requires_grad=True)), (torch, torch.tensor(a, requires_grad=True))):
        (d,) = m.autograd.grad(getattr(x, op)().sum(), x, create_graph=True)
        if not d.requires_grad:       # (a constant first derivative: neg)
            res.append((d, None))
            continue
        (h,) = m.autograd.grad((d * m.tensor(g)).sum(), x, allow_unused=True)
        if m is torch and h is not None and h._is_zerotensor():
            h = torch.zeros_like(x)         # (torch's lazy zeros: abs'' = 0)
        res.append((d, h))
    assert_close(res[0][0], res[1][0].detach())
    assert res[0][0].requires_grad == res[1][0].requires_grad
    if res[1][1] is None:
        assert res[0][1] is None or not np.any(res[0][1].numpy())
    else:
        assert_close(res[0][1], res[1][1])


BINARY = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
          "div": lambda a, b: a / b, "pow": lambda a, b: a ** b,
          "radd": lambda a, b: 2 + a, "rsub": lambda a, b: 2 - a, "rmul": lambda a, b: 3 * a,
          "rdiv": lambda a, b: 3 / a, "add_int": lambda a, b: a + 2, "mul_float": lambda a, b: a * 0.5,
          "maximum": lambda a, b: a.maximum(b), "mul_method": lambda a, b: a.mul(b),
          "true_divide": lambda a, b: a.true_divide(b)}


@D
@pytest.mark.parametrize("op", list(BINARY))
@pytest.mark.parametrize("needs", [(True, True), (True, False), (False, True)])
def test_binary_operators(op, needs, dtype):
    f = BINARY[op]
    a, b = _x((3, 4), dtype, positive=True), _x((4,), dtype, seed=1, positive=True)
    g = _x((3, 4), dtype, seed=2)
    res = []
    for m in (sg, torch):
        x, y = m.tensor(a, requires_grad=needs[0]), m.tensor(b, requires_grad=needs[1])
        out = f(x, y)
        res.append((x, y, out))
    (xs, ys, s), (xt, yt, t) = res
    assert_close(s.detach(), t.detach())
    assert s.requires_grad == t.requires_grad
    if not t.requires_grad:
        assert s.grad_fn is None
        return
    assert type(s.grad_fn).__name__ == type(t.grad_fn).__name__
    if not op.startswith("r"):
        assert [f is None for f, _ in s.grad_fn.next_functions] == \
            [f is None for f, _ in t.grad_fn.next_functions]
    # (scalar-left operators order their operands unlike torch: issue 15 item 6)
    for name in () if op.startswith("r") else ("_saved_self", "_saved_other"):
        if hasattr(t.grad_fn, name):
            vs, vt = getattr(s.grad_fn, name), getattr(t.grad_fn, name)
            assert (vs is None) == (vt is None), name
            if vt is not None:
                assert_close(vs, vt, check_dtype=False)
    s.backward(sg.tensor(g))
    t.backward(torch.tensor(g))
    for u, v in ((xs, xt), (ys, yt)):
        assert (u.grad is None) == (v.grad is None)
        if v.grad is not None:
            assert_close(u.grad, v.grad)


@D
def test_binary_second_derivative(dtype):
    a, b = _x((3, 4), dtype, positive=True), _x((3, 4), dtype, seed=1, positive=True)
    v = _x((3, 4), dtype, seed=2)
    res = []
    for m in (sg, torch):
        x, y = m.tensor(a, requires_grad=True), m.tensor(b, requires_grad=True)
        z = (x * y / (x + y) - 2 * x) ** 2
        gx, gy = m.autograd.grad(z.sum(), (x, y), create_graph=True)
        hx, hy = m.autograd.grad((gx * m.tensor(v) + gy).sum(), (x, y))
        res.append((gx, gy, hx, hy))
    for s, t in zip(*res):
        assert_close(s, t.detach())


def _mul_then_update_other(m, x):
    y = m.tensor([3.0, 4.0])
    z = x * y
    y.add_(1)
    return z


def _exp_then_update_result(m, x):
    z = (x * 1).exp()          # saves its result
    z.add_(1)
    return z


@pytest.mark.parametrize("make", [_mul_then_update_other, _exp_then_update_result])
def test_version_counter_errors(make):
    msgs = []
    for m in (sg, torch):
        z = make(m, m.tensor([1.0, 2.0], requires_grad=True))
        with pytest.raises(RuntimeError) as e:
            z.sum().backward()
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]


def test_operators_on_subclass_and_mixed_dtypes():
    for m in (sg, torch):
        p = m.nn.Parameter(m.ones(2))
        q = p * 2 + m.tensor([1, 2])             # int tensor: promotion path
        assert q.dtype == m.float32
        r = m.tensor([1, 2]) + 0.5               # int tensor with a float scalar
        assert r.dtype == m.float32
        s = m.tensor([1.0], dtype=m.float64) * m.tensor([2.0])
        assert s.dtype == m.float64


def test_hooks_and_retain_graph_through_fast_paths():
    res = []
    for m in (sg, torch):
        x = m.tensor([1.0, -2.0, 3.0], requires_grad=True)
        seen = []
        x.register_hook(lambda g: seen.append(g.clone()))
        y = x.tanh()
        y.register_hook(lambda g: g * 2)
        z = (y * x + 1).sum()
        z.backward(retain_graph=True)
        z.backward()
        res.append((x.grad.clone(), [s.clone() for s in seen]))
        with pytest.raises(RuntimeError):
            z.backward()
    assert_close(res[0][0], res[1][0])
    for a, b in zip(res[0][1], res[1][1]):
        assert_close(a, b)


@D
@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_stack(dim, dtype):
    arrays = [_x((3, 4), dtype, seed=k) for k in range(3)]
    (xs, s), (xt, t) = _both(lambda m, *ts: m.stack(ts, dim), arrays)
    assert type(s.grad_fn).__name__ == "StackBackward0" == type(t.grad_fn).__name__
    np.testing.assert_array_equal(s.detach().numpy(), t.detach().numpy())
    g = _x(tuple(t.shape), dtype, seed=9)
    s.backward(sg.tensor(g))
    t.backward(torch.tensor(g))
    for u, v in zip(xs, xt):
        np.testing.assert_array_equal(u.grad.numpy(), v.grad.numpy())
        assert u.grad.numpy().flags.c_contiguous


@D
def test_stack_non_contiguous_and_second_derivative(dtype):
    a = _x((4, 3), dtype)
    res = []
    for m in (sg, torch):
        x = m.tensor(a, requires_grad=True)
        y = m.stack([x.t(), x.t() * 2], 1)
        (g,) = m.autograd.grad((y * y).sum(), x, create_graph=True)
        (h,) = m.autograd.grad(g.sum(), x)
        res.append((y, g, h))
    for s, t in zip(*res):
        assert_close(s, t.detach())


@D
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("needs", [(True, True), (True, False), (False, True)])
def test_cat(dim, needs, dtype):
    a, b = _x((2, 3), dtype), _x((2, 3), dtype, seed=1)
    res = []
    for m in (sg, torch):
        x, y = m.tensor(a, requires_grad=needs[0]), m.tensor(b, requires_grad=needs[1])
        out = m.cat([x, y], dim)
        res.append((x, y, out))
    (xs, ys, s), (xt, yt, t) = res
    np.testing.assert_array_equal(s.detach().numpy(), t.detach().numpy())
    assert type(s.grad_fn).__name__ == type(t.grad_fn).__name__
    assert len(s.grad_fn.next_functions) == len(t.grad_fn.next_functions)
    g = _x(tuple(t.shape), dtype, seed=5)
    s.backward(sg.tensor(g))
    t.backward(torch.tensor(g))
    for u, v in ((xs, xt), (ys, yt)):
        assert (u.grad is None) == (v.grad is None)
        if v.grad is not None:
            np.testing.assert_array_equal(u.grad.numpy(), v.grad.numpy())


def test_cat_mixed_dtypes_and_errors():
    for m in (sg, torch):
        out = m.cat([m.ones(2, requires_grad=True), m.ones(2, dtype=m.float64)])
        assert out.dtype == m.float64 and out.requires_grad
    errs = []
    for m in (sg, torch):
        with pytest.raises(RuntimeError) as e:
            m.cat([m.ones(2, 3), m.ones(3, 3)], 1)
        errs.append(str(e.value))
    assert errs[0] == errs[1]


@D
@pytest.mark.parametrize("ignore_index", [-100, 0, 2, 7])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_ignore_index(ignore_index, reduction, dtype):
    a = _x((5, 4), dtype)
    y = np.array([0, 2, 1, 2, 3])
    res = []
    for m in (sg, torch):
        x = m.tensor(a, requires_grad=True)
        loss = m.nn.functional.cross_entropy(x, m.tensor(y), ignore_index=ignore_index,
                                             reduction=reduction)
        (g,) = m.autograd.grad(loss.sum(), x, create_graph=True)
        (h,) = m.autograd.grad((g * g).sum(), x)
        res.append((loss, g, h, type(loss.grad_fn).__name__))
    assert res[0][3] == res[1][3]
    for s, t in zip(res[0][:3], res[1][:3]):
        assert_close(s, t.detach())


@D
def test_nll_loss_all_targets_in_range_and_bounds(dtype):
    a = _x((3, 4), dtype)
    for y in ([0, 1, 3], [3, 3, 3]):
        res = []
        for m in (sg, torch):
            x = m.tensor(a, requires_grad=True)
            loss = m.nn.functional.nll_loss(x, m.tensor(y))
            loss.backward()
            res.append((loss, x.grad))
        for s, t in zip(*res):
            assert_close(s, t.detach())
    errs = []
    for m in (sg, torch):
        with pytest.raises(IndexError) as e:
            m.nn.functional.nll_loss(m.tensor(a), m.tensor([0, 4, 1]))
        errs.append(str(e.value))
    assert errs[0] == errs[1]


def test_backward_accumulates_and_steals_as_torch():
    """Two paths into one leaf, a leaf used twice, .grad accumulated over two backwards."""
    res = []
    for m in (sg, torch):
        x = m.tensor([1.0, 2.0, 3.0], requires_grad=True)
        w = m.tensor([0.5, -1.0, 2.0], requires_grad=True)
        for _ in range(2):
            h = x * w
            loss = (h.exp() + h * x).sum()
            loss.backward()
        res.append((x.grad, w.grad))
    for s, t in zip(*res):
        assert_close(s, t)


@D
@pytest.mark.parametrize("affine", [(False, False), (True, False), (True, True)])
@pytest.mark.parametrize("shape,k", [((4, 5), 1), ((2, 3, 4), 2)])
def test_layer_norm_gradients(affine, shape, k, dtype):
    a = _x(shape, dtype)
    w, b = _x(shape[-k:], dtype, seed=1), _x(shape[-k:], dtype, seed=2)
    g = _x(shape, dtype, seed=3)
    res = []
    for m in (sg, torch):
        x = m.tensor(a, requires_grad=True)
        params = [m.tensor(w, requires_grad=True) if affine[0] else None,
                  m.tensor(b, requires_grad=True) if affine[1] else None]
        y = m.nn.functional.layer_norm(x, shape[-k:], *params)
        grads = m.autograd.grad(y, [x] + [p for p in params if p is not None], m.tensor(g),
                                create_graph=True)
        (h,) = m.autograd.grad((grads[0] * grads[0]).sum(), x)
        res.append((y,) + tuple(grads) + (h, type(y.grad_fn).__name__))
    assert res[0][-1] == res[1][-1] == "NativeLayerNormBackward0"
    for s, t in zip(res[0][:-1], res[1][:-1]):
        assert_close(s, t.detach())


@D
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss_backward_spatial_and_matrix(reduction, dtype):
    for shape, y in (((3, 4), [1, 0, 3]), ((2, 3, 5), [[0, 1, 2, 2, 1], [2, 2, 0, 1, 0]])):
        a = _x(shape, dtype)
        res = []
        for m in (sg, torch):
            x = m.tensor(a, requires_grad=True)
            loss = m.nn.functional.nll_loss(x, m.tensor(y), reduction=reduction)
            loss.sum().backward()
            res.append((loss, x.grad))
        for s, t in zip(*res):
            assert_close(s, t.detach())


@D
@pytest.mark.parametrize("perm", [(1, 0, 2), (2, 0, 1), (0, 1, 2)])
def test_permute(perm, dtype):
    a = _x((2, 3, 4), dtype)
    (xs, s), (xt, t) = _both(lambda m, x: x.permute(*perm), [a])
    np.testing.assert_array_equal(s.detach().numpy(), t.detach().numpy())
    assert s.is_contiguous() == t.is_contiguous()
    assert type(s.grad_fn).__name__ == type(t.grad_fn).__name__
    g = _x(tuple(t.shape), dtype, seed=1)
    s.backward(sg.tensor(g))
    t.backward(torch.tensor(g))
    np.testing.assert_array_equal(xs[0].grad.numpy(), xt[0].grad.numpy())


@D
@pytest.mark.parametrize("needs", [(True, True), (True, False), (False, True), (False, False)])
def test_matmul_of_matrices(needs, dtype):
    a, b = _x((3, 4), dtype), _x((4, 5), dtype, seed=1)
    g = _x((3, 5), dtype, seed=2)
    res = []
    for m in (sg, torch):
        x, y = m.tensor(a, requires_grad=needs[0]), m.tensor(b, requires_grad=needs[1])
        out = x @ y
        if out.requires_grad:
            assert type(out.grad_fn).__name__ == "MmBackward0"
            out.backward(m.tensor(g))
        res.append((out, x.grad, y.grad))
    for s, t in zip(*res):
        assert (s is None) == (t is None)
        if t is not None:
            assert_close(s, t.detach())


def test_matmul_of_matrices_errors_and_second_derivative():
    errs = []
    for m in (sg, torch):
        with pytest.raises(RuntimeError) as e:
            m.ones(2, 3) @ m.ones(2, 3)
        errs.append(str(e.value))
        with pytest.raises(RuntimeError) as e:
            m.ones(2, 3) @ m.ones(3, 2, dtype=m.float64)
        errs.append(str(e.value))
    assert errs[:2] == errs[2:]
    a, b = _x((2, 3), np.float64), _x((3, 2), np.float64, seed=1)
    res = []
    for m in (sg, torch):
        x, y = m.tensor(a, requires_grad=True), m.tensor(b, requires_grad=True)
        (gx,) = m.autograd.grad(((x @ y) ** 2).sum(), x, create_graph=True)
        (hy,) = m.autograd.grad(gx.sum(), y)
        res.append((gx, hy, m.tensor([[1, 2]]) @ m.tensor([[3], [4]])))
    for s, t in zip(*res):
        assert_close(s, t.detach())


@D
@pytest.mark.parametrize("bounds", [(-0.5, 0.5), (None, 1), (0, None), (2, -1), (-3, 2.5)])
def test_clamp_scalar_bounds(bounds, dtype):
    a = _x((3, 4), dtype)
    g = _x((3, 4), dtype, seed=1)
    lo, hi = bounds
    (xs, s), (xt, t) = _both(lambda m, x: x.clamp(lo, hi), [a])
    assert type(s.grad_fn).__name__ == type(t.grad_fn).__name__
    assert str(s.dtype) == str(t.dtype)
    np.testing.assert_array_equal(s.detach().numpy(), t.detach().numpy())
    s.backward(sg.tensor(g))
    t.backward(torch.tensor(g))
    np.testing.assert_array_equal(xs[0].grad.numpy(), xt[0].grad.numpy())


@D
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_max_min_dim(dim, keepdim, dtype):
    a = _x((3, 4), dtype)
    for kind in ("max", "min"):
        (xs, s), (xt, t) = _both(lambda m, x: getattr(x, kind)(dim, keepdim), [a])
        np.testing.assert_array_equal(s.values.detach().numpy(), t.values.detach().numpy())
        np.testing.assert_array_equal(s.indices.numpy(), t.indices.numpy())
        assert type(s.values.grad_fn).__name__ == type(t.values.grad_fn).__name__
        g = _x(tuple(t.values.shape), dtype, seed=1)
        s.values.backward(sg.tensor(g))
        t.values.backward(torch.tensor(g))
        np.testing.assert_array_equal(xs[0].grad.numpy(), xt[0].grad.numpy())


@D
@pytest.mark.parametrize("bounds", [(-0.5, 0.5), (0, 6), (-1, 0), (3, -2), (-np.inf, 1.5),
                                    (-2.5, np.inf), (-1e-40, 1e-40), (5, 5), (-0.0, 1)])
@pytest.mark.parametrize("n", [5, 17, 4096])
def test_clamp_special_values_bits(bounds, n, dtype):
    """clamp's values to the bit against torch's: NaN, +-inf, signed zeros (a zero input
    keeps its sign), bounds crossing, on sizes below and above numpy's vector width."""
    a = (rng(n).standard_normal(n) * 3).astype(dtype)
    sp = rng(n + 1).integers(0, 8, n)
    a[sp == 0], a[sp == 1], a[sp == 2], a[sp == 3], a[sp == 4] = np.nan, -0.0, 0.0, np.inf, -np.inf
    s = sg.tensor(a).clamp(*bounds).numpy()
    t = torch.tensor(a).clamp(*bounds).numpy()
    np.testing.assert_array_equal(s.view(np.uint8), t.view(np.uint8))
