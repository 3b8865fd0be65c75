"""Dot-product GEMM tiles for ``C = A @ B`` when A's rows and B's columns are contiguous.

``x @ w.T`` -- PyTorch's ``linear`` with its ``(out, in)`` weight -- reads both operands
along the shared dimension K.  An ``MR x NR`` tile of C keeps ``MR * NR`` vector
accumulators: per step of one vector along K it loads ``MR`` vectors of A's rows and
``NR`` of B's columns and does ``MR * NR`` FMAs; at the end each accumulator is summed
across its lanes (a fixed tree) into one element of C.  The last step along K loads only
the lanes left (masked, the others read as 0), the last column panel has fewer columns,
and rows past the range read the last valid row again and are not stored, as in
:mod:`.gemm_kernel`, whose loop nest (row blocks, column panels, row tiles) runs these
kernels too.  Every element's sum has the same order whatever the row chunk, so a split
product equals the whole one.  Tiles are 4 x 4 (4 x 8 spills registers).
"""
from __future__ import annotations

import llvmlite.ir as ir

from symgrad.graph.dtypes import DType

from .. import target
from .. import types as T
from .loops import Loop
from .tiles import (clamped_rows, each_valid_row, intrinsic, kernel_attributes, multiply_add,
                    suffix, vload)

__all__ = ["Kernels", "tile", "MAX_K"]

MAX_K = 4096     # a tile's rows of A and columns of B (8 x K elements) stay in L1/L2


def tile(dtype: DType) -> tuple[int, int, int]:
    """(MR rows, NR columns, lanes per vector) of a tile for ``dtype``: 4 x 4 with 32
    vector registers, 2 x 4 with 16."""
    t = target.current()
    return (4 if t.vector_registers >= 32 else 2), 4, t.lanes(8 * dtype.itemsize)


class Kernels:
    """The kernels of one product, made on first use:
    ``void @"symgrad.gemm.dk...<cols>"(ptr A, ptr B, ptr C, i64 valid_rows)`` (the whole
    of K), named by everything their code depends on, so one function serves every
    product of the module with the same shapes and strides."""

    def __init__(self, module: ir.Module, dtype: DType, A, B, C) -> None:
        self.module, self.dtype = module, dtype
        self.A, self.B, self.C = A, B, C
        self.rows, self.panel, self.lanes = tile(dtype)
        self.fns: dict[int, ir.Function] = {}

    def blocks(self) -> list[tuple[int, int]]:
        return [(0, self.A.cols)]

    def for_columns(self, kc: int, cols: int, accumulate: bool) -> ir.Function:
        assert kc == self.A.cols and not accumulate
        fn = self.fns.get(cols)
        if fn is None:
            A, B, C = self.A, self.B, self.C
            name = f"symgrad.gemm.dk.{self.dtype.name}.a{A.rs}.k{A.cols}.b{B.cs}.c{C.rs}.dk{cols}"
            fn = self.fns[cols] = self.module.globals.get(name) or self._build(name, cols)
        return fn

    def _build(self, name: str, cols: int) -> ir.Function:
        A, B, C, mr, lanes, dt = self.A, self.B, self.C, self.rows, self.lanes, self.dtype
        ety = T.storage_type(dt)
        vty = ir.VectorType(ety, lanes)
        k = A.cols
        fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(), [T.PTR, T.PTR, T.PTR, T.I64]),
                         name)
        kernel_attributes(fn)
        for arg, nm in zip(fn.args, ("A", "B", "C", "rows")):
            arg.name = nm
        for arg in fn.args[:3]:
            arg.add_attribute("noalias")
        a_ptr, b_ptr, c_ptr, valid = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        rows = clamped_rows(b, valid, mr)
        a_rows = [b.gep(a_ptr, [b.mul(r, T.I64(A.rs))], source_etype=ety) for r in rows]
        b_cols = [b.gep(b_ptr, [T.I64(c * B.cs)], source_etype=ety) for c in range(cols)]
        fma = multiply_add(self.module, dt, lanes)
        zero = ir.Constant(vty, [0.0] * lanes)

        def step(koff: ir.Value, acc: list[ir.Value], masked: int) -> list[ir.Value]:
            av = [vload(b, b.gep(p, [koff], source_etype=ety), dt, lanes, masked) for p in a_rows]
            out = list(acc)
            for c in range(cols):
                bv = vload(b, b.gep(b_cols[c], [koff], source_etype=ety), dt, lanes, masked)
                for r in range(mr):
                    out[r * cols + c] = b.call(fma, [av[r], bv, acc[r * cols + c]])
            return out

        full, rest = divmod(k, lanes)
        acc = [zero] * (mr * cols)
        if full:
            loop = Loop(b, 0, full, "k", acc)
            acc = loop.close(step(b.mul(loop.index, T.I64(lanes)), loop.carried, 0))
        if rest:
            acc = step(T.I64(full * lanes), acc, rest)
        reduce = intrinsic(self.module, f"llvm.vector.reduce.fadd.{suffix(dt, lanes)}", ety, [ety, vty])

        def store_row(r: int) -> None:
            crow = b.gep(c_ptr, [b.mul(rows[r], T.I64(C.rs))], source_etype=ety)
            for c in range(cols):
                total = b.call(reduce, [ir.Constant(ety, -0.0), acc[r * cols + c]],
                               fastmath=("reassoc",))
                b.store(total, b.gep(crow, [T.I64(c)], source_etype=ety))

        each_valid_row(b, valid, mr, store_row)
        b.ret_void()
        return fn
