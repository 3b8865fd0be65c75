"""Custom ``autograd.Function`` in eager mode against PyTorch 2.13: each snippet defines its
Functions with the library it is given (``T`` is torch or symgrad) and returns values,
gradients, grad_fn objects and reprs, which must agree (so must errors and warnings),
in float32 and float64. Includes the examples of PyTorch's "Extending torch.autograd"
notes, its double-backward tutorial and the Legendre-polynomial tutorial."""
from __future__ import annotations

import numpy as np
import pytest

from oracle import rng, same_as_torch, tol

DTYPES = ("float32", "float64")


def _x(dt, *shape, seed=0, scale=1.0):
    return (rng(seed).standard_normal(shape) * scale).astype(dt)


def _same(snippet, dt):
    t = tol(np.dtype(dt))
    return same_as_torch(snippet, rtol=t["rtol"] * 10, atol=t["atol"] * 10)


# ---- the examples of the documentation -----------------------------------------------------
def exp_fn(T):
    class Exp(T.autograd.Function):
        @staticmethod
        def forward(ctx, i):
            result = i.exp()
            ctx.save_for_backward(result)
            return result

        @staticmethod
        def backward(ctx, grad_output):
            result, = ctx.saved_tensors
            return grad_output * result
    return Exp


@pytest.mark.parametrize("dt", DTYPES)
def test_exp_saving_its_output(dt):
    def snippet(T):
        Exp = exp_fn(T)
        x = T.tensor(_x(dt, 4), requires_grad=True)
        y = Exp.apply(x)
        fn = y.grad_fn
        saved, = fn.saved_tensors
        g, = T.autograd.grad(y.sum(), x, create_graph=True)      # through the saved output
        gg, = T.autograd.grad(g.sum(), x)
        return (y, repr(fn), fn.name(), type(fn).__name__, fn.next_functions,
                fn.needs_input_grad, saved, saved.grad_fn is fn, g, repr(g.grad_fn),
                g.grad_fn.next_functions, gg, isinstance(fn, T.autograd.graph.Node),
                repr(type(fn)), issubclass(Exp, T.autograd.function.FunctionCtx))
    _same(snippet, dt)


def linear_fn(T):
    class LinearFunction(T.autograd.Function):
        @staticmethod
        def forward(input, weight, bias):
            output = input.mm(weight.t())
            if bias is not None:
                output += bias.unsqueeze(0).expand_as(output)
            return output

        @staticmethod
        def setup_context(ctx, inputs, output):
            input, weight, bias = inputs
            ctx.save_for_backward(input, weight, bias)

        @staticmethod
        def backward(ctx, grad_output):
            input, weight, bias = ctx.saved_tensors
            grad_input = grad_weight = grad_bias = None
            if ctx.needs_input_grad[0]:
                grad_input = grad_output.mm(weight)
            if ctx.needs_input_grad[1]:
                grad_weight = grad_output.t().mm(input)
            if bias is not None and ctx.needs_input_grad[2]:
                grad_bias = grad_output.sum(0)
            return grad_input, grad_weight, grad_bias
    return LinearFunction


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("with_bias", [True, False])
def test_linear_function_with_setup_context(dt, with_bias):
    def snippet(T):
        linear = linear_fn(T).apply
        x = T.tensor(_x(dt, 5, 3), requires_grad=True)
        w = T.tensor(_x(dt, 4, 3, seed=1), requires_grad=True)
        b = T.tensor(_x(dt, 4, seed=2), requires_grad=True) if with_bias else None
        y = linear(x, w, b)
        (y * T.tensor(_x(dt, 5, 4, seed=3))).sum().backward()
        gw_only = T.autograd.grad(linear(x, w, b).sum(), w)
        return (y, y.grad_fn.next_functions, y.grad_fn.needs_input_grad, x.grad, w.grad,
                b.grad if b is not None else None, gw_only)
    _same(snippet, dt)


