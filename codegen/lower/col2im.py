"""col2im (the window sum, :mod:`symgrad.ops.layout`): every window element added where
the windows read it, ``out[.., s*p + d*i, ..] += g[.., i, .., p, ..]``.

The output is zero-filled, then one loop nest runs over the operand in its own order --
leading dims, kernel elements, window positions -- and adds each element at its place:
with unit stride the innermost loop walks a row of the operand and a row of the output
side by side (vectorised); the output plane of one leading index stays in cache while
every kernel element adds its shifted copy.  Every index is in range by construction
(the shape rule checks that the last window of the last kernel element fits)."""
from __future__ import annotations

from symgrad.graph.node import Node

from .. import layout as L
from .. import types as T
from ..plan import Plan, Storage
from .context import StepContext
from .loops import Loop, LoopNest, strided_offset
from .reduce import combine

__all__ = ["storages", "emit"]


def storages(plan: Plan, node: Node) -> list[Storage]:
    return [plan.view(node.args[0]).buffer, plan.storage[id(node)]]


def emit(ctx: StepContext, node: Node, step_id: int) -> None:
    g = node.args[0]
    size, stride, dilation = node.attr("size"), node.attr("stride"), node.attr("dilation")
    r, b = len(size), ctx.b
    vg, out = ctx.plan.view(g), ctx.plan.storage[id(node)]
    ctx.memset0(out)
    if 0 in g.shape:
        return
    lead = len(g.shape) - 2 * r
    nest = LoopNest(b, g.shape[:-1], "w")
    row = Loop(b, 0, g.shape[-1], "q", hints={"unroll.count": 1})    # vectorised along rows,
    ind = list(nest.indices) + [row.index]            # not across them with gathers

    at = [b.add(b.mul(ind[lead + r + a], T.I64(s)), b.mul(ind[lead + a], T.I64(d)))
          for a, (s, d) in enumerate(zip(stride, dilation))]
    value = T.load(b, ctx.elem(vg.buffer, strided_offset(b, vg.offset, vg.strides, ind)), g.dtype)
    ptr = ctx.elem(out, strided_offset(b, 0, L.contiguous_strides(node.shape), ind[:lead] + at))
    T.store(b, combine(b, "sum", out.dtype, T.load(b, ptr, out.dtype), value), ptr, out.dtype)
    row.close()
    nest.close()
