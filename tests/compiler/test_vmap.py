"""symgrad.vmap against jax.vmap (axes, pytrees, nesting, out_axes, per-example
gradients eager and compiled, vmap under grad, the per-example fallback for primitives
without a batching rule), transforms composed inside traces (grad of grad), and JAX's
errors for bad axes."""
from __future__ import annotations

import numpy as np
import pytest

import symgrad as sg

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy


def _close(a, b, tol=1e-12):
    a = a.detach().numpy() if isinstance(a, sg.Tensor) else np.asarray(a)
    np.testing.assert_allclose(a, np.asarray(b), rtol=tol, atol=tol)


def _leaves_close(ours, theirs):
    for a, b in zip(jax.tree_util.tree_leaves(ours, is_leaf=lambda v: isinstance(v, sg.Tensor)),
                    jax.tree_util.tree_leaves(theirs)):
        _close(a, b)


def mlp(m, p, x):
    h = m.tanh(x @ p["w1"] + p["b1"])
    return (h @ p["w2"]).sum() + (h * h).mean()


def _params(rng):
    return {"w1": rng.normal(size=(3, 4)), "b1": rng.normal(size=(4,)),
            "w2": rng.normal(size=(4, 2))}


RNG = np.random.default_rng(0)
X = RNG.normal(size=(5, 3))
P = _params(RNG)


@pytest.mark.parametrize("in_axes,shapes", [
    (0, [(5, 3), (5, 3)]), (1, [(3, 5), (3, 5)]), (-1, [(2, 5), (2, 5)]),
    ((0, None), [(5, 3), (3,)]), ((None, 1), [(3,), (3, 5)]), ([1, 0], [(3, 5), (5, 3)]),
])
def test_in_axes_match_jax(in_axes, shapes):
    args = [RNG.normal(size=s) for s in shapes]

    def f(m, a, b):
        return m.sin(a) * b + (a * b).sum()
    want = jax.vmap(lambda a, b: f(jnp, a, b), in_axes=in_axes)(*args)
    _close(sg.vmap(lambda a, b: f(sg, a, b), in_axes=in_axes)(*[sg.tensor(a) for a in args]),
           want)
    got = sg.compile(sg.vmap(lambda a, b: f(sg, a, b), in_axes=in_axes))(*args)
    _close(got, want)


@pytest.mark.parametrize("out_axes", [0, (1, 0), (-1, None), (0, None)])
def test_out_axes_match_jax(out_axes):
    def f(m, x, w):
        return (m.tanh(x[:, None] * w), (w * 2).sum())
    w = RNG.normal(size=(4,))
    want = jax.vmap(lambda x: f(jnp, x, w), out_axes=out_axes)(X)
    got = sg.vmap(lambda x: f(sg, x, sg.tensor(w)), out_axes=out_axes)(sg.tensor(X))
    _leaves_close(got, want)


def test_pytree_arguments_and_dict_in_axes():
    ps = {k: np.stack([v * (i + 1) for i in range(3)]) for k, v in P.items()}
    want = jax.vmap(lambda p, x: mlp(jnp, p, x), in_axes=({"w1": 0, "b1": 0, "w2": 0}, None))(
        ps, X)
    got = sg.vmap(lambda p, x: mlp(sg, p, x), in_axes=({"w1": 0, "b1": 0, "w2": 0}, None))(
        ps, X)
    _close(got, want)


def test_per_example_gradients_eager_and_compiled():
    want = jax.vmap(jax.grad(lambda p, x: mlp(jnp, p, x)), in_axes=(None, 0))(P, X)
    g = sg.vmap(sg.grad(lambda p, x: mlp(sg, p, x)), in_axes=(None, 0))
    _leaves_close(g(P, X), want)
    _leaves_close(sg.compile(g)(P, X), want)


def test_nested_vmap_and_vmap_under_grad():
    a, b = RNG.normal(size=(4,)), RNG.normal(size=(3,))
    outer = sg.vmap(sg.vmap(lambda s, t: s * sg.exp(t), in_axes=(None, 0)), in_axes=(0, None))
    _close(outer(sg.tensor(a), sg.tensor(b)), np.outer(a, np.exp(b)))
    want = jax.grad(lambda w: jax.vmap(lambda x: jnp.tanh(x @ w).sum())(X).sum())(P["w1"])
    got = sg.grad(lambda w: sg.vmap(lambda x: sg.tanh(x @ w).sum())(X).sum())(P["w1"])
    _close(got, want)
    wt = sg.tensor(P["w1"], requires_grad=True)
    sg.vmap(lambda x: sg.tanh(x @ wt).sum())(sg.tensor(X)).sum().backward()
    _close(wt.grad, want)


def test_primitives_without_a_batching_rule_fall_back_per_example():
    idx = np.array([2, 0, 2])

    def f(m, x):
        c, ys = (sg.scan if m is sg else jax.lax.scan)(lambda c, v: (c * 0.5 + v, c), x[0], x)
        return c + x[idx].sum() + ys.sum()
    xs = RNG.normal(size=(4, 3, 2))
    want = jax.vmap(lambda x: f(jnp, x))(xs)
    _close(sg.vmap(lambda x: f(sg, x))(sg.tensor(xs)), want)
    _close(sg.compile(sg.vmap(lambda x: f(sg, x)))(xs), want)