def test_linear_function_passes_gradcheck():
    def snippet(T):
        linear = linear_fn(T).apply
        inputs = (T.tensor(_x("float64", 6, 5), requires_grad=True),
                  T.tensor(_x("float64", 3, 5, seed=1), requires_grad=True))
        return T.autograd.gradcheck(linear, inputs + (None,), eps=1e-6, atol=1e-4)
    assert same_as_torch(snippet) is True


@pytest.mark.parametrize("dt", DTYPES)
def test_mul_constant_keeps_non_tensor_arguments_on_ctx(dt):
    def snippet(T):
        class MulConstant(T.autograd.Function):
            @staticmethod
            def forward(tensor, constant):
                return tensor * constant

            @staticmethod
            def setup_context(ctx, inputs, output):
                tensor, constant = inputs
                ctx.constant = constant

            @staticmethod
            def backward(ctx, grad_output):
                return grad_output * ctx.constant, None
        x = T.tensor(_x(dt, 3), requires_grad=True)
        y = MulConstant.apply(x, 2.5)
        y.backward(T.ones(3, dtype=getattr(T, dt)))
        kw = MulConstant.apply(x, constant=3.0)         # bound to forward's signature
        return y, y.grad_fn.constant, y.grad_fn.next_functions, x.grad, kw
    _same(snippet, dt)


