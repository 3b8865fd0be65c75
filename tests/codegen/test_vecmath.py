"""Tests of codegen/vecmath/: accuracy, special values and vectorisation.

Every function is compiled (once per target, in one module) into an elementwise kernel
``void k(T* x, [T* y,] T* out, i64 n)`` and swept over ~1e6 points per dtype, on every
target of the matrix this host can run (``machine``: without FMA and rounding
instructions, with AVX2, the host); vectorisation is also checked on targets it cannot
run (``foreign_machine``).  The accuracy reference is numpy in ``longdouble`` (x87 80-bit on
x86-64: glibc's expl/sinl/powl, 11 bits more than double), rounded to the dtype;
numpy's own float64/float32 results are a second, independent check (<= 4 ulp).

Run ``python tests/codegen/test_vecmath.py`` to print throughput (G elements/s).
"""
from __future__ import annotations

import ctypes
import re
import sys
import time
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import llvmlite.ir as ir  # noqa: E402

from codegen import jit, target, vecmath  # noqa: E402
from machines import machine, foreign_machine  # noqa: E402,F401  (fixtures)

LD = np.longdouble
DTYPES = (np.float64, np.float32)
IR_TYPES = {np.float64: ir.DoubleType(), np.float32: ir.FloatType()}
TRANSCENDENTAL = ("exp", "expm1", "log", "log1p", "tanh", "sigmoid", "softplus",
                  "log1pexp", "sin", "cos", "tan", "pow")
EXACT = ("sqrt", "abs", "floor", "ceil", "trunc", "rint")

# Max error in ulp against the longdouble reference, (float64, float32); measured
# values (see the report in test_report_accuracy) are below these.
ULP_BOUND = {
    "exp": (1.0, 1.2), "expm1": (2.0, 1.7), "log": (1.0, 1.0), "log1p": (1.0, 1.0),
    "tanh": (3.0, 2.5), "sigmoid": (2.5, 2.5), "softplus": (2.0, 2.0), "log1pexp": (2.0, 2.0),
    "sin": (1.0, 1.0), "cos": (1.0, 1.0), "tan": (2.5, 0.51), "pow": (1.5, 0.51),
    "sqrt": (0.5, 0.5),
}
NUMPY_ULP_BOUND = 4.0

needs_longdouble = pytest.mark.skipif(np.finfo(LD).nmant < 63,
                                      reason="needs 80-bit longdouble for the reference")
pytestmark = needs_longdouble


# --------------------------------------------------------------------- kernels


def kernel_name(name: str, dtype: type) -> str:
    return f"k_{name}_{np.dtype(dtype).name}"


def compiled() -> jit.CompiledModule:
    """All kernels of all functions and dtypes in one module, for the current target."""
    return compiled_for(target.current())


@lru_cache(maxsize=None)
def compiled_for(t: target.Target) -> jit.CompiledModule:
    with target.use(t):
        module = ir.Module("vecmath_sweeps")
        for dtype in DTYPES:
            for name in vecmath.FUNCTIONS:
                vecmath.build_elementwise_kernel(module, kernel_name(name, dtype), name,
                                                 IR_TYPES[dtype])
        return jit.compile_module(module)


def run(name: str, *arrays: np.ndarray) -> np.ndarray:
    arrays = tuple(np.ascontiguousarray(a) for a in arrays)
    out = np.empty_like(arrays[0])
    ptr = ctypes.c_void_p
    fn = compiled().cfunc(kernel_name(name, arrays[0].dtype.type), None,
                          *([ptr] * (len(arrays) + 1)), ctypes.c_int64)
    fn(*[a.ctypes.data for a in arrays], out.ctypes.data, out.size)
    return out


def kernel_ir(name: str, dtype: type) -> str:
    """The optimised IR of one kernel's definition."""
    text = compiled().optimized_ir
    start = text.index(f"@{kernel_name(name, dtype)}(")
    start = text.rindex("define", 0, start)
    end = text.find("\ndefine", start + 1)
    return text[start:end if end > 0 else len(text)]


# ------------------------------------------------------------------ references


def reference(name: str, x: np.ndarray, y: np.ndarray | None = None) -> np.ndarray:
    """The exact-ish value in longdouble."""
    X = x.astype(LD)
    with np.errstate(all="ignore"):
        if name == "sigmoid":
            return np.where(X >= 0, 1 / (1 + np.exp(-X)), np.exp(X) / (1 + np.exp(X)))
        if name == "softplus":
            return np.where(X > 20, X, np.log1p(np.exp(X)))
        if name == "log1pexp":
            return np.logaddexp(X, 0)
        if name == "pow":
            return np.power(X, y.astype(LD))
        return getattr(np, name)(X)


