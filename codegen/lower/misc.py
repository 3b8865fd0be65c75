"""The remaining opaque primitives: argmax/argmin (first extremum, NaN wins as in numpy)
and cumsum (sequential, float32 accumulated in double as PyTorch's CPU scan)."""
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
    """A running sum from +0 (PyTorch's CPU scan: -0 never shows) along the axis, kept
    in double for float32 (PyTorch's at::acc_type) and rounded as stored."""
    b = ctx.b
    x, axis, vx, out, (pre, n, post) = _along_axis(ctx, node)
    cs = L.contiguous_strides(x.shape)
    if n == 0:
        return
    acc = dtypes.float64 if node.dtype.name == "float32" else node.dtype
    outer = LoopNest(b, pre + post, "o")
    lead, trail = list(outer.indices[:len(pre)]), list(outer.indices[len(pre):])
    loop = Loop(b, 0, n, "j", carried=[T.constant(acc, 0)])
    ind = lead + [loop.index] + trail
    v = T.load(b, ctx.elem(vx.buffer, strided_offset(b, vx.offset, vx.strides, ind)), x.dtype)
    total = combine(b, "sum", acc, loop.carried[0], T.convert(b, v, x.dtype, acc))
    T.store(b, T.convert(b, total, acc, node.dtype), ctx.elem(out, strided_offset(b, 0, cs, ind)),
            out.dtype)
    loop.close([total])
    outer.close()
