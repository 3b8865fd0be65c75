"""The log family: log and log1p.

* log: x = 2^k m, m in [sqrt(1/2), sqrt(2)), f = m - 1, s = f / (2 + f),
  log(m) = f - (f^2/2 - s (f^2/2 + R(s^2))); subnormals pre-scaled by 2^54 (2^25).
* log1p: u = 1 + x and its exact rounding error e; log1p(x) = log(u) + e / u.
"""
from __future__ import annotations

import llvmlite.ir as ir

from .core import (
    INF, LN2_HI, LN2_LO, LOG_COEFFS, NAN, SQRT_HALF_BITS, SUBNORMAL_SCALE, _Emitter)
from .exp import _tiny_is_identity


def _log_split(e: _Emitter, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """x = 2**k * m with m in [sqrt(1/2), sqrt(2)), for finite x > 0 (subnormals
    included): returns (k as float, m)."""
    f = e.f
    sub = e.cmp("<", x, e.c(2.0 ** (1 - f.bias)))
    scale = SUBNORMAL_SCALE[e.k]
    x = e.sel(sub, e.mul(x, e.c(2.0 ** scale)), x)
    u = e.b.add(e.bits(x), e.i(f.one_bits - SQRT_HALF_BITS[e.k]))
    k = e.b.sub(e.b.lshr(u, e.i(f.mant)), e.i(f.bias))
    k = e.b.sub(k, e.b.select(sub, e.i(scale), e.i(0)))
    mbits = e.b.add(e.b.and_(u, e.i((1 << f.mant) - 1)), e.i(SQRT_HALF_BITS[e.k]))
    return e.b.sitofp(k, e.ty), e.from_bits(mbits)


def _log_core(e: _Emitter, x: ir.Value, extra: ir.Value) -> ir.Value:
    """log(x) + extra for finite x > 0, where |extra| is below ulp(log(x))-ish."""
    kd, m = _log_split(e, x)
    fr = e.sub(m, e.c(1.0))
    s = e.div(fr, e.add(e.c(2.0), fr))
    z = e.mul(s, s)
    big_r = e.mul(z, e.poly(z, LOG_COEFFS[e.k]))
    hfsq = e.mul(e.c(0.5), e.mul(fr, fr))
    low = e.muladd(kd, e.c(LN2_LO[e.k]), extra)
    inner = e.muladd(s, e.add(hfsq, big_r), low)
    return e.muladd(kd, e.c(LN2_HI[e.k]), e.sub(fr, e.sub(hfsq, inner)))


def _log_specials(e: _Emitter, x: ir.Value, res: ir.Value, at: float) -> ir.Value:
    """Apply log's special cases for an argument x whose pole is at ``at``."""
    res = e.sel(e.cmp("==", x, e.c(INF)), e.c(INF), res)
    res = e.sel(e.cmp("==", x, e.c(at)), e.c(-INF), res)
    res = e.sel(e.cmp("<", x, e.c(at)), e.c(NAN), res)
    return e.sel(e.isnan(x), x, res)


def _log(e: _Emitter, x: ir.Value) -> ir.Value:
    return _log_specials(e, x, _log_core(e, x, e.c(0.0)), 0.0)


def _log1p(e: _Emitter, x: ir.Value) -> ir.Value:
    u = e.add(e.c(1.0), x)
    err = e.sub(x, e.sub(u, e.c(1.0)))      # exact: 1 + x = u + err
    res = _log_core(e, u, e.div(err, u))
    return _tiny_is_identity(e, x, _log_specials(e, x, res, -1.0))