def numpy_value(name: str, x: np.ndarray, y: np.ndarray | None = None) -> np.ndarray:
    """numpy's own result in the input dtype (softplus: torch's formula)."""
    with np.errstate(all="ignore"):
        if name == "softplus":
            return np.where(x > 20, x, np.log1p(np.exp(x)))
        if name == "log1pexp":
            return np.logaddexp(x, 0)
        if name == "pow":
            return np.power(x, y)
        return getattr(np, name)(x)


def ulp_errors(got: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """|got - ref| in ulps of the reference rounded to got's dtype, where both are
    finite (elsewhere 0)."""
    dtype = got.dtype
    with np.errstate(all="ignore"):
        rounded = ref.astype(dtype)
        ok = np.isfinite(rounded) & np.isfinite(got)
        spacing = np.spacing(np.abs(rounded[ok])).astype(LD)
    err = np.zeros(got.shape, dtype=LD)
    err[ok] = np.abs(got[ok].astype(LD) - ref[ok].astype(LD)) / spacing
    return err


def assert_same_class(got: np.ndarray, expected: np.ndarray, x: np.ndarray) -> None:
    """NaN, +-inf and signed zeros must match exactly."""
    with np.errstate(over="ignore"):
        expected = expected.astype(got.dtype)
    for what, pred in (("nan", np.isnan), ("inf", np.isinf), ("zero", lambda v: v == 0)):
        bad = pred(got) != pred(expected)
        assert not bad.any(), f"{what} mismatch at x={x[bad][:5]}: {got[bad][:5]} vs {expected[bad][:5]}"
    special = np.isinf(expected) | (expected == 0)
    bad = special & (np.signbit(got) != np.signbit(expected))
    assert not bad.any(), f"sign mismatch at x={x[bad][:5]}: {got[bad][:5]} vs {expected[bad][:5]}"


# -------------------------------------------------------------------- domains


def log_uniform(rng: np.random.Generator, lo: float, hi: float, n: int) -> np.ndarray:
    """Magnitudes 2**U(lo, hi) with random signs."""
    return np.exp2(rng.uniform(lo, hi, n)) * rng.choice([-1.0, 1.0], n)


def specials(dtype: type) -> np.ndarray:
    fi = np.finfo(dtype)
    values = [0.0, -0.0, np.inf, -np.inf, np.nan, fi.smallest_subnormal,
              -fi.smallest_subnormal, fi.tiny, -fi.tiny, fi.max, -fi.max, 1.0, -1.0,
              0.5, -0.5, 2.0, -2.0, 20.0, -20.0, 1e-30, -1e-30, 88.0, -88.0, 104.0,
              -104.0, 709.0, -709.0, 710.0, -710.0, 745.0, -745.0, 746.0, -746.0,
              1e5, -1e5, 1e15, 1e16, 1e22, -1e300, np.pi / 2, np.pi, 3 * np.pi / 2]
    with np.errstate(over="ignore"):
        return np.array(values, dtype=dtype)


def sweep(name: str, dtype: type, n: int = 250_000) -> np.ndarray:
    """~1e6 points across the domain of ``name`` (plus the special values)."""
    rng = np.random.default_rng(sum(map(ord, name)) + np.dtype(dtype).itemsize)
    f64 = dtype == np.float64
    emax, emin = (1023, -1074) if f64 else (127, -149)
    big = 750.0 if f64 else 110.0
    parts: list[np.ndarray] = []
    if name in ("exp", "expm1", "sigmoid", "softplus", "log1pexp", "tanh"):
        parts = [rng.uniform(-big, big, n), rng.uniform(-3, 3, n),
                 log_uniform(rng, emin, 3, n), rng.uniform(-40, 40, n)]
    elif name == "log":
        parts = [np.abs(log_uniform(rng, emin, emax, 2 * n)), rng.uniform(0.5, 2, n),
                 1 + log_uniform(rng, -60, -1, n)]
    elif name == "log1p":
        parts = [rng.uniform(-1, 1, n), np.abs(log_uniform(rng, emin, emax, n)),
                 log_uniform(rng, emin, -1, n), -1 + np.abs(log_uniform(rng, -53, -1, n))]
    elif name in ("sin", "cos", "tan"):
        k = rng.integers(-2 ** 20, 2 ** 20, n)
        near = k * (np.pi / 2) * (1 + rng.integers(-8, 9, n) * 2.0 ** -52)
        parts = [rng.uniform(-10, 10, n), rng.uniform(-1e5, 1e5, n),
                 log_uniform(rng, -30, emax, n), near]
    elif name == "sqrt":
        parts = [np.abs(log_uniform(rng, emin, emax, n))]
    else:
        parts = [log_uniform(rng, -10, 60, n) * rng.uniform(0.5, 1.5, n)]
    with np.errstate(over="ignore"):
        return np.concatenate([*[p.astype(dtype) for p in parts], specials(dtype)])


def pow_sweep(dtype: type, n: int = 250_000) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7 + np.dtype(dtype).itemsize)
    top = 1000 if dtype == np.float64 else 120
    xs = [np.exp2(rng.uniform(-top, top, n)), rng.uniform(0.5, 2.0, n),
          -np.exp2(rng.uniform(-top / 4, top / 4, n)), np.exp2(rng.uniform(-top, top, n))]
    ys = [rng.uniform(-1, 1, n) * rng.choice([1.0, 10.0, 1000.0], n),
          rng.uniform(-3000, 3000, n), rng.integers(-40, 41, n).astype(float),
          rng.uniform(-2, 2, n)]
    with np.errstate(over="ignore"):
        return (np.concatenate(xs).astype(dtype), np.concatenate(ys).astype(dtype))


