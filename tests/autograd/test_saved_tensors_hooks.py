"""Saved-tensor hooks against PyTorch 2.13 (``autograd.graph.saved_tensors_hooks``,
``save_on_cpu``, ``disable_saved_tensors_hooks``): which tensors each operation packs and
in what order, unpack calls in backward and on ``grad_fn._saved_*`` / ``ctx.saved_tensors``,
the metadata an unpacked tensor gets back (gradients reach the saved tensor's history),
what an unpack hook's other values, shapes and dtypes do, nesting, disabling, errors, and
second derivatives through packed tensors; float32 and float64."""
from __future__ import annotations

import numpy as np
import pytest

import symgrad as sg
from oracle import rng, same_as_torch, tol

DTYPES = ("float32", "float64")


def _same(snippet, dt="float64"):
    t = tol(np.dtype(dt))
    return same_as_torch(snippet, rtol=t["rtol"] * 10, atol=t["atol"] * 10)


def _t(T, dt, *shape, seed=0, grad=True):
    return T.tensor(rng(seed).uniform(0.5, 1.5, shape).astype(dt), requires_grad=grad)


def _logging_hooks(log, T):
    """Hooks that log what they see (shape, requires_grad, grad_fn name, grad mode)."""
    def pack(t):
        log.append(("pack", list(t.shape), t.requires_grad,
                    t.grad_fn.name() if t.grad_fn is not None else None, T.is_grad_enabled()))
        return t.detach()

    def unpack(p):
        log.append(("unpack", list(p.shape), T.is_grad_enabled()))
        return p
    return pack, unpack


OPS = {
    "mul": lambda T, a, b, c: a * b,
    "div": lambda T, a, b, c: a / b,
    "pow": lambda T, a, b, c: a ** b,
    "pow scalar": lambda T, a, b, c: a ** 2.5,
    "rpow": lambda T, a, b, c: 2 ** a,
    "atan2": lambda T, a, b, c: T.atan2(a, b),
    "clamp tensors": lambda T, a, b, c: a.clamp(b, b + 1),
    "where": lambda T, a, b, c: T.where(a > 1, a, b),
    "dot": lambda T, a, b, c: a @ b,
    "mm": lambda T, a, b, c: a[None] @ b[:, None],
    "mv": lambda T, a, b, c: c @ a,
    "scalar times": lambda T, a, b, c: a * 3,
    "exp sin": lambda T, a, b, c: a.exp().sin(),
    "tanh sigmoid sqrt": lambda T, a, b, c: a.tanh() + a.sigmoid() + a.sqrt(),
    "max prod": lambda T, a, b, c: a.max() + a.prod(),
    "softmax": lambda T, a, b, c: a.softmax(0),
    "log_softmax": lambda T, a, b, c: a.log_softmax(0),
    "mse_loss": lambda T, a, b, c: T.nn.functional.mse_loss(a, b),
    "activations": lambda T, a, b, c: (T.nn.functional.silu(a) + T.nn.functional.gelu(a)
                                       + T.nn.functional.elu(a)
                                       + T.nn.functional.leaky_relu(a)
                                       + T.nn.functional.hardtanh(a)),
    "bce": lambda T, a, b, c: T.nn.functional.binary_cross_entropy(a.sigmoid(), b / 2),
    "logsumexp var norm": lambda T, a, b, c: a.logsumexp(0) + a.var() + a.norm(),
    "views": lambda T, a, b, c: a.view(3, 1).t().expand(2, 3) * 2,
    "linear": lambda T, a, b, c: T.nn.functional.linear(c[None], a[None] * 1, b[:1]),
    "linear of a constant": lambda T, a, b, c: T.nn.functional.linear(c.detach(), a[None],
                                                                      b[:1]),
    "linear into a constant": lambda T, a, b, c: T.nn.functional.linear(c, a[None].detach(),
                                                                        b[:1]),
}


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("op", sorted(OPS))
def test_what_each_operation_packs_and_unpacks(op, dt):
    def snippet(T):
        log = []
        a, b, c = _t(T, dt, 3, seed=1), _t(T, dt, 3, seed=2) * 1, _t(T, dt, 2, 3, seed=3)
        with T.autograd.graph.saved_tensors_hooks(*_logging_hooks(log, T)):
            y = OPS[op](T, a, b, c)
        packed = list(log)
        log.clear()
        y.sum().backward()
        return packed, log, a.grad, c.grad
    _same(snippet, dt)


@pytest.mark.parametrize("dt", DTYPES)
def test_saved_attributes_unpack_each_time_and_keep_the_history(dt):
    def snippet(T):
        log = []
        a, b = _t(T, dt, 3), _t(T, dt, 3, seed=1) * 2
        with T.autograd.graph.saved_tensors_hooks(lambda t: t.detach().clone(),
                                                  lambda p: log.append("unpack") or p):
            y = a * b
            z = y.exp()
            w = z * 2
        s = y.grad_fn._saved_self
        return (s, s is a, s.is_leaf, y.grad_fn._saved_other, z.grad_fn._saved_result,
                w.grad_fn._saved_other, w.grad_fn._saved_self, list(log))
    _same(snippet, dt)


