"""Building blocks of the hand-written tile kernels (:mod:`.gemm_kernel`, :mod:`.gemm_dot`).

They build ``<lanes x float>`` values themselves instead of leaving vectorisation to
LLVM: intrinsic declarations, splats, loads and stores of part of a vector (a masked
load or store touches only its valid lanes), and the row edge of a tile (rows past the
valid ones read the last valid row again and are not stored), so a kernel never reads
or writes past an operand.
"""
from __future__ import annotations

import llvmlite.ir as ir

from symgrad.graph.dtypes import DType

from .. import target
from .. import types as T

__all__ = ["intrinsic", "suffix", "multiply_add", "vload", "vstore", "splat", "clamped_rows",
           "each_valid_row", "kernel_attributes", "KERNELS_OUT_OF_LINE"]

# A tile kernel is one function that every product of its shape calls (``noinline``):
# inlined at each call site (every row loop of a step, and every step of the module),
# LLVM optimised and compiled its long body again each time -- an MLP of 4 layers spent
# a fifth of its LLVM time on the copies.  A call per tile of MR x NV x K FMAs costs
# nothing measurable (see the measurements in the commit adding this).
KERNELS_OUT_OF_LINE = True


def kernel_attributes(fn: ir.Function) -> None:
    """The attributes of a tile kernel ``fn`` (internal, nounwind; ``noinline``: above)."""
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    if KERNELS_OUT_OF_LINE:
        fn.attributes.add("noinline")


def intrinsic(module: ir.Module, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
    """The declaration of LLVM intrinsic ``name``, added once."""
    return module.globals.get(name) or ir.Function(module, ir.FunctionType(ret, args), name)


def suffix(dtype: DType, lanes: int) -> str:
    """An intrinsic's type suffix, e.g. ``v8f64``."""
    return f"v{lanes}f{8 * dtype.itemsize}"


def multiply_add(module: ir.Module, dtype: DType, lanes: int) -> ir.Function:
    """``a * b + c`` on vectors: one FMA instruction where the target has them
    (``llvm.fma``), else a multiply and an add (``llvm.fmuladd``; ``llvm.fma`` would be a
    libm call per lane)."""
    vty = ir.VectorType(T.storage_type(dtype), lanes)
    op = "fma" if target.current().fma else "fmuladd"
    return intrinsic(module, f"llvm.{op}.{suffix(dtype, lanes)}", vty, [vty] * 3)


def _mask(lanes: int, valid: int) -> ir.Constant:
    return ir.Constant(ir.VectorType(T.I1, lanes), [1] * valid + [0] * (lanes - valid))


def vload(b: ir.IRBuilder, ptr: ir.Value, dtype: DType, lanes: int, masked: int = 0) -> ir.Value:
    """A vector of ``lanes`` elements at ``ptr``; with ``masked`` only that many lanes are
    read (the others are 0): nothing past them is touched."""
    vty = ir.VectorType(T.storage_type(dtype), lanes)
    align = dtype.itemsize
    if masked:
        fn = intrinsic(b.module, f"llvm.masked.load.{suffix(dtype, lanes)}.p0", vty,
                       [T.PTR, T.I32, ir.VectorType(T.I1, lanes), vty])
        return b.call(fn, [ptr, T.I32(align), _mask(lanes, masked), ir.Constant(vty, [0.0] * lanes)])
    return b.load(ptr, typ=vty, align=align)


def vstore(b: ir.IRBuilder, value: ir.Value, ptr: ir.Value, dtype: DType, lanes: int,
           masked: int = 0) -> None:
    """Store a vector; with ``masked`` only its first that many lanes."""
    align = dtype.itemsize
    if masked:
        vty = ir.VectorType(T.storage_type(dtype), lanes)
        fn = intrinsic(b.module, f"llvm.masked.store.{suffix(dtype, lanes)}.p0", ir.VoidType(),
                       [vty, T.PTR, T.I32, ir.VectorType(T.I1, lanes)])
        b.call(fn, [value, ptr, T.I32(align), _mask(lanes, masked)])
    else:
        b.store(value, ptr, align=align)


def splat(b: ir.IRBuilder, scalar: ir.Value, lanes: int) -> ir.Value:
    """A vector of ``lanes`` copies of ``scalar``."""
    vty = ir.VectorType(scalar.type, lanes)
    one = b.insert_element(ir.Constant(vty, None), scalar, T.I32(0))
    return b.shuffle_vector(one, ir.Constant(vty, None),
                            ir.Constant(ir.VectorType(T.I32, lanes), [0] * lanes))


def clamped_rows(b: ir.IRBuilder, valid: ir.Value, rows: int) -> list[ir.Value]:
    """Row ``r`` of a tile of ``rows``, or the last valid one (``valid - 1``) past it."""
    top = b.sub(valid, T.I64(1))
    return [T.I64(0)] + [b.select(b.icmp_signed("<", T.I64(r), valid), T.I64(r), top)
                         for r in range(1, rows)]


def each_valid_row(b: ir.IRBuilder, valid: ir.Value, rows: int, emit) -> None:
    """``emit(r)`` for every row of the tile, guarded by ``r < valid`` (row 0 always is)."""
    for r in range(rows):
        if r == 0:
            emit(r)
        else:
            with b.if_then(b.icmp_signed("<", T.I64(r), valid)):
                emit(r)
