"""The built-in elementwise primitives, each defined once by its formula
(:mod:`symgrad.graph.formula`, symgrad's own formula type: no sympy is imported).

`numpy=` gives a faster or more careful numpy kernel than the evaluated formula (tests
check it against the formula); `grads=` gives closed-form partials where the derivative
would be numerically unstable (tests check them against ``sympy.diff``). Each formula is
written in the order it is computed: nothing rewrites it.

The formulas are Python functions the registry calls on formula symbols when a formula is
first needed.
"""
from __future__ import annotations

import numpy as np
from fractions import Fraction

from ..graph import formula as F
from ..graph.primitives import elementwise
from .lax import zero_where
from .vjp import abs_vjp, masked_vjp, pow_vjp, relu_vjp, where_vjp
from ..graph.fpstate import quiet

__all__ = ["BUILTIN_ELEMENTWISE"]


class _Functions:
    """``S.exp(x)`` etc.: the formula functions by name; ``S.Eq`` / ``S.Ne`` etc. the
    relations, ``S.pi`` the constant."""

    _REL = {"Eq": F.eq, "Ne": F.ne, "StrictLessThan": F.lt, "LessThan": F.le,
            "StrictGreaterThan": F.gt, "GreaterThan": F.ge}
    _NAMES = {"Abs": "abs", "ceiling": "ceil", "Max": "max", "Min": "min"}

    def __getattr__(self, name: str):
        if name in self._REL:
            return self._REL[name]
        if name == "pi":
            return F.pi
        fn = self._NAMES.get(name, name)
        if fn not in F.FUNCTIONS:
            raise AttributeError(name)
        return lambda *args: F.call(fn, *args)


S = _Functions()


def log1p(x):
    return F.call("log1p", x)


def expm1(x):
    return F.call("expm1", x)


def _pw(*pairs):
    """Piecewise: (value, condition) pairs, the last one's condition True."""
    *pairs, (last, cond) = pairs
    assert cond is True
    return F.select(*pairs, default=last)


def _softplus_numpy(x):
    with quiet():
        return np.where(x > 20, x, np.log1p(np.exp(np.minimum(x, 20))))


def _log1pexp_numpy(x):
    """log(1 + e^x) = max(x, 0) + log1p(e^-|x|): exact for every x (no threshold)."""
    with quiet():
        return np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0)


_EXPIT: list = []
# arrays from this size take 1 / (1 + exp(-x)) in numpy passes (scipy's expit costs ~5 ns
# per element: 10x PyTorch on 256 x 256); smaller ones one expit call (the passes' four
# ufunc calls cost more than the work there)
SIGMOID_PASSES_MIN_SIZE = 1024


def _sigmoid_numpy(x):
    """sigmoid: scipy.special.expit (one stable ufunc; imported on first use, as
    scipy.special would add ~0.15 s to ``import symgrad``) on small inputs;
    ``1 / (1 + exp(-x))`` in place on large arrays -- PyTorch's vectorised formula (exp(-x)
    overflows to inf below about -88 in float32: 1 / inf is the 0 torch gives). The two
    differ in the last bit for some elements, as PyTorch's scalar and vector loops do."""
    if type(x) is np.ndarray and x.size >= SIGMOID_PASSES_MIN_SIZE and x.dtype.kind == "f":
        with quiet():
            e = np.exp(np.negative(x))
            np.add(e, e.dtype.type(1), out=e)
            return np.reciprocal(e, out=e)
    if not _EXPIT:
        from scipy.special import expit
        _EXPIT.append(expit)
    return _EXPIT[0](x)


def _sign_numpy(x):
    if x.dtype == np.bool_:
        return x.copy()
    r = np.sign(x)
    return np.where(np.isnan(r), 0, r) if r.dtype.kind == "f" else r


def _log1pexp(a):
    """log(1 + e^a) as a formula that no evaluation overflows: each branch is exact
    where it is taken (numpy evaluates both and selects; compiled code lowers each
    log1p(exp(.)) to the stable max(., 0) + log1p(e^-|.|), shared by the branches)."""
    return _pw((a + log1p(S.exp(-a)), a > 0), (log1p(S.exp(a)), True))


def _sigmoid(x):
    """1 / (1 + e^-x) as a formula whose derivatives stay finite: e^x / (1 + e^x) below 0
    (the value 0 -- or e^x, subnormal -- at x = -100 in float32, not 1 / inf; and the
    second derivative e^x / (1 + e^x)^2, not inf / inf = NaN: softplus, BCE with logits)."""
    return _pw((1 / (1 + S.exp(-x)), x >= 0), (S.exp(x) / (1 + S.exp(x)), True))


