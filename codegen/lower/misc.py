"""The remaining opaque primitives: argmax/argmin (first extremum, NaN wins as in numpy)
and cumsum (sequential in the array's dtype, like ``np.cumsum(x, dtype=x.dtype)``)."""
from __future__ import annotations

from symgrad.graph import dtypes
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
    if node.op in ("argmax", "argmin"):
        _arg_extremum(ctx, node)
    else:
        _cumsum(ctx, node)


def _along_axis(ctx: StepContext, node: Node):
    """What a scan along ``node``'s axis needs: (x, axis, x's view, the output storage,
    (dims before the axis, its length, dims after it))."""
    x = node.args[0]
    axis = node.attr("axis") % len(x.shape)
    shape = x.shape
    return (x, axis, ctx.plan.view(x), ctx.plan.storage[id(node)],
            (tuple(shape[:axis]), shape[axis], tuple(shape[axis + 1:])))


def _arg_extremum(ctx: StepContext, node: Node) -> None:
    b = ctx.b
    x, axis, vx, out, (pre, n, post) = _along_axis(ctx, node)
    nest = LoopNest(b, pre + post, "o")
    ind = list(nest.indices)
    at = lambda j: ind[:axis] + [j] + ind[axis:]
    first = T.load(b, ctx.elem(vx.buffer, strided_offset(b, vx.offset, vx.strides, at(T.I64(0)))), x.dtype)
    loop = Loop(b, 1, n, "j", [first, T.I64(0)])
    best, where = loop.carried
    v = T.load(b, ctx.elem(vx.buffer, strided_offset(b, vx.offset, vx.strides, at(loop.index))), x.dtype)
    op = ">" if node.op == "argmax" else "<"
    if x.dtype.is_floating_point:
        better = b.or_(b.fcmp_ordered(op, v, best), b.fcmp_unordered("uno", v, v))
        better = b.and_(better, b.fcmp_ordered("ord", best, best))
    elif x.dtype.name == "bool":
        better = b.icmp_unsigned(op, v, best)
    else:
        better = b.icmp_signed(op, v, best)
    best2, where2 = b.select(better, v, best), b.select(better, loop.index, where)
    _, idx = loop.close([best2, where2])
    cs = L.contiguous_strides(pre + post)
    T.store(b, idx, ctx.elem(out, strided_offset(b, 0, cs, ind)), dtypes.int64)
    nest.close()


def _cumsum(ctx: StepContext, node: Node) -> None:
    b = ctx.b
    x, axis, vx, out, (pre, n, post) = _along_axis(ctx, node)
    cs = L.contiguous_strides(x.shape)
    if n == 0:
        return
    outer = LoopNest(b, pre, "o")
    for j_lo, j_hi in ((0, 1), (1, n)):
        loop = Loop(b, j_lo, j_hi, "j")
        inner = LoopNest(b, post, "p")
        ind = list(outer.indices) + [loop.index] + list(inner.indices)
        v = T.load(b, ctx.elem(vx.buffer, strided_offset(b, vx.offset, vx.strides, ind)), x.dtype)
        off = strided_offset(b, 0, cs, ind)
        if j_lo == 1:
            prev = b.sub(off, T.I64(cs[axis]))
            v = combine(b, "sum", node.dtype, T.load(b, ctx.elem(out, prev), out.dtype), v)
        T.store(b, v, ctx.elem(out, off), out.dtype)
        inner.close()
        loop.close()
    outer.close()
