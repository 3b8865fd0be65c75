"""Compound arithmetic as PyTorch names it: ``lerp``, ``addmm``, ``addcmul``, ``addcdiv``,
``logaddexp`` / ``logaddexp2``, ``log2`` / ``log10`` / ``exp2``, ``hypot``, ``xlogy``,
``logit``, ``sinc``, ``deg2rad`` / ``rad2deg``, ``copysign``, ``fmax`` / ``fmin``,
``positive``, ``float_power`` --
each one backward Function with PyTorch's name over a formula of primitives (so its
gradient is symbolic, compiled and differentiable again), computed the way ATen's CPU
kernels do where the formula matters (lerp's two branches, logaddexp's infinities,
hypot's scaling, xlogy's zero).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ..graph import dtypes
from ..ops import lax
from . import elementwise as E
from .common import Tensor, is_scalar, to_tensor
from .composite import named
from .linalg import matmul

if TYPE_CHECKING:
    from ..types import TensorOrScalar

__all__ = ["lerp", "addmm", "addcmul", "addcdiv", "logaddexp", "logaddexp2", "log2", "log10",
           "exp2", "hypot", "xlogy", "lerp_formula", "logit", "sinc", "deg2rad", "rad2deg",
           "copysign", "fmax", "fmin", "positive", "float_power"]


def _operands(*xs):
    """Tensors (Python numbers as 0-d tensors) of the operands' promoted dtype (integers
    and bools: the default float dtype)."""
    dt = E.promote(list(xs))
    if dt.category != "float":
        dt = dtypes.get_default_dtype()
    return [x if isinstance(x, Tensor) and x.dtype is dt else lax.cast(to_tensor(x), dt)
            for x in xs]


def lerp_formula(a, b, w):
    """ATen's lerp: ``a + w (b - a)`` where |w| < 0.5, else ``b - (b - a)(1 - w)``."""
    diff = lax.sub(b, a)
    small = E.binary("lt", E.unary("abs", w), 0.5) if isinstance(w, Tensor) else abs(w) < 0.5
    near_a = lax.add(a, lax.mul(w, diff))
    near_b = lax.sub(b, lax.mul(diff, lax.sub(1.0, w) if isinstance(w, Tensor) else 1.0 - w))
    if isinstance(small, bool):
        return near_a if small else near_b
    return lax.where(small, near_a, near_b)


def lerp(input: Tensor, end: Tensor, weight: TensorOrScalar) -> Tensor:
    """``input + weight * (end - input)`` (``LerpBackward0``; a tensor weight:
    ``LerpBackward1``)."""
    a, b = to_tensor(input), to_tensor(end)
    if is_scalar(weight):
        w = float(weight)
        return named("LerpBackward0", lambda x, y: lerp_formula(x, y, w), a, b)
    return named("LerpBackward1", lerp_formula, a, b, to_tensor(weight))


def addmm(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta: float = 1,
          alpha: float = 1) -> Tensor:
    """``beta * input + alpha * (mat1 @ mat2)`` (``AddmmBackward0``); ``beta = 0`` ignores
    ``input`` (its NaN too), as PyTorch."""
    m1, m2 = to_tensor(mat1), to_tensor(mat2)
    if m1.dim() != 2 or m2.dim() != 2:
        raise RuntimeError(f"{'mat1' if m1.dim() != 2 else 'mat2'} must be a matrix, got "
                           f"{m1.dim() if m1.dim() != 2 else m2.dim()}-D tensor")

    def fn(c, x, y):
        prod = matmul(x, y)
        prod = prod if alpha == 1 else lax.mul(prod, alpha)
        if beta == 0:
            return lax.add(prod, lax.zeros(tuple(c.shape), prod.dtype)) \
                if tuple(c.shape) == tuple(prod.shape) else prod
        return lax.add(c if beta == 1 else lax.mul(c, beta), prod)
    return named("AddmmBackward0", fn, to_tensor(input), m1, m2)


