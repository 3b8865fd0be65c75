"""inference_mode against PyTorch 2.13: inference tensors (made inside; views of them
too), PyTorch's errors for using them outside (in place, requires_grad, saved for
backward, ``_version``), views of normal tensors made inside (normal tensors, in place
forbidden in normal mode, no gradient through them), nothing recorded inside even under
``enable_grad``, ``inference_mode(False)``, ``is_inference_mode_enabled``,
``torch.is_inference``, the decorator forms, ``mode`` / ``clone()``; float32 and float64
where values are compared."""
from __future__ import annotations

import numpy as np
import pytest

from oracle import same_as_torch, tol

DTYPES = ("float32", "float64")
SNIPPETS = {}


def snippet(fn):
    SNIPPETS[fn.__name__] = fn
    return fn


@snippet
def basic(T):
    with T.inference_mode():
        x = T.ones(3)
        e = T.is_inference_mode_enabled()
        g = T.is_grad_enabled()
    return x.is_inference(), e, g, T.is_inference_mode_enabled(), x.requires_grad


@snippet
def mode_false(T):
    with T.inference_mode():
        with T.inference_mode(False):
            x = T.ones(3)
            e = T.is_inference_mode_enabled()
            g = T.is_grad_enabled()
    return x.is_inference(), e, g


@snippet
def mode_false_outside(T):
    with T.inference_mode(False):
        x = T.ones(3)
        e = T.is_inference_mode_enabled()
        g = T.is_grad_enabled()
    return x.is_inference(), e, g


@snippet
def decorator(T):
    @T.inference_mode()
    def f(x):
        return x * 2, T.is_inference_mode_enabled()
    y, e = f(T.ones(2, requires_grad=True))
    return y.is_inference(), e, y.requires_grad


@snippet
def decorator_bare(T):
    @T.inference_mode
    def f(x):
        return x * 2
    y = f(T.ones(2, requires_grad=True))
    return y.is_inference(), y.requires_grad


@snippet
def decorator_false(T):
    @T.inference_mode(False)
    def f(x):
        return x * 2
    with T.inference_mode():
        y = f(T.ones(2, requires_grad=True))
    return y.is_inference(), y.requires_grad


@snippet
def inplace_outside(T):
    with T.inference_mode():
        x = T.ones(3)
    x.add_(1)


@snippet
def inplace_inside(T):
    with T.inference_mode():
        x = T.ones(3)
    with T.inference_mode():
        x.add_(1)
    return x


@snippet
def inplace_normal_inside(T):
    x = T.ones(3)
    with T.inference_mode():
        x.add_(1)
    return x, x._version


@snippet
def setitem_outside(T):
    with T.inference_mode():
        x = T.ones(3)
    x[0] = 2


@snippet
def view_outside_inplace(T):
    with T.inference_mode():
        x = T.ones(3)
    v = x[1:]
    return v.is_inference()


@snippet
def view_outside_inplace2(T):
    with T.inference_mode():
        x = T.ones(3)
    v = x[1:]
    v.mul_(2)


@snippet
def saved(T):
    with T.inference_mode():
        x = T.ones(3)
    x * T.ones(3, requires_grad=True)


@snippet
def saved_not_needed(T):
    with T.inference_mode():
        x = T.ones(3)
    y = x + T.ones(3, requires_grad=True)
    y.sum().backward()
    return y, y.is_inference()


@snippet
def saved_exp(T):
    with T.inference_mode():
        x = T.ones(3)
    x.requires_grad
    return x.exp()


@snippet
def reqgrad(T):
    with T.inference_mode():
        x = T.ones(3)
    x.requires_grad_()


@snippet
def reqgrad_false(T):
    with T.inference_mode():
        x = T.ones(3)
    x.requires_grad_(False)
    return x.requires_grad


@snippet
def reqgrad_attr(T):
    with T.inference_mode():
        x = T.ones(3)
    x.requires_grad = True


@snippet
def reqgrad_inside(T):
    with T.inference_mode():
        x = T.ones(3)
        x.requires_grad_()
        y = x * 2
    return x.requires_grad, y.requires_grad, y.grad_fn


