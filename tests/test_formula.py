"""symgrad.graph.formula, the sympy-free formula type: its values and derivatives against
sympy's (every built-in elementwise formula, converted from its sympy definition), its
structure (hash-consing, no automatic rewriting, signed zeros), pickling, CSE, depth
without recursion, and that using it never imports sympy."""
from __future__ import annotations

import pickle
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest
import sympy
import torch

from symgrad.graph import formula as F
from symgrad.graph.primitives import PRIMITIVES, derivative, lambdify as sympy_lambdify
from symgrad.ops.formulas import BUILTIN_ELEMENTWISE


# operands drawn where every built-in is defined, ties included (x == y, 0)
_RNG = np.random.default_rng(19)


def _points(name, n):
    if name in ("asin", "acos", "erfinv"):
        return _RNG.uniform(-0.95, 0.95, n)
    if name in ("binary_cross_entropy",):
        return _RNG.uniform(0.05, 0.95, n)
    if name in ("log", "sqrt", "rsqrt", "pow", "log1p"):
        return _RNG.uniform(0.1, 3.0, n)
    v = _RNG.uniform(-3, 3, n)
    v[:3] = (0.0, 1.0, -1.0)
    return np.round(v, 1)       # ties between operands, integers


def _close(a, b):
    a = np.broadcast_to(np.asarray(a, dtype=np.float64), (40,))
    b = np.broadcast_to(np.asarray(b, dtype=np.float64), (40,))
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-300, equal_nan=True)


@pytest.mark.parametrize("name", BUILTIN_ELEMENTWISE)
def test_builtin_formulas_values_and_derivatives_match_sympy(name):
    f = PRIMITIVES[name].formula
    syms = f.symbols
    mine = F.from_sympy(f.expr)
    args = [_points(name, 40) for _ in syms]
    if name == "where":
        args[0] = (args[0] > 0).astype(np.float64)
    with np.errstate(all="ignore"):
        ours = F.lambdify([F.symbol(s.name) for s in syms], mine)(*args)
        ref = np.isnan(*args) if name == "isnan" else sympy_lambdify(syms, f.expr)(*args)
        _close(ours, ref)
        if not PRIMITIVES[name].differentiable:
            return
        for s in syms:
            d = F.diff(mine, F.symbol(s.name))
            ref_d = derivative(f.expr, s)
            if ref_d.has(sympy.Derivative):         # round: sympy leaves it unevaluated
                assert d is F.number(0)
                continue
            ref_d = sympy_lambdify(syms, ref_d)(*args)
            _close(F.lambdify([F.symbol(t.name) for t in syms], d)(*args), ref_d)


def test_hash_consing_and_no_rewriting():
    x, y = F.symbol("x"), F.symbol("y")
    assert (x + 1) * y is (x + 1) * y
    assert ((x + 1) - 1) is not x
    assert (3 * (x + 1)).op == "mul"
    assert F.number(0.0) is not F.number(-0.0)
    assert F.number(1) is not F.number(1.0) and F.number(1) is not F.number(True)
    assert F.number(Fraction(4, 2)) is F.number(2)
    assert F.number(np.float32(0.5)) is F.number(0.5)
    nan = F.number(float("nan"))
    assert nan is F.number(float("nan"))
    with pytest.raises(TypeError, match="truth value"):
        bool(x < y)
    with pytest.raises(AttributeError, match="immutable"):
        x.op = "y"
    with pytest.raises(ValueError, match="unknown formula function"):
        F.call("gamma", x)
    with pytest.raises(TypeError, match="takes 2"):
        F.call("atan2", x)


def test_values_are_evaluated_in_the_order_written():
    x = F.symbol("x")
    fn = F.lambdify([x], (x + 1.0) - 1.0)
    assert fn(np.float64(1e-17)) == 0.0          # sympy would fold it to x
    fn = F.lambdify([x], (x * 1e300) * 1e-300)
    assert np.isinf(fn(np.float64(1e10)))


