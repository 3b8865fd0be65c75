"""The shared pieces of the math library: the float formats (:class:`_Format`), the
constants and coefficient tables every family reads, and :class:`_Emitter`, the IR
builder wrapper (exact products, double-double arithmetic, selects, bit tricks) their
bodies are written with."""
from __future__ import annotations

from dataclasses import dataclass
from math import factorial
from typing import Callable

import llvmlite.ir as ir

from .. import target


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


def define_function(module: ir.Module, name: str, fmt: _Format, arity: int,
                    body: Callable[..., ir.Value]) -> ir.Function:
    """The ``internal alwaysinline`` scalar function ``symgrad.vm.<name>.<f64|f32>`` of
    ``module`` whose value is ``body(emitter, *args)``, defined on first use."""
    full = f"symgrad.vm.{name}.{fmt.suffix}"
    existing = module.globals.get(full)
    if existing is not None:
        return existing
    fn = ir.Function(module, ir.FunctionType(fmt.ty, [fmt.ty] * arity), full)
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline")
    fn.attributes.add("nounwind")
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    builder.ret(body(_Emitter(builder, fmt), *fn.args))
    return fn
