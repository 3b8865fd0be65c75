"""Vectorisable transcendental math emitted as LLVM IR.

This package owns symgrad's elementwise math library: exp, expm1, log, log1p, tanh,
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
Each family's module describes its algorithms: :mod:`.exp`, :mod:`.log`, :mod:`.trig`,
:mod:`.pow`; :mod:`.core` holds the formats, tables and the IR emitter they share.
Accuracy and throughput are measured by ``python tests/codegen/test_vecmath.py``
(figures in ``bench/README.md``).

Example::

    >>> import llvmlite.ir as ir
    >>> from codegen import vecmath
    >>> m = ir.Module()
    >>> kernel = vecmath.build_elementwise_kernel(m, "exp_kernel", "exp", ir.DoubleType())
    >>> "symgrad.vm.exp.f64" in m.globals
    True
"""
from __future__ import annotations

from typing import Callable

import llvmlite.ir as ir

from .core import _Emitter, _format_of, define_function
from .exp import _exp, _expm1, _log1pexp, _sigmoid, _softplus, _tanh
from .log import _log, _log1p
from .trig import _cos, _sin, _tan
from .pow import _pow

__all__ = [
    "UNARY", "BINARY", "FUNCTIONS", "get_function", "emit", "build_elementwise_kernel",
    "exp", "expm1", "log", "log1p", "tanh", "sigmoid", "softplus", "log1pexp", "sin", "cos",
    "tan", "pow", "sqrt", "abs", "floor", "ceil", "trunc", "rint",
]


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
    return define_function(module, name, _format_of(ty), _arity(name), _BODIES[name])


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