# ----------------------------------------------------------------------- tests


@pytest.mark.usefixtures("machine")
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", [n for n in TRANSCENDENTAL if n != "pow"] + ["sqrt"])
def test_unary_accuracy(name: str, dtype: type) -> None:
    x = sweep(name, dtype)
    got = run(name, x)
    ref = reference(name, x)
    assert_same_class(got, ref, x)
    err = ulp_errors(got, ref)
    bound = ULP_BOUND[name][DTYPES.index(dtype)]
    worst = int(np.argmax(err))
    assert err[worst] <= bound, f"{name}({x[worst]!r}) = {got[worst]!r}: {float(err[worst]):.3f} ulp"
    if name != "sigmoid":                                  # numpy has no sigmoid
        npv = numpy_value(name, x).astype(dtype)
        assert_same_class(got, npv, x)
        assert ulp_errors(got, npv.astype(LD)).max() <= NUMPY_ULP_BOUND


@pytest.mark.usefixtures("machine")
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_pow_accuracy(dtype: type) -> None:
    x, y = pow_sweep(dtype)
    got = run("pow", x, y)
    ref = reference("pow", x, y)
    assert_same_class(got, ref, x)
    err = ulp_errors(got, ref)
    worst = int(np.argmax(err))
    assert err[worst] <= ULP_BOUND["pow"][DTYPES.index(dtype)], \
        f"pow({x[worst]!r}, {y[worst]!r}): {float(err[worst]):.3f} ulp"
    assert ulp_errors(got, numpy_value("pow", x, y).astype(LD)).max() <= NUMPY_ULP_BOUND


@pytest.mark.usefixtures("machine")
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_pow_special_values(dtype: type) -> None:
    values = [0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0, np.inf, -np.inf,
              np.nan, 1e-30, 2.0 ** 53, -(2.0 ** 53) - 2, 1e30, -1e30, 7.5, -7.5, 2.0 ** 24 + 2]
    values = np.array(values, dtype=dtype)
    x, y = (a.ravel() for a in np.meshgrid(values, values))
    got = run("pow", x, y)
    npv = numpy_value("pow", x, y)
    assert_same_class(got, npv, x)
    assert ulp_errors(got, npv.astype(LD)).max() <= 1.0


@pytest.mark.usefixtures("machine")
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", EXACT)
def test_exact_functions(name: str, dtype: type) -> None:
    x = sweep(name, dtype, 20_000)
    got = run(name, x)
    expected = numpy_value(name, x)
    assert_same_class(got, expected, x)
    ok = ~np.isnan(expected)
    assert np.array_equal(got[ok], expected[ok])