def _ew(name, formula, **kw):
    return elementwise(name, formula, _builtin=True, **kw)


# arithmetic
_ew("add", lambda x, y: x + y, numpy=np.add)
_ew("sub", lambda x, y: x - y, numpy=np.subtract)
_ew("mul", lambda x, y: x * y, numpy=np.multiply)
# closed forms below also choose what backward saves, as PyTorch does: div its inputs,
# expm1 / rsqrt / relu their result (in-place updates afterwards are checked the same way)
_ew("div", lambda x, y: x / y, numpy=np.true_divide, out_dtype="float",
    grads=lambda x, y, out: (1 / y, -((x / y) / y)))
_ew("neg", lambda x: -x, numpy=np.negative)
_ew("copy", lambda x: x, numpy=lambda x: np.array(x, copy=True), grad_name="CloneBackward0")
_ew("pow", lambda x, y: x ** y, numpy=F.torch_pow,
    grads=lambda x, y, out: (_pw((0, S.Eq(y, 0)), (y * x ** (y - 1), True)),
                             _pw((0, S.Eq(x, 0) & (y >= 0)), (out * S.log(x), True))),
    vjp=pow_vjp)
# remainder and floor_divide as PyTorch (and Python, numpy) compute them, from the exact
# fmod (x - y*floor(x/y) is off by up to y when x/y rounds: 1000 % 0.1):
# m = fmod(x, y), moved by y when its sign is not y's; the quotient (x - m)/y, rounded
# to the nearest integer below (a zero quotient takes the sign of x/y; x or y zero: x/y)
def _wrong_side(m, y):
    return ((m < 0) & (y > 0)) | ((m > 0) & (y < 0))


def _remainder(x, y):
    m = F.call("fmod", x, y)
    return _pw((m + y, _wrong_side(m, y)), (m, True))


def _floor_divide(x, y):
    # (keep: its sympy form, for inspection, would distribute a constant divisor over
    # x - m and see through the floor of a piecewise -- exact for reals, not in IEEE;
    # the compiler's own formula keeps every step anyway and lowers keep as its argument)
    m = F.call("fmod", x, y)
    d = F.call("keep", F.call("keep", x - m) / y)
    q = F.call("keep", _pw((d - 1, _wrong_side(m, y)), (d, True)))
    f = S.floor(q)
    # (the whole in a floor -- exact on these integral values, infinities, NaN and signed
    # zeros -- so that its derivative is structurally 0, as PyTorch's is)
    return S.floor(_pw((x / y, S.Eq(y, 0) | S.Eq(x, 0)),
                       (S.Abs(q) * S.sign(x / y), S.Eq(q, 0)),
                       (f + 1, q - f > _half()), (f, True)))