@pytest.mark.parametrize("dt", DTYPES)
def test_a_gradient_reaches_the_saved_tensors_history(dt):
    def snippet(T):
        a = _t(T, dt, 3)
        with T.autograd.graph.saved_tensors_hooks(lambda t: t.detach().clone(), lambda p: p):
            y = a.sin()
            z = (a * 3).exp()
        s = y.grad_fn._saved_self
        g1, = T.autograd.grad(s.sum(), a)
        r = z.grad_fn._saved_result
        g2, = T.autograd.grad(r.sum(), a)
        return g1, g2, r.grad_fn.name()
    _same(snippet, dt)


@pytest.mark.parametrize("dt", DTYPES)
def test_pack_results_need_not_be_tensors(dt):
    def snippet(T):
        store = {}

        def pack(t):
            key = len(store)
            store[key] = t.detach().clone()
            return key

        a = _t(T, dt, 4)
        with T.autograd.graph.saved_tensors_hooks(pack, lambda k: store[k]):
            y = (a * a.cos()).exp().sum()
        y.backward()
        return a.grad, len(store)
    _same(snippet, dt)


UNPACKED = {
    "doubled": lambda p: p * 2,
    "other dtype": lambda p: p.double() if p.dtype != p.double().dtype else p.float(),
    "integer": lambda p: p.long(),
    "broadcasts to it": lambda p: (p[:1] * 0 + 1),
    "broadcasts over it": lambda p: (p * 0 + 1).expand(2, *p.shape).clone(),
    "another size": lambda p: (p.reshape(-1)[:2] * 0 + 1),
    "an int": lambda p: 5,
    "None": lambda p: None,
    "a numpy array": lambda p: np.ones(3),
    "an object": lambda p: type("Packed", (), {})(),
}


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("op", ["mul", "exp", "sin", "where"])
@pytest.mark.parametrize("unpacked", sorted(UNPACKED))
def test_what_an_unpack_hook_returns(unpacked, op, dt):
    ops = {"mul": lambda T, a: a * a, "exp": lambda T, a: a.exp(),
           "sin": lambda T, a: a.sin(), "where": lambda T, a: T.where(a > 1, a, a * 3)}

    def snippet(T):
        a = _t(T, dt, 3)
        with T.autograd.graph.saved_tensors_hooks(lambda t: t.detach(), UNPACKED[unpacked]):
            y = ops[op](T, a)
        y.sum().backward()
        return a.grad
    _same(snippet, "float32" if unpacked == "other dtype" else dt)   # (float32 accuracy)


def test_an_unpacked_tensor_a_reshaping_rule_cannot_use_is_a_clear_error():
    a = sg.ones(3, requires_grad=True)
    with sg.autograd.graph.saved_tensors_hooks(lambda t: t.detach(), lambda p: sg.ones(2)):
        y = a @ a
    with pytest.raises(RuntimeError, match=r"DotBackward0 cannot use what an unpack_hook "
                       r"returned: a tensor of shape \[2\] for a saved tensor of shape \[3\]"):
        y.backward()


@pytest.mark.parametrize("dt", DTYPES)
def test_nested_contexts_innermost_wins_and_hooks_stay_with_what_they_saved(dt):
    def snippet(T):
        log = []
        a = _t(T, dt, 3)
        outer = (lambda t: log.append("pack outer") or t.detach(),
                 lambda p: log.append("unpack outer") or p)
        inner = (lambda t: log.append("pack inner") or t.detach(),
                 lambda p: log.append("unpack inner") or p * 2)
        with T.autograd.graph.saved_tensors_hooks(*outer):
            with T.autograd.graph.saved_tensors_hooks(*inner):
                y = a * a
            z = a.exp()
        plain = a.sin()
        (y.sum() + z.sum() + plain.sum()).backward()
        return log, a.grad
    _same(snippet, dt)


def test_disabled_hooks_raise_the_given_message():
    def snippet(T):
        G = T.autograd.graph
        out = []
        for case in ("enter", "save", "save_on_cpu", "nested", "after"):
            try:
                if case == "enter":
                    with G.disable_saved_tensors_hooks("hooks are off here"):
                        with G.saved_tensors_hooks(lambda t: t, lambda p: p):
                            pass
                elif case == "save":
                    with G.saved_tensors_hooks(lambda t: t, lambda p: p):
                        with G.disable_saved_tensors_hooks("no saving with hooks"):
                            T.ones(2, requires_grad=True).exp()
                elif case == "save_on_cpu":
                    with G.disable_saved_tensors_hooks("not on cpu"):
                        with G.save_on_cpu():
                            pass
                elif case == "nested":
                    with G.disable_saved_tensors_hooks("outer"):
                        with G.disable_saved_tensors_hooks("inner"):
                            pass
                        with G.saved_tensors_hooks(lambda t: t, lambda p: p):
                            pass
                else:
                    with G.disable_saved_tensors_hooks("gone"):
                        pass
                    with G.saved_tensors_hooks(lambda t: t, lambda p: p):
                        T.ones(2, requires_grad=True).exp()
                    with G.disable_saved_tensors_hooks("no hooks set"):
                        T.ones(2, requires_grad=True).exp()     # nothing to disable
                out.append((case, None))
            except RuntimeError as e:
                out.append((case, str(e)))
        return out
    _same(snippet)


