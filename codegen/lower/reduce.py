"""Reductions (sum, mean, amax, amin, prod) inside a fused loop: accumulators,
identities, combining and finalising.

Accuracy (a documented choice).  Inside the innermost loop a reduction whose output
does not move with that loop keeps a register accumulator with ``reassoc`` adds, so
LLVM vectorises it into several lane-parallel partial sums.  The innermost loop runs in
blocks of :data:`BLOCK_F64` elements; each block's partial sum is then added to the
output's accumulator in memory:

* float64 sum/mean: block sums are combined with Neumaier's compensated summation
  (a second ``comp`` buffer), so the error is that of one block (<= 16 sequential adds
  per lane + a tree of 8 lanes, ~20 ulp worst case) plus ~2 ulp -- independent of n,
  while numpy's pairwise sum grows with log2(n);
* float32 sum/mean: float32 partial sums over blocks of :data:`BLOCK_F32` elements
  (<= 16 adds per lane), block sums accumulated in float64 (a float64 scratch
  buffer), rounded once at the end;
* other reductions combine directly (max/min are exact; prod multiplies).

A reduction whose output moves with the innermost loop (e.g. ``x.sum(0)`` of a
C-contiguous matrix) accumulates each element into memory in loop order, vectorised
along the kept axis: sequential along the reduced axis, like numpy for that layout,
and in float64 for float32 data.
"""
from __future__ import annotations

import llvmlite.ir as ir

from symgrad.graph import dtypes
from symgrad.graph.dtypes import DType
from symgrad.graph.node import Node

from .. import types as T

__all__ = ["acc_dtype", "block_dtype", "identity", "combine", "neumaier", "BLOCK_F64", "BLOCK_OTHER",
           "REASSOC"]

BLOCK_F64 = 128        # elements per register block for compensated float64 sums
BLOCK_F32 = 256        # elements per register block of float32 partial sums
BLOCK_OTHER = 4096     # elements per block for max/min/prod/integer sums
REASSOC = ("reassoc",)


def acc_dtype(r: Node) -> DType:
    """The dtype a reduction accumulates in, in memory."""
    if r.op in ("sum", "mean") and r.dtype.name == "float32":
        return dtypes.float64
    return r.dtype


def block_dtype(r: Node) -> DType:
    """The dtype of a reduction's register accumulator inside one block: the data's own
    float type (a float64 add in a float32 loop would halve its vector width)."""
    if r.op in ("sum", "mean") and r.dtype.name == "float32":
        return dtypes.float32
    return acc_dtype(r)


def identity(r: Node) -> float | int | bool:
    op, dt = r.op, acc_dtype(r)
    if dt.name == "bool" and op in ("sum", "mean"):
        return False
    if op in ("sum", "mean"):
        return 0
    if op == "prod":
        return 1
    if dt.name == "bool":
        return op == "amin"
    if dt.is_floating_point:
        return float("-inf") if op == "amax" else float("inf")
    info = (-(2 ** 63), 2 ** 63 - 1) if dt.itemsize == 8 else (-(2 ** 31), 2 ** 31 - 1)
    return info[0] if op == "amax" else info[1]


def _intrinsic(b: ir.IRBuilder, name: str, x: ir.Value, y: ir.Value) -> ir.Value:
    suffix = "f64" if x.type == T.F64 else "f32"
    full = f"llvm.{name}.{suffix}"
    fn = b.module.globals.get(full) or ir.Function(b.module, ir.FunctionType(x.type, [x.type, x.type]), full)
    return b.call(fn, [x, y])


def combine(b: ir.IRBuilder, op: str, dt: DType, acc: ir.Value, x: ir.Value,
            reassoc: bool = False) -> ir.Value:
    """acc (op) x for reduction ``op`` in dtype ``dt``."""
    flags = REASSOC if reassoc else ()
    if dt.name == "bool":
        if op in ("amax", "sum"):
            return b.or_(acc, x)
        return b.and_(acc, x)
    if dt.is_floating_point:
        if op in ("sum", "mean"):
            return b.fadd(acc, x, flags=flags)
        if op == "prod":
            return b.fmul(acc, x, flags=flags)
        return _intrinsic(b, "maximum" if op == "amax" else "minimum", acc, _frozen(b, x))
    if op in ("sum", "mean"):
        return b.add(acc, x)
    if op == "prod":
        return b.mul(acc, x)
    pick = b.icmp_signed(">" if op == "amax" else "<", x, acc)
    return b.select(pick, x, acc)


def _frozen(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """``freeze x``: ``x`` itself (it is never poison), but opaque to LLVM's instcombine,
    which otherwise turns ``max(acc, select(m, -inf, x))`` (a masked_fill before a max:
    causal attention's softmax) into ``select(m, acc, max(acc, x))`` -- a conditional
    recurrence the loop vectoriser does not take (one element per FMA-latency chain,
    16x slower than the vectorised ``llvm.maximum`` reduction)."""
    instr = ir.instructions.Instruction(b.block, x.type, "freeze", [x])
    b._insert(instr)
    return instr


def neumaier(b: ir.IRBuilder, s: ir.Value, c: ir.Value, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(s + x, c + rounding error of that add): one step of Neumaier's summation.  An
    add that reaches inf or NaN has no rounding error to carry (its error term would be
    inf - inf = NaN and turn a sum of -inf into NaN): the compensation stays finite."""
    t = b.fadd(s, x)
    fabs = lambda v: _unary(b, "fabs", v)
    big_s = b.fcmp_ordered(">=", fabs(s), fabs(x))
    err = b.select(big_s, b.fadd(b.fsub(s, t), x), b.fadd(b.fsub(x, t), s))
    finite = b.fcmp_ordered("<", fabs(t), ir.Constant(t.type, float("inf")))
    return t, b.fadd(c, b.select(finite, err, ir.Constant(t.type, 0.0)))


def _unary(b: ir.IRBuilder, name: str, x: ir.Value) -> ir.Value:
    suffix = "f64" if x.type == T.F64 else "f32"
    full = f"llvm.{name}.{suffix}"
    fn = b.module.globals.get(full) or ir.Function(b.module, ir.FunctionType(x.type, [x.type]), full)
    return b.call(fn, [x])
