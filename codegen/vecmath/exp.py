"""The exp family: exp, expm1 and what is built on them (tanh, sigmoid, softplus,
log1pexp).

* exp: x = k ln2 + r, |r| <= ln2/2 (ln2 in two parts, k ln2_hi exact); 2^k is
  applied in two exact halves so that subnormal results are rounded once.
* expm1: same reduction; 2^k (1 + p) - 1 = 2 * fma(2^(k-1), p, 2^(k-1) - 0.5).
* tanh: h = expm1(2|x|) / 2, tanh = copysign(h / (h + 1), x), |x| clamped at 22 (10).
* sigmoid: e = exp(-|x|); (x >= 0 ? 1 : e) / (1 + e) -- never overflows.
* log1pexp: log(1 + e^x) = max(x, 0) + log1p(t), t = e^-|x| in [0, 1]: s = t / (2 + t)
  <= 1/3 and log1p(t) = t - (t^2/2 - s (t^2/2 + R(s^2))) with no range reduction and
  no special cases (one division; the general log1p needs two and a split).  The
  formulas' ``log1p(exp(a))`` and ``1 / (1 + exp(-a))`` lower to log1pexp and sigmoid
  (:mod:`codegen.lower.sympy_ir`), which share e^-|a|.
* softplus: torch's ``x if x > 20 else log1pexp(x)``.
"""
from __future__ import annotations

import llvmlite.ir as ir

from .core import (
    EXPM1_CLAMP, EXP_CLAMP, EXP_COEFFS, EXP_ONLY_COEFFS, INV_LN2, LN2_HI, LN2_LO,
    LOG1P_UNIT_COEFFS, SOFTPLUS_THRESHOLD, TANH_CLAMP, _Emitter)


def _exp_reduce(e: _Emitter, x: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
    """x = k ln2 + r: returns (k float, k int, r)."""
    kd, ki = e.round_to_int(e.mul(x, e.c(INV_LN2)))
    r = e.sub(x, e.mul(kd, e.c(LN2_HI[e.k])))
    return kd, ki, e.sub(r, e.mul(kd, e.c(LN2_LO[e.k])))


def _expm1_poly(e: _Emitter, r: ir.Value) -> ir.Value:
    """exp(r) - 1 for |r| <= ln2/2."""
    return e.muladd(e.mul(r, r), e.poly(r, EXP_COEFFS[e.k]), r)


def _scale(e: _Emitter, v: ir.Value, k: ir.Value) -> ir.Value:
    """v * 2**k in two exact steps (one rounding, even into subnormals)."""
    k1 = e.b.ashr(k, e.i(1))
    k2 = e.b.sub(k, k1)
    return e.mul(e.mul(v, e.pow2(k1)), e.pow2(k2))


def _exp_of_reduced(e: _Emitter, ki: ir.Value, r: ir.Value) -> ir.Value:
    coeffs = EXP_ONLY_COEFFS.get(e.k, EXP_COEFFS[e.k])
    p = e.muladd(e.mul(r, r), e.poly(r, coeffs), r)
    return _scale(e, e.add(e.c(1.0), p), ki)


def _tiny_is_identity(e: _Emitter, x: ir.Value, res: ir.Value) -> ir.Value:
    """x itself where |x| < 2^-(mant+2): f(x) = x + O(x^2) rounds to x there
    (keeps -0 and subnormals exact)."""
    return e.sel(e.cmp("<", e.abs(x), e.c(2.0 ** -(e.f.mant + 2))), x, res)


def _exp(e: _Emitter, x: ir.Value) -> ir.Value:
    _, ki, r = _exp_reduce(e, e.clamp(x, *EXP_CLAMP[e.k]))
    return _exp_of_reduced(e, ki, r)


def _half_expm1(e: _Emitter, x: ir.Value) -> ir.Value:
    """(e^x - 1) / 2 for x within EXPM1_CLAMP (or NaN)."""
    _, ki, r = _exp_reduce(e, x)
    p = _expm1_poly(e, r)
    t = e.pow2(e.b.sub(ki, e.i(1)))
    return e.muladd(t, p, e.sub(t, e.c(0.5)))


def _expm1(e: _Emitter, x: ir.Value) -> ir.Value:
    res = e.mul(e.c(2.0), _half_expm1(e, e.clamp(x, *EXPM1_CLAMP[e.k])))
    return _tiny_is_identity(e, x, res)


def _tanh(e: _Emitter, x: ir.Value) -> ir.Value:
    """h = (e^(2|x|) - 1) / 2, tanh = h / (h + 1) (= e / (e + 2), exactly).  No
    tiny-argument select (as expm1 has): below 2^-(mant+2) every step is exact,
    h = |x| and h + 1 = 1, subnormals included; the sign comes from copysign."""
    a = e.abs(x)
    a = e.sel(e.cmp(">", a, e.c(TANH_CLAMP[e.k])), e.c(TANH_CLAMP[e.k]), a)
    h = _half_expm1(e, e.add(a, a))
    return e.copysign(e.div(h, e.add(h, e.c(1.0))), x)


def _sigmoid(e: _Emitter, x: ir.Value) -> ir.Value:
    ex = _exp(e, e.neg(e.abs(x)))
    num = e.sel(e.cmp(">=", x, e.c(0.0)), e.c(1.0), ex)
    return e.div(num, e.add(e.c(1.0), ex))


def _log1p_unit(e: _Emitter, t: ir.Value) -> ir.Value:
    """log1p(t) for t in [0, 1] (NaN propagates): one division, no reduction, no
    special cases (t = 0 gives 0, tiny t gives t)."""
    s = e.div(t, e.add(e.c(2.0), t))
    z = e.mul(s, s)
    hfsq = e.mul(e.mul(e.c(0.5), t), t)
    big_r = e.mul(z, e.poly(z, LOG1P_UNIT_COEFFS[e.k]))
    return e.sub(t, e.sub(hfsq, e.mul(s, e.add(hfsq, big_r))))


def _log1pexp(e: _Emitter, x: ir.Value) -> ir.Value:
    """log(1 + e^x) = max(x, 0) + log1p(e^-|x|): finite for every finite x, one exp
    and one division (the same e^-|x| as sigmoid's, so a loop computing both, as the
    logistic loss and its gradient do, shares it)."""
    t = _exp(e, e.neg(e.abs(x)))
    return e.add(e.sel(e.cmp(">", x, e.c(0.0)), x, e.c(0.0)), _log1p_unit(e, t))


def _softplus(e: _Emitter, x: ir.Value) -> ir.Value:
    return e.sel(e.cmp(">", x, e.c(SOFTPLUS_THRESHOLD)), x, _log1pexp(e, x))