@pytest.mark.usefixtures("machine")
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_named_special_values(dtype: type) -> None:
    def one(name: str, *args: float) -> float:
        return float(run(name, *[np.array([a], dtype=dtype) for a in args])[0])

    assert one("exp", 1000.0) == np.inf and one("exp", -1000.0) == 0.0
    assert one("log", 0.0) == -np.inf and np.isnan(one("log", -1.0))
    assert one("log1p", -1.0) == -np.inf and np.isnan(one("log1p", -2.0))
    assert one("tanh", np.inf) == 1.0 and one("tanh", -np.inf) == -1.0
    assert np.isnan(one("sin", np.inf)) and np.isnan(one("cos", -np.inf))
    assert np.signbit(one("sin", -0.0)) and np.signbit(one("expm1", -0.0))
    assert one("sigmoid", np.inf) == 1.0 and one("sigmoid", -np.inf) == 0.0
    assert one("softplus", 1e30) == np.float32(1e30) and one("softplus", -1000.0) == 0.0
    assert one("pow", -2.0, 3.0) == -8.0 and np.isnan(one("pow", -2.0, 0.5))
    assert one("pow", np.nan, 0.0) == 1.0 and one("pow", 1.0, np.nan) == 1.0


@pytest.mark.usefixtures("machine")
def test_huge_trig_arguments_are_correct() -> None:
    """Arguments far beyond 2^51 go through the table reduction; the hardest known
    double (closest to a multiple of pi/2) still comes out right."""
    x = np.array([np.ldexp(6381956970095103.0, 797), 1e22, 2.0 ** 51, -(2.0 ** 60),
                  np.finfo(np.float64).max], dtype=np.float64)
    for name in ("sin", "cos", "tan"):
        got = run(name, x)
        assert ulp_errors(got, reference(name, x)).max() <= 1.0
    assert abs(run("cos", x[:1])[0] + 4.687165924254628e-19) < 1e-33
    x32 = np.array([2.0 ** 17, -(2.0 ** 17), 131071.99, 1e20, 3e38, -1e30], dtype=np.float32)
    for name in ("sin", "cos", "tan"):
        got = run(name, x32)
        assert ulp_errors(got, reference(name, x32)).max() <= 1.0


@pytest.mark.usefixtures("machine")
def test_trig_reduction_hard_cases() -> None:
    """The reductions near their worst cases: the doubles below 2^20 and the
    floats closest to a multiple of pi/2 (from the continued fraction of 2/pi;
    |x - k pi/2| ~ 2^-60.5 and ~ 2^-27.8), their neighbours, and both sides of
    the limits between the tiers (2^20, 2^51; float 2^8, 2^32)."""
    hard64 = [np.ldexp(float.fromhex("0x1.6c6cbc45dc8dep+5"), j) for j in range(15)]
    hard64 += [2.0 ** 20, 2.0 ** 51, 1.5 * 2.0 ** 20]
    hard32 = [float.fromhex(h) for h in ("0x1.f9cbe2p+7", "0x1.f9cbe2p+8", "0x1.4665d2p+25",
                                         "0x1.2d97c8p+2", "0x1.9a48dep+15")]
    hard32 += [256.0, 2.0 ** 32, 2.0 ** 17, 1.5 * 2.0 ** 32]
    for dtype, hard in ((np.float64, hard64), (np.float32, hard32)):
        x = np.array(hard, dtype=dtype)
        x = np.concatenate([x, np.nextafter(x, 0), np.nextafter(x, np.inf),
                            np.nextafter(np.nextafter(x, 0), 0)])
        x = np.concatenate([x, -x])
        for name in ("sin", "cos", "tan"):
            got = run(name, x)
            err = ulp_errors(got, reference(name, x))
            bound = 1.0 if name != "tan" else ULP_BOUND["tan"][DTYPES.index(dtype)]
            worst = int(np.argmax(err))
            assert err[worst] <= bound, f"{name}({x[worst]!r}): {float(err[worst]):.3f} ulp"


@pytest.mark.usefixtures("machine")
def test_scalar_use_outside_loops() -> None:
    """The functions also work when not vectorised (the huge-argument helper's
    scalar path included)."""
    module = ir.Module()
    d = ir.DoubleType()
    for name in ("sin", "exp", "pow"):
        arity = 2 if name == "pow" else 1
        fn = ir.Function(module, ir.FunctionType(d, [d] * arity), f"scalar_{name}")
        builder = ir.IRBuilder(fn.append_basic_block())
        builder.ret(vecmath.emit(builder, name, *fn.args))
    cm = jit.compile_module(module)
    sin = cm.cfunc("scalar_sin", ctypes.c_double, ctypes.c_double)
    for x in (0.5, 1e5, 1e22, -3e300):
        assert sin(x) == pytest.approx(float(np.sin(LD(x))), rel=1e-15, abs=1e-300)
    exp = cm.cfunc("scalar_exp", ctypes.c_double, ctypes.c_double)
    assert abs(exp(1.0) - np.e) <= np.spacing(np.e)
    pow_ = cm.cfunc("scalar_pow", ctypes.c_double, ctypes.c_double, ctypes.c_double)
    assert abs(pow_(2.0, 0.5) - np.sqrt(2.0)) <= np.spacing(np.sqrt(2.0))


