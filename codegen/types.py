"""The one table mapping symgrad dtypes to LLVM types, and conversions between them.

* storage type: how an element lives in memory (``bool`` is one byte, ``i8``);
* value type: how it lives in a register (``bool`` is ``i1``);
* :func:`convert` casts a register value with numpy's ``astype`` semantics (on x86: a
  NaN or out-of-range float becomes the minimum integer) and never produces poison
  that could later reach an address computation.

>>> from symgrad.graph import dtypes
>>> str(storage_type(dtypes.bool_)), str(value_type(dtypes.bool_)), str(storage_type(dtypes.float32))
('i8', 'i1', 'float')
"""
from __future__ import annotations

import llvmlite.ir as ir

from symgrad.graph import dtypes
from symgrad.graph.dtypes import DType

__all__ = ["NATIVE", "is_native", "storage_type", "value_type", "convert", "load", "store",
           "constant", "I1", "I8", "I32", "I64", "PTR", "F32", "F64"]

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
F32, F64 = ir.FloatType(), ir.DoubleType()
PTR = ir.PointerType()

# dtype name -> (storage type, value type); the only place these facts are written down.
_TABLE: dict[str, tuple[ir.Type, ir.Type]] = {
    "float64": (F64, F64),
    "float32": (F32, F32),
    "int64": (I64, I64),
    "int32": (I32, I32),
    "bool": (I8, I1),
}
NATIVE: frozenset[str] = frozenset(_TABLE)
# dtypes generated code only moves (an output that is an input, u + 0 folded to u: a copy
# loop); never computed on (numpy computes them: is_native is False)
_MOVED: dict[str, ir.Type] = {"int16": ir.IntType(16), "int8": I8, "uint8": I8,
                              "float16": ir.HalfType()}


def is_native(dtype: DType) -> bool:
    """True if generated code handles ``dtype`` (others run through numpy rules)."""
    return dtype.name in _TABLE


def storage_type(dtype: DType) -> ir.Type:
    """The in-memory LLVM type of one element."""
    entry = _TABLE.get(dtype.name)
    return entry[0] if entry is not None else _MOVED[dtype.name]


def value_type(dtype: DType) -> ir.Type:
    """The in-register LLVM type of one element."""
    entry = _TABLE.get(dtype.name)
    return entry[1] if entry is not None else _MOVED[dtype.name]


def load(b: ir.IRBuilder, ptr: ir.Value, dtype: DType, name: str = "") -> ir.Value:
    """Load one element of ``dtype`` from ``ptr`` as a register value."""
    raw = b.load(ptr, typ=storage_type(dtype), name=name)
    if dtype.name == "bool":
        return b.icmp_unsigned("!=", raw, I8(0))
    return raw


def store(b: ir.IRBuilder, value: ir.Value, ptr: ir.Value, dtype: DType) -> None:
    """Store a register value of ``dtype`` to ``ptr``."""
    if dtype.name == "bool":
        value = b.zext(value, I8)
    b.store(value, ptr)


def constant(dtype: DType, value: float | int | bool) -> ir.Constant:
    """A register constant of ``dtype``."""
    ty = value_type(dtype)
    if dtype.is_floating_point:
        return ir.Constant(ty, float(value))
    return ir.Constant(ty, int(value))


def _fptosi(b: ir.IRBuilder, value: ir.Value, to: ir.IntType) -> ir.Value:
    """numpy's float -> int cast on x86: out of range or NaN gives the minimum integer.
    (``fptosi`` alone would be poison there; ``select`` discards it.)"""
    limit = ir.Constant(value.type, float(2 ** (to.width - 1)))
    in_range = b.and_(b.fcmp_ordered(">=", value, ir.Constant(value.type, -float(2 ** (to.width - 1)))),
                      b.fcmp_ordered("<", value, limit))
    return b.select(in_range, b.fptosi(value, to), ir.Constant(to, -(2 ** (to.width - 1))))


def convert(b: ir.IRBuilder, value: ir.Value, src: DType, dst: DType) -> ir.Value:
    """``value`` (a register value of ``src``) as a register value of ``dst``."""
    if src.name == dst.name:
        return value
    to = value_type(dst)
    if dst.name == "bool":
        if src.is_floating_point:
            return b.fcmp_unordered("!=", value, ir.Constant(value.type, 0.0))
        return b.icmp_unsigned("!=", value, ir.Constant(value.type, 0))
    if src.name == "bool":
        return b.uitofp(value, to) if dst.is_floating_point else b.zext(value, to)
    if src.is_floating_point and dst.is_floating_point:
        return b.fpext(value, to) if to == F64 else b.fptrunc(value, to)
    if src.is_floating_point:
        return _fptosi(b, value, to)
    if dst.is_floating_point:
        return b.sitofp(value, to)
    if to.width > value.type.width:
        return b.sext(value, to)
    return b.trunc(value, to)


def float_dtype_of(ty: ir.Type) -> DType:
    """The float dtype whose value type is ``ty``."""
    return dtypes.float64 if ty == F64 else dtypes.float32