@snippet
def create_reqgrad_inside(T):
    with T.inference_mode():
        x = T.ones(3, requires_grad=True)
        y = x * 2
    return x.requires_grad, y.requires_grad, x.is_inference()


@snippet
def normal_in_inference(T):
    a = T.ones(3, requires_grad=True)
    with T.inference_mode():
        b = a * 2
        c = a.view(3)
        d = a[1:]
    return b.is_inference(), b.requires_grad, c.is_inference(), c.requires_grad, d.is_inference(), d.requires_grad, c.grad_fn


def _view_updated(requires_grad: bool, inside: bool):
    """A view of a normal tensor made in inference mode, updated in place inside or
    after the block."""
    def run(T):
        a = T.ones(3, requires_grad=True) * 1 if requires_grad else T.ones(3)
        with T.inference_mode():
            c = a.view(3)
            if inside:
                c.add_(1)
        if not inside:
            c.add_(1)
        return a
    return run


SNIPPETS["view_of_normal_inplace"] = _view_updated(False, False)
SNIPPETS["view_of_normal_inplace_reqgrad"] = _view_updated(True, False)
SNIPPETS["view_inside_inplace_inside"] = _view_updated(True, True)


@snippet
def inference_mixed(T):
    with T.inference_mode():
        x = T.ones(3)
    y = x * 2
    z = x + T.ones(3)
    return y.is_inference(), z.is_inference(), y.requires_grad


@snippet
def clone(T):
    with T.inference_mode():
        x = T.ones(3)
    y = x.clone().requires_grad_()
    (y*y).sum().backward()
    return y.grad, y.is_inference()


@snippet
def detach(T):
    with T.inference_mode():
        x = T.ones(3)
    return x.detach().is_inference(), x.data.is_inference()


@snippet
def nograd_inside(T):
    with T.inference_mode():
        with T.no_grad(): e = T.is_inference_mode_enabled()
        with T.enable_grad():
            x = T.ones(3, requires_grad=True)
            y = x * 2
            e2 = T.is_inference_mode_enabled(), T.is_grad_enabled()
    return e, e2, y.requires_grad, y.is_inference()


@snippet
def inference_zero_grad(T):
    x = T.ones(3, requires_grad=True)
    (x * 2).sum().backward()
    with T.inference_mode():
        x.grad.zero_()
        x.grad.add_(1)
    return x.grad, x.grad.is_inference()


@snippet
def param_update(T):
    x = T.ones(3, requires_grad=True)
    (x * 2).sum().backward()
    with T.inference_mode():
        x.sub_(x.grad * 0.1)
    return x, x._version


@snippet
def param_update_outside_then(T):
    x = T.ones(3, requires_grad=True)
    with T.inference_mode():
        y = x * 2
    z = x * y
    z.sum().backward()


@snippet
def inf_as_grad_out(T):
    x = T.ones(3, requires_grad=True)
    with T.inference_mode():
        g = T.ones(3)
    y = x.exp()
    y.backward(g)
    return x.grad


@snippet
def inf_assign_grad(T):
    x = T.ones(3, requires_grad=True)
    with T.inference_mode():
        g = T.ones(3)
    x.grad = g
    return x.grad.is_inference()


@snippet
def inf_resize_view_outside(T):
    with T.inference_mode():
        x = T.ones(2, 3)
    return x.view(6).is_inference(), x.t().is_inference(), x.reshape(3, 2).is_inference(), x[0].is_inference(), x.sum().is_inference()


@snippet
def inf_tensor_nested_ctx(T):
    out = []
    with T.inference_mode():
        out.append(T.is_inference_mode_enabled())
        with T.inference_mode(False):
            out.append(T.is_inference_mode_enabled())
            x = T.ones(1, requires_grad=True)
            y = x * 2
            out.append((y.requires_grad, y.is_inference()))
        out.append(T.is_inference_mode_enabled())
    return out


@snippet
def inf_set_grad_enabled_inside(T):
    with T.inference_mode():
        T.set_grad_enabled(True)
        x = T.ones(1, requires_grad=True)
        y = x * 2
        r = y.requires_grad, T.is_grad_enabled()
    return r, T.is_grad_enabled()


