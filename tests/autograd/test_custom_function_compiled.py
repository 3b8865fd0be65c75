"""Custom ``autograd.Function`` inside ``symgrad.compile`` / ``symgrad.grad`` /
``symgrad.hessian``: the forward is traced, the user's backward becomes part of the
symbolic gradient (a ``custom_vjp`` node). Compiled gradients must equal eager symgrad's
and torch's (which run the same backward), on both backends and in both dtypes --
including backwards that are not the derivative of the forward (straight-through),
several outputs, saved outputs, a custom backward inside a backward, and second
derivatives. A Function that needs concrete values gets a clear error."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg
from oracle import rng, tol

DTYPES = (np.float32, np.float64)
BACKENDS = ("numpy", "llvm")


def functions(T):
    """Custom Functions written once, with library T."""
    class Exp(T.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            r = x.exp()
            ctx.save_for_backward(r)
            return r

        @staticmethod
        def backward(ctx, g):
            r, = ctx.saved_tensors
            return g * r

    class StraightThrough(T.autograd.Function):      # backward is not the forward's derivative
        @staticmethod
        def forward(ctx, x):
            return x.clamp(-1, 1)

        @staticmethod
        def backward(ctx, g):
            return g * 0.5

    class CubeAndDouble(T.autograd.Function):        # two outputs, a number argument
        @staticmethod
        def forward(ctx, x, k):
            ctx.save_for_backward(x)
            ctx.k = k
            return x ** 3 * k, x * 2

        @staticmethod
        def backward(ctx, g, g2):
            x, = ctx.saved_tensors
            return g * 3 * x ** 2 * ctx.k + g2 * 2, None

    class Mul(T.autograd.Function):                  # setup_context, two tensor inputs
        @staticmethod
        def forward(x, y):
            return x * y

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(*inputs)

        @staticmethod
        def backward(ctx, g):
            x, y = ctx.saved_tensors
            gx = g * y if ctx.needs_input_grad[0] else None
            gy = g * x if ctx.needs_input_grad[1] else None
            return gx, gy

    class Cube(T.autograd.Function):                 # the double-backward tutorial's
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, grad_out):
            x, = ctx.saved_tensors
            return CubeBackward.apply(grad_out, x)

    class CubeBackward(T.autograd.Function):
        @staticmethod
        def forward(ctx, grad_out, x):
            ctx.save_for_backward(x, grad_out)
            return grad_out * 3 * x ** 2

        @staticmethod
        def backward(ctx, grad_out):
            x, sav_grad_out = ctx.saved_tensors
            return grad_out * 3 * x ** 2, grad_out * sav_grad_out * 6 * x
    return Exp, StraightThrough, CubeAndDouble, Mul, Cube


def loss(T):
    Exp, StraightThrough, CubeAndDouble, Mul, Cube = functions(T)

    def f(x, y):
        a, b = CubeAndDouble.apply(x, 1.5)
        c = Exp.apply(StraightThrough.apply(x) * 0.7) * a
        return c.sum() + (b * b).sum() + Mul.apply(x, y).sum() + Cube.apply(y * 0.5).sum()
    return f


def _inputs(dt):
    r = rng(3)
    return r.uniform(-1.4, 1.4, size=5).astype(dt), r.uniform(-1, 1, size=5).astype(dt)


def _torch_grads(dt, argnums=(0, 1)):
    x, y = (torch.tensor(a, requires_grad=True) for a in _inputs(dt))
    value = loss(torch)(x, y)
    grads = torch.autograd.grad(value, [x, y])
    return value.detach().numpy(), [g.numpy() for g in grads]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dt", DTYPES)
def test_compiled_gradient_uses_the_custom_backward(dt, backend):
    x, y = _inputs(dt)
    want_value, want = _torch_grads(dt)
    xs, ys = sg.tensor(x, requires_grad=True), sg.tensor(y, requires_grad=True)
    eager = sg.autograd.grad(loss(sg)(xs, ys), [xs, ys])
    value, grads = sg.value_and_grad(loss(sg), argnums=(0, 1), backend=backend)(x, y)
    t = tol(dt)
    np.testing.assert_allclose(np.asarray(value), want_value, **t)
    for g, e, w in zip(grads, eager, want):
        np.testing.assert_allclose(e.numpy(), w, **t)
        np.testing.assert_allclose(np.asarray(g), w, **t)


@pytest.mark.parametrize("backend", BACKENDS)
def test_compiled_hessian_differentiates_the_custom_backward(backend):
    x, y = _inputs(np.float64)
    xt, yt = torch.tensor(x), torch.tensor(y)
    want = torch.autograd.functional.hessian(lambda a: loss(torch)(a, yt), xt).numpy()
    got = np.asarray(sg.hessian(lambda a: loss(sg)(a, sg.tensor(y)), backend=backend)(x))
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    want_y = torch.autograd.functional.hessian(lambda b: loss(torch)(xt, b), yt).numpy()
    got_y = np.asarray(sg.hessian(lambda b: loss(sg)(sg.tensor(x), b), backend=backend)(y))
    np.testing.assert_allclose(got_y, want_y, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dt", DTYPES)
def test_compiled_forward_and_jacobian(dt):
    x, y = _inputs(dt)
    Exp, StraightThrough, CubeAndDouble, Mul, Cube = functions(sg)
    f = sg.compile(lambda a: Exp.apply(StraightThrough.apply(a)), backend="numpy")
    np.testing.assert_allclose(np.asarray(f(x)), np.exp(np.clip(x, -1, 1)), **tol(dt))
    TExp, TST = functions(torch)[:2]
    want = torch.autograd.functional.jacobian(lambda a: TExp.apply(TST.apply(a)),
                                              torch.tensor(x)).numpy()
    got = sg.jacobian(lambda a: Exp.apply(StraightThrough.apply(a)), backend="numpy")(x)
    np.testing.assert_allclose(np.asarray(got), want, **tol(dt))


def test_the_gradient_program_shows_the_custom_backward():
    Exp = functions(sg)[0]
    lowered = sg.grad(lambda a: Exp.apply(a).sum(), backend="numpy").lower(np.ones(3))
    raw = lowered.as_text("graph-raw")
    assert "custom_vjp rule=Exp.backward[0]" in raw
    assert "custom_vjp" not in lowered.as_text("graph")      # gone once gradients are built


def test_backward_inside_compile_runs_the_custom_backward_on_traced_tensors():
    Exp = functions(sg)[0]
    x = np.array([0.3, -1.7, 0.9])
    w = sg.tensor([1.0, 2.0, 3.0], dtype=sg.float64, requires_grad=True)

    def step(a):
        Exp.apply(w * a).sum().backward()
        return w.grad * 1
    got = sg.compile(step, backend="numpy")(x)
    wt = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64, requires_grad=True)
    functions(torch)[0].apply(wt * torch.tensor(x)).sum().backward()
    np.testing.assert_allclose(np.asarray(got), wt.grad.numpy(), rtol=1e-12)
    # the call set the eager leaf's .grad, as an eager backward() would
    np.testing.assert_allclose(w.grad.numpy(), wt.grad.numpy(), rtol=1e-12)


def test_once_differentiable_compiles_once_and_refuses_a_second_derivative():
    class Cube(sg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        @sg.autograd.function.once_differentiable
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return g * 3 * x ** 2
    x = np.array([0.3, -1.7, 0.9])
    np.testing.assert_allclose(np.asarray(sg.grad(lambda a: Cube.apply(a).sum(),
                                                  backend="numpy")(x)), 3 * x ** 2)
    with pytest.raises(RuntimeError, match="trying to differentiate twice a function that "
                                           "was marked with @once_differentiable"):
        sg.hessian(lambda a: Cube.apply(a).sum(), backend="numpy")(x)


def test_a_function_that_needs_concrete_values_cannot_be_compiled():
    class NumpyExp(sg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            r = sg.tensor(np.exp(x.numpy()))
            ctx.save_for_backward(r)
            return r

        @staticmethod
        def backward(ctx, g):
            r, = ctx.saved_tensors
            return g * r

    class ItemBackward(sg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return g * float(x.sum())
    x = np.array([0.3, -1.7])
    for fn, part in ((NumpyExp, "forward"), (ItemBackward, "backward")):
        with pytest.raises(TypeError, match=f"custom autograd.Function {fn.__name__} cannot be "
                                            f"traced by symgrad.compile: its {part} needs "
                                            "concrete values"):
            sg.grad(lambda a: fn.apply(a).sum(), backend="numpy")(x)
    # eagerly both work
    xs = sg.tensor(x, requires_grad=True)
    NumpyExp.apply(xs).sum().backward()
    np.testing.assert_allclose(xs.grad.numpy(), np.exp(x))


@pytest.mark.parametrize("backend", BACKENDS)
def test_custom_function_inside_a_scan_body(backend):
    """The reverse loop rebuilds the body on its own inputs: the custom backward's saved
    tensors follow (torch runs the same steps as a Python loop)."""
    def step(T, Exp):
        def body(c, x):
            c = Exp.apply(c * 0.5 + x) * 0.3
            return c, c.sum()
        return body

    def f(c0, xs):
        c, ys = sg.scan(step(sg, functions(sg)[0]), c0, xs)
        return c.sum() + ys.sum()
    c0, xs = np.array([0.1, -0.2]), np.linspace(-1, 1, 6).reshape(3, 2)
    ct = torch.tensor(c0, requires_grad=True)
    body, c, total = step(torch, functions(torch)[0]), ct, 0
    for x in torch.tensor(xs):
        c, y = body(c, x)
        total = total + y
    (c.sum() + total).backward()
    got = np.asarray(sg.grad(f, backend=backend)(c0, xs))
    np.testing.assert_allclose(got, ct.grad.numpy(), rtol=1e-12)
    ce = sg.tensor(c0, requires_grad=True)
    f(ce, sg.tensor(xs)).backward()
    np.testing.assert_allclose(ce.grad.numpy(), ct.grad.numpy(), rtol=1e-12)