def _np_remainder(x, y):
    """numpy's remainder but for the sign of a zero result: PyTorch keeps fmod's (x's)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        m = np.fmod(x, y)
        return np.where(((m < 0) & (y > 0)) | ((m > 0) & (y < 0)), m + y, m)


_ew("remainder", _remainder, numpy=_np_remainder,
    grads=lambda x, y, out: (1, -_floor_divide(x, y)))
# fmod: the remainder of the division rounded toward zero (a function of its own:
# exact, where x - y*trunc(x/y) is not); partials 1 and -trunc(x/y)
_ew("fmod", lambda x, y: F.call("fmod", x, y), numpy=np.fmod)
_ew("floor_divide", _floor_divide, numpy=np.floor_divide,
    grads=lambda x, y, out: (0, 0), grad_name="DivBackward2")
# ties split the gradient; where a NaN is compared (no order) both operands get all of it,
# and clamp passes nothing there, as PyTorch's backward formulas do
def _half():
    return F.number(Fraction(1, 2))


def _tie(x, y):
    """The value at a tie, y as PyTorch's vectorised kernels give it, written so that its
    partials are the given 1/2, 1/2: ``y + (x - y)/2`` where ``x - y`` is exactly 0 and
    ``y`` is not zero (the mean x/2 + y/2 rounded odd subnormals), ``y`` itself at ±0
    (its sign, as torch's) and ±inf ties; a NaN operand: x + y, NaN."""
    return ((y + (x - y) / 2, S.Eq(x - y, 0) & S.Ne(y, 0)), (y, S.Eq(x, y)), (x + y, True))


_ew("maximum", lambda x, y: _pw((x, x > y), (y, x < y), *_tie(x, y)),
    numpy=np.maximum,
    grads=lambda x, y, out: (_pw((1, x > y), (0, x < y), (_half(), S.Eq(x, y)), (1, True)),
                             _pw((0, x > y), (1, x < y), (_half(), S.Eq(x, y)), (1, True))),
    vjp=masked_vjp)
_ew("minimum", lambda x, y: _pw((x, x < y), (y, x > y), *_tie(x, y)),
    numpy=np.minimum,
    grads=lambda x, y, out: (_pw((1, x < y), (0, x > y), (_half(), S.Eq(x, y)), (1, True)),
                             _pw((0, x < y), (1, x > y), (_half(), S.Eq(x, y)), (1, True))),
    vjp=masked_vjp)
try:
    from numpy._core.umath import clip as _clip_ufunc      # (np.clip without its wrappers)
except ImportError:          # other numpy versions
    _clip_ufunc = np.clip
_NUMBERS = (int, float)


def _clamp_numpy(x, lo, hi):
    """min(max(x, lo), hi), x itself where it equals a bound (PyTorch's clamp keeps the
    input's zero sign: clamp(-0.0, 0, 6) is -0.0; numpy's maximum gives +0.0). With
    Python-number bounds that are not zero (nor NaN) numpy's clip ufunc gives exactly
    that, branch-free (the select below mispredicts per element: ~100x slower on 256²)."""
    if type(x) is np.ndarray and x.dtype.kind == "f" and type(lo) in _NUMBERS \
            and type(hi) in _NUMBERS and lo != 0 and hi != 0 and lo == lo and hi == hi:
        return _clip_ufunc(x, lo, hi)
    r = np.minimum(np.maximum(x, lo), hi)
    return np.where(r == x, x, r) if r.dtype.kind == "f" else r


_ew("clamp", lambda x, lo, hi: _pw((hi, _pw((lo, x < lo), (x, True)) > hi),
                                   (_pw((lo, x < lo), (x, True)), True)),
    numpy=_clamp_numpy, grad_name="ClampBackward1",
    grads=lambda x, lo, hi, out: (
        _pw((1, (x >= lo) & (x <= hi)), (0, True)),
        _pw((1, (x < lo) & (lo <= hi)), (0, True)),
        _pw((1, ((x < lo) & (lo > hi)) | ((x >= lo) & (x > hi))), (0, True))), vjp=masked_vjp)
_ew("where", lambda c, x, y: _pw((x, S.Eq(c, 1)), (y, True)),
    numpy=lambda c, x, y: np.where(c, x, y), grad_name="WhereBackward0", vjp=where_vjp)

# transcendental
_ew("exp", lambda x: S.exp(x), numpy=np.exp, out_dtype="float")
_ew("log", lambda x: S.log(x), numpy=np.log, out_dtype="float")
_ew("log1p", lambda x: log1p(x), numpy=np.log1p, out_dtype="float")
_ew("expm1", lambda x: expm1(x), numpy=np.expm1, out_dtype="float",
    grads=lambda x, out: (out + 1,))
_ew("sqrt", lambda x: S.sqrt(x), numpy=np.sqrt, out_dtype="float")
_ew("rsqrt", lambda x: 1 / S.sqrt(x), numpy=lambda x: 1 / np.sqrt(x), out_dtype="float",
    grads=lambda x, out: (-out ** 3 / 2,))
_ew("sin", lambda x: S.sin(x), numpy=np.sin, out_dtype="float")
_ew("cos", lambda x: S.cos(x), numpy=np.cos, out_dtype="float")
_ew("tan", lambda x: S.tan(x), numpy=np.tan, out_dtype="float")
# tanh's partial 1 - t**2 as (1 - t)(1 + t): a relative error of a few ulps of t where
# t*t rounds next to 1 (|x| past ~3), as PyTorch's fused 1 - t*t (fuzz seed 2028005510)
_ew("tanh", lambda x: S.tanh(x), numpy=np.tanh, out_dtype="float",
    grads=lambda x, out: ((1 - out) * (1 + out),))
_ew("sigmoid", lambda x: 1 / (1 + S.exp(-x)), numpy=_sigmoid_numpy, out_dtype="float",
    grads=lambda x, out: (out * (1 - out),))
def _softplus_double_backward(x, out):
    """PyTorch's softplus_double_backward: s (1 - s) (x < 20) with s = sigmoid(x) --
    0 at the threshold itself (the backward's mask is x > 20), 0 where s rounds to 1
    (float32 past ~17), NaN at NaN."""
    s = 1 / (1 + S.exp(-x))
    return ((s * (1 - s) * _pw((1, x < 20), (0, True)),),)


_ew("softplus", lambda x: _pw((x, x > 20), (log1p(S.exp(x)), True)), numpy=_softplus_numpy,
    out_dtype="float", grads=lambda x, out: (_pw((1, x > 20), (_sigmoid(x), True)),),
    grad_grads=_softplus_double_backward)
# log(1 + e^x) with no threshold: what the compiler's stabilising rewrites produce for
# log(sigmoid a), log(1 - sigmoid a), log(1 + exp a) (softplus's threshold would change
# their value past |a| = 20); lowered to the same stable form as numpy's kernel
_ew("log1pexp", _log1pexp, numpy=_log1pexp_numpy, out_dtype="float",
    grad_name="Log1pexpBackward0", grads=lambda x, out: (_sigmoid(x),))
_ew("reciprocal", lambda x: 1 / x, numpy=np.reciprocal, out_dtype="float",
    grads=lambda x, out: (-(out ** 2),))


def _bce_numpy(x, t):
    with np.errstate(divide="ignore", invalid="ignore"):
        return -(t * np.maximum(np.log(x), -100) + (1 - t) * np.maximum(np.log1p(-x), -100))


# binary cross-entropy of probabilities, logs clamped at -100 (log(1 - x) as log1p(-x),
# PyTorch's: exact for tiny x, 1e-8 in float32); the closed-form partials
# are PyTorch's backward: (x - t) / max((1 - x) x, EPSILON) (a float 1e-12, in float64
# too) and -logit(x). The partials of the first are PyTorch's double backward, formulas
# of their own (not the clamp differentiated, 1 / EPSILON = 1e12 where it holds: x = t =
# 0 or 1), with a double eps = 1e-12: (x² - 2xt + t) / ((x + eps)² (1 - x + eps)²) and
# -1 / max((1 - x) x, eps) (review4 #15)
_BCE_EPSILON = float(np.float32(1e-12))
_BCE_EPS = 1e-12


def _bce_double_backward(x, t, out):
    return (((x * x - 2 * x * t + t) / ((x + _BCE_EPS) ** 2 * ((1 - x) + _BCE_EPS) ** 2),
             -1 / S.Max((1 - x) * x, _BCE_EPS)),
            None)


_ew("binary_cross_entropy",
    lambda x, t: -(t * S.Max(S.log(x), -100) + (1 - t) * S.Max(log1p(-x), -100)),
    numpy=_bce_numpy, out_dtype="float", grad_name="BinaryCrossEntropyBackward0",
    grads=lambda x, t, out: ((x - t) / S.Max((1 - x) * x, F.number(_BCE_EPSILON)),
                             log1p(-x) - S.log(x)),
    grad_grads=_bce_double_backward)

def _bce_logits_numpy(x, t):
    return (1 - t) * x + _log1pexp_numpy(-x)


# binary cross-entropy on logits, (1 - t) x + log(1 + e^-x) with no threshold (torch's
# value is exact for every x; compiled code lowers log1p(exp(a)) to the same stable
# max(a, 0) + log1p(e^-|a|) as the numpy kernel); partials sigmoid(x) - t (written
# so exp overflows to the right limit) and -x
_ew("binary_cross_entropy_with_logits",
    lambda x, t: (1 - t) * x + _log1pexp(-x),
    numpy=_bce_logits_numpy, out_dtype="float",
    grad_name="BinaryCrossEntropyWithLogitsBackward0",
    grads=lambda x, t, out: (_sigmoid(x) - t, -x))

# piecewise-linear and rounding
# NaN follows PyTorch: relu passes the gradient at NaN, abs and sign give 0 there
# (x < 0, not <= 0: relu(-0.0) is -0.0, as PyTorch's clamp_min)
_ew("relu", lambda x: _pw((0, x < 0), (x, True)),
    numpy=lambda x: zero_where(np.less(x, 0), x),
    grads=lambda x, out: (_pw((0, out <= 0), (1, True)),), vjp=relu_vjp)
_ew("abs", lambda x: S.Abs(x), numpy=np.abs,
    grads=lambda x, out: (_pw((1, x > 0), (-1, x < 0), (0, True)),), vjp=abs_vjp)
_ew("sign", lambda x: _pw((1, x > 0), (-1, x < 0), (0, True)), numpy=_sign_numpy,
    grads=lambda x, out: (0,))
_ew("floor", lambda x: S.floor(x), numpy=np.floor, grads=lambda x, out: (0,))
_ew("ceil", lambda x: S.ceiling(x), numpy=np.ceil, grads=lambda x, out: (0,))
_ew("round", lambda x: S.round(x), numpy=np.round, grads=lambda x, out: (0,))

# comparisons and logic (bool results, never differentiable)
for _name, _rel, _np in (("lt", "StrictLessThan", np.less), ("le", "LessThan", np.less_equal),
                         ("gt", "StrictGreaterThan", np.greater),
                         ("ge", "GreaterThan", np.greater_equal),
                         ("eq", "Eq", np.equal), ("ne", "Ne", np.not_equal)):
    _ew(_name, (lambda r: lambda x, y: _pw((1, getattr(S, r)(x, y)), (0, True)))(_rel),
        numpy=_np, out_dtype="bool", differentiable=False)
_ew("logical_not", lambda x: _pw((1, S.Eq(x, 0)), (0, True)), numpy=np.logical_not,
    out_dtype="bool", differentiable=False)
_ew("logical_and", lambda x, y: _pw((1, S.Ne(x, 0) & S.Ne(y, 0)), (0, True)),
    numpy=np.logical_and, out_dtype="bool", differentiable=False)
_ew("logical_or", lambda x, y: _pw((1, S.Ne(x, 0) | S.Ne(y, 0)), (0, True)),
    numpy=np.logical_or, out_dtype="bool", differentiable=False)


_ew("erf", lambda x: S.erf(x), out_dtype="float",
    grads=lambda x, out: (2 / S.sqrt(S.pi) * S.exp(-x ** 2),))
_ew("erfinv", lambda x: S.erfinv(x), out_dtype="float",
    grads=lambda x, out: (S.sqrt(S.pi) / 2 * S.exp(out ** 2),))
# hyperbolic and inverse trigonometric functions
_ew("sinh", lambda x: S.sinh(x), numpy=np.sinh, out_dtype="float")
_ew("cosh", lambda x: S.cosh(x), numpy=np.cosh, out_dtype="float")
_ew("asin", lambda x: S.asin(x), numpy=np.arcsin, out_dtype="float",
    grads=lambda x, out: (1 / S.sqrt(1 - x ** 2),))
_ew("acos", lambda x: S.acos(x), numpy=np.arccos, out_dtype="float",
    grads=lambda x, out: (-1 / S.sqrt(1 - x ** 2),))
_ew("atan", lambda x: S.atan(x), numpy=np.arctan, out_dtype="float",
    grads=lambda x, out: (1 / (1 + x ** 2),))
def _atan2_recip(y, x):
    """1 / (x² + y²), 0 where the sum is 0 (the origin, or underflow): PyTorch's atan2
    backward, whose gradient there is 0 (and -0), not NaN."""
    r = x ** 2 + y ** 2
    return _pw((0, S.Eq(r, 0)), (1 / r, True))


_ew("atan2", lambda y, x: S.atan2(y, x), numpy=np.arctan2, out_dtype="float",
    grads=lambda y, x, out: (x * _atan2_recip(y, x), -y * _atan2_recip(y, x)))


# (isnan is a function of its own: sympy, which inspection converts to, folds Ne(x, x)
# to False for real x)
_ew("isnan", lambda x: S.isnan(x), numpy=np.isnan, out_dtype="bool",
    differentiable=False)
# the sign bit (-0.0 and -NaN included): a function of its own, as comparisons miss both
_ew("signbit", lambda x: S.signbit(x), numpy=np.signbit, out_dtype="bool",
    differentiable=False)

BUILTIN_ELEMENTWISE = ("add", "sub", "mul", "div", "neg", "copy", "pow", "remainder", "fmod", "floor_divide",
                       "maximum", "minimum", "clamp", "where", "exp", "log", "log1p", "expm1",
                       "sqrt", "rsqrt", "sin", "cos", "tan", "tanh", "sigmoid", "softplus",
                       "log1pexp", "reciprocal", "relu", "abs", "sign", "floor", "ceil", "round", "lt",
                       "le", "gt", "ge", "eq", "ne", "logical_not", "logical_and",
                       "logical_or", "isnan", "signbit", "erf", "erfinv", "sinh", "cosh", "asin",
                       "acos", "atan", "atan2", "binary_cross_entropy",
                       "binary_cross_entropy_with_logits")