def test_derivative_conventions():
    x, y = F.symbol("x"), F.symbol("y")
    z = np.array([-1.0, 0.0, 2.0])
    grad = F.lambdify([x], F.diff(abs(x), x))
    np.testing.assert_array_equal(grad(z), [-1.0, 0.0, 1.0])
    grad = F.lambdify([x, y], F.diff(F.call("max", x, y), x))
    np.testing.assert_array_equal(grad(z, np.zeros(3)), [0.0, 0.0, 1.0])   # 0 at the tie
    assert F.diff(F.call("floor", x) * y, x) is F.number(0)
    assert F.diff(x * y, x) is y                  # 1 * y simplified, nothing else
    assert F.diff(x * y + x, y) is x
    # the quotient rule in PyTorch's order: -(x / y) / y, not -x / y**2
    d = F.diff(x / y, y)
    assert F.lambdify([x, y], d)(np.float64(1e300), np.float64(1e300)) == -1e-300
    d = F.diff(F.call("fmod", x, y), y)
    np.testing.assert_array_equal(F.lambdify([x, y], d)(np.array([7.0, -7.0]), 2.0),
                                  [-3.0, 3.0])


def test_sympy_round_trip():
    x, y = F.symbol("x"), F.symbol("y")
    e = F.select((F.call("exp", x) / (y + 2), x > y), default=F.call("log1p", x * x))
    sx, sy = sympy.symbols("x y", real=True)
    from sympy.codegen.cfunctions import log1p
    ref = sympy.Piecewise((sympy.exp(sx) / (sy + 2), sx > sy), (log1p(sx ** 2), True))
    assert sympy.simplify(F.to_sympy(e) - ref) == 0
    back = F.from_sympy(F.to_sympy(e))
    pts = np.linspace(-2, 2, 9)
    _close(np.resize(F.lambdify([x, y], back)(pts, pts[::-1]), 40),
           np.resize(F.lambdify([x, y], e)(pts, pts[::-1]), 40))
    with pytest.raises(ValueError, match="no formula operation"):
        F.from_sympy(sympy.gamma(sx))


def test_cse_names_each_shared_operation_once():
    x, y = F.symbol("x"), F.symbol("y")
    s = F.call("exp", x + y)
    assigns, (r1, r2) = F.cse([s * s, s + (x + y)])
    assert [v for _, v in assigns][0] is x + y
    assert len(assigns) == 2
    t0, t1 = (t for t, _ in assigns)
    assert assigns[1][1] is F.call("exp", t0)
    assert r1 is t1 * t1 and r2 is t1 + t0


def test_pickle_and_depth_without_recursion():
    x = F.symbol("x")
    e = x
    for i in range(10_000):
        e = F.call("sin", e) + 0.5 if i % 2 else e * 1.0001
    back = pickle.loads(pickle.dumps(e))
    assert back is e
    d = F.diff(e, x)
    val = F.lambdify([x], d)(np.float64(0.3))
    assert np.isfinite(val)
    assert len(F.to_text(e)) > 10_000
    assert F.free_symbols(d) == {x}


def test_no_sympy_import():
    code = ("import sys, numpy as np; from symgrad.graph import formula as F\n"
            "x = F.symbol('x'); e = F.select((F.call('tanh', x) ** 2, x > 0), default=x)\n"
            "F.lambdify([x], F.diff(e, x))(np.ones(3)); F.cse([e])\n"
            "assert 'sympy' not in sys.modules, 'sympy imported'\n")
    subprocess.run([sys.executable, "-c", code], check=True)


_SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 1e-30, -1e-30, 1e30, -1e30, 1e300, -1e300,
            5e-324, np.inf, -np.inf, np.nan, 3.0, 20.0, 21.0, -20.5, 0.999, 1e-8]


