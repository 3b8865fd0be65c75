"""Structured loops (scan, fori_loop, while_loop) against JAX: values eagerly, compiled on
both backends, gradients (grad, eager backward, hessian, jacobian), pytrees, nesting,
reverse scans, mixed dtypes; JAX's errors for bad carries; a loop is one node whatever
its trip count."""
from __future__ import annotations

import types

import numpy as np
import pytest

import symgrad as sg

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy

SG = types.SimpleNamespace(np=sg, scan=sg.scan, fori_loop=sg.fori_loop,
                           while_loop=sg.while_loop, i64=lambda t: t.to(sg.int64))
JX = types.SimpleNamespace(np=jnp, scan=jax.lax.scan, fori_loop=jax.lax.fori_loop,
                           while_loop=jax.lax.while_loop, i64=lambda t: t.astype(jnp.int64))
TOL = {np.float32: dict(rtol=2e-5, atol=2e-6), np.float64: dict(rtol=1e-11, atol=1e-12)}


# ---- programs, written once for both libraries -------------------------------------------------
def rnn(m, xs, w, u):
    def step(h, x):
        h = m.np.tanh(h @ w + x @ u)
        return h, (h * h).sum()
    h, ys = m.scan(step, m.np.zeros(w.shape[0], dtype=w.dtype), xs)
    return h.sum() + ys.sum()


def reverse_cumprod(m, xs, w, u):
    def step(c, x):
        c = c * m.np.sin(x[0] * u[0, 0]) + w[0, 0]
        return c, {"c": c, "x": x[1] * c}
    c, ys = m.scan(step, xs[0, 0] * 0 + 1, xs, reverse=True)
    return c + ys["c"].sum() + (ys["x"] ** 2).sum()


def euler(m, xs, w, u):
    k = (w ** 2).sum()

    def body(i, s):
        x, v = s
        a = -k * x - 0.1 * v + m.np.cos(i * (u[0, 0] * 0 + 0.3)) * u[0, 0]
        return (x + 0.05 * v, v + 0.05 * a)
    x, v = m.fori_loop(0, 40, body, (xs[0], xs[1]))
    return (x * x).sum() + v.sum()


def nested(m, xs, w, u):
    def inner(c, x):
        return c * 0.9 + m.np.tanh(x * c), None

    def outer(c, row):
        c2, _ = m.scan(inner, c, row)
        return c2 + w[0, 0], c2
    c, ys = m.scan(outer, u[0, 0] * 0 + 0.5, xs)
    return c + (ys ** 2).sum()


def no_xs(m, xs, w, u):
    def step(c, _):
        return (c @ w) * 0.5 + u[0], c.sum()
    c, ys = m.scan(step, xs[0], None, length=7)
    return (c ** 2).sum() + ys.sum()


def closure_only_carry(m, xs, w, u):
    c, ys = m.scan(lambda c, x: (c + x.sum() * w.sum(), c * 2), xs[0, 0], xs)
    return c + ys.sum()


PROGRAMS = [rnn, reverse_cumprod, euler, nested, no_xs, closure_only_carry]


def _data(dtype, seed=0):
    rng = np.random.default_rng(seed)
    xs = rng.normal(size=(6, 3)).astype(dtype) * 0.5
    w = rng.normal(size=(3, 3)).astype(dtype) * 0.4
    u = rng.normal(size=(3, 3)).astype(dtype) * 0.4
    return xs, w, u


def _close(a, b, dtype):
    np.testing.assert_allclose(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64),
                               **TOL[dtype])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("prog", PROGRAMS, ids=lambda p: p.__name__)
