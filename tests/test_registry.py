"""The primitive registry: every table covers every primitive; closed-form partials equal
sympy's derivative of the formula; numpy overrides equal the lambdified formula; a
user-defined formula gets a correct gradient (checked against PyTorch)."""
from __future__ import annotations

import zlib

import numpy as np
import pytest
import scipy.special
import sympy
import torch

import symgrad as sg
from symgrad.graph import primitives as R
from symgrad.ops import vjp
from symgrad.ops.formulas import BUILTIN_ELEMENTWISE
from symgrad.ops.define import BUILTIN_STRUCTURAL as STRUCTURAL

from oracle import assert_close, check, to_np


# --- table coverage ---------------------------------------------------------------------

def _all_primitives():
    # instantiate every derived partial primitive too, so they are covered by the check
    for name in list(R.PRIMITIVES):
        prim = R.PRIMITIVES[name]
        if prim.kind == "elementwise" and prim.differentiable and "." not in name:
            for i in range(prim.nin):
                R.derivative_primitive(prim, i)
    return dict(R.PRIMITIVES)


def test_every_primitive_is_in_every_table():
    prims = _all_primitives()
    missing = [(name, table) for name in prims
               for table, rules in (("shape", R.SHAPE_RULES), ("numpy", R.NUMPY_RULES))
               if name not in rules]
    for name in prims:
        assert callable(vjp.rule(name)), name
    assert not missing, f"primitives missing a rule: {missing}"
    for table in (R.SHAPE_RULES, R.NUMPY_RULES, R.VJP_RULES):
        assert set(table) <= set(prims), set(table) - set(prims)


def test_builtin_lists_match_the_registry():
    builtin = {n for n, p in R.PRIMITIVES.items() if not p.user and "." not in n}
    # `fused` is the compiler's kernel primitive (symgrad/ops/fused.py)
    assert set(BUILTIN_ELEMENTWISE) | set(STRUCTURAL) | {"fused"} >= builtin, \
        builtin - set(BUILTIN_ELEMENTWISE) - set(STRUCTURAL)
    for name in BUILTIN_ELEMENTWISE:
        assert R.PRIMITIVES[name].kind == "elementwise"
        assert R.PRIMITIVES[name].formula is not None
    for name in STRUCTURAL:
        assert R.PRIMITIVES[name].kind == "structural"


# built-in primitives compiled code computes with their numpy rule (no native lowering):
# the factors of prod's gradient, rare enough that a kernel is not worth its upkeep; the
# dense solvers (numpy's LAPACK); scatter_reduce (numpy's ufunc.at); order_index (PyTorch's
# tie-breaking selects and sorts replayed row by row), running_index and logcumsumexp (scans
# with PyTorch's NaN and infinity cases), bitwise (integer bits, ATen's shift rules)
NUMPY_IN_COMPILED_CODE = {"order_index", "running_index", "logcumsumexp", "bitwise",
                          "eigh_factor", "eigh_values", "eigh_vectors", "qr_factor", "qr_q",
                          "qr_r", "solve_triangular", "pinv", "searchsorted", "prod_others", "prod_others_dot", "loop", "while", "argsort",
                          "inv", "solve", "det", "cofactor", "slogdet_sign", "slogdet_logabs",
                          "cholesky", "cumprod", "svd_factor", "svd_u", "svdvals", "svd_vh",
                          "scatter_reduce"}
REWRITTEN_AWAY = {"stop_gradient", "custom_vjp", "checked_in_backward"}  # removed once gradients are built (rewrite)


def test_every_builtin_primitive_has_every_row():
    """One row per primitive: family, shape rule, numpy rule (the numpy backend and the
    eager path), reverse-mode rule, what the eager tape saves, and a lowering on the LLVM
    backend (or the numpy path named above)."""
    from codegen import classify, module
    native = (classify.VIEW_OPS | classify.REDUCE_OPS | classify.WINDOW_OPS
              | classify.OPAQUE_OPS | classify.EW_STRUCTURAL)
    for name, prim in R.PRIMITIVES.items():
        if prim.user:
            continue
        assert prim.family in R.FAMILIES, name
        assert name in R.SHAPE_RULES and name in R.NUMPY_RULES, name
        assert callable(vjp.rule(name)), name
        assert prim.saves == "all" or all(0 <= i < max(prim.nin, 64) for i in prim.saves), name
        if name in classify.OPAQUE_OPS:
            assert prim.family in module._OPAQUE, name
        assert prim.family == "elementwise" or name in native | NUMPY_IN_COMPILED_CODE \
            | REWRITTEN_AWAY, \
            f"{name} ({prim.family}) has no lowering in codegen"
        if not prim.differentiable and prim.kind == "structural":
            assert vjp.rule(name) is vjp.no_vjp, name


