"""Counted loops in the rotated form LLVM's vectoriser expects.

:class:`Loop` emits ``for (i = start; i < stop; ++i)`` with loop-carried values::

    pre:   br (start < stop), body, exit
    body:  i = phi [start, pre], [i+1, latch]; carried = phi [...]
           ... (caller emits here) ...
    latch: br (i+1 < stop), body, exit
    exit:  results = phi [init, pre], [next, latch]

``hints`` tag the latch with ``llvm.loop.<name>`` values (``{"unroll.count": 1}``: a
short constant-trip loop stays a loop, so the vectoriser takes it rather than the loop
around it; :data:`BOOKKEEPING`: loops next to the real work, vectorised but neither
interleaved nor unrolled); ``interleave=k`` is ``llvm.loop.interleave.count`` k: the vectoriser
then runs k independent vector iterations side by side.  Loops whose body is one long
dependency chain (vector exp/log/tanh polynomials, divisions) are latency-bound
otherwise -- the out-of-order window holds barely more than one iteration of such a
body -- and LLVM's cost model, worried about register pressure, leaves them at 1.

>>> import llvmlite.ir as ir
>>> m = ir.Module(); f = ir.Function(m, ir.FunctionType(ir.IntType(64), []), "f")
>>> b = ir.IRBuilder(f.append_basic_block())
>>> loop = Loop(b, 0, 10, "i", [ir.IntType(64)(0)])
>>> total, = loop.close([b.add(loop.carried[0], loop.index)])
>>> _ = b.ret(total)
"""
from __future__ import annotations

from typing import Sequence

import llvmlite.ir as ir

from ..types import I64

__all__ = ["Loop", "LoopNest", "as_i64", "strided_offset", "loop_id", "BOOKKEEPING"]

# Hints of bookkeeping loops -- filling and merging accumulators, finishing reductions --
# which run over small buffers next to the real work: vectorised, but neither
# interleaved nor unrolled.  LLVM's own choice multiplied each into hundreds of
# instructions (an attention gradient's chunk merges were a sixth of its LLVM time).
BOOKKEEPING: dict[str, int | bool | None] = {"interleave.count": 1, "unroll.disable": None}


def as_i64(v: ir.Value | int) -> ir.Value:
    return I64(v) if isinstance(v, int) else v


class _LoopID(ir.values.MDValue):
    """A self-referential ``llvm.loop`` node (its first operand is itself), compared and
    hashed by identity: it is never shared through the module's metadata cache."""

    __hash__ = object.__hash__

    def __eq__(self, other: object) -> bool:
        return self is other

    def __ne__(self, other: object) -> bool:
        return self is not other


def loop_id(module: ir.Module, hints: dict[str, int | bool | None]) -> ir.values.MDValue:
    """``!N = !{!N, !{!"llvm.loop.<hint>", i32 v}, ...}`` for a loop's latch branch
    (a bool value is an ``i1``, as ``vectorize.predicate.enable`` takes; None: a hint
    without a value, as ``unroll.disable``)."""
    ops = [module.add_metadata([ir.MetaDataString(module, f"llvm.loop.{k}")] + (
               [] if v is None else [ir.IntType(1 if isinstance(v, bool) else 32)(v)]))
           for k, v in hints.items()]
    md = _LoopID(module, [], name=str(len(module.metadata)))
    md.operands = (md, *ops)
    return md


class Loop:
    """One counted loop; the builder is left inside the body until :meth:`close`."""

    def __init__(self, b: ir.IRBuilder, start: ir.Value | int, stop: ir.Value | int, name: str,
                 carried: Sequence[ir.Value] = (), interleave: int = 0,
                 hints: dict[str, int | bool | None] | None = None) -> None:
        self.b = b
        self.hints = dict(hints or {})
        if interleave > 1:
            self.hints["interleave.count"] = interleave
        self.start, self.stop = as_i64(start), as_i64(stop)
        self.init = list(carried)
        fn = b.function
        self.pre = b.block
        self.body = fn.append_basic_block(f"{name}.body")
        self.exit = fn.append_basic_block(f"{name}.exit")
        b.cbranch(b.icmp_signed("<", self.start, self.stop), self.body, self.exit)
        b.position_at_end(self.body)
        self.index = b.phi(I64, name=name)
        self.index.add_incoming(self.start, self.pre)
        self.carried = []
        for k, v in enumerate(self.init):
            phi = b.phi(v.type, name=f"{name}.acc{k}")
            phi.add_incoming(v, self.pre)
            self.carried.append(phi)

    def close(self, next_values: Sequence[ir.Value] = ()) -> list[ir.Value]:
        """End the body; return the carried values after the loop."""
        b = self.b
        latch = b.block
        nxt = b.add(self.index, I64(1), name=f"{self.index.name}.next", flags=["nuw", "nsw"])
        self.index.add_incoming(nxt, latch)
        for phi, v in zip(self.carried, next_values):
            phi.add_incoming(v, latch)
        br = b.cbranch(b.icmp_signed("<", nxt, self.stop), self.body, self.exit)
        if self.hints:
            br.set_metadata("llvm.loop", loop_id(b.module, self.hints))
        b.position_at_end(self.exit)
        out = []
        for init, v in zip(self.init, next_values):
            phi = b.phi(init.type)
            phi.add_incoming(init, self.pre)
            phi.add_incoming(v, latch)
            out.append(phi)
        return out


class LoopNest:
    """Nested counted loops over ``shape`` (outermost first); ``indices`` are the loop
    variables (constant 0 for size-1 dimensions)."""

    def __init__(self, b: ir.IRBuilder, shape: Sequence[int], name: str) -> None:
        self.loops: list[Loop] = []
        self.indices: list[ir.Value] = []
        for d, n in enumerate(shape):
            if n == 1:
                self.indices.append(I64(0))
                continue
            loop = Loop(b, 0, n, f"{name}{d}")
            self.loops.append(loop)
            self.indices.append(loop.index)

    def close(self) -> None:
        for loop in reversed(self.loops):
            loop.close()


def strided_offset(b: ir.IRBuilder, offset: int, strides: Sequence[int],
                   indices: Sequence[ir.Value]) -> ir.Value:
    """offset + sum(strides[d] * indices[d]) as an i64 value."""
    out: ir.Value = I64(offset)
    for s, i in zip(strides, indices):
        if s == 0 or (isinstance(i, ir.Constant) and i.constant == 0):
            continue
        out = b.add(out, i if s == 1 else b.mul(i, I64(s)))
    return out