def test_value_eager_and_compiled_match_jax(prog, dtype):
    args = _data(dtype)
    want = prog(JX, *args)
    _close(prog(SG, *[sg.tensor(a) for a in args]).numpy(), want, dtype)
    for backend in ("llvm", "numpy"):
        got = sg.compile(lambda *a: prog(SG, *a), backend=backend)(*args)
        _close(got, want, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("prog", PROGRAMS, ids=lambda p: p.__name__)
def test_gradients_compiled_and_eager_match_jax(prog, dtype):
    args = _data(dtype, seed=1)
    want = jax.grad(lambda *a: prog(JX, *a), argnums=(0, 1, 2))(*args)
    got = sg.grad(lambda *a: prog(SG, *a), argnums=(0, 1, 2))(*args)
    for g, h in zip(got, want):
        _close(g, h, dtype)
    ts = [sg.tensor(a, requires_grad=True) for a in args]
    prog(SG, *ts).backward()
    for t, h in zip(ts, want):       # an unused input: no grad in PyTorch, zeros in JAX
        _close(t.grad.numpy() if t.grad is not None else np.zeros_like(h), h, dtype)


@pytest.mark.parametrize("prog", [rnn, euler, reverse_cumprod], ids=lambda p: p.__name__)
def test_hessian_through_loops_matches_jax(prog):
    xs, w, u = _data(np.float64, seed=2)
    want = jax.hessian(lambda w_: prog(JX, xs, w_, u))(w)
    xs_t, u_t = sg.tensor(xs), sg.tensor(u)    # tensors: numpy scalars promote as Python's
    got = sg.hessian(lambda w_: prog(SG, xs_t, w_, u_t))(w)
    _close(got, want, np.float64)


def test_jacobian_of_stacked_results_matches_jax():
    xs, w, u = _data(np.float64, seed=3)

    def f(m, w):
        return m.scan(lambda c, x: (m.np.tanh(c @ w + x), (c * x).sum()),
                      m.np.zeros(3, dtype=w.dtype), xs)[1]
    _close(sg.jacobian(lambda w_: f(SG, w_))(w), jax.jacobian(lambda w_: f(JX, w_))(w),
           np.float64)


def test_value_and_grad_runs_the_forward_loop_once():
    xs, w, u = _data(np.float64)
    text = sg.value_and_grad(lambda w_: rnn(SG, xs, w_, u)).lower(w).as_text()
    assert sum(" = loop " in line and "reverse=False" in line for line in text.splitlines()) == 1


def test_trip_count_does_not_change_the_program():
    w = np.eye(3) * 0.5

    def f(xs, w):
        return rnn(SG, xs, w, w)
    sizes = []
    for T in (5, 2000):
        xs = np.ones((T, 3)) * 0.1
        low = sg.value_and_grad(f, argnums=1).lower(xs, w)
        sizes.append(low.stats["optimized"])
        np.testing.assert_allclose(
            sg.value_and_grad(f, argnums=1)(xs, w)[1],
            jax.grad(lambda w_: rnn(JX, xs, w_, w_))(w), rtol=1e-10)
    assert sizes[0] == sizes[1]


def test_loop_prints_as_one_node_with_its_body():
    xs, w, u = _data(np.float64)
    text = sg.compile(lambda w_: rnn(SG, xs, w_, u)).lower(w).as_text()
    assert text.count(" = loop ") == 1 and "body:" in text and "tanh" in text


# ---- while_loop and fori_loop with traced bounds ----------------------------------------------------
def newton_sqrt(m, a):
    def cond(s):
        x, i = s
        return (m.np.abs(x * x - a).max() > 1e-6) & (i < 50)

    def body(s):
        x, i = s
        return (0.5 * (x + a / x), i + 1)
    return m.while_loop(cond, body, (a * 0 + 1, 0))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_while_loop_matches_jax(dtype):
    a = np.array([2.0, 9.0, 0.25], dtype=dtype)
    x_j, i_j = newton_sqrt(JX, a)
    x_e, i_e = newton_sqrt(SG, sg.tensor(a))
    x_c, i_c = sg.compile(lambda a_: newton_sqrt(SG, a_))(a)
    for x, i in ((x_e.numpy(), int(i_e)), (x_c, int(i_c))):
        _close(x, x_j, dtype)
        assert i == int(i_j)


def test_fori_loop_with_traced_bounds_is_a_while_loop():
    def f(m, n, x):
        return m.fori_loop(0, n, lambda i, v: v * 1.5 + i, x)
    x = np.array([1.0, -2.0])
    want = f(JX, jnp.int64(5), x)
    got = sg.compile(lambda n, x_: f(SG, n, x_))(np.int64(5), x)
    _close(got, want, np.float64)
    with pytest.raises(ValueError, match="Reverse-mode differentiation does not work for "
                                         "lax.while_loop"):
        sg.grad(lambda x_: f(SG, sg.tensor(5) * 1, x_).sum())(x)


def test_while_loop_cannot_be_differentiated():
    with pytest.raises(ValueError, match="Reverse-mode differentiation does not work"):
        sg.grad(lambda a: newton_sqrt(SG, a)[0].sum())(np.array([2.0]))


def test_mixed_dtype_carries():
    def f(m, xs):
        def step(c, x):
            v, n = c
            return (v + x, n + m.i64((x > 0).sum())), v.sum()
        return m.scan(step, (xs[0] * 0, m.i64(xs[0, 0] * 0)), xs)
    xs = np.random.default_rng(4).normal(size=(9, 4))
    (v_j, n_j), ys_j = f(JX, xs)
    for res in (f(SG, sg.tensor(xs)), sg.compile(lambda a: f(SG, a))(xs)):
        (v, n), ys = res
        _close(np.asarray(v), v_j, np.float64)
        _close(np.asarray(ys), ys_j, np.float64)
        np.testing.assert_array_equal(np.asarray(n), np.asarray(n_j))
        assert np.asarray(n).dtype == np.int64


def test_zero_length_scan_and_loop():
    xs = np.zeros((0, 3))
    c, ys = sg.compile(lambda a: sg.scan(lambda c, x: (c + x, c.sum()), sg.ones(3,
                       dtype=sg.float64), a))(xs)
    np.testing.assert_array_equal(c, np.ones(3))
    assert np.asarray(ys).shape == (0,)
    c, ys = sg.scan(lambda c, x: (c + x, c.sum()), sg.ones(3, dtype=sg.float64), sg.tensor(xs))
    assert tuple(ys.shape) == (0,) and ys.dtype == sg.float64
    assert float(sg.fori_loop(3, 1, lambda i, v: v + 1, sg.tensor(2.0))) == 2.0


def test_closure_over_parameters_gets_gradients():
    w = sg.tensor(np.array([[0.5, -0.2], [0.1, 0.3]]), requires_grad=True)

    def f(x):
        return sg.scan(lambda h, xt: (sg.tanh(h @ w + xt), None), sg.zeros(2, dtype=sg.float64),
                       x)[0].sum()
    xs = np.random.default_rng(5).normal(size=(4, 2))
    want = jax.grad(lambda w_: jax.lax.scan(lambda h, xt: (jnp.tanh(h @ w_ + xt), None),
                                            jnp.zeros(2), xs)[0].sum())(w.detach().numpy())
    f(sg.tensor(xs)).backward()
    _close(w.grad.numpy(), want, np.float64)
    gx = sg.grad(f)(xs)
    want_x = jax.grad(lambda x_: jax.lax.scan(lambda h, xt: (jnp.tanh(h @ w.detach().numpy() + xt),
                                                             None), jnp.zeros(2), x_)[0].sum())(xs)
    _close(gx, want_x, np.float64)


# ---- bad input: JAX's errors --------------------------------------------------------------------
@pytest.mark.parametrize("compiled", [False, True])
def test_carry_that_changes_shape_dtype_or_structure_is_refused(compiled):
    xs = np.ones((3, 2))

    def run(step, init):
        if compiled:
            return sg.compile(lambda a: sg.scan(step, init, a))(xs)
        return sg.scan(step, init, sg.tensor(xs))
    with pytest.raises(TypeError, match=r"The input carry carry has type float64\[\] but "
                                        r"the corresponding output carry component has type "
                                        r"float64\[2\], so the shapes do not match"):
        run(lambda c, x: (c + x, None), sg.tensor(0.0, dtype=sg.float64))
    with pytest.raises(TypeError, match="so the dtypes do not match"):
        run(lambda c, x: (c.float(), None), sg.tensor(0.0, dtype=sg.float64))
    with pytest.raises(TypeError, match="must have the same pytree structure"):
        run(lambda c, x: ((c, c), None), sg.tensor(0.0, dtype=sg.float64))
    with pytest.raises(TypeError, match="scan body output must be a pair"):
        run(lambda c, x: c, sg.tensor(0.0, dtype=sg.float64))


def test_scan_length_errors_as_jax():
    with pytest.raises(ValueError, match="different leading axis sizes: 3, 4"):
        sg.scan(lambda c, x: (c, None), 0.0, (sg.ones(3), sg.ones(4)))
    with pytest.raises(ValueError, match="`length` argument of 5 which disagrees"):
        sg.scan(lambda c, x: (c, None), 0.0, sg.ones(3), length=5)
    with pytest.raises(ValueError, match="no values to scan over"):
        sg.scan(lambda c, x: (c, None), 0.0, None)


def test_while_cond_must_be_a_boolean_scalar():
    with pytest.raises(TypeError, match="cond_fun must return a boolean scalar"):
        sg.while_loop(lambda v: v, lambda v: v - 1, sg.tensor(3.0))
    with pytest.raises(TypeError, match="cond_fun must return a boolean scalar"):
        sg.compile(lambda a: sg.while_loop(lambda v: v, lambda v: v - 1, a))(np.ones(2))


# ---- inspection ------------------------------------------------------------------------------
def test_symbolic_unrolls_a_scan_against_sympy():
    import sympy
    w = sympy.Symbol("w", real=True)

    def f(w_):
        return sg.scan(lambda c, x: (c * w_ + sg.sin(x), None), w_ * 0,
                       sg.tensor([0.5, 1.0, 2.0], dtype=sg.float64))[0]
    want = ((sympy.sin(sympy.Rational(1, 2)) * w + sympy.sin(1)) * w + sympy.sin(2))
    got = sg.compile(f).lower(np.float64(0.3)).symbolic()
    assert sympy.simplify(got.item() - want) == 0       # (the argument w_ is named w)
    g = sg.grad(f).lower(np.float64(0.3)).symbolic()
    assert sympy.simplify(g.item() - sympy.diff(want, w)) == 0


def test_symbolic_of_a_deep_chain_is_a_clear_error():
    def f(x):
        for _ in range(1500):
            x = sg.sin(x) * 0.9 + 0.1
        return x.sum()
    with pytest.raises(ValueError, match="nested deeper than sympy can handle"):
        sg.grad(f).lower(np.ones(2)).symbolic()
    with pytest.raises(ValueError, match="while_loop's trip count depends on values"):
        sg.compile(lambda a: sg.while_loop(lambda v: v.sum() < 9, lambda v: v * 2, a)).lower(
            np.ones(2)).symbolic()