def _operands(dtype, n, rng):
    v = np.concatenate([_SPECIAL, rng.standard_normal(n) * 3, rng.uniform(-1, 1, n),
                        np.exp(rng.uniform(-80, 80, n)) * rng.choice([-1, 1], n)])
    with np.errstate(all="ignore"):
        v = v.astype(dtype)
    rng.shuffle(v)
    return v


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", [n for n in BUILTIN_ELEMENTWISE if PRIMITIVES[n].differentiable])
def test_first_partials_are_sympys_bit_for_bit(name, dtype):
    """The eager gradient's partial derivatives (own formula type) give the numbers the
    sympy derivative lambdified gives, bit for bit, on ordinary and extreme operands."""
    from symgrad.graph.primitives import derivative_primitive
    prim = PRIMITIVES[name]
    rng = np.random.default_rng(len(name))
    for i in range(prim.nin):
        d = derivative_primitive(prim, i)
        if not isinstance(d, tuple):
            ref = prim.formula.partial(i)
            assert F.from_sympy(ref) is d
            continue
        dprim = d[0]
        form = dprim.formula
        args = [_operands(dtype, 200, rng) for _ in form.fsymbols]
        if name == "where":
            args[0] = (args[0] > 0).astype(dtype)
        ours = np.broadcast_to(np.asarray(F.lambdify(form.fsymbols, form.node)(*args)),
                               args[0].shape)
        with np.errstate(all="ignore"):
            ref = np.broadcast_to(np.asarray(sympy_lambdify(form.symbols, form.expr)(*args)),
                                  args[0].shape)
        if name == "binary_cross_entropy" and dtype is np.float64:
            # sympy prints the clamp's float32 1e-12 with 15 digits; ours is exact
            with np.errstate(all="ignore"):
                keep = args[0] * (1 - args[0]) > 1e-11
            ours, ref, args = ours[keep], ref[keep], [a[keep] for a in args]
        if name in ("erf", "erfinv") and dtype is np.float32:
            # sympy's lambdified sqrt(pi) is a numpy float64, a strong scalar under NEP 50:
            # its result for float32 operands is float64; ours folds 2/sqrt(pi) to a weak
            # Python float and computes in float32, as PyTorch and compiled code do --
            # within a few float32 ulp of sympy's, rounded
            assert ours.dtype == dtype
            np.testing.assert_allclose(ours, ref.astype(dtype), rtol=4 * np.finfo(dtype).eps,
                                       atol=0)
            continue
        assert ours.dtype == ref.dtype
        same = (ours == ref) & (np.signbit(ours) == np.signbit(ref)) | \
            (np.isnan(ours) & np.isnan(ref))
        assert same.all(), (dprim.name, [a[~same][:3] for a in args])


def test_threads_building_one_formula_get_one_node():
    import threading
    made, start = [], threading.Barrier(8)

    def build():
        start.wait()
        x = F.symbol("x_threads")
        made.append(F.call("exp", (x + 0.25) * x) / F.call("log1p", x))
    threads = [threading.Thread(target=build) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(m is made[0] for m in made)


def test_fold_decides_only_what_is_exact():
    x = F.symbol("x")
    cond = F.select((0, F.eq(F.number(2), 0)), default=2 * x ** (F.number(2) - 1))
    assert F.fold(cond) is 2 * x                       # 2 == 0 is False, 2 - 1 is 1, x**1 is x
    assert F.fold(F.select((x, F.lt(1, 2)), default=-x)) is x
    kept = x ** (F.number(1.5) - 1) + F.number(0.1) * 3  # float arithmetic may round: kept
    assert F.fold(kept) is kept
    assert F.fold(F.logical_and(F.gt(3, 1), F.ne(F.number(1), 1.0))) is F.number(False)


def test_lambdify_keeps_number_operations_weak():
    """Operations on numbers alone evaluate to Python numbers, so a float32 array stays
    float32 (numpy's scalar result of 2 - 1 is an int64, a strong type under NEP 50)."""
    x = F.symbol("x")
    big = np.array([3e38], np.float32)
    got = F.lambdify([x], 2 * x ** (F.number(2) - 1))(big)
    assert got.dtype == np.float32
    # PyTorch: float32 * a Python scalar stays float32 and overflows
    want = (torch.from_numpy(big) * 2).numpy()
    assert np.isinf(want).all() and np.array_equal(got, want)
