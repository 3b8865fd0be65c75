"""sin, cos and tan, with argument reduction correct over the whole range.

* sin/cos, three tiers.  Inline, for |x| < 2^20 (float: 2^8): k = nearest
  integer to x 2/pi by one FMA with a shifter (k's low bits then sit in the
  result's low bits), r = x - k pi/2 = rh + rl with pi/2 in three parts, the first
  product exact by FMA and the second exact because that part is short (33 bits,
  float 16), good to ~2^-119 (2^-55.5) while |r| >= 2^-60.5 (2^-27.8) there; sin r
  and cos r both by minimax polynomials; the quadrant chooses between them and
  flips the sign with bit operations.  Beyond, and for inf and NaN, a
  ``noinline`` helper (see ``_trig_huge_helper``): double |x| < 2^51 by a
  double-double reduction (two-part 2/pi, three-part pi/2), float |x| < 2^32 in
  double (two-part pi/2, |r| >= 2^-29.3 for every float, rounded once) (the helper's vector
  variants run these tiers on all lanes at once), and beyond those, lane by lane, a table of (2^E 2/pi) mod 4 for every
  exponent E, in four 53-bit parts, that reduces x = M 2^E exactly (Payne-Hanek;
  float calls the double functions).  So sin/cos/tan are correct over the whole
  range (the classic worst case x = 6381956970095103 * 2^797 included).  The
  helper's vector variants return at once unless some lane needs them; the call
  uses the C convention (:attr:`codegen.target.Target.helper_cconv` says why), so
  the loop spills its live registers around it.
* tan: double: sin and cos of the reduced argument as double-doubles, their
  quotient corrected once (~1 ulp; the helper's tiers divide sin by cos, ~2 ulp);
  float: in double below 2^32, rounded once.
"""
from __future__ import annotations

import struct
from functools import lru_cache
from math import ldexp

import llvmlite.ir as ir

from .. import library, target
from .core import (
    COS_COEFFS, COS_COEFFS_TAN32, F32, F64, INF, NAN, PIO2, PIO2_FAST, SIN_COEFFS,
    SIN_COEFFS_TAN32, TRIG_FAST, TRIG_LIMIT, TRIG_SHIFTER, TRIG_TABLE_PRECISION,
    TRIG_TABLE_ROWS, TWO_OVER_PI, _Emitter, _Format, define_function)


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

def _huge_helper_name(fmt: _Format, tag: str = "") -> str:
    """The helper's name; ``tag``: the target's, for the shared library's copy
    (:mod:`codegen.library`)."""
    return f"symgrad_vm_trig_huge_{fmt.suffix}" + (f"_{tag}" if tag else "")


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


def _helper_function(module: ir.Module, name: str, ty: ir.Type,
                     declare: bool = False) -> ir.Function:
    fn = ir.Function(module, ir.FunctionType(ty, [ty, ty]), name)
    fn.calling_convention = _helper_cconv()
    # Not internal: interprocedural passes must not specialise the helper's
    # signature (that breaks the vector-variant mapping) nor delete the variants,
    # to which only the attribute refers.  (A declaration: external.)
    if not declare:
        fn.linkage = "weak_odr"
    for attr in ("nounwind", "readnone") if declare else ("noinline", "nounwind", "readnone"):
        fn.attributes.add(attr)
    return fn


def _trig_huge_helper(module: ir.Module, fmt: _Format) -> ir.Function:
    """T helper(T x, T q): sin(x + q pi/2) for |x| >= TRIG_FAST, inf and NaN, else 0
    (float: q = 2 gives tan x).  Defined in ``module``, or -- inside
    :func:`codegen.library.shared` -- declared, the shared library defining it."""
    shared = library.active(fmt.suffix)
    name = _huge_helper_name(fmt, library.tag(shared) if shared is not None else "")
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    if shared is None:
        return define_huge_helper(module, fmt)
    fn = _helper_function(module, name, fmt.ty, declare=True)
    _add_string_attribute(fn, "vector-function-abi-variant", _variant_names(name, fmt))
    for lanes in _huge_lanes(fmt):     # kept by codegen.library.finish
        _helper_function(module, f"{name}_v{lanes}", ir.VectorType(fmt.ty, lanes), declare=True)
    return fn


def _variant_names(name: str, fmt: _Format) -> str:
    return ",".join(f"_ZGV_LLVM_N{n}vv_{name}({name}_v{n})" for n in _huge_lanes(fmt))


def define_huge_helper(module: ir.Module, fmt: _Format, tag: str = "") -> ir.Function:
    """Define the helper (see :func:`_trig_huge_helper`) and its vector variants in
    ``module``; ``tag``: the shared library's copy, named for its target.

    Three kinds of function: the helper (carries the vector-variant attribute),
    its vector variants, and the worker they all call (no attribute -- were the
    variants to call the helper, the SLP vectoriser would turn their lane-by-lane
    calls back into a call of the variant itself: infinite recursion)."""
    name = _huge_helper_name(fmt, tag)
    worker = _trig_huge_worker(module, fmt, name)
    fn = _helper_function(module, name, fmt.ty)
    _add_string_attribute(fn, "vector-function-abi-variant", _variant_names(name, fmt))
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    b.ret(b.call(worker, list(fn.args)))
    for lanes in _huge_lanes(fmt):
        _trig_huge_variant(module, worker, fmt, lanes, name)
    return fn


def _trig_huge_worker(module: ir.Module, fmt: _Format, name: str) -> ir.Function:
    """Double: the double-double reduction below TRIG_LIMIT, the table above.
    Float: the double functions, rounded.  NaN for inf and NaN."""
    fn = _helper_function(module, f"{name}_worker", fmt.ty)
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
    sin, cos, tan = (e.b.call(define_function(module, n, F64, 1, body), [xd])
                     for n, body in (("sin", _sin), ("cos", _cos), ("tan", _tan)))
    res = e.b.select(e.b.fcmp_ordered("==", quarter, e.c(0.0)), sin,
                     e.b.select(e.b.fcmp_ordered("==", quarter, e.c(1.0)), cos, tan))
    e.b.ret(e.b.fptrunc(res, F32.ty))
    return fn


def _trig_huge_variant(module: ir.Module, worker: ir.Function, fmt: _Format,
                       lanes: int, name: str) -> None:
    """<lanes x T> version of the helper: zeros unless some lane needs it.  Double:
    the double-double tier (|x| < 2^51) vectorised over all lanes; only if some
    lane is beyond it (or inf or NaN) the worker lane by lane.  Float: likewise,
    the first tier in double (|x| < 2^32; tan when quarter is 2)."""
    vty = ir.VectorType(fmt.ty, lanes)
    fn = _helper_function(module, f"{name}_v{lanes}", vty)
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


