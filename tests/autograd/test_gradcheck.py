"""``autograd.gradcheck`` / ``gradgradcheck`` against PyTorch 2.13's: signatures, results,
each failure's exception (GradcheckError) and message, warnings -- on correct and broken
custom Functions, in float64 (and float32, where PyTorch warns)."""
from __future__ import annotations

import inspect
import re
import warnings

import numpy as np
import pytest
import torch

import symgrad as sg
from oracle import rng, run_snippet, same_as_torch


def _x(*shape, seed=0, dt="float64"):
    return rng(seed).uniform(-1, 1, size=shape).astype(dt)


@pytest.mark.parametrize("name", ["gradcheck", "gradgradcheck"])
def test_signatures_are_pytorchs(name):
    def params(f):
        return [(p.name, p.kind, p.default) for p in inspect.signature(f).parameters.values()]
    assert params(getattr(sg.autograd, name)) == params(getattr(torch.autograd, name))


def scaled_backward(T, factor):
    """x * y.sum() whose backward for y is off by `factor`."""
    class Bad(T.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_backward(x, y)
            return x * y.sum()

        @staticmethod
        def backward(ctx, g):
            x, y = ctx.saved_tensors
            return g * y.sum(), (g * x).sum() * factor * T.ones_like(y)
    return Bad


def _pair(T, dt="float64"):
    return (T.tensor(_x(2, dt=dt), requires_grad=True),
            T.tensor(_x(3, seed=1, dt=dt), requires_grad=True))


def test_correct_functions_pass():
    def snippet(T):
        Good = scaled_backward(T, 1.0)
        x, y = _pair(T)
        return (T.autograd.gradcheck(Good.apply, (x, y)),
                T.autograd.gradcheck(Good.apply, (x, y), fast_mode=True),
                T.autograd.gradcheck(lambda a: (a.sin() * a, a * 2), x),
                T.autograd.gradgradcheck(lambda a: a.sin() * a, x),
                T.autograd.gradgradcheck(lambda a: a.sin() * a, x, fast_mode=True))
    assert same_as_torch(snippet) == (True,) * 5


def test_jacobian_mismatch_message():
    def snippet(T):
        return T.autograd.gradcheck(scaled_backward(T, 1.01).apply, _pair(T))
    same_as_torch(snippet)
    err = run_snippet(snippet, torch)[1]
    assert err[0] == "GradcheckError" and err[1].startswith(
        "Jacobian mismatch for output 0 with respect to input 1,\nnumerical:tensor(")


def test_raise_exception_false_returns_false():
    def snippet(T):
        Bad = scaled_backward(T, 1.01)
        return (T.autograd.gradcheck(Bad.apply, _pair(T), raise_exception=False),
                T.autograd.gradcheck(Bad.apply, _pair(T), raise_exception=False,
                                     fast_mode=True),
                isinstance(T.autograd.gradcheck, object))
    assert same_as_torch(snippet)[:2] == (False, False)


def test_error_class():
    from symgrad.autograd.gradcheck import GradcheckError
    assert issubclass(GradcheckError, RuntimeError)
    with pytest.raises(GradcheckError):
        sg.autograd.gradcheck(scaled_backward(sg, 1.5).apply, _pair(sg))


_NUMBER = re.compile(r"-?\d+\.\d+(?:e[-+]?\d+)?")


def test_fast_mode_message_uses_pytorchs_random_vectors():
    """Fast mode projects the Jacobians on PyTorch's own random vectors (its generator's
    stream): the scalars in the message agree to rounding, the slow-mode part exactly."""
    def snippet(T):
        return T.autograd.gradcheck(scaled_backward(T, 1.01).apply, _pair(T), fast_mode=True)
    (_, want, _), (_, got, _) = run_snippet(snippet, torch), run_snippet(snippet, sg)
    assert got[0] == want[0] == "GradcheckError"
    assert _NUMBER.sub("N", got[1]) == _NUMBER.sub("N", want[1])
    a = [float(v) for v in _NUMBER.findall(got[1])]
    b = [float(v) for v in _NUMBER.findall(want[1])]
    np.testing.assert_allclose(a, b, rtol=1e-9)
    assert "The max per-element difference (slow mode) is: " in want[1]


def test_float32_inputs_warn_and_fail_as_in_pytorch():
    def snippet(T):
        x = T.tensor(_x(3, dt="float32"), requires_grad=True)
        return T.autograd.gradcheck(lambda a: a * a * 2, (x,))
    same_as_torch(snippet)
    value, err, warns = run_snippet(snippet, torch)
    assert err[0] == "GradcheckError" and warns[0][1].startswith(
        "Input #0 requires gradient and is not a double precision floating point")


def test_input_and_output_errors():
    def no_input(T):
        return T.autograd.gradcheck(lambda a: a.exp(), (T.tensor(_x(2)),))

    def stride_zero(T):
        x = T.tensor(_x(1, 3)).expand(2, 3).requires_grad_()
        return T.autograd.gradcheck(lambda a: a * 2, (x,))

    def no_differentiable_output(T):
        return T.autograd.gradcheck(lambda a: a.detach() * 2, (_pair(T)[0],))

    def constant_output(T):
        return T.autograd.gradcheck(lambda a: (a * 2, a.detach()), (_pair(T)[0],))
    for snippet in (no_input, stride_zero, no_differentiable_output, constant_output):
        same_as_torch(snippet)
    assert run_snippet(no_differentiable_output, torch)[1] == (
        "GradcheckError", "Numerical gradient for function expected to be zero")


def test_backward_not_multiplied_by_grad_output():
    def snippet(T):
        class NotMultiplied(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return T.where(g.abs().sum() > 0, g * 2, T.ones_like(g))
        return T.autograd.gradcheck(NotMultiplied.apply, (_pair(T)[0],))
    same_as_torch(snippet)
    assert run_snippet(snippet, torch)[1] == ("GradcheckError",
                                              "backward not multiplied by grad_output")


def _undefined(T, kind):
    """A two-output Function without materialized gradients whose backward, given no
    gradient at all, raises or returns non-zeros."""
    class Two(T.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            ctx.save_for_backward(x)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            x, = ctx.saved_tensors
            if g1 is None and g2 is None:
                if kind == "raises":
                    raise RuntimeError("no gradient at all")
                return T.ones_like(x)
            out = T.zeros_like(x)
            if g1 is not None:
                out = out + g1 * 2
            if g2 is not None:
                out = out + g2 * 3
            return out
    return T.autograd.gradcheck(Two.apply, (_pair(T)[0],))


@pytest.mark.parametrize("kind", ["raises", "not zero"])
def test_custom_backward_must_handle_undefined_gradients(kind):
    snippet = lambda T: _undefined(T, kind)          # noqa: E731
    same_as_torch(snippet)
    err = run_snippet(snippet, torch)[1]
    assert err[0] == "GradcheckError" and err[1].startswith("Expected ")


def test_nondeterministic_backward():
    def snippet(T):
        calls = []

        class Drift(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                calls.append(1)
                return g * (2 + 1e-3 * len(calls))
        return T.autograd.gradcheck(Drift.apply, (_pair(T)[0],), atol=1e-1, nondet_tol=1e-5)
    same_as_torch(snippet)
    assert run_snippet(snippet, torch)[1][1].startswith("Backward is not reentrant")


def test_gradgradcheck_catches_a_backward_that_is_not_differentiable_as_written():
    def snippet(T):
        class Cube(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x ** 3

            @staticmethod
            def backward(ctx, g):
                x, = ctx.saved_tensors
                return g * 3 * x.detach() ** 2            # the x-dependence is cut
        x = _pair(T)[0]
        go = T.tensor([1.0, 2.0], dtype=T.float64, requires_grad=True)
        return (T.autograd.gradcheck(Cube.apply, x),
                T.autograd.gradgradcheck(Cube.apply, x, go))
    same_as_torch(snippet)
    assert run_snippet(snippet, torch)[1][1].startswith(
        "Jacobian mismatch for output 0 with respect to input 0,")


def test_gradgradcheck_with_grad_outputs_not_requiring_grad():
    def snippet(T):
        class Cube(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x ** 3

            @staticmethod
            def backward(ctx, g):
                x, = ctx.saved_tensors
                return g * 3 * x ** 2
        go = T.tensor([1.0, 2.0], dtype=T.float64)
        return (T.autograd.gradgradcheck(Cube.apply, _pair(T)[0], go),
                T.autograd.gradgradcheck(Cube.apply, _pair(T)[0],
                                         gen_non_contig_grad_outputs=True))
    assert same_as_torch(snippet) == (True, True)


def test_modes_symgrad_cannot_check_say_so():
    x = _pair(sg)[0]
    for kw in ({"check_forward_ad": True}, {"check_batched_forward_grad": True,
                                            "check_forward_ad": True}):
        with pytest.raises(NotImplementedError, match="symgrad has no"):
            sg.autograd.gradcheck(lambda a: a * 2, (x,), **kw)
    with pytest.raises(AssertionError, match="Expected at least one of check_forward_ad"):
        sg.autograd.gradcheck(lambda a: a * 2, (x,), check_backward_ad=False)


BATCHED = {
    "mul sin": lambda a, b: (a * b).sin(),
    "matmul exp": lambda a, b: (a @ b).exp(),
    "softmax": lambda a, b: (a * b).softmax(1),
    "an unused input": lambda a, b: a.tanh(),
    "two outputs": lambda a, b: (a.sum(0) * b, a.cos()),
    "norm logsumexp": lambda a, b: a.norm() + b.logsumexp(0) + (a / b).pow(3).mean(),
    # max / min along a dim without keepdim: their create_graph backward re-ran the
    # gather with the squeezed indices (a closure rebound after it was made) and crashed
    "max min along a dim": lambda a, b: a.max(1)[0].sum() * b + (a * b).min(0).values,
    "max keepdim": lambda a, b: a.max(0, keepdim=True)[0] * b,
}


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(BATCHED))
def test_check_batched_grad(name, dt):
    """gradcheck / gradgradcheck with check_batched_grad: the backward vmapped over two
    grad_outputs equals the two backward passes (float32 with loose tolerances)."""
    loose = {} if dt == "float64" else {"eps": 1e-3, "atol": 1e-2, "rtol": 1e-2}

    def snippet(T):
        x = T.tensor(np.linspace(-1, 1, 6).reshape(2, 3).astype(dt), requires_grad=True)
        w = T.tensor(np.linspace(0.5, 2, 3).astype(dt), requires_grad=True)
        f = BATCHED[name]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")         # (float32 inputs: PyTorch warns)
            return (T.autograd.gradcheck(f, (x, w), check_batched_grad=True, **loose),
                    T.autograd.gradgradcheck(f, (x, w), check_batched_grad=True, **loose))
    assert same_as_torch(snippet) == (True, True)


def test_a_backward_that_cannot_be_batched_fails_batched_gradcheck():
    def snippet(T):
        class Item(T.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                return a * 2

            @staticmethod
            def backward(ctx, g):
                return g * (g.sum().item() != 0.5) * 2      # needs a value: not batchable
        x = _pair(T)[0]
        quiet = T.autograd.gradcheck(Item.apply, (x,), check_batched_grad=True,
                                     raise_exception=False)
        try:
            T.autograd.gradcheck(Item.apply, (x,), check_batched_grad=True)
        except RuntimeError as e:
            head, _, tail = str(e).partition("\n\n")
            return quiet, type(e).__name__, head.split(":")[0], tail
    assert same_as_torch(snippet)[:3] == (False, "GradcheckError",
                                          "While computing batched gradients, got")


def test_batched_gradients_that_differ_fail_with_pytorchs_message():
    def snippet(T):
        calls = []

        class Drift(T.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                return a * 2

            @staticmethod
            def backward(ctx, g):
                calls.append(1)
                return g * 2 if len(calls) <= 2 else g * 3     # the vmapped call differs
        x = _pair(T)[0]
        out = Drift.apply(x)
        from symgrad.autograd.gradcheck import _test_batched_grad as check_sg
        try:
            if T is sg:
                check_sg((x,), out, 0)
            else:
                from torch.autograd.gradcheck import _test_batched_grad
                _test_batched_grad((x,), out, 0)
        except RuntimeError as e:
            text = str(e)
            return type(e).__name__, text.split("\n\nGot:")[0]
    assert same_as_torch(snippet)[0] == "GradcheckError"