def test_hook_errors_as_pytorchs():
    def snippet(T):
        G = T.autograd.graph
        out = []
        for case in ("in place", "in place non-leaf", "pack raises", "not callable"):
            a = T.ones(3, requires_grad=True)
            try:
                if case == "in place":
                    with G.saved_tensors_hooks(lambda t: t.add_(1), lambda p: p):
                        a.sin()
                elif case == "in place non-leaf":
                    with G.saved_tensors_hooks(lambda t: t.mul_(2), lambda p: p):
                        (a * 2).exp()
                elif case == "pack raises":
                    with G.saved_tensors_hooks(lambda t: 1 / 0, lambda p: p):
                        a.sin()
                else:
                    with G.saved_tensors_hooks(1, 2):
                        pass
                out.append((case, None))
            except Exception as e:          # noqa: BLE001 -- compared with torch's
                out.append((case, type(e).__name__, str(e)))
        return out
    _same(snippet)


@pytest.mark.parametrize("dt", DTYPES)
def test_second_derivatives_through_packed_tensors(dt):
    def snippet(T):
        log = []
        a = _t(T, dt, 3)
        with T.autograd.graph.saved_tensors_hooks(*_logging_hooks(log, T)):
            y = (a * a * a).sum() + a.sin().sum()
        g, = T.autograd.grad(y, a, create_graph=True)
        h, = T.autograd.grad(g.sum(), a)
        first = list(log)
        log.clear()
        with T.autograd.graph.saved_tensors_hooks(*_logging_hooks(log, T)):
            y = (a * a * a).sum()
            g, = T.autograd.grad(y, a, create_graph=True)   # the backward saves too
            h2, = T.autograd.grad(g.sum(), a)
        return first, g, h, h2, log
    _same(snippet, dt)


@pytest.mark.parametrize("dt", DTYPES)
def test_custom_function_saved_tensors_go_through_the_hooks(dt):
    def snippet(T):
        log = []

        class F(T.autograd.Function):
            @staticmethod
            def forward(ctx, x, y):
                log.append("forward")
                z = x * 3
                out = x * y
                ctx.save_for_backward(x, out, None, z, y)
                return out

            @staticmethod
            def backward(ctx, g):
                x, out, none, z, y = ctx.saved_tensors
                log.append(("backward", out.grad_fn.name(), x.requires_grad, none,
                            z.requires_grad))
                ctx.saved_tensors                      # each read unpacks again
                return g * y * out / out, g * x
        x, y = _t(T, dt, 2), _t(T, dt, 2, seed=1)
        with T.autograd.graph.saved_tensors_hooks(*_logging_hooks(log, T)):
            o = F.apply(x, y)
        log.append("applied")
        saved = o.grad_fn.saved_tensors
        o.sum().backward()
        return log, saved, x.grad, y.grad
    _same(snippet, dt)


@pytest.mark.parametrize("dt", DTYPES)
def test_nothing_is_packed_when_nothing_is_saved(dt):
    def snippet(T):
        log = []
        a = _t(T, dt, 3)
        with T.autograd.graph.saved_tensors_hooks(*_logging_hooks(log, T)):
            with T.no_grad():
                a * a
            _t(T, dt, 3, grad=False).exp()
            (a + a).sum()
            a.softmax(0)                 # one pack: the result, as PyTorch's node saves
        return log
    _same(snippet, dt)


def test_saved_tensors_are_freed_after_backward():
    def snippet(T):
        a = T.ones(3, requires_grad=True)
        with T.autograd.graph.saved_tensors_hooks(lambda t: t.detach(), lambda p: p):
            y = a.sin()
        y.sum().backward()
        return y.grad_fn._saved_self
    _same(snippet)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("pin_memory", [False, True])
def test_save_on_cpu(pin_memory, dt):
    def snippet(T):
        x = _t(T, dt, 4, 3)
        w1, w2 = _t(T, dt, 3, 5, seed=1), _t(T, dt, 5, 2, seed=2)
        with T.autograd.graph.save_on_cpu(pin_memory=pin_memory):
            h = (x @ w1).tanh()
            y = (h @ w2).exp().sum()
        r = h.grad_fn._saved_result
        y.backward()
        values = [t.detach().numpy().tolist() for t in (x.grad, w1.grad, w2.grad, r)]
        return values, r.grad_fn.name(), isinstance(T.autograd.graph.save_on_cpu(),
                                                     T.autograd.graph.saved_tensors_hooks)
    _same(snippet, dt)