@snippet
def inf_tensor_in_autograd_grad(T):
    with T.inference_mode():
        x = T.ones(3)
    w = T.ones(3, requires_grad=True)
    return T.autograd.grad((w.exp() + x).sum(), w)


@snippet
def inf_leaf_backward_inplace(T):
    with T.inference_mode():
        x = T.ones(3)
    y = T.ones(3, requires_grad=True)
    x.copy_(y)


@snippet
def inf_tensor_inside_copy(T):
    with T.inference_mode():
        x = T.ones(3)
    y = T.ones(3)
    y.copy_(x)
    return y.is_inference()


@snippet
def inf_exit_restores_on_error(T):
    try:
        with T.inference_mode():
            raise ValueError
    except ValueError:
        pass
    return T.is_inference_mode_enabled(), T.is_grad_enabled()


@snippet
def inf_version(T):
    with T.inference_mode():
        x = T.ones(3)
        x.add_(1)
    return x._version


@snippet
def inf_version2(T):
    x = T.ones(3)
    with T.inference_mode():
        x * 2
        x.add_(1)
    return x._version


@snippet
def normal_view_created_in_inf_reqgrad(T):
    a = T.ones(3, requires_grad=True)
    with T.inference_mode():
        c = a[:2]
    c.sum().backward()
    return a.grad


@snippet
def inf_sum_backward(T):
    with T.inference_mode():
        x = T.ones(3)
    w = T.ones(3, requires_grad=True)
    (w * x.sum()).sum()


@snippet
def inf_mm(T):
    with T.inference_mode():
        x = T.ones(3, 3)
    w = T.ones(3, 3, requires_grad=True)
    (w @ x).sum()


@snippet
def inf_softmax(T):
    with T.inference_mode():
        x = T.ones(3)
    w = T.ones(3, requires_grad=True)
    T.softmax(x + w, 0)
    return (x + w).softmax(0)