def test_grad_of_grad_composes_as_jax():
    def f(m, y):
        return (m.sin(y) ** 3 * y).sum()
    x = np.array([0.3, -0.5, 1.2])
    want = jax.grad(lambda x_: jax.grad(lambda y: f(jnp, y))(x_).sum())(x)
    _close(sg.grad(lambda x_: sg.grad(lambda y: f(sg, y))(x_).sum())(x), want)
    want_h = jax.hessian(lambda y: f(jnp, y))(x)
    _close(sg.jacobian(sg.grad(lambda y: f(sg, y)))(x), want_h)


# ---- bad axes: JAX's errors -----------------------------------------------------------------
def test_inconsistent_sizes_name_both_arguments():
    with pytest.raises(ValueError, match=r"vmap got inconsistent sizes for array axes to be "
                                         r"mapped:\n  \* one axis had size 5: axis 0 of "
                                         r"args\[0\] of type float64\[5,3\];\n  \* one axis had "
                                         r"size 4: axis 0 of args\[1\] of type float64\[4\]"):
        sg.vmap(lambda a, b: a.sum() + b)(sg.tensor(X), sg.zeros(4, dtype=sg.float64))


def test_bad_in_axes():
    with pytest.raises(ValueError, match=r"len\(in_axes\)=2, len\(args\)=1"):
        sg.vmap(lambda a: a, in_axes=(0, 0))(sg.tensor(X))
    with pytest.raises(ValueError, match="along axis 2, which implies that its rank should be "
                                         r"at least 3, but is only 2 \(its shape is \(5, 3\)\)"):
        sg.vmap(lambda a: a, in_axes=2)(sg.tensor(X))
    with pytest.raises(ValueError, match="at least one non-None value in in_axes"):
        sg.vmap(lambda a: a, in_axes=None)(sg.tensor(X))
    with pytest.raises(TypeError, match="must be an int, None"):
        sg.vmap(lambda a: a, in_axes="0")
    with pytest.raises(ValueError, match="vmap has mapped output but out_axes is None"):
        sg.vmap(lambda a: a * 2, out_axes=None)(sg.tensor(X))


def test_torch_func_vmap_takes_in_dims_and_out_dims():
    import torch
    x = RNG.normal(size=(3, 4))
    want = torch.func.vmap(lambda t: t.sin().sum(), in_dims=1)(torch.tensor(x))
    _close(sg.func.vmap(lambda t: t.sin().sum(), in_dims=1)(sg.tensor(x)), want.numpy())
    with pytest.raises(RuntimeError, match="Only allowed values for randomness"):
        sg.func.vmap(lambda t: t, randomness="bad")


@pytest.mark.parametrize("in_axes", [(None, 0), (0, None), (0, 0)])
def test_vmap_of_scan_is_one_batched_loop(in_axes):
    xs = RNG.normal(size=(6, 3))
    w = np.array([0.3, -0.2, 0.5])
    args = [np.stack([w, w * 2]) if in_axes[0] == 0 else w,
            np.stack([xs, xs * 2]) if in_axes[1] == 0 else xs]

    def f(m, scan, w, xs):
        return scan(lambda c, x: (m.tanh(c * w + x), (c * x).sum()), xs[0] * 0, xs)
    want = jax.vmap(lambda w, xs: f(jnp, jax.lax.scan, w, xs), in_axes=in_axes)(*args)
    mapped = sg.vmap(lambda w, xs: f(sg, sg.scan, w, xs), in_axes=in_axes)
    _leaves_close(mapped(*[sg.tensor(a) for a in args]), want)
    compiled = sg.compile(mapped)
    _leaves_close(compiled(*args), want)
    assert compiled.lower(*args).as_text().count(" = loop ") == 1


def test_hessian_of_a_scan_does_not_grow_with_n():
    def loss(w):
        c, ys = sg.scan(lambda c, x: (sg.tanh(c * w + x), (c * x).sum()), w * 0,
                        sg.ones(5, w.shape[0], dtype=sg.float64))
        return c.sum() + ys.sum()

    def loss_j(w):
        c, ys = jax.lax.scan(lambda c, x: (jnp.tanh(c * w + x), (c * x).sum()), w * 0,
                             jnp.ones((5, w.shape[0])))
        return c.sum() + ys.sum()
    counts = []
    for n in (3, 12):
        w = np.linspace(-0.5, 0.5, n)
        _close(sg.hessian(loss)(w), jax.hessian(loss_j)(w))
        counts.append(sg.hessian(loss).lower(w).as_text().count(" = loop "))
    assert counts[0] == counts[1]


def test_vmap_keeps_a_custom_backward():
    class StraightThrough(sg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return sg.round(x)

        @staticmethod
        def backward(ctx, g):
            return g * 3

    x = RNG.normal(size=(4, 2))
    g = sg.grad(lambda x: sg.vmap(lambda r: StraightThrough.apply(r).sum())(x).sum())(x)
    np.testing.assert_array_equal(g, np.full((4, 2), 3.0))
    xt = sg.tensor(x, requires_grad=True)
    sg.vmap(lambda r: StraightThrough.apply(r).sum())(xt).sum().backward()
    np.testing.assert_array_equal(xt.grad.numpy(), np.full((4, 2), 3.0))