# ------------------------------------------------------------- vectorisation


# LLVM intrinsics (the vectoriser's own included: lane masks, vscale, masked loads) and
# the trig helper; LIBM below names the intrinsics that would be C library calls
ALLOWED_CALLS = re.compile(r"llvm\.|symgrad_vm_trig_huge_f(64|32)(_v\d+)?$")
LIBM = re.compile(r"@(llvm\.)?(exp|exp2|expm1|log|log2|log10|log1p|sin|cos|tan|tanh|"
                  r"pow|powi|atan|sinh|cosh)(f|\.f32|\.f64|\.v\d+f(32|64))?\(")


def computing_type(name: str, dtype: type) -> tuple[str, int]:
    """(IR element type, bits) the function computes in."""
    if dtype == np.float32 and name not in ("tan", "pow"):
        return "float", 32
    return "double", 64


def check_vectorised(name: str, dtype: type, t: target.Target) -> None:
    """The kernel of ``name`` runs at the target's vector width and calls nothing but
    intrinsics that are instructions on that target."""
    body = kernel_ir(name, dtype)
    elem, bits = computing_type(name, dtype)
    # a float loop computing in double runs as many lanes as a vector of doubles or of
    # floats holds (LLVM picks by cost): <4 x double> per <4 x float> on 128-bit vectors
    widths = {t.lanes(bits), t.lanes(8 * np.dtype(dtype).itemsize)}
    vectors = {t.loop_vector_type(elem, bits).replace(f"{t.lanes(bits)} x", f"{n} x")
               for n in widths}
    trig = name in ("sin", "cos", "tan")
    if trig and t.scalable_vectors:     # the huge-argument helper has fixed-width variants
        vectors = {f"<{n} x {elem}>" for n in widths}
    used = [v for v in vectors if v in body]
    assert used, f"none of {sorted(vectors)} in {name} kernel"
    assert not LIBM.search(body)
    for callee in re.findall(r"call [^@]*@([\w.]+)\(", body):
        assert ALLOWED_CALLS.match(callee), f"{name} kernel calls {callee}"
        if not t.fma:
            assert not callee.startswith("llvm.fma."), f"{name}: llvm.fma is a libm call on {t}"
        if not t.native_rounding:
            assert not re.match(r"llvm\.(floor|ceil|trunc|roundeven)\.", callee), \
                f"{name}: {callee} is a libm call on {t}"
    if trig:                                                       # the huge-argument
        helper = f"symgrad_vm_trig_huge_f{np.dtype(dtype).itemsize * 8}_v"   # helper is
        assert any(f"{helper}{n}(" in body for n in widths)                  # vectorised too


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", vecmath.FUNCTIONS)
def test_kernel_is_vectorised_at_the_targets_width(name: str, dtype: type,
                                                   machine: target.Target) -> None:
    check_vectorised(name, dtype, machine)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_kernels_for_other_machines(dtype: type, foreign_machine: target.Target) -> None:
    """Generated (not run) for machines this host cannot run."""
    for name in vecmath.FUNCTIONS:
        check_vectorised(name, dtype, foreign_machine)
    assert compiled().loaded is None


def test_object_code_references_no_external_symbol(machine: target.Target) -> None:
    """No libm, no libmvec: the object is self-contained on every target."""
    defined, undefined = jit.elf_symbols(compiled().object_code)
    assert undefined == []
    assert kernel_name("exp", np.float64) in defined
    assert "llvm.exp" not in compiled().asm and "call\texp" not in compiled().asm


def test_get_function_is_cached_and_typed() -> None:
    module = ir.Module()
    f1 = vecmath.get_function(module, "exp", ir.DoubleType())
    assert vecmath.get_function(module, "exp", ir.DoubleType()) is f1
    f2 = vecmath.get_function(module, "exp", ir.FloatType())
    assert f2 is not f1 and f1.linkage == "internal" and "alwaysinline" in f1.attributes
    with pytest.raises(KeyError):
        vecmath.get_function(module, "erf", ir.DoubleType())
    with pytest.raises(TypeError):
        vecmath.get_function(module, "exp", ir.IntType(64))


