"""pow, in double-double where the result needs it.

* pow: |x|^y = exp(y log|x|) with log|x| a double-double (~2^-65 relative) and
  y log|x| an exact double-double product; all C99/numpy special cases by select.
  float pow: double log and exp (|y log x| < 104 where the result is finite).
"""
from __future__ import annotations

from typing import Callable

import llvmlite.ir as ir

from .core import (
    EXP_CLAMP, F32, F64, INF, INV_LN2, LN2_HI, LN2_LO, NAN, POW_LOG_COEFFS, TWO_THIRDS,
    _Emitter)
from .exp import _exp, _exp_of_reduced
from .log import _log_core, _log_split


def _atanh_ratio_dd(e: _Emitter, m: ir.Value) -> tuple[ir.Value, ir.Value]:
    """s = (m - 1) / (m + 1) as a double-double (log m = 2 atanh s)."""
    fr = e.sub(m, e.c(1.0))                                  # exact
    dh = e.add(m, e.c(1.0))
    dl = e.sub(m, e.sub(dh, e.c(1.0)))                       # m + 1 = dh + dl
    sh = e.div(fr, dh)
    return sh, e.div(e.sub(e.fma(e.neg(sh), dh, fr), e.mul(sh, dl)), dh)


def _cube_term_dd(e: _Emitter, sh: ir.Value, sl: ir.Value) -> tuple[ir.Value, ...]:
    """((2/3) s^3 as hi, lo; s^3 and s^2 roughly) for s = sh + sl."""
    zh, zl = e.two_prod(sh, sh)
    ch, cl = e.two_prod(sh, zh)
    c_lo = e.add(cl, e.muladd(sh, zl, e.mul(e.c(3.0), e.mul(zh, sl))))
    uh, ul = e.two_prod(e.c(TWO_THIRDS[0]), ch)
    u_lo = e.add(ul, e.muladd(e.c(TWO_THIRDS[0]), c_lo, e.mul(e.c(TWO_THIRDS[1]), ch)))
    return uh, u_lo, ch, zh