def addcmul(input: Tensor, tensor1: Tensor, tensor2: Tensor, *,
            value: float = 1) -> Tensor:
    """``input + value * tensor1 * tensor2`` (``AddcmulBackward0``)."""
    return named("AddcmulBackward0", lambda c, x, y: lax.add(
        c, lax.mul(lax.mul(x, y), value) if value != 1 else lax.mul(x, y)),
        *(to_tensor(t) for t in (input, tensor1, tensor2)))


def addcdiv(input: Tensor, tensor1: Tensor, tensor2: Tensor, *,
            value: float = 1) -> Tensor:
    """``input + value * tensor1 / tensor2`` (``AddcdivBackward0``)."""
    return named("AddcdivBackward0", lambda c, x, y: lax.add(
        c, lax.mul(lax.div(x, y), value) if value != 1 else lax.div(x, y)),
        *(to_tensor(t) for t in (input, tensor1, tensor2)))


def _logaddexp(a, b, scale):
    """ATen's: a where a and b are the same infinity, else max + log1p(e^-|a-b|) (base 2:
    ``log1p(2^-|a-b|) / ln 2``)."""
    m = E.binary("maximum", a, b)
    d = E.unary("neg", E.unary("abs", lax.sub(a, b)))
    tail = E.unary("log1p", E.unary("exp", d if scale == 1 else lax.mul(d, scale)))
    general = lax.add(m, tail if scale == 1 else lax.div(tail, scale))
    same_inf = E.binary("logical_and", E.binary("eq", E.unary("abs", a), math.inf),
                        E.binary("eq", a, b))
    return lax.where(same_inf, a, general)


def logaddexp(input: Tensor, other: Tensor) -> Tensor:
    """``log(exp(input) + exp(other))`` without overflow (``LogaddexpBackward0``)."""
    a, b = _operands(input, other)
    return named("LogaddexpBackward0", lambda x, y: _logaddexp(x, y, 1), a, b)


def logaddexp2(input: Tensor, other: Tensor) -> Tensor:
    """``log2(2**input + 2**other)`` without overflow (``Logaddexp2Backward0``)."""
    a, b = _operands(input, other)
    return named("Logaddexp2Backward0", lambda x, y: _logaddexp(x, y, math.log(2)), a, b)


def log2(input: Tensor) -> Tensor:
    """Base-2 logarithm (``Log2Backward0``)."""
    (x,) = _operands(input)
    return named("Log2Backward0", lambda v: lax.div(E.unary("log", v), math.log(2)), x)


def log10(input: Tensor) -> Tensor:
    """Base-10 logarithm (``Log10Backward0``)."""
    (x,) = _operands(input)
    return named("Log10Backward0", lambda v: lax.div(E.unary("log", v), math.log(10)), x)


def exp2(input: Tensor) -> Tensor:
    """``2 ** input`` (``Exp2Backward0``)."""
    (x,) = _operands(input)
    return named("Exp2Backward0", lambda v: E.binary("pow", 2.0, v), x)


def hypot(input: Tensor, other: Tensor) -> Tensor:
    """``sqrt(input**2 + other**2)`` without overflow, scaled by the larger magnitude;
    inf where either is infinite (``HypotBackward0``; the gradient ``input / out``)."""
    a, b = _operands(input, other)

    def fn(x, y):
        m = E.binary("maximum", E.unary("abs", x), E.unary("abs", y))
        s = lax.where(E.binary("eq", m, 0), 1.0, m)
        xs, ys = lax.div(x, s), lax.div(y, s)
        out = lax.mul(m, E.unary("sqrt", lax.add(lax.mul(xs, xs), lax.mul(ys, ys))))
        infinite = E.binary("logical_or", E.binary("eq", E.unary("abs", x), math.inf),
                            E.binary("eq", E.unary("abs", y), math.inf))
        return lax.where(infinite, math.inf, out)      # (C's hypot: inf, NaN or not)
    return named("HypotBackward0", fn, a, b)