# ------------------------------------------------------------------- constants


def test_split_constants() -> None:
    import mpmath          # a dependency of sympy, so always installed
    with mpmath.workprec(1400):
        ln2, pio2, tpi = mpmath.log(2), mpmath.pi / 2, 2 / mpmath.pi

        def rel(total: object, exact: object) -> float:
            return float(abs(total - exact) / exact)

        hi64, hi32 = vecmath.core.LN2_HI["f64"], vecmath.core.LN2_HI["f32"]
        assert rel(mpmath.mpf(hi64) + vecmath.core.LN2_LO["f64"], ln2) < 2.0 ** -95
        assert rel(mpmath.mpf(hi32) + vecmath.core.LN2_LO["f32"], ln2) < 2.0 ** -38
        # k * LN2_HI must be exact for |k| < 2^11 (f64) / 2^9 (f32)
        assert (hi64 * 2.0 ** 42).is_integer() and (hi32 * 2.0 ** 15).is_integer()
        for fmt, pio2_bits, tpi_bits in (("f64", 160, 106), ("f32", 100, 48)):
            assert rel(sum(mpmath.mpf(c) for c in vecmath.core.PIO2[fmt]), pio2) < 2.0 ** -pio2_bits
            assert rel(sum(mpmath.mpf(c) for c in vecmath.core.TWO_OVER_PI[fmt]), tpi) < 2.0 ** -tpi_bits
            # k * PIO2[0] must cancel exactly by FMA: PIO2[0] in [1, 2)
            assert 1 <= vecmath.core.PIO2[fmt][0] < 2
        rows = vecmath.trig._two_over_pi_rows()
        for exponent in (-1, 0, 1, 100, 500, 971):
            exact = mpmath.fmod(mpmath.ldexp(tpi, exponent), 4)
            total = sum(mpmath.mpf(g) for g in rows[4 * (exponent + 1):4 * (exponent + 2)])
            assert abs(total - exact) < 2.0 ** -205


# ---------------------------------------------------------------- measurements


def measured_ulps() -> dict[str, tuple[float, float]]:
    """Max ulp error vs the longdouble reference per function and dtype."""
    result = {}
    for name in TRANSCENDENTAL:
        row = []
        for dtype in DTYPES:
            args = pow_sweep(dtype) if name == "pow" else (sweep(name, dtype),)
            row.append(float(ulp_errors(run(name, *args), reference(name, *args)).max()))
        result[name] = (row[0], row[1])
    return result


def throughput(n: int = 1 << 16, repeats: int = 200) -> dict[str, tuple[float, float]]:
    """G elements/s per function and dtype, in-cache arrays, best of ``repeats``."""
    result = {}
    rng = np.random.default_rng(0)
    for name in vecmath.FUNCTIONS:
        row = []
        for dtype in DTYPES:
            args = [rng.uniform(0.1, 5.0, n).astype(dtype) for _ in range(2 if name == "pow" else 1)]
            out = np.empty_like(args[0])
            ptr = ctypes.c_void_p
            fn = compiled().cfunc(kernel_name(name, dtype), None,
                                  *([ptr] * (len(args) + 1)), ctypes.c_int64)
            ptrs = [a.ctypes.data for a in args] + [out.ctypes.data]
            best = float("inf")
            for _ in range(repeats):
                t0 = time.perf_counter()
                fn(*ptrs, n)
                best = min(best, time.perf_counter() - t0)
            row.append(n / best / 1e9)
        result[name] = (row[0], row[1])
    return result


if __name__ == "__main__":
    t0 = time.perf_counter()
    compiled()
    print(f"compiled {2 * len(vecmath.FUNCTIONS)} kernels in {time.perf_counter() - t0:.2f} s")
    ulps = measured_ulps()
    print(f"{'function':10s} {'f64 ulp':>8s} {'f32 ulp':>8s} {'f64 G/s':>8s} {'f32 G/s':>8s}")
    for name, (g64, g32) in throughput().items():
        u64, u32 = ulps.get(name, (float("nan"), float("nan")))
        print(f"{name:10s} {u64:8.3f} {u32:8.3f} {g64:8.2f} {g32:8.2f}")