def _log_dd(e: _Emitter, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """log(x) as a double-double (hi, lo), ~2^-65 relative, finite x > 0:
    k ln2 + 2s + (2/3)s^3 + s^5 (2/5 + 2s^2/7 + ...), big terms summed exactly."""
    kd, m = _log_split(e, x)
    sh, sl = _atanh_ratio_dd(e, m)
    uh, u_lo, cube, square = _cube_term_dd(e, sh, sl)
    t5 = e.mul(e.mul(cube, square), e.poly(square, POW_LOG_COEFFS))
    s1, e1 = e.two_sum(e.mul(kd, e.c(LN2_HI["f64"])), e.add(sh, sh))
    s2, e2 = e.two_sum(s1, uh)
    lo = e.add(e.add(e1, e2), e.muladd(kd, e.c(LN2_LO["f64"]), e.add(sl, sl)))
    return e.fast_two_sum(s2, e.add(lo, e.add(u_lo, t5)))


def _exp_dd(e: _Emitter, yh: ir.Value, yl: ir.Value) -> ir.Value:
    """exp(yh + yl) with |yl| <= ulp(yh)."""
    lo, hi = EXP_CLAMP["f64"]
    clamped = e.b.or_(e.cmp(">", yh, e.c(hi)), e.cmp("<", yh, e.c(lo)))
    yh = e.clamp(yh, lo, hi)
    yl = e.sel(clamped, e.c(0.0), yl)
    kd, ki = e.round_to_int(e.mul(yh, e.c(INV_LN2)))
    r = e.sub(yh, e.mul(kd, e.c(LN2_HI["f64"])))             # exact
    r = e.add(r, e.sub(yl, e.mul(kd, e.c(LN2_LO["f64"]))))
    return _exp_of_reduced(e, ki, r)


def _pow_magnitude(e: _Emitter, ax: ir.Value, y: ir.Value) -> ir.Value:
    """|x|^y for finite ax > 0 and finite y."""
    lh, ll = _log_dd(e, ax)
    yh, yl = e.two_prod(y, lh)
    return _exp_dd(e, yh, e.muladd(y, ll, yl))


def _pow_magnitude_single(e: _Emitter, ax: ir.Value, y: ir.Value) -> ir.Value:
    """|x|^y in double for float arguments: |y log|x|| < 104 wherever the float
    result is finite and nonzero, so double log/exp are ~2^-45 accurate there."""
    return _exp(e, e.mul(y, _log_core(e, ax, e.c(0.0))))


def _pow_with(e: _Emitter, x: ir.Value, y: ir.Value,
              magnitude: Callable[[_Emitter, ir.Value, ir.Value], ir.Value]) -> ir.Value:
    """x**y from ``magnitude`` (valid for finite ax > 0, finite y) plus every C99
    special case."""
    one, zero, inf = e.c(1.0), e.c(0.0), e.c(INF)
    ax = e.abs(x)
    finite_x = e.b.and_(e.cmp("<", ax, inf), e.cmp(">", ax, zero))
    mag = magnitude(e, e.sel(finite_x, ax, one), e.sel(e.cmp("<", e.abs(y), inf), y, zero))
    y_neg = e.cmp("<", y, zero)
    mag = e.sel(e.cmp("==", ax, zero), e.sel(y_neg, inf, zero), mag)
    mag = e.sel(e.cmp("==", ax, inf), e.sel(y_neg, zero, inf), mag)
    grows = e.b.icmp_unsigned("==", e.cmp("<", ax, one), y_neg)
    y_inf = e.cmp("==", e.abs(y), inf)
    mag = e.sel(y_inf, e.sel(e.cmp("==", ax, one), one, e.sel(grows, inf, zero)), mag)
    return _pow_signs_and_nans(e, x, y, mag)


def _pow_signs_and_nans(e: _Emitter, x: ir.Value, y: ir.Value, mag: ir.Value) -> ir.Value:
    """Negative x: odd integer y flips the sign, non-integer finite y gives NaN;
    then NaN propagation, except pow(1, y) = pow(x, 0) = 1."""
    one, zero = e.c(1.0), e.c(0.0)
    y_int = e.cmp("==", e.floor(y), y)
    half = e.mul(y, e.c(0.5))
    y_odd = e.b.and_(y_int, e.cmp("!=", e.floor(half), half))
    x_signbit = e.b.icmp_signed("<", e.bits(x), e.i(0))
    res = e.sel(e.b.and_(x_signbit, y_odd), e.neg(mag), mag)
    finite_negative = e.b.and_(e.cmp("<", x, zero), e.cmp("<", e.abs(x), e.c(INF)))
    y_fraction = e.b.and_(e.b.not_(y_int), e.cmp("<", e.abs(y), e.c(INF)))
    res = e.sel(e.b.and_(finite_negative, y_fraction), e.c(NAN), res)
    res = e.sel(e.b.or_(e.isnan(x), e.isnan(y)), e.c(NAN), res)
    return e.sel(e.b.or_(e.cmp("==", x, one), e.cmp("==", y, zero)), one, res)


def _pow(e: _Emitter, x: ir.Value, y: ir.Value) -> ir.Value:
    if e.f is F32:
        return _in_double(e, lambda w, xd, yd: _pow_with(w, xd, yd, _pow_magnitude_single),
                          x, y)
    return _pow_with(e, x, y, _pow_magnitude)


def _in_double(e: _Emitter, body: Callable[..., ir.Value], *args: ir.Value) -> ir.Value:
    """A float function computed by a double body and rounded once."""
    wide = [e.b.fpext(a, F64.ty) for a in args]
    return e.b.fptrunc(body(_Emitter(e.b, F64), *wide), F32.ty)


