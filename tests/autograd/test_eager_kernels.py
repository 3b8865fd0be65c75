"""The eager kernels of named composites (symgrad/functions/kernels.py) against torch:
values, grad_fn names, gradients (array and Tensor cotangents), second derivatives,
saved outputs with their version check, hooks on the node, retain_graph and freeing,
non-finite rows, no_grad -- in both dtypes; and the generic path (saved-tensor hooks,
anomaly mode, tracing) giving the same answers."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg

from oracle import DTYPES, assert_close, check, rng, tol

D = pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
OPS = {"softmax": (lambda m, x, d: m.softmax(x, d), "SoftmaxBackward0"),
       "log_softmax": (lambda m, x, d: m.log_softmax(x, d), "LogSoftmaxBackward0")}
K = pytest.mark.parametrize("op", list(OPS))


def _x(shape, dtype, seed=0, scale=3.0):
    return np.asarray(rng(seed).standard_normal(shape) * scale).astype(dtype)


@D
@K
@pytest.mark.parametrize("shape,dim", [((4, 5), 1), ((4, 5), 0), ((2, 3, 4), -1),
                                       ((2, 3, 4), 1), ((7,), 0), ((), 0), ((0, 3), 1),
                                       ((3, 0), 1)])
def test_values_names_gradients(op, dtype, shape, dim):
    f, name = OPS[op]
    s, t = check(lambda m, x: f(m, x, dim), _x(shape, dtype))
    assert type(s.grad_fn).__name__ == name


@D
@K
def test_no_grad_and_method_form(op, dtype):
    f, _ = OPS[op]
    a = _x((3, 6), dtype)
    with sg.no_grad():
        s = getattr(sg.tensor(a, requires_grad=True), op)(1)
    assert s.grad_fn is None and not s.requires_grad
    assert_close(s, f(torch, torch.tensor(a), 1))


@D
@K
def test_second_derivative(op, dtype):
    f, _ = OPS[op]
    a = _x((3, 4), dtype)
    v = _x((3, 4), dtype, seed=1)
    res = []
    for m in (sg, torch):
        x = m.tensor(a, requires_grad=True)
        y = f(m, x, 1)
        (g,) = m.autograd.grad((y * y).sum(), x, create_graph=True)
        (h,) = m.autograd.grad((g * m.tensor(v)).sum(), x)
        res.append((g, h))
    assert_close(res[0][0], res[1][0])
    assert_close(res[0][1], res[1][1], rtol=1e-4 if dtype == np.float32 else 1e-9,
                 atol=1e-5 if dtype == np.float32 else 1e-11)


def _error(run) -> str:
    with pytest.raises(RuntimeError) as e:
        run()
    return str(e.value)


@D
@K
def test_tensor_cotangent_through_hook(op, dtype):
    """A hook on the output makes the engine hand a Tensor cotangent to the node."""
    f, _ = OPS[op]
    a, u = _x((3, 4), dtype), _x((3, 4), dtype, 2)

    def run(m):
        x = m.tensor(a, requires_grad=True)
        y = f(m, x, 1)
        y.register_hook(lambda g: g * 2)
        seen = []
        y.grad_fn.register_hook(lambda gi, go: seen.append(gi[0].clone()))
        (y * m.tensor(u)).sum().backward()
        return x.grad, seen[0]
    assert_close(run(sg), run(torch))


@D
@K
def test_saved_output_version_check_and_freeing(op, dtype):
    f, _ = OPS[op]
    a = _x((2, 3), dtype)
    s = f(sg, sg.tensor(a, requires_grad=True), 1)
    assert_close(s.grad_fn._saved_result, f(torch, torch.tensor(a), 1))

    def modified(m):
        y = f(m, m.tensor(a, requires_grad=True), 1)
        y.add_(1)
        return _error(lambda: y.sum().backward())

    def twice(m):
        y = f(m, m.tensor(a, requires_grad=True), 1).sum()
        y.backward()
        return _error(y.backward)
    assert modified(sg) == modified(torch)
    assert twice(sg) == twice(torch)


@D
@K
def test_retain_graph_twice(op, dtype):
    f, _ = OPS[op]
    a, u = _x((2, 5), dtype), _x((2, 5), dtype, 3)

    def run(m):
        x = m.tensor(a, requires_grad=True)
        y = (f(m, x, 1) * m.tensor(u)).sum()
        y.backward(retain_graph=True)
        y.backward()
        return x.grad
    assert_close(run(sg), run(torch))


@D
@K
def test_non_finite_rows(op, dtype):
    f, _ = OPS[op]
    a = np.array([[1.0, -np.inf, 2.0], [-np.inf, -np.inf, -np.inf], [np.inf, 0.0, 1.0],
                  [np.nan, 0.0, 1.0], [1000.0, -1000.0, 0.0]], dtype)
    check(lambda m, x: f(m, x, 1), a)


@D
@K
def test_generic_paths_agree(op, dtype):
    """Saved-tensor hooks and anomaly mode take the recorded primitives: same answers."""
    f, name = OPS[op]
    a = _x((3, 4), dtype)
    u = _x((3, 4), dtype, seed=5)
    x = torch.tensor(a, requires_grad=True)
    (f(torch, x, 1) * torch.tensor(u)).sum().backward()
    for ctx in (lambda: sg.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t),
                lambda: sg.autograd.detect_anomaly()):
        with ctx():
            s = sg.tensor(a, requires_grad=True)
            y = f(sg, s, 1)
        assert type(y.grad_fn).__name__ == name
        (y * sg.tensor(u)).sum().backward()
        assert_close(s.grad, x.grad, **tol(dtype))


@D
@K
def test_compiled_gradient(op, dtype):
    f, _ = OPS[op]
    a = _x((3, 4), dtype)
    g = sg.compile(sg.grad(lambda x: (f(sg, x, 1) * f(sg, x, 1)).sum()))
    x = torch.tensor(a, requires_grad=True)
    (f(torch, x, 1) * f(torch, x, 1)).sum().backward()
    assert_close(g(sg.tensor(a)), x.grad, rtol=1e-4 if dtype == np.float32 else 1e-9)


LOSSES = {"cross_entropy": ("NllLossBackward0", lambda m: m.nn.functional.cross_entropy),
          "nll_loss": ("NllLossBackward0", lambda m: m.nn.functional.nll_loss)}


@D
@pytest.mark.parametrize("loss", list(LOSSES))
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("target", [[0, 2, 1, 2], [0, -100, 3, -100], [-100] * 4, [1]],
                         ids=["plain", "ignored", "all-ignored", "1d"])
def test_nll_losses(loss, reduction, target, dtype):
    name, f = LOSSES[loss]
    shape = (4,) if len(target) == 1 else (4, 5)
    t = np.array(target if len(target) > 1 else target[0], np.int64)
    s, _ = check(lambda m, x, tt: f(m)(x, tt, reduction=reduction), _x(shape, dtype), t,
                 names=False)
    assert type(s.grad_fn).__name__ == name


@D
def test_cross_entropy_second_derivative_and_uint8_target(dtype):
    a = _x((3, 4), dtype)
    v = _x((3, 4), dtype, seed=7)
    res = []
    for m in (sg, torch):
        x = m.tensor(a, requires_grad=True)
        y = m.nn.functional.cross_entropy(x, m.tensor([1, 3, 0]))
        (g,) = m.autograd.grad(y, x, create_graph=True)
        (h,) = m.autograd.grad((g * m.tensor(v)).sum(), x)
        z = m.nn.functional.nll_loss(x.log_softmax(1), m.tensor([1, 3, 0], dtype=m.uint8),
                                     reduction="sum")
        res.append((y, g, h, z))
    for a_, b_ in zip(*res):
        assert_close(a_, b_, rtol=1e-4 if dtype == np.float32 else 1e-9,
                     atol=1e-6 if dtype == np.float32 else 1e-12)


@D
@pytest.mark.parametrize("shape", [(4, 5), (), (0,), (2, 3, 2)])
def test_gelu(shape, dtype):
    a = _x(shape, dtype)
    if a.size:
        a.reshape(-1)[0] = 0.0
    s, _ = check(lambda m, x: m.nn.functional.gelu(x), a)
    assert type(s.grad_fn).__name__ == "GeluBackward0"
    v = _x(shape, dtype, seed=4)
    res = []
    for m in (sg, torch):
        x = m.tensor(a, requires_grad=True)
        (g,) = m.autograd.grad((m.nn.functional.gelu(x) * m.tensor(v)).sum(), x,
                               create_graph=True)
        (h,) = m.autograd.grad((g * g).sum(), x)
        res.append((g, h))
    assert_close(res[0], res[1], rtol=1e-4 if dtype == np.float32 else 1e-9,
                 atol=1e-6 if dtype == np.float32 else 1e-12)

    def modified(m):          # the saved input updated in place: PyTorch's error
        x = m.tensor(a, requires_grad=True) * 1
        y = m.nn.functional.gelu(x)
        x.add_(1)
        return _error(lambda: y.sum().backward())
    if a.size:
        assert modified(sg) == modified(torch)


@D
@pytest.mark.parametrize("kind", ["max", "min"])
@pytest.mark.parametrize("shape,dim,keepdim", [((4, 5), 1, False), ((4, 5), 0, True),
                                               ((2, 3, 4), -1, False), ((3,), 0, False),
                                               ((2, 3, 4), 1, True)])
def test_max_min_dim(kind, shape, dim, keepdim, dtype):
    a = _x(shape, dtype)
    a.reshape(-1)[:2] = 7.0           # a tie: the first index, as PyTorch
    s, _ = check(lambda m, x: getattr(x, kind)(dim, keepdim=keepdim), a)
    assert type(s[0].grad_fn).__name__ == f"{kind.capitalize()}Backward0"
    v = _x(s[0].shape, dtype, seed=3)
    res = []
    for m in (sg, torch):
        x = m.tensor(a, requires_grad=True)
        y = getattr(x * x, kind)(dim, keepdim=keepdim)[0]
        (g,) = m.autograd.grad((y * m.tensor(v)).sum(), x, create_graph=True)
        (h,) = m.autograd.grad((g * g).sum(), x)
        res.append((g, h))
    assert_close(res[0], res[1])


@D
@pytest.mark.parametrize("xshape,bshape", [((5, 3), (4,)), ((2, 5, 3), (4,)), ((3,), (4,)),
                                           ((5, 3), ()), ((5, 3), (5, 4)), ((5, 3), (1, 4))])
@pytest.mark.parametrize("needs", [(True, True, True), (True, False, False),
                                   (False, True, False), (False, False, True)])
def test_linear_kernel(xshape, bshape, needs, dtype):
    """linear with a bias (AddmmBackward0) through its eager kernel: values, names,
    gradients of whichever inputs require grad, and the saved inputs PyTorch keeps."""
    arrays = [_x(xshape, dtype), _x((4, 3), dtype, 1), _x(bshape, dtype, 2)]
    check(lambda m, x, w, b: m.nn.functional.linear(x, w, b), *arrays, requires_grad=needs)
    s, t = (m.nn.functional.linear(*(m.tensor(a, requires_grad=n) for a, n in zip(arrays, needs)))
            for m in (sg, torch))
    fs, ft = s.grad_fn, t.grad_fn
    if len(xshape) != 2:
        fs, ft = fs.next_functions[0][0], ft.next_functions[0][0]
    assert type(fs).__name__ == type(ft).__name__
    for name in ("_saved_mat1", "_saved_mat2"):
        a, b = getattr(fs, name), getattr(ft, name)
        assert (a is None) == (b is None)
        if b is not None:
            assert_close(a, b)


@D
def test_linear_kernel_second_derivative_and_errors(dtype):
    a, w, b = _x((5, 3), dtype), _x((4, 3), dtype, 1), _x((4,), dtype, 2)
    res = []
    for m in (sg, torch):
        x, W = m.tensor(a, requires_grad=True), m.tensor(w, requires_grad=True)
        y = m.nn.functional.linear(x, W, m.tensor(b))
        (g,) = m.autograd.grad((y * y).sum(), W, create_graph=True)
        res.append((g,) + m.autograd.grad((g * g).sum(), x))
    assert_close(res[0], res[1])
    for bad in (np.zeros(3, dtype), ):
        msgs = []
        for m in (sg, torch):
            with pytest.raises(RuntimeError) as e:
                m.nn.functional.linear(m.tensor(a), m.tensor(w), m.tensor(bad))
            msgs.append(str(e.value))
        assert msgs[0] == msgs[1]


@D
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("shape", [(4, 5), (7,), ()])
def test_mse_loss_kernel(reduction, shape, dtype):
    a, b = _x(shape, dtype), _x(shape, dtype, 1)
    check(lambda m, x, y: m.nn.functional.mse_loss(x, y, reduction=reduction), a, b)
    s, t = (m.nn.functional.mse_loss(m.tensor(a, requires_grad=True), m.tensor(b),
                                      reduction=reduction) for m in (sg, torch))
    assert_close(s.grad_fn._saved_self, t.grad_fn._saved_self)
    assert_close(s.grad_fn._saved_target, t.grad_fn._saved_target)
    res = []
    for m in (sg, torch):     # second derivative through the kernel's node
        x, y = m.tensor(a, requires_grad=True), m.tensor(b, requires_grad=True)
        loss = m.nn.functional.mse_loss(x * x, y, reduction=reduction).sum()
        (g,) = m.autograd.grad(loss, x, create_graph=True)
        res.append((g,) + m.autograd.grad(g.sum(), (x, y)))
    assert_close(res[0], res[1])