@snippet
def inf_custom_fn_save(T):
    class F(T.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(b)
            return a * 2
        @staticmethod
        def backward(ctx, g): return g, None
    with T.inference_mode():
        x = T.ones(3)
    w = T.ones(3, requires_grad=True)
    F.apply(w, x)


@snippet
def view_backward(T):
    a = T.ones(3, requires_grad=True)
    with T.inference_mode():
        c = a.view(3)
    c.backward(T.ones(3))


@snippet
def view_ops(T):
    a = T.ones(3, requires_grad=True)
    with T.inference_mode():
        c = a[1:]
    d = c * 2
    e = (c * a[1:]).sum()
    e.backward()
    return d, d.grad_fn.next_functions, a.grad, c.grad, c.is_leaf, c.requires_grad, c._version


@snippet
def view_hook(T):
    a = T.ones(3, requires_grad=True)
    with T.inference_mode():
        c = a[1:]
    c.register_hook(lambda g: g)
    return c.requires_grad


@snippet
def view_other_operand(T):
    a = T.ones(3)
    w = T.ones(3, requires_grad=True)
    with T.inference_mode():
        c = a.view(3)
    c.add_(w)


@snippet
def view_nograd_inplace(T):
    a = T.ones(3, requires_grad=True)
    with T.inference_mode():
        c = a.view(3)
    with T.no_grad():
        c.mul_(2)
    return a


@snippet
def view_of_view_inference(T):
    with T.inference_mode():
        x = T.ones(2, 3)
        v = x[0]
    w = v.view(3)
    return v.is_inference(), w.is_inference()


@snippet
def numpy_in_inference_enable(T):
    with T.inference_mode():
        with T.enable_grad():
            x = T.ones(2, requires_grad=True)
            return x.numpy().tolist()


@snippet
def grad_in_inference(T):
    x = T.ones(2, requires_grad=True)
    y = (x * x).sum()
    with T.inference_mode():
        y.backward()
    return x.grad, x.grad.is_inference()


@snippet
def grad_in_inference_create(T):
    x = T.ones(2, requires_grad=True)
    y = (x * x).sum()
    with T.inference_mode():
        g, = T.autograd.grad(y, x, create_graph=True)
    return g, g.requires_grad, g.is_inference()


@snippet
def inf_tensor_reqgrad_false_attr(T):
    with T.inference_mode():
        x = T.ones(3)
    x.requires_grad = False
    return x.requires_grad


@snippet
def inf_setitem_inside_normal(T):
    with T.inference_mode():
        x = T.zeros(3)
        x[1] = 5
    return x


@snippet
def clone_ctx(T):
    m = T.inference_mode(False)
    c = m.clone()
    return type(c).__name__, c.mode


@snippet
def inf_non_bool(T):
    @T.inference_mode(0)
    def f():
        return T.is_inference_mode_enabled()
    return "decorated"


@snippet
def nn_module_in_inference(T):
    T.manual_seed(0)
    m = T.nn.Linear(3, 2)
    with T.inference_mode():
        y = m(T.ones(1, 3))
    return y.is_inference(), y.requires_grad, m.weight.is_inference()


@snippet
def inference_then_train(T):
    T.manual_seed(0)
    m = T.nn.Linear(3, 2)
    with T.inference_mode():
        x = T.ones(1, 3)
    m(x)


@snippet
def inference_then_train_clone(T):
    m = T.nn.Linear(3, 2)
    with T.inference_mode():
        x = T.ones(1, 3)
    y = m(x.clone()).sum()
    y.backward()
    return m.bias.grad


@snippet
def decorated_generators_run_each_step_in_the_mode(T):
    out = []

    @T.inference_mode()
    def gen(n):
        for i in range(n):
            x = yield (i, T.is_inference_mode_enabled(), T.is_grad_enabled())
            out.append(("sent", x, T.is_inference_mode_enabled()))
        return "done"
    g = gen(2)
    out.append(next(g))
    out.append(T.is_inference_mode_enabled())
    out.append(g.send("a"))
    try:
        g.send("b")
    except StopIteration as e:
        out.append(("stop", e.value))

    @T.no_grad()
    def gen2():
        yield T.is_grad_enabled()
        yield T.is_grad_enabled()
    out.append(list(gen2()))

    @T.inference_mode
    def gen3():
        try:
            yield 1
        except ValueError:
            yield ("caught", T.is_inference_mode_enabled())
    g = gen3()
    next(g)
    out.append(g.throw(ValueError()))
    g.close()
    return out


@snippet
def grad_mode_decorators(T):
    @T.no_grad
    def f1():
        return T.is_grad_enabled()

    @T.enable_grad
    def f2():
        return T.is_grad_enabled()

    @T.set_grad_enabled(False)
    def f3():
        return T.is_grad_enabled()
    out = [f1(), T.is_grad_enabled()]
    with T.no_grad():
        out.append(f2())
    out.append((f3(), T.is_grad_enabled()))
    out.append((type(T.no_grad().clone()).__name__, type(T.enable_grad().clone()).__name__))
    return out


@snippet
def context_attributes(T):
    m = T.inference_mode()
    return type(m).__name__, m.mode, T.inference_mode(False).mode, m.clone().mode


@snippet
def is_inference_function(T):
    with T.inference_mode():
        x = T.ones(2)
    out = [T.is_inference(x), T.is_inference(T.ones(2))]
    try:
        T.is_inference(3)
    except TypeError as e:
        out.append(str(e))
    return out


@pytest.mark.parametrize("name", sorted(SNIPPETS))
def test_inference_mode_as_pytorchs(name):
    same_as_torch(SNIPPETS[name])


@pytest.mark.parametrize("dt", DTYPES)
def test_values_computed_in_inference_mode(dt):
    def snippet(T):
        T.manual_seed(0)
        x = T.tensor(np.linspace(-2, 2, 12).reshape(3, 4).astype(dt))
        w = T.tensor(np.linspace(0.5, 1.5, 8).reshape(4, 2).astype(dt), requires_grad=True)
        with T.inference_mode():
            y = (x @ w).tanh().softmax(1)
            v = x[1:].t()
        z = (x.clone() @ w).tanh().softmax(1).sum()
        z.backward()
        return y, y.is_inference(), v.is_inference(), w.grad
    t = tol(np.dtype(dt))
    same_as_torch(snippet, rtol=t["rtol"] * 10, atol=t["atol"] * 10)