def test_builtin_cannot_be_redefined():
    with pytest.raises(ValueError, match="built-in primitive"):
        sg.elementwise("exp", lambda x: sympy.exp(x))


def test_out_is_reserved():
    with pytest.raises(ValueError, match="reserved"):
        sg.elementwise("bad_out_op", lambda out: out + 1)


# --- sample points per primitive: both sides of every Piecewise branch ---------------------

def _points(name, n, seed):
    """Random float64 points for the formula's symbols, including special values."""
    r = np.random.default_rng(seed)
    u = lambda lo, hi: r.uniform(lo, hi, n)  # noqa: E731
    if name == "pow":
        x = np.concatenate([u(0.05, 3), -u(0.1, 3), u(0.05, 3)])
        y = np.concatenate([u(-3, 3), r.integers(-3, 4, n).astype(float), np.zeros(n)])
        return [x, y]
    if name in ("remainder", "floor_divide", "fmod"):
        y = u(0.3, 3) * r.choice([-1, 1], n)
        return [u(-10, 10), y]
    if name in ("maximum", "minimum"):
        x = u(-3, 3)
        y = np.where(r.random(n) < 0.2, x, u(-3, 3))      # includes ties
        return [x, y]
    if name == "clamp":
        lo = u(-2, 0)
        return [u(-4, 4), lo, lo + u(0.1, 3)]
    if name == "where":
        return [r.integers(0, 2, n).astype(float), u(-3, 3), u(-3, 3)]
    if name in ("log", "sqrt", "rsqrt"):
        return [u(0.01, 10)]
    if name == "log1p":
        return [u(-0.99, 10)]
    if name == "tan":
        return [u(-1.5, 1.5)]
    if name in ("asin", "acos", "erfinv"):
        return [u(-0.99, 0.99)]
    if name == "softplus":
        return [np.concatenate([u(-40, 40), [20.0, 19.999, 20.001, -20.0, 0.0]])]
    if name == "sigmoid":
        return [np.concatenate([u(-40, 40), [0.0, -800.0, 800.0]])]
    if name == "binary_cross_entropy":
        # (near 0 and 1 the closed forms follow PyTorch's clamps: checked in test_nn_functional)
        return [u(0.02, 0.98), r.uniform(0, 1, n)]
    if name in ("floor", "ceil", "round"):
        return [u(-5, 5)]
    if name == "isnan":
        x = u(-3, 3)
        x[::5] = np.nan
        return [x]
    nin = R.PRIMITIVES[name].nin
    if R.PRIMITIVES[name].out_dtype == "bool":
        # comparisons / logic: small integers so equality happens
        return [r.integers(-2, 3, n).astype(float) for _ in range(nin)]
    return [u(-3, 3) for _ in range(nin)]


_LAMBDIFY_MODULES = [{"round": np.round, "fmod": np.fmod, "keep": lambda u: u,
                      "erf": scipy.special.erf, "erfinv": scipy.special.erfinv}, "numpy"]


def _eval(expr, syms, pts):
    fn = sympy.lambdify(syms, expr, modules=_LAMBDIFY_MODULES)
    with np.errstate(all="ignore"):
        out = fn(*pts)
    return np.broadcast_to(np.asarray(out, dtype=np.float64), np.broadcast(*pts).shape)


def _drop_measure_zero(d):
    """sympy's derivative with the distributional parts (DiracDelta, derivatives of
    floor/round) removed: they are zero everywhere except on a set of measure zero that
    random points never hit."""
    return d.replace(lambda e: isinstance(e, (sympy.Derivative, sympy.Subs, sympy.DiracDelta)),
                     lambda e: sympy.S.Zero)


GIVEN = [n for n in BUILTIN_ELEMENTWISE if R.PRIMITIVES[n].formula.given_partials is not None]


def test_given_partials_list_is_not_empty():
    assert {"pow", "sigmoid", "softplus", "remainder"} <= set(GIVEN)