def xlogy(input: TensorOrScalar, other: TensorOrScalar) -> Tensor:
    """``input * log(other)``, 0 where ``input`` is 0 (NaN where ``other`` is NaN)
    (``XlogyBackward0``; a number ``input``: ``XlogyBackward1``)."""
    name = "XlogyBackward1" if is_scalar(input) else "XlogyBackward0"
    x, y = _operands(input, other)

    def fn(a, b):
        prod = lax.where(E.binary("eq", a, 0), 0.0, lax.mul(a, E.unary("log", b)))
        return lax.where(E.unary("isnan", b), b, prod)
    if is_scalar(input):
        return named(name, lambda b: fn(x, b), y)
    return named(name, fn, x, y)


# ---- more elementwise compositions ----------------------------------------------------------
def logit(input: Tensor, eps: float | None = None) -> Tensor:
    """``log(z / (1 - z))`` with ``z`` the input clamped to [eps, 1 - eps] when ``eps`` is
    given (``LogitBackward0``)."""
    (x,) = _operands(input)

    def fn(v):
        z = v if eps is None else lax.apply("clamp", v, float(eps), 1.0 - float(eps))
        return E.unary("log", lax.div(z, lax.sub(1.0, z)))
    return named("LogitBackward0", fn, x)


def sinc(input: Tensor) -> Tensor:
    """``sin(pi x) / (pi x)``, 1 at 0 (``SincBackward0``)."""
    (x,) = _operands(input)

    def fn(v):
        zero = E.binary("eq", v, 0)
        px = lax.mul(lax.where(zero, 1.0, v), math.pi)
        return lax.where(zero, 1.0, lax.div(E.unary("sin", px), px))
    return named("SincBackward0", fn, x)


def deg2rad(input: Tensor) -> Tensor:
    """Degrees to radians: ``x * (pi / 180)`` (``Deg2RadBackward0``)."""
    (x,) = _operands(input)
    return named("Deg2RadBackward0", lambda v: lax.mul(v, math.pi / 180), x)


def rad2deg(input: Tensor) -> Tensor:
    """Radians to degrees: ``x * (180 / pi)`` (``Rad2DegBackward0``)."""
    (x,) = _operands(input)
    return named("Rad2DegBackward0", lambda v: lax.mul(v, 180 / math.pi), x)


def copysign(input: TensorOrScalar, other: TensorOrScalar) -> Tensor:
    """``|input|`` with the sign (bit) of ``other`` (``CopysignBackward0``; a number
    ``other``: ``CopysignBackward1``); no gradient reaches ``other``."""
    x, y = _operands(input, other)
    name = "CopysignBackward1" if is_scalar(other) else "CopysignBackward0"

    def fn(a, b=y):
        mag = E.unary("abs", a)
        return lax.where(E.unary("signbit", b.detach()), E.unary("neg", mag), mag)
    if is_scalar(other):
        return named(name, fn, x)
    return named(name, lambda a, b: fn(a, b), x, y)


def _nan_ignoring(test: str, name: str):
    def fn(input: Tensor, other: Tensor) -> Tensor:
        a, b = to_tensor(input), to_tensor(other)

        def pick(u, v):
            keep = E.binary("logical_or", E.binary(test, u, v), E.unary("isnan", v)) \
                if u.dtype.is_floating_point else E.binary(test, u, v)
            return lax.where(keep, u, v)
        return named(f"F{name[1:]}Backward0", pick, a, b)
    fn.__name__ = name
    fn.__doc__ = (f"Elementwise {name[1:]} ignoring NaN (NaN only where both are); ties take "
                  f"``input`` and its gradient (``F{name[1:]}Backward0``).")
    return fn


fmax = _nan_ignoring("ge", "fmax")
fmin = _nan_ignoring("le", "fmin")


def positive(input: Tensor) -> Tensor:
    """``input`` itself (PyTorch's error for bool)."""
    x = to_tensor(input)
    if x.dtype is dtypes.bool_:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return x


def float_power(input: TensorOrScalar, exponent: TensorOrScalar) -> Tensor:
    """``input ** exponent`` in float64."""
    f64 = dtypes.float64
    x = lax.cast(to_tensor(input), f64) if not is_scalar(input) else float(input)
    e = lax.cast(to_tensor(exponent), f64) if not is_scalar(exponent) else float(exponent)
    return E.pow(x, e)
