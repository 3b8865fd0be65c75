"""Autograd hooks against PyTorch 2.13: ``Tensor.register_hook`` (leaf and non-leaf, a
replacement gradient, PyTorch's errors for a wrong one), ``retain_grad`` after the hooks,
``register_post_accumulate_grad_hook``, a node's ``register_hook`` / ``register_prehook``
(AccumulateGrad's too), handles, the order hooks run in, hooks under ``autograd.grad``,
``backward(inputs=...)`` and ``create_graph`` (second derivatives through a hook), and on
custom Functions' nodes; float32 and float64."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from oracle import rng, run_snippet, same_as_torch, tol

DTYPES = ("float32", "float64")


def _same(snippet, dt):
    t = tol(np.dtype(dt))
    return same_as_torch(snippet, rtol=t["rtol"] * 10, atol=t["atol"] * 10)


def _t(T, dt, *shape, seed=0, grad=True):
    return T.tensor(rng(seed).standard_normal(shape).astype(dt), requires_grad=grad)


@pytest.mark.parametrize("dt", DTYPES)
def test_tensor_hooks_replace_gradients_and_retain_grad_sees_them(dt):
    def snippet(T):
        log = []
        x = _t(T, dt, 3)
        h = x.register_hook(lambda g: log.append(("leaf", g)))
        (x * 2).sum().backward()
        h.remove()
        h.remove()                                  # a second remove is harmless
        x.grad = None
        y = x * 2
        y.register_hook(lambda g: g * 10)
        y.retain_grad()
        y.register_hook(lambda g: log.append(("second", g)))
        (y * y).sum().backward()
        first = (x.grad, y.grad)
        x.grad = None
        z = x * 2
        z.retain_grad()                             # before the hook: .grad still after it
        z.register_hook(lambda g: g * 10)
        z.sum().backward()
        return log, first, x.grad, z.grad, repr(h), type(x._backward_hooks).__name__
    _same(snippet, dt)


@pytest.mark.parametrize("dt", DTYPES)
def test_hook_order_tensor_hooks_retain_grad_prehooks_posthooks(dt):
    def snippet(T):
        log = []
        x = _t(T, dt, 3)
        y = x * 2
        y.grad_fn.register_prehook(lambda go: log.append(("node pre", go)) or (go[0] + 100,))
        y.register_hook(lambda g: log.append(("tensor 1", g)) or g * 2)
        y.retain_grad()
        y.register_hook(lambda g: log.append(("tensor 2", g)) or g + 1)
        y.grad_fn.register_hook(lambda gi, go: log.append(("node post", gi, go)))
        acc = y.grad_fn.next_functions[0][0]
        acc.register_prehook(lambda go: log.append(("acc pre", go)))
        acc.register_hook(lambda gi, go: log.append(("acc post", gi, go)))
        x.register_hook(lambda g: log.append(("leaf", g)) or g * 3)
        x.register_post_accumulate_grad_hook(lambda t: log.append(("post acc", t.grad)))
        y.sum().backward()
        return log, x.grad, y.grad, acc.name(), repr(acc)
    _same(snippet, dt)


@pytest.mark.parametrize("dt", DTYPES)
def test_node_hooks_replace_and_remove(dt):
    def snippet(T):
        log = []
        x = _t(T, dt, 3)
        y = x * 2
        y.grad_fn.register_prehook(lambda go: (go[0] * 10,))
        y.grad_fn.register_hook(lambda gi, go: (gi[0] + 1, None))
        y.sum().backward()
        a = x.grad.clone()
        x.grad = None
        z = x * 2
        h = z.grad_fn.register_hook(lambda gi, go: log.append("removed hook ran"))
        h.remove()
        z.grad_fn.register_hook(lambda gi, go: (None, None))     # None replaces too
        z.sum().backward()
        w = x.sin()
        w.grad_fn.register_prehook(lambda go: log.append(go))
        w.grad_fn.register_hook(lambda gi, go: log.append((gi, go)))
        w.sum().backward()
        return a, log, x.grad
    _same(snippet, dt)


@pytest.mark.parametrize("dt", DTYPES)
def test_hooks_under_autograd_grad_and_backward_inputs(dt):
    def snippet(T):
        log = []
        a = _t(T, dt, 2)
        a.register_hook(lambda g: log.append(("a", g)) or g * 3)
        b = a * 2
        b.register_hook(lambda g: log.append(("b", g)) or g * 5)
        r1 = T.autograd.grad(b.sum(), a)
        r2 = T.autograd.grad(b.sum(), b)
        r3 = T.autograd.grad((b * b).sum(), [b, a])   # b's node runs: b read before its hook
        b.retain_grad()
        r4 = T.autograd.grad((b * 1).sum(), [b])
        c = a * 2
        c.retain_grad()
        (c * 1).sum().backward(inputs=[a])
        a.register_post_accumulate_grad_hook(lambda t: log.append(("post", t.grad)))
        a.grad = None
        (a * 3).sum().backward(inputs=[a])
        d = a * 2
        d.register_hook(lambda g: log.append("d") or g * 7)
        (d * 1).sum().backward(inputs=[d])
        return log, r1, r2, r3, r4, b.grad, c.grad, a.grad, d.grad, d.retains_grad
    _same(snippet, dt)


@pytest.mark.parametrize("dt", DTYPES)
def test_hooks_with_create_graph_and_second_derivatives(dt):
    def snippet(T):
        c = _t(T, dt, 3)
        d = c ** 2
        d.register_hook(lambda g: g * c)               # the replacement has history
        gc, = T.autograd.grad(d.sum(), c, create_graph=True)
        ggc, = T.autograd.grad(gc.sum(), c)
        e = c.exp()
        e.grad_fn.register_hook(lambda gi, go: (gi[0] * c,))
        ge, = T.autograd.grad(e.sum(), c, create_graph=True)
        gge, = T.autograd.grad(ge.sum(), c)
        return gc, repr(gc.grad_fn), ggc, ge, gge
    _same(snippet, dt)


@pytest.mark.parametrize("dt", DTYPES)
def test_hooks_on_a_tensor_used_twice_and_in_registration_order(dt):
    def snippet(T):
        log = []
        x = _t(T, dt, 3)
        e = x * 2
        e.register_hook(lambda g: log.append(("e", g)))
        (e * e).sum().backward()
        first = x.grad.clone()
        x.grad = None
        y = x * 1
        y.register_hook(lambda g: log.append("h1") or g + 1)
        y.register_hook(lambda g: log.append(("h2", g)) or g * 2)
        y.sum().backward()
        return log, first, x.grad
    _same(snippet, dt)


@pytest.mark.parametrize("dt", DTYPES)
def test_hooks_on_custom_function_outputs(dt):
    def snippet(T):
        log = []

        class Two(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2, x * 3

            @staticmethod
            def backward(ctx, a, b):
                log.append(("backward", a, b))
                return a + b
        x = _t(T, dt, 2)
        a, b = Two.apply(x)
        b.register_hook(lambda g: log.append(("b hook", g)))    # b gets no gradient: None
        a.register_hook(lambda g: g * 4)
        a.sum().backward()
        a, b = Two.apply(x)
        a.grad_fn.register_prehook(lambda go: log.append(("pre", go)))
        a.grad_fn.register_hook(lambda gi, go: log.append(("post", gi, go)))
        b.retain_grad()
        b.sum().backward()
        return log, x.grad, b.grad
    _same(snippet, dt)


def _tensor_hook(hook, double=False):
    def run(T, x):
        y = x * 2
        if double:
            y = y.double()
        y.register_hook(hook)
        y.sum().backward()
    return run


def _leaf_hook(register):
    def run(T, x):
        register(x)
        (x * 2).sum().backward()
    return run


def _node_hook(pre, hook):
    def run(T, x):
        y = x * 2
        (y.grad_fn.register_prehook if pre else y.grad_fn.register_hook)(hook)
        y.sum().backward()
    return run


def _reshaping_hook(g):
    return g.reshape(3, 1)


HOOK_ERRORS = {
    "tensor hook: shape": _tensor_hook(lambda g: g[:2]),
    "tensor hook: dtype": _tensor_hook(lambda g: g.double() if g.element_size() == 4
                                       else g.float()),
    "tensor hook: dtype of a float64": _tensor_hook(lambda g: g.float(), double=True),
    "tensor hook: reshape (named)": _tensor_hook(_reshaping_hook),
    "tensor hook: a number": _tensor_hook(lambda g: 3),
    "leaf hook: shape": _leaf_hook(lambda x: x.register_hook(lambda g: g[:2])),
    "post accumulate: a number": _leaf_hook(
        lambda x: x.register_post_accumulate_grad_hook(lambda t: 5)),
    "post accumulate: a tensor": _leaf_hook(
        lambda x: x.register_post_accumulate_grad_hook(lambda t: t * 2)),
    "prehook: not a tuple": _node_hook(True, lambda go: go[0]),
    "prehook: a list": _node_hook(True, lambda go: [go[0]]),
    "prehook: too many": _node_hook(True, lambda go: (go[0], go[0])),
    "prehook: shape": _node_hook(True, lambda go: (go[0][:2],)),
    "prehook: a number": _node_hook(True, lambda go: (3,)),
    "posthook: count": _node_hook(False, lambda gi, go: (gi[0][:2],)),
    "posthook: replacing None": _node_hook(False, lambda gi, go: (gi[0], gi[0])),
    "posthook: not a tuple": _node_hook(False, lambda gi, go: gi[0]),
}


@pytest.mark.parametrize("case", sorted(HOOK_ERRORS))
@pytest.mark.parametrize("dt", DTYPES)
def test_errors_of_what_hooks_return(case, dt):
    err = run_snippet(lambda T: HOOK_ERRORS[case](T, _t(T, dt, 3)), torch)[1]
    assert err is not None, "torch raises here"
    _same(lambda T: HOOK_ERRORS[case](T, _t(T, dt, 3)), dt)


def test_registration_errors():
    def snippet(T):
        out = []
        for register in (lambda: T.tensor([1.0, 2.0]).register_hook(lambda g: g),
                         lambda: (T.tensor([1.0], requires_grad=True) * 2)
                         .register_post_accumulate_grad_hook(lambda t: None),
                         lambda: T.tensor([1.0]).retain_grad()):
            try:
                register()
            except RuntimeError as e:
                out.append(str(e))
        return out
    assert len(same_as_torch(snippet)) == 3