def test_mark_dirty_example_of_the_documentation():
    def snippet(T):
        class Inplace(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                x_npy = x.numpy()          # shares storage with x
                x_npy += 1
                ctx.mark_dirty(x)
                return x

            @staticmethod
            @T.autograd.function.once_differentiable
            def backward(ctx, grad_output):
                return grad_output
        a = T.tensor(1., requires_grad=True, dtype=T.double).clone()
        b = a * a
        out = Inplace.apply(a)
        return out is a, out, a._version, repr(a.grad_fn), b.backward()
    _same(snippet, "float64")


@pytest.mark.parametrize("dt", DTYPES)
def test_mark_dirty_rebases_the_history_of_the_input(dt):
    def snippet(T):
        class AddOne(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                x.add_(1)
                ctx.mark_dirty(x)
                return x

            @staticmethod
            def backward(ctx, g):
                return g * 3
        x = T.tensor(_x(dt, 3), requires_grad=True)
        z = x.clone()
        w = AddOne.apply(z)
        (w * w).sum().backward()
        plain = T.tensor(_x(dt, 3))
        w2 = AddOne.apply(plain)                # no grad: only the version bump
        return (w is z, w, z.grad_fn is w.grad_fn, z._version, x.grad, w2 is plain,
                plain._version, w2.grad_fn)
    _same(snippet, dt)


@pytest.mark.parametrize("dt", DTYPES)
def test_mark_dirty_of_a_view_rewrites_its_base(dt):
    def snippet(T):
        class Double(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                x.mul_(2)
                ctx.mark_dirty(x)
                return x

            @staticmethod
            def backward(ctx, g):
                return g * 2
        x = T.tensor(_x(dt, 3), requires_grad=True)
        b = x * 1
        v = b[:2]
        o = Double.apply(v)
        (b * T.tensor([1.0, 2.0, 3.0], dtype=getattr(T, dt))).sum().backward()
        return o is v, repr(o.grad_fn), repr(b.grad_fn), v._version, b, x.grad
    _same(snippet, dt)


@pytest.mark.parametrize("dt", DTYPES)
def test_mark_non_differentiable(dt):
    def snippet(T):
        class MaxAndIndex(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                i = x.argmax()
                ctx.mark_non_differentiable(i)
                ctx.save_for_backward(x, i)
                return x * 2, i

            @staticmethod
            def backward(ctx, gv, gi):
                x, i = ctx.saved_tensors
                return gv * 2 + gi.sum()        # gi: materialized zeros (int64)
        x = T.tensor(_x(dt, 4), requires_grad=True)
        v, i = MaxAndIndex.apply(x)
        v.sum().backward()

        class Half(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                b = x * 3
                ctx.mark_non_differentiable(b)
                return x * 2, b

            @staticmethod
            def backward(ctx, ga, gb):
                return ga + gb
        a, b = Half.apply(x)
        return (v, i, i.requires_grad, i.grad_fn, v.grad_fn.next_functions, x.grad, b,
                b.requires_grad, b.grad_fn, b.is_leaf, T.autograd.grad(a.sum(), x))
    _same(snippet, dt)


@pytest.mark.parametrize("dt", DTYPES)
def test_set_materialize_grads_examples_of_the_documentation(dt):
    def snippet(T):
        once = T.autograd.function.once_differentiable

        class SimpleFunc(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x.clone(), x.clone()

            @staticmethod
            @once
            def backward(ctx, g1, g2):
                return g1 + g2                  # no check for None necessary

        class Func(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.set_materialize_grads(False)
                ctx.save_for_backward(x)
                return x.clone(), x.clone()

            @staticmethod
            @once
            def backward(ctx, g1, g2):
                x, = ctx.saved_tensors
                grad_input = T.zeros_like(x)
                if g1 is not None:
                    grad_input += g1
                if g2 is not None:
                    grad_input += g2
                return grad_input
        a = T.tensor(_x(dt, 3), requires_grad=True)
        b, _ = SimpleFunc.apply(a)
        ga = T.autograd.grad(b.sum(), a)
        b, _ = Func.apply(a)                    # induces g2 to be undefined
        gb = T.autograd.grad(b.sum(), a)
        c, d = Func.apply(a)
        gd = T.autograd.grad((d * 2).sum(), a)
        return ga, gb, gd, c.grad_fn is d.grad_fn, repr(d.grad_fn)
    _same(snippet, dt)


# ---- the double-backward tutorial ------------------------------------------------------------
@pytest.mark.parametrize("dt", DTYPES)
def test_double_backward_saving_the_input(dt):
    def snippet(T):
        class Square(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x ** 2

            @staticmethod
            def backward(ctx, grad_out):
                x, = ctx.saved_tensors
                return grad_out * 2 * x
        x = T.tensor(_x(dt, 3, 3), requires_grad=True)
        y = Square.apply(x)
        g, = T.autograd.grad(y.sum(), x, create_graph=True)
        gg, = T.autograd.grad((g * g).sum(), x)
        checks = ()
        if dt == "float64":
            checks = (T.autograd.gradcheck(Square.apply, x),
                      T.autograd.gradgradcheck(Square.apply, x))
        return g, repr(g.grad_fn), gg, checks
    _same(snippet, dt)


@pytest.mark.parametrize("dt", DTYPES)
def test_double_backward_returning_intermediate_results(dt):
    """Sinh returns exp(x) and exp(-x) as outputs so that its backward can use them and
    still be differentiated: three outputs, one node."""
    def snippet(T):
        class Sinh(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                expx = T.exp(x)
                expnegx = T.exp(-x)
                ctx.save_for_backward(expx, expnegx)
                return (expx - expnegx) / 2, expx, expnegx

            @staticmethod
            def backward(ctx, grad_out, _grad_out_exp, _grad_out_negexp):
                expx, expnegx = ctx.saved_tensors
                grad_input = grad_out * (expx + expnegx) / 2
                grad_input += _grad_out_exp * expx
                grad_input -= _grad_out_negexp * expnegx
                return grad_input

        def sinh(x):
            return Sinh.apply(x)[0]
        x = T.tensor(_x(dt, 4, scale=0.5), requires_grad=True)
        out = Sinh.apply(x)
        g, = T.autograd.grad(sinh(x).sum(), x, create_graph=True)
        gg, = T.autograd.grad(g.sum(), x)
        nexts = [(o * 1).grad_fn.next_functions for o in out]
        checks = ()
        if dt == "float64":
            checks = (T.autograd.gradcheck(sinh, x), T.autograd.gradgradcheck(sinh, x))
        return out, nexts, out[0].grad_fn is out[2].grad_fn, g, gg, checks
    _same(snippet, dt)


@pytest.mark.parametrize("dt", DTYPES)
def test_double_backward_through_a_custom_backward_function(dt):
    """Cube's backward is itself a custom Function (CubeBackward) with its own backward:
    the tutorial's way to make a backward that is not tracked differentiable."""
    def snippet(T):
        class Cube(T.autograd.Function):
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
                dx = grad_out * sav_grad_out * 6 * x
                dgrad_out = grad_out * 3 * x ** 2
                return dgrad_out, dx
        x = T.tensor(_x(dt, 3), requires_grad=True)
        g, = T.autograd.grad(Cube.apply(x).sum(), x, create_graph=True)
        gg, = T.autograd.grad(g.sum(), x)
        checks = ()
        if dt == "float64":
            xs = T.tensor(2., requires_grad=True, dtype=T.double)
            checks = (T.autograd.gradcheck(Cube.apply, xs),
                      T.autograd.gradgradcheck(Cube.apply, xs))
        return g, repr(g.grad_fn), g.grad_fn.next_functions, gg, checks
    _same(snippet, dt)


@pytest.mark.parametrize("dt", DTYPES)
def test_once_differentiable_runs_without_graph_and_refuses_double_backward(dt):
    def snippet(T):
        class Cube(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x ** 3

            @staticmethod
            @T.autograd.function.once_differentiable
            def backward(ctx, g):
                x, = ctx.saved_tensors
                return g * 3 * x ** 2, T.is_grad_enabled()
        x = T.tensor(_x(dt, 3), requires_grad=True)
        g1, = T.autograd.grad(Cube.apply(x).sum(), x, create_graph=True)  # seed needs no grad
        go = T.ones(3, dtype=getattr(T, dt), requires_grad=True)
        g2, = T.autograd.grad(Cube.apply(x), x, go, create_graph=True)
        nexts = g2.grad_fn.next_functions
        return g1, g1.requires_grad, g2, repr(g2.grad_fn), g2.grad_fn.name(), nexts, \
            g2.sum().backward()
    _same(snippet, dt)


# ---- Legendre polynomial tutorial ------------------------------------------------------------
@pytest.mark.parametrize("dt", DTYPES)
def test_legendre_polynomial_tutorial(dt):
    """PyTorch's "Defining new autograd functions" example: fit a third-order Legendre
    polynomial to sin(x) with a custom P3 and hand-written SGD (fewer steps)."""
    def snippet(T):
        class LegendrePolynomial3(T.autograd.Function):
            @staticmethod
            def forward(ctx, input):
                ctx.save_for_backward(input)
                return 0.5 * (5 * input ** 3 - 3 * input)

            @staticmethod
            def backward(ctx, grad_output):
                input, = ctx.saved_tensors
                return grad_output * 1.5 * (5 * input ** 2 - 1)
        dtype = getattr(T, dt)
        x = T.tensor(np.linspace(-np.pi, np.pi, 2000).astype(dt))
        y = T.sin(x)
        a = T.full((), 0.0, dtype=dtype, requires_grad=True)
        b = T.full((), -1.0, dtype=dtype, requires_grad=True)
        c = T.full((), 0.0, dtype=dtype, requires_grad=True)
        d = T.full((), 0.3, dtype=dtype, requires_grad=True)
        learning_rate = 5e-6
        losses = []
        for t in range(60):
            P3 = LegendrePolynomial3.apply
            y_pred = a + b * P3(c + d * x)
            loss = (y_pred - y).pow(2).sum()
            losses.append(loss.item())
            loss.backward()
            with T.no_grad():
                for p in (a, b, c, d):
                    p -= learning_rate * p.grad
                    p.grad = None
        return losses[::10], a.item(), b.item(), c.item(), d.item(), repr(y_pred.grad_fn)
    t = tol(np.dtype(dt))
    same_as_torch(snippet, rtol=t["rtol"] * 100, atol=t["atol"] * 100)


# ---- behaviour details ----------------------------------------------------------------------
@pytest.mark.parametrize("dt", DTYPES)
def test_non_tensor_outputs_inputs_and_returned_inputs(dt):
    def snippet(T):
        class Mixed(T.autograd.Function):
            @staticmethod
            def forward(ctx, x, k, y):
                ctx.k = k
                return x * k, 5, None, y * x

            @staticmethod
            def backward(ctx, a, b, c, d):
                return a * ctx.k + d, None, None if d is None else d

        class Ident(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x

            @staticmethod
            def backward(ctx, g):
                return g * 2
        x = T.tensor(_x(dt, 3), requires_grad=True)
        y = T.tensor(_x(dt, 3, seed=1))
        out = Mixed.apply(x, 3, y)
        out[3].sum().backward()
        i = Ident.apply(x)
        x.grad = None
        i.sum().backward()
        with T.no_grad():
            j = Ident.apply(x)
        k = Ident.apply(y)
        return (out, out[0].grad_fn.next_functions, out[0].grad_fn.needs_input_grad,
                (out[3] * 1).grad_fn.next_functions, i is x, i._base is x, x.grad,
                j.requires_grad, j is x, k._base is y, k.requires_grad)
    _same(snippet, dt)


@pytest.mark.parametrize("dt", DTYPES)
def test_backward_gradients_are_reduced_and_cast_to_the_inputs(dt):
    def snippet(T):
        class Broadcast(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g.expand(4, 2, 3).double()      # summed to x's shape, cast to its dtype
        x = T.tensor(_x(dt, 2, 3), requires_grad=True)
        Broadcast.apply(x).sum().backward()
        return x.grad
    _same(snippet, dt)


@pytest.mark.parametrize("dt", DTYPES)
def test_context_and_node_attributes(dt):
    def snippet(T):
        class Scale(T.autograd.Function):
            @staticmethod
            def forward(ctx, x, y):
                ctx.tag = "hello"
                ctx.save_for_backward(None, y)
                inside = ctx.saved_tensors
                return x * y, inside

            @staticmethod
            def backward(ctx, g, _):
                none, y = ctx.saved_tensors
                return g * y, None
        x = T.tensor(_x(dt, 3), requires_grad=True)
        y = T.tensor(_x(dt, 3, seed=1))
        out, inside = Scale.apply(x, y)
        fn = out.grad_fn
        fn.metadata["k"] = 1
        before = (fn.tag, fn.to_save, fn.saved_tensors, fn.metadata, fn.dirty_tensors,
                  fn.non_differentiable, fn.needs_input_grad)
        out.sum().backward()
        return inside, before, out, x.grad
    _same(snippet, dt)


# ---- errors ---------------------------------------------------------------------------------
def _apply_backward(T, backward, n_inputs=1, dt="float32", second_requires_grad=False):
    """A Function of `n_inputs` inputs (the first a tensor requiring grad, then a tensor
    and Python numbers) with the given backward, run forward and backward."""
    class Fn(T.autograd.Function):
        @staticmethod
        def forward(ctx, x, *rest):
            return x * 2

    Fn.backward = staticmethod(backward)
    x = T.tensor(_x(dt, 2, 3), requires_grad=True)
    rest = (T.tensor(_x(dt, 2, 3, seed=1), requires_grad=second_requires_grad),
            2.0)[:n_inputs - 1]
    Fn.apply(x, *rest).sum().backward()
    return x.grad


BAD_BACKWARDS = {
    "too few": (lambda ctx, g: g, 2),
    "too many": (lambda ctx, g: (g, g), 1),
    "extra Nones are fine": (lambda ctx, g: (g, None, None), 1),
    "a number": (lambda ctx, g: 3, 1),
    "a list": (lambda ctx, g: [g], 1),
    "gradient for a number": (lambda ctx, g: (g, None, g), 3),
    "wrong shape": (lambda ctx, g: g[0], 1),
    "wrong shape, second input not requiring grad": (lambda ctx, g: (g, g.sum(0)), 2),
    "wrong shape, second input": (lambda ctx, g: (g, g.sum(0)), 2, True),
    "0-d for a matrix": (lambda ctx, g: g.sum(), 1),
}


@pytest.mark.parametrize("case", sorted(BAD_BACKWARDS))
@pytest.mark.parametrize("dt", DTYPES)
def test_errors_of_what_backward_returns(case, dt):
    backward, n, *rg = BAD_BACKWARDS[case]
    _same(lambda T: _apply_backward(T, backward, n, dt, *rg), dt)


@pytest.mark.parametrize("dt", DTYPES)
def test_inplace_modification_of_saved_tensors(dt):
    def modified(T, which):
        Exp = exp_fn(T)

        class SaveInput(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * 2

            @staticmethod
            def backward(ctx, g):
                x, = ctx.saved_tensors
                return g * x
        x = T.tensor(_x(dt, 3), requires_grad=True)
        if which == "output":
            y = Exp.apply(x)
            y.mul_(2)
        elif which == "input":
            a = x * 1
            y = SaveInput.apply(a)
            a.add_(1)
        else:
            b = x.detach().clone().requires_grad_()
            y = SaveInput.apply(b)
            with T.no_grad():
                b.add_(1)
        y.sum().backward()
    for which in ("output", "input", "leaf"):
        _same(lambda T: modified(T, which), dt)


def test_misuse_errors_and_warnings():
    def define(T, kind):
        class NoForward(T.autograd.Function):
            pass

        class NoBackward(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

        class SaveNumber(NoBackward):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x, 3)
                return x * 2

        class DirtyNumber(NoBackward):
            @staticmethod
            def forward(ctx, x):
                ctx.mark_dirty(3)
                return x * 2

        class NonDiffNumber(NoBackward):
            @staticmethod
            def forward(ctx, x):
                ctx.mark_non_differentiable(3)
                return x * 2

        class DirtyNotReturned(NoBackward):
            @staticmethod
            def forward(ctx, x):
                x.add_(1)
                ctx.mark_dirty(x)
                return x * 2

        class DirtyNotInput(NoBackward):
            @staticmethod
            def forward(ctx, x):
                y = x * 2
                ctx.mark_dirty(y)
                return y

        class DirtyLeaf(DirtyNotReturned):
            @staticmethod
            def forward(ctx, x):
                x.add_(1)
                ctx.mark_dirty(x)
                return x

        class BothBackwardAndVjp(NoBackward):
            @staticmethod
            def backward(ctx, g):
                return g

            @staticmethod
            def vjp(ctx, g):
                return g
        x = T.tensor([1.0, 2.0], requires_grad=True)
        fns = dict(NoForward=NoForward, NoBackward=NoBackward, SaveNumber=SaveNumber,
                   DirtyNumber=DirtyNumber, NonDiffNumber=NonDiffNumber,
                   DirtyNotReturned=DirtyNotReturned, DirtyNotInput=DirtyNotInput,
                   DirtyLeaf=DirtyLeaf, BothBackwardAndVjp=BothBackwardAndVjp)
        if kind == "instantiate":
            return NoBackward()(x)
        if kind == "freed":
            y = exp_fn(T).apply(x)
            y.sum().backward()
            return y.grad_fn.saved_tensors
        if kind == "setup_context without ctx":
            class Bad(T.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return x * 2

                @staticmethod
                def setup_context(ctx, inputs, output):
                    pass
            return Bad.apply(x)
        out = fns[kind].apply(x if kind != "DirtyNotReturned" else x.clone())
        return out.sum().backward()
    kinds = ["NoForward", "NoBackward", "SaveNumber", "DirtyNumber", "NonDiffNumber",
             "DirtyNotReturned", "DirtyNotInput", "DirtyLeaf", "BothBackwardAndVjp",
             "instantiate", "freed", "setup_context without ctx"]
    for kind in kinds:
        same_as_torch(lambda T: define(T, kind))
