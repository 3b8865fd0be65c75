"""Vectorisable transcendental math emitted as LLVM IR.

This module owns symgrad's elementwise math library: exp, expm1, log, log1p, tanh,
sigmoid, softplus, log1pexp, sin, cos, tan, pow, and the cheap intrinsics (sqrt, abs, floor,
ceil, trunc, rint), for ``double`` and ``float``.

Design.  Each function is an ``internal alwaysinline`` *scalar* IR function,
``symgrad.vm.<name>.<f64|f32>``, added to a module on demand by
:func:`get_function` (or emitted as a call by :func:`emit` / :func:`exp` ...).
Bodies are straight-line code: no branches, no calls other than LLVM intrinsics
with vector forms (fmuladd, fma, fabs, floor, roundeven, copysign, sqrt) and the
trig functions' huge-argument helper, which has vector variants; special cases
are selects, exponent tricks are bitcasts to i64/i32.  After inlining, the loop
vectoriser widens a loop calling them to the target's vectors
(``<8 x double>`` / ``<16 x float>`` on AVX-512; float tan and pow compute in
double, so their loops run 8 lanes wide).  No libm or libmvec symbol is
referenced: results do not depend on the C library, and objects link stand-alone.
Exact products use ``llvm.fma`` where the target has FMA instructions, and Dekker's
splitting elsewhere (``llvm.fma`` would be a libm call there).

Algorithms (written for this project; the ideas are textbook: Cody-Waite and
Payne-Hanek reduction, fdlibm-style log, double-double arithmetic; polynomials are
minimax fits computed offline for this module (sin, cos, double exp; the method is
described above ``EXP_COEFFS``) or Taylor series, the degree chosen for each
reduced range):

* exp: x = k ln2 + r, |r| <= ln2/2 (ln2 in two parts, k ln2_hi exact); 2^k is
  applied in two exact halves so that subnormal results are rounded once.
* expm1: same reduction; 2^k (1 + p) - 1 = 2 * fma(2^(k-1), p, 2^(k-1) - 0.5).
* log: x = 2^k m, m in [sqrt(1/2), sqrt(2)), f = m - 1, s = f / (2 + f),
  log(m) = f - (f^2/2 - s (f^2/2 + R(s^2))); subnormals pre-scaled by 2^54 (2^25).
* log1p: u = 1 + x and its exact rounding error e; log1p(x) = log(u) + e / u.
* tanh: h = expm1(2|x|) / 2, tanh = copysign(h / (h + 1), x), |x| clamped at 22 (10).
* sigmoid: e = exp(-|x|); (x >= 0 ? 1 : e) / (1 + e) -- never overflows.
* log1pexp: log(1 + e^x) = max(x, 0) + log1p(t), t = e^-|x| in [0, 1]: s = t / (2 + t)
  <= 1/3 and log1p(t) = t - (t^2/2 - s (t^2/2 + R(s^2))) with no range reduction and
  no special cases (one division; the general log1p needs two and a split).  The
  formulas' ``log1p(exp(a))`` and ``1 / (1 + exp(-a))`` lower to log1pexp and sigmoid
  (:mod:`codegen.lower.sympy_ir`), which share e^-|a|.
* softplus: torch's ``x if x > 20 else log1pexp(x)``.
* sin/cos, three tiers.  Inline, for |x| < 2^20 (float: 2^8): k = nearest
  integer to x 2/pi by one FMA with a shifter (k's low bits then sit in the
  result's low bits), r = x - k pi/2 = rh + rl with pi/2 in three parts, the first
  product exact by FMA and the second exact because that part is short (33 bits,
  float 16), good to ~2^-119 (2^-55.5) while |r| >= 2^-60.5 (2^-27.8) there; sin r
  and cos r both by minimax polynomials; the quadrant chooses between them and
  flips the sign with bit operations.  Beyond, and for inf and NaN, a
  ``noinline`` helper (see ``_trig_huge_helper``): double |x| < 2^51 by a
  double-double reduction (two-part 2/pi, three-part pi/2), float |x| < 2^32 in
  double (two-part pi/2, |r| >= 2^-29.3 for every float, rounded once) -- ~0.37
  and ~0.8 G/s, as the helper's vector variants run these tiers on all lanes at
  once -- and beyond those, lane by lane, a table of (2^E 2/pi) mod 4 for every
  exponent E, in four 53-bit parts, that reduces x = M 2^E exactly (Payne-Hanek;
  float calls the double functions).  So sin/cos/tan are correct over the whole
  range (the classic worst case x = 6381956970095103 * 2^797 included).  The
  helper's vector variants return at once unless some lane needs them; the call
  uses the C convention (:attr:`codegen.target.Target.helper_cconv` says why), so
  the loop spills its live registers around it.
* tan: double: sin and cos of the reduced argument as double-doubles, their
  quotient corrected once (~1 ulp; the helper's tiers divide sin by cos, ~2 ulp);
  float: in double below 2^32, rounded once.
* pow: |x|^y = exp(y log|x|) with log|x| a double-double (~2^-65 relative) and
  y log|x| an exact double-double product; all C99/numpy special cases by select.
  float pow: double log and exp (|y log x| < 104 where the result is finite).

Measured on this host (Zen 4, one core, 2^16-element in-cache arrays, best of 200,
other processes busy on the second core): max error in ulp against a longdouble
reference over the ~1e6-point sweeps of ``tests/codegen/test_vecmath.py``, and
throughput in G elements/s (``python tests/codegen/test_vecmath.py`` reprints it):

    function   f64 ulp  f32 ulp  f64 G/s  f32 G/s
    exp          0.96     1.00     1.34     3.52
    expm1        1.75     1.54     1.38     3.69
    log          0.79     0.82     0.83     2.22
    log1p        0.82     0.77     0.75     1.97
    tanh         2.45     2.26     1.16     3.18
    sigmoid      2.35     2.26     1.00     2.61
    softplus     1.71     1.76     0.54     1.64
    log1pexp     1.64     1.84     0.56     1.68
    sin          0.77     0.80     0.97     2.30
    cos          0.80     0.74     1.00     2.37
    tan          2.03     0.50     0.61     1.19
    pow          1.34     0.50     0.23     0.30
    sqrt         0.5      0.5      1.80     5.63
    abs/floor/ceil/trunc/rint  exact  ~5.3 (f64)  ~11.5 (f32)

(softplus was 0.31 / 0.93 G/s, 1.51 / 1.49 ulp, as log1p(exp(x)).  Before the minimax
polynomials and the inline reductions, measured the same way:
sin/cos/tan 0.48/0.49/0.41 G/s for double and 1.09/1.14/0.40 for float, with
0.85/0.86/2.08 and 0.79/0.82/0.50 ulp; tanh 0.99/2.64, exp 1.26/3.34 G/s and
0.98/1.02 ulp.  On all floats in [0, 256) with a stride of 5, float sin/cos are
within 0.83/0.81 ulp, and were within 0.83/0.84.)

Example::

    >>> import llvmlite.ir as ir
    >>> from codegen import vecmath
    >>> m = ir.Module()
    >>> kernel = vecmath.build_elementwise_kernel(m, "exp_kernel", "exp", ir.DoubleType())
    >>> "symgrad.vm.exp.f64" in m.globals
    True
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import lru_cache
from math import factorial, ldexp
from typing import Callable

import llvmlite.ir as ir

from . import target

__all__ = [
    "UNARY", "BINARY", "FUNCTIONS", "get_function", "emit", "build_elementwise_kernel",
    "exp", "expm1", "log", "log1p", "tanh", "sigmoid", "softplus", "log1pexp", "sin", "cos",
    "tan", "pow", "sqrt", "abs", "floor", "ceil", "trunc", "rint",
]


@dataclass(frozen=True)
class _Format:
    """Bit layout of one IEEE binary format."""

    ty: ir.Type
    ity: ir.IntType
    suffix: str
    mant: int   # explicit mantissa bits
    bias: int

    @property
    def one_bits(self) -> int:
        return self.bias << self.mant


F64 = _Format(ir.DoubleType(), ir.IntType(64), "f64", 52, 1023)
F32 = _Format(ir.FloatType(), ir.IntType(32), "f32", 23, 127)


def _format_of(ty: ir.Type) -> _Format:
    if isinstance(ty, ir.DoubleType):
        return F64
    if isinstance(ty, ir.FloatType):
        return F32
    raise TypeError(f"vecmath supports double and float, not {ty}")


def _by_format(f64: object, f32: object) -> dict[str, object]:
    return {"f64": f64, "f32": f32}


_H = float.fromhex
INF = float("inf")
NAN = float("nan")

# ln2 split so that k * LN2_HI is exact for the exponents that occur.
LN2_HI = _by_format(float.fromhex("0x1.62e42fefa3800p-1"), float.fromhex("0x1.62e4p-1"))
LN2_LO = _by_format(float.fromhex("0x1.ef35793c76730p-45"), float.fromhex("0x1.7f7d1cp-20"))
INV_LN2 = float.fromhex("0x1.71547652b82fep+0")
SQRT_HALF_BITS = _by_format(0x3FE6A09E667F3BCD, 0x3F3504F3)
# pi/2 = sum(PIO2[f]) (to ~2^-162 / ~2^-103); 2/pi = sum(TWO_OVER_PI[f]).
PIO2 = _by_format(
    (float.fromhex("0x1.921fb54442d18p+0"), float.fromhex("0x1.1a62633145c07p-54"),
     float.fromhex("-0x1.f1976b7ed8fbcp-110")),
    (float.fromhex("0x1.921fb6p+0"), float.fromhex("-0x1.777a5cp-25"),
     float.fromhex("-0x1.ee59dap-50"), float.fromhex("0x1.98a2e0p-77")))
TWO_OVER_PI = _by_format(
    (float.fromhex("0x1.45f306dc9c883p-1"), float.fromhex("-0x1.6b01ec5417056p-55")),
    (float.fromhex("0x1.45f306p-1"), float.fromhex("0x1.b93910p-26")))
TWO_THIRDS = (float.fromhex("0x1.5555555555555p-1"), float.fromhex("0x1.5555555555555p-55"))

# Polynomial coefficients.  Where marked "minimax", they come from codegen/fits.py
# (``python -m codegen.fits`` recomputes them; a test checks each table is as accurate
# as a fresh fit): a Remez exchange on the stated interval minimising the maximum
# *relative* error of the whole function (weight r^2/(e^r - 1) for the exp family,
# r^3/sin r and r^4/cos r for sin and cos), coefficients rounded to the format one at a
# time, lowest first, the rest refitted (exp: rounded at once); the errors quoted are
# the rounded polynomials'.  The rest are Taylor series.
# exp: e^r - 1 = r + r^2 P(r), |r| <= ln2/2 + 2^-20: double minimax (error 2^-61.7
# relative to e^r, 2^-59.9 relative to e^r - 1; the former Taylor series to r^13 had
# 2^-57.6 and 2^-56 with one more term); float Taylor to r^7 (expm1, tanh).
EXP_COEFFS = _by_format([_H(h) for h in (
    "0x1.0000000000000p-1", "0x1.5555555555559p-3", "0x1.555555555553fp-5",
    "0x1.111111110f6dfp-7", "0x1.6c16c16c1f065p-10", "0x1.a01a01afd17edp-13",
    "0x1.a01a017bc9f59p-16", "0x1.71ddf88552d70p-19", "0x1.27e536296f6fdp-22",
    "0x1.af5e68928cf2ep-26", "0x1.1ee884cfb18b1p-29")],
                        [1 / factorial(n) for n in range(2, 8)])
# Float exp alone (not expm1, whose small results need the relative weight): minimax
# for e^r, one term fewer than the Taylor series, error 2^-28.1 (Taylor: 2^-27.5).
EXP_ONLY_COEFFS = {"f32": [_H(h) for h in (
    "0x1.fffffcp-2", "0x1.555492p-3", "0x1.5558f2p-5", "0x1.1239d4p-7", "0x1.6a244cp-10")]}
LOG_COEFFS = _by_format([2 / (2 * j + 1) for j in range(1, 11)],
                        [2 / (2 * j + 1) for j in range(1, 5)])
POW_LOG_COEFFS = [2 / (2 * j + 1) for j in range(2, 13)]   # s^5 .. s^25 terms
# sin r = r + r^3 S(r^2), cos r = 1 - r^2/2 + r^4 C(r^2): minimax; double on
# |r| <= pi/4 + 2^-30, relative error 2^-57.9 and 2^-63.9 (the Taylor series had 8
# and 7 terms).
SIN_COEFFS = _by_format(
    [_H("-0x1.5555555555548p-3"), _H("0x1.111111110f730p-7"), _H("-0x1.a01a019be9217p-13"),
     _H("0x1.71de35552b544p-19"), _H("-0x1.ae5e4b83e8d56p-26"), _H("0x1.5d8b55978774bp-33")],
    # float, |r| <= pi/4 + 2^-16, coefficients rounded to float one at a time
    # (lowest first), the rest refitted: 2^-32.5
    [_H("-0x1.555556p-3"), _H("0x1.111174p-7"), _H("-0x1.a05954p-13"), _H("0x1.7c2c4ep-19")])
COS_COEFFS = _by_format(
    [_H("0x1.555555555554bp-5"), _H("-0x1.6c16c16c15015p-10"), _H("0x1.a01a019c8f254p-16"),
     _H("-0x1.27e4f7f191490p-22"), _H("0x1.1ee9dbcefc875p-29"), _H("-0x1.8fa68487eb52dp-37")],
    [_H("0x1.55554ap-5"), _H("-0x1.6c0c28p-10"), _H("0x1.99e80cp-16")])      # 2^-33.0
# Float sin/cos/tan in double (float tan, and the helper's first float tier):
# sin r = r + r^3 S(r^2), cos r = 1 + r^2 C(r^2) on |r| <= pi/4 + 2^-20, minimax,
# relative error 2^-37.5 and 2^-43.6 (tan must stay within 0.51 ulp).
SIN_COEFFS_TAN32 = [_H("-0x1.5555554c71cb3p-3"), _H("0x1.1111086a5d089p-7"),
                    _H("-0x1.a00f7f253e764p-13"), _H("0x1.6cd1f1d776876p-19")]
COS_COEFFS_TAN32 = [_H("-0x1.ffffffffe98aep-2"), _H("0x1.55555545c50b2p-5"),
                    _H("-0x1.6c16b348b57b9p-10"), _H("0x1.a00eb9aba7e0dp-16"),
                    _H("-0x1.23c97dba5560cp-22")]
EXP_CLAMP = _by_format((-746.0, 710.0), (-104.0, 89.0))
EXPM1_CLAMP = _by_format((-60.0, 710.0), (-20.0, 89.0))
TANH_CLAMP = _by_format(22.0, 10.0)
SUBNORMAL_SCALE = _by_format(54, 25)
SOFTPLUS_THRESHOLD = 20.0
# log1p(t) for t in [0, 1] without range reduction (softplus's log1p(exp(-|x|))):
# s = t / (2 + t) <= 1/3, log1p(t) = t - (t^2/2 - s (t^2/2 + z P(z))), z = s^2 <= 1/9,
# where z P(z) = 2 atanh(s)/s - 2 = 2z/3 + 2z^2/5 + ...: interpolation at Chebyshev
# nodes, computed by codegen/fits.py (``python -m codegen.fits``; a test keeps these
# equal); error relative to log1p(t) 2^-57.0 (double) and 2^-30.0 (float) (the Taylor
# series needs 16 and 8 terms for the same).
LOG1P_UNIT_COEFFS = _by_format([_H(h) for h in (
    "0x1.5555555555555p-1", "0x1.999999999a3ddp-2", "0x1.24924923d44bfp-2",
    "0x1.c71c72714381cp-3", "0x1.745cf0b0d0765p-3", "0x1.3b18b2967986cp-3",
    "0x1.10ac75c001f86p-3", "0x1.eb9060a13a603p-4", "0x1.687a63b6d1ffep-4",
    "0x1.4b0a323296698p-3")],
    [_H(h) for h in ("0x1.555556p-1", "0x1.9998d4p-2", "0x1.24c926p-2", "0x1.bc8cf8p-3",
                     "0x1.dba266p-3")])
TRIG_FAST = _by_format(2.0 ** 20, 256.0)       # inline reduction below this |x|
# the helper's vectorised tier (double-double; float: in double) below this |x|
TRIG_LIMIT = _by_format(2.0 ** 51, 2.0 ** 32)
TRIG_SHIFTER = _by_format(1.5 * 2.0 ** 52, 1.5 * 2.0 ** 23)   # k in t's low bits
# pi/2 = P1 + P2 + P3 + O(2^-141), P2 of 33 bits (exact k P2 for |k| < 2^20)
# pi/2 = P1 + P2 + P3 + O(2^-141 / 2^-68.7), P2 of 33 / 16 bits (k P2 exact for
# |k| < 2^20 / 2^8)
PIO2_FAST = _by_format(
    (_H("0x1.921fb54442d18p+0"), _H("0x1.1a62633100000p-54"), _H("0x1.1701b839a2520p-88")),
    (_H("0x1.921fb6p+0"), _H("-0x1.777ap-25"), _H("-0x1.73dcb4p-43")))
TRIG_TABLE_ROWS = 973          # exponents E = -1 .. 971 of x = M 2^E
TRIG_TABLE_PRECISION = 1300    # bits of 2/pi used to build the table


class _Emitter:
    """Thin typed layer over an IRBuilder for one float format, on scalars or (for
    the trig helper's hand-written vector variants) on ``<lanes x T>`` vectors."""

    def __init__(self, builder: ir.IRBuilder, fmt: _Format, lanes: int = 0) -> None:
        self.b = builder
        self.f = fmt
        self.k = fmt.suffix
        self.lanes = lanes
        self.ty = ir.VectorType(fmt.ty, lanes) if lanes else fmt.ty
        self.ity = ir.VectorType(fmt.ity, lanes) if lanes else fmt.ity
        self.suffix = f"v{lanes}{fmt.suffix}" if lanes else fmt.suffix
        self.has_fma = target.current().fma
        self.native_rounding = target.current().native_rounding

    # constants and intrinsics -----------------------------------------------
    def c(self, value: float) -> ir.Constant:
        return ir.Constant(self.ty, [value] * self.lanes if self.lanes else value)

    def i(self, value: int) -> ir.Constant:
        return ir.Constant(self.ity, [value] * self.lanes if self.lanes else value)

    def intrinsic(self, name: str, *args: ir.Value) -> ir.Value:
        module = self.b.module
        full = f"llvm.{name}.{self.suffix}"
        fn = module.globals.get(full)
        if fn is None:
            fnty = ir.FunctionType(self.ty, [self.ty] * len(args))
            fn = ir.Function(module, fnty, full)
        return self.b.call(fn, list(args))

    # arithmetic ---------------------------------------------------------------
    def add(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.fadd(a, b)

    def sub(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.fsub(a, b)

    def mul(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.fmul(a, b)

    def div(self, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.fdiv(a, b)

    def neg(self, a: ir.Value) -> ir.Value:
        return self.b.fneg(a)

    def muladd(self, a: ir.Value, b: ir.Value, c: ir.Value) -> ir.Value:
        """a*b + c, fused where the target has FMA (for polynomials)."""
        return self.intrinsic("fmuladd", a, b, c)

    def fma(self, a: ir.Value, b: ir.Value, c: ir.Value) -> ir.Value:
        """a*b + c with one rounding (exact-product tricks).  On a target without FMA
        instructions (``llvm.fma`` would be a libm call) the product is split exactly
        (Dekker) and summed in double-double: exact whenever the result is
        representable, as every use here needs."""
        if self.has_fma:
            return self.intrinsic("fma", a, b, c)
        ph, pl = self._dekker_prod(a, b)
        sh, sl = self.two_sum(ph, c)
        return self.add(sh, self.add(sl, pl))

    def _split(self, a: ir.Value) -> tuple[ir.Value, ir.Value]:
        """a = hi + lo with hi of half the significand's bits (Veltkamp)."""
        t = self.mul(a, self.c(2.0 ** ((self.f.mant + 2) // 2) + 1.0))
        hi = self.sub(t, self.sub(t, a))
        return hi, self.sub(a, hi)

    def _dekker_prod(self, a: ir.Value, b: ir.Value) -> tuple[ir.Value, ir.Value]:
        """a * b = p + err exactly, without FMA (|a|, |b| far from overflow)."""
        p = self.mul(a, b)
        ah, al = self._split(a)
        bh, bl = self._split(b)
        err = self.add(self.add(self.add(self.sub(self.mul(ah, bh), p), self.mul(ah, bl)),
                                self.mul(al, bh)), self.mul(al, bl))
        return p, err

    def abs(self, a: ir.Value) -> ir.Value:
        return self.intrinsic("fabs", a)

    # rounding to integers: instructions where the target has them; elsewhere (x86
    # before SSE4.1, where the intrinsics are libm calls) exact arithmetic: adding and
    # subtracting 2^mant rounds |a| < 2^mant to an integer in the current (nearest-even)
    # mode; larger values, inf and NaN are integers already and pass through; the
    # result takes a's sign (floor(-0.0) = -0.0, ceil(-0.5) = -0.0, as IEEE says).
    def roundeven(self, a: ir.Value) -> ir.Value:
        if self.native_rounding:
            return self.intrinsic("roundeven", a)
        big = self.c(2.0 ** self.f.mant)
        mag = self.abs(a)
        r = self.sub(self.add(mag, big), big)
        return self.sel(self.cmp("<", mag, big), self.copysign(r, a), a)

    def floor(self, a: ir.Value) -> ir.Value:
        if self.native_rounding:
            return self.intrinsic("floor", a)
        r = self.roundeven(a)
        return self.copysign(self.sel(self.cmp(">", r, a), self.sub(r, self.c(1.0)), r), a)

    def ceil(self, a: ir.Value) -> ir.Value:
        if self.native_rounding:
            return self.intrinsic("ceil", a)
        r = self.roundeven(a)
        return self.copysign(self.sel(self.cmp("<", r, a), self.add(r, self.c(1.0)), r), a)

    def trunc(self, a: ir.Value) -> ir.Value:
        if self.native_rounding:
            return self.intrinsic("trunc", a)
        return self.copysign(self.floor(self.abs(a)), a)

    def copysign(self, mag: ir.Value, sign: ir.Value) -> ir.Value:
        return self.intrinsic("copysign", mag, sign)

    def poly(self, x: ir.Value, coeffs: list[float]) -> ir.Value:
        """Horner: coeffs[0] + x*(coeffs[1] + x*(...))."""
        acc = self.c(coeffs[-1])
        for coef in reversed(coeffs[:-1]):
            acc = self.muladd(acc, x, self.c(coef))
        return acc

    # comparisons and selects ----------------------------------------------------
    def cmp(self, op: str, a: ir.Value, b: ir.Value) -> ir.Value:
        """Ordered comparison: false when either side is NaN."""
        return self.b.fcmp_ordered(op, a, b)

    def isnan(self, a: ir.Value) -> ir.Value:
        return self.b.fcmp_unordered("uno", a, a)

    def sel(self, cond: ir.Value, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.b.select(cond, a, b)

    def clamp(self, x: ir.Value, lo: float, hi: float) -> ir.Value:
        """Clamp to [lo, hi]; NaN stays NaN."""
        x = self.sel(self.cmp(">", x, self.c(hi)), self.c(hi), x)
        return self.sel(self.cmp("<", x, self.c(lo)), self.c(lo), x)

    # bits ------------------------------------------------------------------------
    def low_bit(self, q: ir.Value) -> ir.Value:
        """Bit 0 of an integer (vector) as i1."""
        i1 = ir.IntType(1)
        return self.b.trunc(q, ir.VectorType(i1, self.lanes) if self.lanes else i1)

    def bits(self, a: ir.Value) -> ir.Value:
        return self.b.bitcast(a, self.ity)

    def from_bits(self, a: ir.Value) -> ir.Value:
        return self.b.bitcast(a, self.ty)

    def pow2(self, k: ir.Value) -> ir.Value:
        """2**k for an integer k in the normal exponent range."""
        biased = self.b.add(k, self.i(self.f.bias))
        return self.from_bits(self.b.shl(biased, self.i(self.f.mant)))

    def round_to_int(self, x: ir.Value) -> tuple[ir.Value, ir.Value]:
        """(k as float, k as integer), k = nearest integer to x, |x| < 2**(mant-1)."""
        shifter = self.c(1.5 * 2.0 ** self.f.mant)
        t = self.add(x, shifter)
        return self.sub(t, shifter), self.b.sub(self.bits(t), self.bits(shifter))

    # error-free transformations ---------------------------------------------------
    def two_prod(self, a: ir.Value, b: ir.Value) -> tuple[ir.Value, ir.Value]:
        """a * b = p + err exactly."""
        if not self.has_fma:
            return self._dekker_prod(a, b)
        p = self.mul(a, b)
        return p, self.fma(a, b, self.neg(p))

    def two_sum(self, a: ir.Value, b: ir.Value) -> tuple[ir.Value, ir.Value]:
        s = self.add(a, b)
        bb = self.sub(s, a)
        err = self.add(self.sub(a, self.sub(s, bb)), self.sub(b, bb))
        return s, err

    def fast_two_sum(self, a: ir.Value, b: ir.Value) -> tuple[ir.Value, ir.Value]:
        """Exact a + b = s + err, assuming |a| >= |b| (or a == 0)."""
        s = self.add(a, b)
        return s, self.sub(b, self.sub(s, a))


# ------------------------------------------------------------------- exp family


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


# ------------------------------------------------------------------- log family


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


# ------------------------------------------------------------------------- trig


@lru_cache(maxsize=None)
def _two_over_pi_rows() -> tuple[float, ...]:
    """Row E+1 (E = -1 .. 971) holds G(E) = (2^E * 2/pi) mod 4 as four doubles of 53
    bits each, of bit weights 2^1 .. 2^-51, 2^-52 .. 2^-104, ... (all exact)."""
    import mpmath   # a sympy dependency; only needed when trig is first emitted

    with mpmath.workprec(TRIG_TABLE_PRECISION + 64):
        n = int(mpmath.floor(2 / mpmath.pi * mpmath.mpf(2) ** TRIG_TABLE_PRECISION))
    rows: list[float] = []
    for exponent in range(-1, TRIG_TABLE_ROWS - 1):
        scale = TRIG_TABLE_PRECISION - exponent      # G(E) = g / 2^scale
        g = n % (1 << (scale + 2))
        for j in range(4):
            weight = 51 + 53 * j
            rows.append(ldexp((g >> (scale - weight)) & ((1 << 53) - 1), -weight))
    return tuple(rows)


def _two_over_pi_table(module: ir.Module) -> ir.GlobalVariable:
    """The rows as one byte-string constant: ~30 KB that LLVM parses and emits in
    ~1 ms, where an array of 3892 double literals costs ~100 ms of compile time."""
    name = "symgrad.vm.two_over_pi"
    table = module.globals.get(name)
    if table is None:
        data = struct.pack(f"<{len(_two_over_pi_rows())}d", *_two_over_pi_rows())
        ty = ir.ArrayType(ir.IntType(8), len(data))
        table = ir.GlobalVariable(module, ty, name)
        table.global_constant = True
        table.linkage = "internal"
        table.align = 8
        table.initializer = ir.Constant(ty, bytearray(data))
    return table


def _reduce_mod4(e: _Emitter, v: ir.Value) -> ir.Value:
    """v - 4 * nearest integer(v / 4): exact, in [-2, 2]."""
    return e.sub(v, e.mul(e.c(4.0), e.roundeven(e.mul(v, e.c(0.25)))))


def _table_row(e: _Emitter, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(row = E + 1 clamped to the table, M = x 2^-E) for x = M 2^E, M an integer
    when |x| >= 2^51."""
    b = e.b
    biased = b.and_(b.lshr(e.bits(x), e.i(52)), e.i(0x7FF))
    row = b.sub(biased, e.i(1075 - 1))
    row = b.select(b.icmp_signed("<", row, e.i(0)), e.i(0), row)
    row = b.select(b.icmp_signed(">", row, e.i(TRIG_TABLE_ROWS - 1)),
                   e.i(TRIG_TABLE_ROWS - 1), row)
    return row, e.mul(x, e.pow2(b.sub(e.i(1), row)))


def _table_parts(e: _Emitter, row: ir.Value) -> list[ir.Value]:
    """The four doubles of G(E) from the table."""
    b = e.b
    table = _two_over_pi_table(b.module)
    base = b.mul(row, e.i(32))
    ptrs = [b.gep(table, [e.i(0), b.add(base, e.i(8 * j))], inbounds=True) for j in range(4)]
    return [b.load(b.bitcast(p, F64.ty.as_pointer()), align=8) for p in ptrs]


def _times_g_mod4(e: _Emitter, m: ir.Value, g: list[ir.Value]) -> tuple[ir.Value, ...]:
    """M * (g0 + g1 + g2 + g3) mod 4 as k + fh + fl with integer k and |fh| <= 1/2;
    exact up to ~2^-157 (products by FMA, sums by two_sum, mod 4 by roundeven)."""
    p0h, p0l = e.two_prod(m, g[0])
    s1 = _reduce_mod4(e, e.add(_reduce_mod4(e, p0h), p0l))  # exact
    p1h, p1l = e.two_prod(m, g[1])
    s2, e2 = e.two_sum(s1, p1h)
    s2 = _reduce_mod4(e, s2)
    p2h, p2l = e.two_prod(m, g[2])
    a, ae = e.two_sum(p1l, p2h)
    t, te = e.two_sum(a, e2)
    tail = e.add(e.add(ae, te), e.muladd(m, g[3], p2l))
    k = e.roundeven(e.add(s2, t))
    fh, fl = e.two_sum(e.sub(s2, k), t)
    return k, fh, e.add(fl, tail)


def _trig_reduce_huge(e: _Emitter, x: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
    """Payne-Hanek style reduction for |x| >= 2^51 (double only): x = M 2^E with an
    integer M, so x 2/pi = M G(E) (mod 4) with G(E) from the table; the fraction
    times pi/2 gives r.  Correct to the last bit even for the hardest doubles."""
    row, m = _table_row(e, x)
    k, fh, fl = _times_g_mod4(e, m, _table_parts(e, row))
    pio2 = PIO2["f64"]
    rh, rl = e.two_prod(fh, e.c(pio2[0]))
    rl = e.add(rl, e.muladd(fh, e.c(pio2[1]), e.mul(fl, e.c(pio2[0]))))
    rh, rl = e.fast_two_sum(rh, rl)
    return k, rh, rl


def _trig_reduce(e: _Emitter, x: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
    """Double x = k pi/2 + (rh + rl), |rh + rl| <= pi/4, for |x| < TRIG_LIMIT (the
    helper's middle tier, 2^20 <= |x| < 2^51).

    k is the nearest integer to x * 2/pi computed from the exact product with a
    two-part 2/pi; the first product k * PIO2[0] cancels exactly by FMA; pi/2 has
    three parts, the second product exact by FMA."""
    pio2, tpi = PIO2[e.k], TWO_OVER_PI[e.k]
    xs = x
    ph, pl = e.two_prod(xs, e.c(tpi[0]))
    pl = e.muladd(xs, e.c(tpi[1]), pl)
    k0 = e.roundeven(ph)
    k = e.add(k0, e.roundeven(e.add(e.sub(ph, k0), pl)))
    r1 = e.fma(e.neg(k), e.c(pio2[0]), xs)          # exact
    qh, ql = e.two_prod(k, e.c(pio2[1]))
    s, err = e.two_sum(r1, e.neg(qh))
    small = ql
    for part in pio2[2:]:
        small = e.muladd(k, e.c(part), small)
    rh, rl = e.fast_two_sum(s, e.sub(err, small))
    return k, rh, rl


def _sin_cos_parts(e: _Emitter, rh: ir.Value, rl: ir.Value) -> tuple[ir.Value, ...]:
    """sin(rh + rl) = rh + ts and cos(rh + rl) = w + tc for |rh| <= pi/4 (a little
    more is fine), |ts| < |rh| / 8 + |rl|, w in [0.69, 1], |tc| < 2^-5:
    returns (rh, ts, w, tc)."""
    z = e.mul(rh, rh)
    ts = e.muladd(e.mul(z, rh), e.poly(z, SIN_COEFFS[e.k]), rl)
    hz = e.mul(e.c(0.5), z)
    w = e.sub(e.c(1.0), hz)
    corr = e.sub(e.sub(e.c(1.0), w), hz)          # rounding error of w
    tc = e.muladd(e.mul(z, z), e.poly(z, COS_COEFFS[e.k]), e.sub(corr, e.mul(rh, rl)))
    return rh, ts, w, tc


def _sin_cos_kernels(e: _Emitter, rh: ir.Value, rl: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(sin(rh + rl), cos(rh + rl)) for |rh| <= pi/4 (a little more is fine)."""
    rh, ts, w, tc = _sin_cos_parts(e, rh, rl)
    return e.add(rh, ts), e.add(w, tc)


def _tan_of(e: _Emitter, q: ir.Value, rh: ir.Value, rl: ir.Value) -> ir.Value:
    """tan(k pi/2 + rh + rl) (q's low bit: k's) as n / d, n = sin, d = cos (odd k:
    n = -cos, d = sin), each summed as a double-double (Fast2Sum), the quotient
    corrected once: i = 1 / d_hi, q0 = n_hi i, tan = q0 + ((n_hi - q0 d_hi) +
    (n_lo - q0 d_lo)) i -- within ~1 ulp instead of ~2 for a plain sin / cos, for
    the same one division."""
    rh, ts, w, tc = _sin_cos_parts(e, rh, rl)
    s_hi, s_lo = e.fast_two_sum(rh, ts)
    c_hi, c_lo = e.fast_two_sum(w, tc)
    odd = e.low_bit(q)
    n_hi, n_lo = e.sel(odd, e.neg(c_hi), s_hi), e.sel(odd, e.neg(c_lo), s_lo)
    d_hi, d_lo = e.sel(odd, s_hi, c_hi), e.sel(odd, s_lo, c_lo)
    inv = e.div(e.c(1.0), d_hi)
    q0 = e.mul(n_hi, inv)
    resid = e.add(e.fma(e.neg(q0), d_hi, n_hi), e.fma(e.neg(q0), d_lo, n_lo))
    return e.fma(resid, inv, q0)


def _is_odd(e: _Emitter, k: ir.Value) -> ir.Value:
    half = e.mul(k, e.c(0.5))
    return e.cmp("!=", e.floor(half), half)


def _sin_of(e: _Emitter, k: ir.Value, rh: ir.Value, rl: ir.Value) -> ir.Value:
    """sin(k pi/2 + rh + rl) for an integer-valued k (cos: pass k + 1)."""
    s, c = _sin_cos_kernels(e, rh, rl)
    v = e.sel(_is_odd(e, k), c, s)
    q = e.sub(k, e.mul(e.c(4.0), e.floor(e.mul(k, e.c(0.25)))))   # k mod 4
    return e.sel(e.cmp(">=", q, e.c(2.0)), e.neg(v), v)


def _trig_reduce_fast(e: _Emitter, x: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
    """x = k pi/2 + rh + rl for |x| < TRIG_FAST (double 2^20, float 2^8): returns
    (q, rh, rl) with q an integer whose low bits are k's.

    k = nearest integer to x * 2/pi, by one FMA with the shifter 1.5 * 2^52 (2^23),
    so |rh| <= pi/4 + 2^-33 (2^-17).  pi/2 = P1 + P2 + P3 with P2 of 33 (16) bits:
    x - k P1 is exact (FMA; the result is a multiple of 2^-52 (2^-23) below 1),
    k P2 is exact (k has at most 20 (8) bits), and r1 - k P2 = rh + err exactly
    (Fast2Sum; when |r1| < |k P2| the sum itself is exact).  The error left,
    k (pi/2 - P1 - P2 - P3) plus the rounding of k P3, is below 2^-119 (2^-55.5),
    while |x - k pi/2| >= 2^-60.5 (2^-27.8) for every double below 2^20 (float below
    2^8; continued fractions of 2/pi): r is good to ~2^-58 (2^-27.7)."""
    shifter = e.c(TRIG_SHIFTER[e.k])
    t = e.fma(x, e.c(TWO_OVER_PI[e.k][0]), shifter)
    k = e.sub(t, shifter)
    p1, p2, p3 = PIO2_FAST[e.k]
    nk = e.neg(k)
    r1 = e.fma(nk, e.c(p1), x)                      # exact
    ph = e.mul(k, e.c(p2))                          # exact
    rh = e.sub(r1, ph)
    rl = e.fma(nk, e.c(p3), e.sub(e.sub(r1, rh), ph))
    return e.bits(t), rh, rl


def _quadrant(e: _Emitter, q: ir.Value, s: ir.Value, c: ir.Value) -> ir.Value:
    """sin(k pi/2 + r) from s = sin r, c = cos r and integer bits q (low bits: k)."""
    b = e.b
    v = e.sel(e.low_bit(q), c, s)
    width = e.f.ity.width
    flip = b.and_(b.shl(q, e.i(width - 2)), e.i(-(1 << (width - 1))))   # bit 1 -> sign
    return e.from_bits(b.xor(e.bits(v), flip))


def _trig_finish(e: _Emitter, x: ir.Value, fast: ir.Value, huge: ir.Value,
                 odd: bool, limit: float | None = None) -> ir.Value:
    """The helper's result for |x| >= limit (TRIG_FAST), inf and NaN; x itself for
    +-0 if odd."""
    big = e.b.fcmp_unordered(">=", e.abs(x), e.c(limit or TRIG_FAST[e.k]))
    res = e.sel(big, huge, fast)
    return e.sel(e.cmp("==", x, e.c(0.0)), x, res) if odd else res


def _huge(e: _Emitter, x: ir.Value, quarter_turns: float) -> ir.Value:
    helper = _trig_huge_helper(e.b.module, e.f)
    return e.b.call(helper, [x, e.c(quarter_turns)])


def _trig_in_double(d: _Emitter, xd: ir.Value, quarter: ir.Value | None) -> ir.Value:
    """sin(x + quarter pi/2) or, for quarter None, tan x, of a float x widened to
    double, |x| < TRIG_LIMIT["f32"], in double (``d``: a double emitter, scalar or
    vector; quarter: an integer, scalar or vector): k by the shifter FMA,
    r = (x - k P1) - k P2 by two FMAs (first exact; pi/2 - P1 - P2 < 2^-109 and
    |r| >= 2^-29.3 for every float), polynomials good to 2^-37, to be rounded to
    float once (tan then stays within 0.501 ulp)."""
    shifter = d.c(TRIG_SHIFTER["f64"])
    t = d.fma(xd, d.c(TWO_OVER_PI["f64"][0]), shifter)
    k = d.sub(t, shifter)
    nk = d.neg(k)
    r = d.fma(nk, d.c(PIO2["f64"][1]), d.fma(nk, d.c(PIO2["f64"][0]), xd))
    z = d.mul(r, r)
    s = d.muladd(d.mul(r, z), d.poly(z, SIN_COEFFS_TAN32), r)
    c = d.muladd(z, d.poly(z, COS_COEFFS_TAN32), d.c(1.0))
    q = d.bits(t)
    if quarter is None:
        odd = d.low_bit(q)
        return d.div(d.sel(odd, d.neg(c), s), d.sel(odd, s, c))
    return _quadrant(d, d.b.add(q, quarter), s, c)


def _sin(e: _Emitter, x: ir.Value) -> ir.Value:
    huge = _huge(e, x, 0.0)        # first: fewer values live across the call
    q, rh, rl = _trig_reduce_fast(e, x)
    s, c = _sin_cos_kernels(e, rh, rl)
    return _trig_finish(e, x, _quadrant(e, q, s, c), huge, odd=True)


def _cos(e: _Emitter, x: ir.Value) -> ir.Value:
    huge = _huge(e, x, 1.0)
    q, rh, rl = _trig_reduce_fast(e, x)
    s, c = _sin_cos_kernels(e, rh, rl)
    return _trig_finish(e, x, _quadrant(e, e.b.add(q, e.i(1)), s, c), huge, odd=False)


def _tan(e: _Emitter, x: ir.Value) -> ir.Value:
    if e.f is F32:      # in double below 2^32; the helper's quarter 2 is tan
        huge = _huge(e, x, 2.0)
        d = _Emitter(e.b, F64)
        fast = e.b.fptrunc(_trig_in_double(d, e.b.fpext(x, F64.ty), None), F32.ty)
        return _trig_finish(e, x, fast, huge, odd=True, limit=TRIG_LIMIT["f32"])
    huge = e.div(_huge(e, x, 0.0), _huge(e, x, 1.0))
    q, rh, rl = _trig_reduce_fast(e, x)
    return _trig_finish(e, x, _tan_of(e, q, rh, rl), huge, odd=True)


# Large arguments.  The double-double reduction is ~20 extra operations per
# element and the table reduction ~70, which would halve sin's throughput if every
# lane paid for them.  So they live in a ``noinline`` scalar helper with an early
# exit, and the helper carries the ``vector-function-abi-variant`` attribute naming
# vector versions of itself (half and full host width) that return zeros unless
# some lane is at least TRIG_FAST (or inf or NaN); then they run the next tier
# (double-double; float: in double) on all lanes at once, and only if some lane is
# beyond it the scalar worker lane by lane.  The loop vectoriser replaces the
# scalar call with the matching vector version, so ordinary inputs pay one compare
# and branch (and the spills of the loop's live registers around the call).

def _huge_helper_name(fmt: _Format) -> str:
    return f"symgrad_vm_trig_huge_{fmt.suffix}"


def _huge_lanes(fmt: _Format) -> tuple[int, ...]:
    """Vector variants offered: the target's full and half width (main loop and
    vectorised epilogue); each costs compile time."""
    full = target.current().lanes(fmt.ity.width)
    return (full // 2, full) if full > 2 else (full,)


def _add_string_attribute(fn: ir.Function, key: str, value: str) -> None:
    # llvmlite validates attribute names against a fixed list; string attributes
    # ("key"="value") are valid LLVM IR, so add the text past the check.
    set.add(fn.attributes, f'"{key}"="{value}"')


def _helper_cconv() -> str:
    """Calling convention of the helper and its vector variants
    (:attr:`codegen.target.Target.helper_cconv`); the loop vectoriser copies the
    variant's convention to the call."""
    return target.current().helper_cconv


def _helper_function(module: ir.Module, name: str, ty: ir.Type) -> ir.Function:
    fn = ir.Function(module, ir.FunctionType(ty, [ty, ty]), name)
    fn.calling_convention = _helper_cconv()
    # Not internal: interprocedural passes must not specialise the helper's
    # signature (that breaks the vector-variant mapping) nor delete the variants,
    # to which only the attribute refers.
    fn.linkage = "weak_odr"
    for attr in ("noinline", "nounwind", "readnone"):
        fn.attributes.add(attr)
    return fn


def _trig_huge_helper(module: ir.Module, fmt: _Format) -> ir.Function:
    """T helper(T x, T q): sin(x + q pi/2) for |x| >= TRIG_FAST, inf and NaN, else 0
    (float: q = 2 gives tan x).

    Three kinds of function: the helper (carries the vector-variant attribute),
    its vector variants, and the worker they all call (no attribute -- were the
    variants to call the helper, the SLP vectoriser would turn their lane-by-lane
    calls back into a call of the variant itself: infinite recursion)."""
    name = _huge_helper_name(fmt)
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    worker = _trig_huge_worker(module, fmt)
    fn = _helper_function(module, name, fmt.ty)
    variants = ",".join(f"_ZGV_LLVM_N{n}vv_{name}({name}_v{n})" for n in _huge_lanes(fmt))
    _add_string_attribute(fn, "vector-function-abi-variant", variants)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    b.ret(b.call(worker, list(fn.args)))
    for lanes in _huge_lanes(fmt):
        _trig_huge_variant(module, worker, fmt, lanes)
    return fn


def _trig_huge_worker(module: ir.Module, fmt: _Format) -> ir.Function:
    """Double: the double-double reduction below TRIG_LIMIT, the table above.
    Float: the double functions, rounded.  NaN for inf and NaN."""
    fn = _helper_function(module, f"{_huge_helper_name(fmt)}_worker", fmt.ty)
    fn.linkage = "internal"
    entry, work, skip = (fn.append_basic_block(s) for s in ("entry", "work", "skip"))
    e = _Emitter(ir.IRBuilder(entry), fmt)
    x, quarter = fn.args
    e.b.cbranch(e.b.fcmp_unordered(">=", e.abs(x), e.c(TRIG_FAST[e.k])), work, skip)
    e.b.position_at_end(skip)
    e.b.ret(e.c(0.0))
    e.b.position_at_end(work)
    if fmt is F64:
        mid, table = fn.append_basic_block("mid"), fn.append_basic_block("table")
        e.b.cbranch(e.cmp("<", e.abs(x), e.c(TRIG_LIMIT[e.k])), mid, table)
        e.b.position_at_end(mid)
        k, rh, rl = _trig_reduce(e, x)
        e.b.ret(_sin_of(e, e.add(k, quarter), rh, rl))
        e.b.position_at_end(table)
        k, rh, rl = _trig_reduce_huge(e, x)
        res = _sin_of(e, e.add(k, quarter), rh, rl)
        e.b.ret(e.sel(e.b.fcmp_unordered("==", e.abs(x), e.c(INF)), e.c(NAN), res))
        return fn
    xd = e.b.fpext(x, F64.ty)
    sin, cos, tan = (e.b.call(get_function(module, n, F64.ty), [xd])
                     for n in ("sin", "cos", "tan"))
    res = e.b.select(e.b.fcmp_ordered("==", quarter, e.c(0.0)), sin,
                     e.b.select(e.b.fcmp_ordered("==", quarter, e.c(1.0)), cos, tan))
    e.b.ret(e.b.fptrunc(res, F32.ty))
    return fn


def _trig_huge_variant(module: ir.Module, worker: ir.Function, fmt: _Format,
                       lanes: int) -> None:
    """<lanes x T> version of the helper: zeros unless some lane needs it.  Double:
    the double-double tier (|x| < 2^51) vectorised over all lanes; only if some
    lane is beyond it (or inf or NaN) the worker lane by lane.  Float: likewise,
    the first tier in double (|x| < 2^32; tan when quarter is 2)."""
    vty = ir.VectorType(fmt.ty, lanes)
    fn = _helper_function(module, f"{_huge_helper_name(fmt)}_v{lanes}", vty)
    entry, work, skip, each = (fn.append_basic_block(s)
                               for s in ("entry", "work", "skip", "each"))
    e = _Emitter(ir.IRBuilder(entry), fmt, lanes)
    b = e.b
    x, quarter = fn.args
    a = e.abs(x)

    def any_lane(limit: float) -> ir.Value:
        mask = b.fcmp_unordered(">=", a, e.c(limit))
        return b.icmp_unsigned("!=", b.bitcast(mask, ir.IntType(lanes)), ir.IntType(lanes)(0))

    b.cbranch(any_lane(TRIG_FAST[fmt.suffix]), work, skip)
    b.position_at_end(skip)
    b.ret(e.c(0.0))
    b.position_at_end(work)
    if fmt is F64:
        done = fn.append_basic_block("done")
        k, rh, rl = _trig_reduce(e, x)
        mid = _sin_of(e, e.add(k, quarter), rh, rl)
        b.cbranch(any_lane(TRIG_LIMIT[fmt.suffix]), each, done)
        b.position_at_end(done)
        b.ret(mid)
    else:       # float below 2^32 in double; quarter is the same in every lane
        d = _Emitter(b, F64, lanes)
        xd = b.fpext(x, d.ty)
        sincos, tan = fn.append_basic_block("sincos"), fn.append_basic_block("tan")
        b.cbranch(any_lane(TRIG_LIMIT["f32"]), each, sincos)
        b.position_at_end(sincos)
        q0 = b.extract_element(quarter, ir.IntType(32)(0))
        b.cbranch(b.fcmp_ordered("==", q0, ir.Constant(fmt.ty, 2.0)), tan, fn.append_basic_block("sc"))
        b.position_at_end(fn.basic_blocks[-1])
        b.ret(b.fptrunc(_trig_in_double(d, xd, b.fptosi(quarter, d.ity)), vty))
        b.position_at_end(tan)
        b.ret(b.fptrunc(_trig_in_double(d, xd, None), vty))
    b.position_at_end(each)
    out = e.c(0.0)
    for lane in range(lanes):
        idx = ir.IntType(32)(lane)
        r = b.call(worker, [b.extract_element(x, idx), b.extract_element(quarter, idx)])
        out = b.insert_element(out, r, idx)
    b.ret(out)


# -------------------------------------------------------------------------- pow


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


# ------------------------------------------------------------------- intrinsics


def _intrinsic_body(name: str) -> Callable[[_Emitter, ir.Value], ir.Value]:
    return lambda e, x: e.intrinsic(name, x)


_BODIES: dict[str, Callable[..., ir.Value]] = {
    "exp": _exp, "expm1": _expm1, "log": _log, "log1p": _log1p, "tanh": _tanh,
    "sigmoid": _sigmoid, "softplus": _softplus, "log1pexp": _log1pexp, "sin": _sin, "cos": _cos, "tan": _tan,
    "pow": _pow,
    "sqrt": _intrinsic_body("sqrt"), "abs": _intrinsic_body("fabs"),
    "floor": _Emitter.floor, "ceil": _Emitter.ceil, "trunc": _Emitter.trunc,
    "rint": _Emitter.roundeven,
}
BINARY: tuple[str, ...] = ("pow",)
UNARY: tuple[str, ...] = tuple(n for n in _BODIES if n not in BINARY)
FUNCTIONS: tuple[str, ...] = tuple(_BODIES)


def _arity(name: str) -> int:
    return 2 if name in BINARY else 1


def get_function(module: ir.Module, name: str, ty: ir.Type) -> ir.Function:
    """The ``internal alwaysinline`` function computing ``name`` on scalars of
    type ``ty`` (double or float), added to ``module`` on first use."""
    if name not in _BODIES:
        raise KeyError(f"unknown vecmath function {name!r}; known: {', '.join(FUNCTIONS)}")
    fmt = _format_of(ty)
    full = f"symgrad.vm.{name}.{fmt.suffix}"
    existing = module.globals.get(full)
    if existing is not None:
        return existing
    fn = ir.Function(module, ir.FunctionType(fmt.ty, [fmt.ty] * _arity(name)), full)
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline")
    fn.attributes.add("nounwind")
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    builder.ret(_BODIES[name](_Emitter(builder, fmt), *fn.args))
    return fn


def emit(builder: ir.IRBuilder, name: str, *args: ir.Value) -> ir.Value:
    """Emit a call computing ``name(*args)`` at the builder's position."""
    return builder.call(get_function(builder.module, name, args[0].type), list(args))


def exp(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """e**x."""
    return emit(b, "exp", x)


def expm1(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """e**x - 1, accurate near 0."""
    return emit(b, "expm1", x)


def log(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Natural logarithm."""
    return emit(b, "log", x)


def log1p(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """log(1 + x), accurate near 0."""
    return emit(b, "log1p", x)


def tanh(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Hyperbolic tangent."""
    return emit(b, "tanh", x)


def sigmoid(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """1 / (1 + e**-x), without overflow."""
    return emit(b, "sigmoid", x)


def softplus(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """torch.nn.functional.softplus (beta=1, threshold=20)."""
    return emit(b, "softplus", x)


def log1pexp(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """log(1 + e**x) for every x (no threshold), without overflow."""
    return emit(b, "log1pexp", x)


def sin(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Sine."""
    return emit(b, "sin", x)


def cos(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Cosine."""
    return emit(b, "cos", x)


def tan(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Tangent."""
    return emit(b, "tan", x)


def pow(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:  # noqa: A001
    """x**y with C99 / numpy special cases."""
    return emit(b, "pow", x, y)


def sqrt(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Square root (llvm.sqrt)."""
    return emit(b, "sqrt", x)


def abs(b: ir.IRBuilder, x: ir.Value) -> ir.Value:  # noqa: A001
    """|x| (llvm.fabs)."""
    return emit(b, "abs", x)


def floor(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Round down (llvm.floor)."""
    return emit(b, "floor", x)


def ceil(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Round up (llvm.ceil)."""
    return emit(b, "ceil", x)


def trunc(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Round toward zero (llvm.trunc)."""
    return emit(b, "trunc", x)


def rint(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Round half to even, like numpy.rint (llvm.roundeven)."""
    return emit(b, "rint", x)


# ------------------------------------------------------------------ test kernels


def build_elementwise_kernel(module: ir.Module, kernel_name: str, fn_name: str,
                             ty: ir.Type) -> ir.Function:
    """Define ``void kernel_name(T* x, [T* y,] T* out, i64 n)`` applying ``fn_name``
    elementwise (``out[i] = f(x[i] [, y[i]])``), a loop the vectoriser widens."""
    ptr = ty.as_pointer()
    arity = _arity(fn_name)
    i64 = ir.IntType(64)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr] * (arity + 1) + [i64]),
                     kernel_name)
    for arg in fn.args[:-1]:
        arg.add_attribute("noalias")
    *inputs, out, n = fn.args
    entry, loop, done = (fn.append_basic_block(s) for s in ("entry", "loop", "done"))
    b = ir.IRBuilder(entry)
    b.cbranch(b.icmp_signed(">", n, i64(0)), loop, done)
    b.position_at_end(loop)
    i = b.phi(i64)
    i.add_incoming(i64(0), entry)
    values = [b.load(b.gep(p, [i], inbounds=True)) for p in inputs]
    b.store(emit(b, fn_name, *values), b.gep(out, [i], inbounds=True))
    nxt = b.add(i, i64(1), flags=["nuw", "nsw"])
    i.add_incoming(nxt, loop)
    b.cbranch(b.icmp_signed("<", nxt, n), loop, done)
    b.position_at_end(done)
    b.ret_void()
    return fn