@pytest.mark.parametrize("name", GIVEN)
def test_given_partials_equal_sympy_diff(name):
    prim = R.PRIMITIVES[name]
    f = prim.formula
    pts = _points(name, 400, seed=zlib.crc32(name.encode()))
    for i, s in enumerate(f.symbols):
        given = sympy.sympify(f.given_partials[i]).subs(R.out_symbol(), f.expr)
        ref = _drop_measure_zero(sympy.diff(f.expr, s))
        # symbolically first: piecewise-free cases usually simplify to zero
        if not given.has(sympy.Piecewise) and not ref.has(sympy.Piecewise):
            if sympy.simplify(given - ref) == 0:
                continue
        a, b = _eval(given, f.symbols, pts), _eval(ref, f.symbols, pts)
        ok = np.isfinite(b)
        assert ok.mean() > 0.5, f"{name}: too few points where sympy's derivative is finite"
        np.testing.assert_allclose(a[ok], b[ok], rtol=1e-9, atol=1e-12,
                                   err_msg=f"d{name}/d{s}")


def test_pow_partials_at_zero_base_follow_torch():
    """Where sympy's derivative is undefined (0 ** y), the closed forms follow PyTorch."""
    x = np.array([0.0, 0.0, 0.0, 0.0, 2.0, -2.0])
    y = np.array([0.0, 1.0, 2.0, 0.5, 0.0, 2.0])
    check(lambda m, a, b: m.pow(a, b), x, y)


@pytest.mark.parametrize("name", BUILTIN_ELEMENTWISE)
def test_numpy_rule_equals_lambdified_formula(name):
    prim = R.PRIMITIVES[name]
    f = prim.formula
    pts = _points(name, 500, seed=1 + zlib.crc32(name.encode()))
    if name == "where":
        pts[0] = pts[0].astype(bool)
    ref = _eval(f.expr, f.symbols, [p.astype(np.float64) for p in pts])
    with np.errstate(all="ignore"):
        got = np.asarray(R.NUMPY_RULES[name](*pts), dtype=np.float64)
    assert got.shape == ref.shape
    # values are O(1): atol covers the cancellation in formulas like x - y * floor(x / y)
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-14, equal_nan=True,
                               err_msg=name)


# --- a user-defined elementwise op -------------------------------------------------------

def _softplus2():
    return sg.elementwise("softplus2", lambda x: sympy.log(1 + sympy.exp(x)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_user_op_gradient_matches_torch_softplus(dtype):
    prim = _softplus2()
    assert set(R.SHAPE_RULES) >= {"softplus2"} and callable(vjp.rule("softplus2"))
    x = np.random.default_rng(3).uniform(-5, 5, (4, 5)).astype(dtype)
    check(lambda m, t: sg.apply(prim, t) if m is sg else torch.nn.functional.softplus(t), x,
          names=False)


def test_user_op_second_derivative_matches_torch():
    prim = _softplus2()
    x = np.linspace(-4, 4, 9)
    xs = sg.tensor(x, requires_grad=True)
    xt = torch.tensor(x, requires_grad=True)
    (gs,) = sg.autograd.grad(sg.apply(prim, xs).sum(), xs, create_graph=True)
    (gt,) = torch.autograd.grad(torch.nn.functional.softplus(xt).sum(), xt, create_graph=True)
    assert_close(gs, gt)
    (hs,) = sg.autograd.grad(gs.sum(), xs)
    (ht,) = torch.autograd.grad(gt.sum(), xt)
    assert_close(hs, ht)


def test_user_binary_op_broadcasts_and_matches_torch_hypot():
    prim = sg.elementwise("hypot2", lambda x, y: sympy.sqrt(x ** 2 + y ** 2))
    r = np.random.default_rng(4)
    a, b = r.uniform(0.5, 2, (3, 1)), r.uniform(0.5, 2, (1, 4))
    check(lambda m, x, y: sg.apply(prim, x, y) if m is sg else torch.hypot(x, y), a, b,
          names=False)


def test_user_op_with_closed_form_grads():
    prim = sg.elementwise("my_sigmoid", lambda x: 1 / (1 + sympy.exp(-x)),
                          grads=lambda x, out: (out * (1 - out),))
    x = np.random.default_rng(5).uniform(-6, 6, 7)
    check(lambda m, t: sg.apply(prim, t) if m is sg else torch.sigmoid(t), x, names=False)


def test_user_op_redefinition_replaces_it():
    p1 = sg.elementwise("twice", lambda x: 2 * x)
    p2 = sg.elementwise("twice", lambda x: 3 * x)
    assert R.PRIMITIVES["twice"] is p2 and p1 is not p2
    t = sg.tensor([1.0])
    assert to_np(sg.apply(p2, t)).tolist() == [3.0]
