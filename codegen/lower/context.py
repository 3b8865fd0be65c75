"""What every step lowering shares: the builder inside the step's function, one pointer
per Storage (function parameters marked ``noalias``), constant globals, memset."""
from __future__ import annotations

import llvmlite.ir as ir
import numpy as np

from symgrad.config import settings

from .. import types as T
from ..plan import Plan, Storage

__all__ = ["StepContext", "ConstPool"]


class ConstPool:
    """Module-level constant arrays, one global per constant Storage."""

    def __init__(self, module: ir.Module) -> None:
        self.module = module
        self.globals: dict[int, ir.GlobalVariable] = {}

    def get(self, st: Storage) -> ir.GlobalVariable:
        g = self.globals.get(id(st))
        if g is None:
            value = np.ascontiguousarray(st.value, dtype=st.dtype.np)
            ety = T.storage_type(st.dtype)
            flat = value.reshape(-1)
            if st.dtype.name == "bool":
                items = [int(v) for v in flat]
            elif st.dtype.is_floating_point:
                items = [float(v) for v in flat]
            else:
                items = [int(v) for v in flat]
            aty = ir.ArrayType(ety, max(len(items), 1))
            g = ir.GlobalVariable(self.module, aty, f"{st.name}.data")
            g.initializer = ir.Constant(aty, items or [0])
            g.global_constant = True
            g.linkage = "internal"
            g.align = 64
            self.globals[id(st)] = g
        return g


class StepContext:
    """Builder, pointers and helpers for lowering one step."""

    def __init__(self, b: ir.IRBuilder, ptrs: dict[int, ir.Value], plan: Plan,
                 consts: ConstPool, err: ir.Value | None = None) -> None:
        self.b = b
        self.ptrs = ptrs
        self.plan = plan
        self.consts = consts
        self.err = err            # i64[4] error record (indexing steps)

    def ptr(self, st: Storage) -> ir.Value:
        if st.kind == "const":
            return self.consts.get(st)
        return self.ptrs[id(st)]

    def elem(self, st: Storage, index: ir.Value, name: str = "") -> ir.Value:
        """Pointer to element ``index`` of ``st`` (bounds-checked in sanitized mode)."""
        if settings.sanitize:
            index = sanitized_index(self.b, st, index)
        return self.b.gep(self.ptr(st), [index], inbounds=True, source_etype=T.storage_type(st.dtype),
                          name=name)

    def _intrinsic(self, name: str, *arg_types: ir.Type) -> ir.Function:
        """The declaration of LLVM intrinsic ``name`` (void result), added once."""
        m = self.b.module
        return m.globals.get(name) or ir.Function(m, ir.FunctionType(ir.VoidType(), arg_types),
                                                  name)

    def memset0(self, st: Storage) -> None:
        if st.nbytes == 0:
            return
        fn = self._intrinsic("llvm.memset.p0.i64", T.PTR, T.I8, T.I64, T.I1)
        self.b.call(fn, [self.ptr(st), T.I8(0), T.I64(st.nbytes), T.I1(0)])

    def memcpy(self, dst: Storage, src: Storage) -> None:
        if dst.nbytes == 0:
            return
        fn = self._intrinsic("llvm.memcpy.p0.p0.i64", T.PTR, T.PTR, T.I64, T.I1)
        self.b.call(fn, [self.ptr(dst), self.ptr(src), T.I64(dst.nbytes), T.I1(0)])


SANITIZE_FAULT = "sanitize_fault"      # "<module>.sanitize_fault": i64, 0 or 1 + storage slot


def sanitize_fault_global(module: ir.Module) -> ir.GlobalVariable:
    """The module's fault word (read and cleared by the executable after each call)."""
    name = f"{module.name}.{SANITIZE_FAULT}"
    g = module.globals.get(name)
    if g is None:
        g = ir.GlobalVariable(module, T.I64, name)
        g.initializer = T.I64(0)
    return g


def in_range(b: ir.IRBuilder, st: Storage, index: ir.Value) -> ir.Value:
    """Whether element ``index`` (i64) of ``st`` lies in it (an alias: ``shift + index``)."""
    size = max(int(st.size), 1)
    shift = st.shift if st.base is not None else 0
    return b.icmp_unsigned("<", b.add(index, T.I64(shift)) if shift else index, T.I64(size))


def sanitized_index(b: ir.IRBuilder, st: Storage, index: ir.Value) -> ir.Value:
    """``index`` if it lies in ``[0, st.size)`` -- for an alias (a buffer seen from
    element ``shift``, see :meth:`codegen.plan.Plan.shifted`), if ``shift + index`` does:
    an alias may be read before its first element --; else 0, and the module's fault
    word records the access (sanitized mode: the call then raises instead of touching
    memory out of range)."""
    index = index if index.type == T.I64 else b.sext(index, T.I64)
    shift = st.shift if st.base is not None else 0
    ok = in_range(b, st, index)
    fault = sanitize_fault_global(b.module)
    old = b.load(fault)
    b.store(b.select(ok, old, T.I64(1)), fault)
    return b.select(ok, index, T.I64(-shift))        # else the buffer's first element

