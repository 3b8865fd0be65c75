"""Indexing with runtime int64 indices: take, gather, gather_scatter, scatter_add,
index_put, and index_check (PyTorch's bounds check of such indices).

Safety first: every step validates *all* its indices before touching memory -- except
indices an argmax / argmin along an axis of the indexed length produced (max pooling's
gather and its gradient): those are in ``[0, n)`` by construction.  numpy semantics: an
index ``v`` in ``[-n, n)`` wraps (``v + n`` when negative); anything else
stops the kernel with status 1 and an error record ``(step, v, axis, n)`` from which the
caller raises PyTorch's ``IndexError: index v is out of bounds for dimension a with size
n`` -- never an out-of-bounds read or write.  Scatters accumulate in C order (``np.add.at``).
``index_check`` copies its indices, each checked in ``[0, n)`` (no wrapping) before it
is stored; the first bad one stops the kernel with status ``CHECK`` and the record
``(step, v, 0, 0)`` (:mod:`codegen.status`: the caller raises PyTorch's error).  A kernel
reading indices an ``index_check`` of its length produced skips its own check.
"""
from __future__ import annotations

import llvmlite.ir as ir

from symgrad.graph.node import Node

from .. import layout as L
from .. import status
from .. import types as T
from ..plan import Plan, Storage
from .context import StepContext
from .loops import LoopNest, strided_offset
from .reduce import combine

__all__ = ["storages", "emit", "FALLIBLE"]

FALLIBLE = True


def storages(plan: Plan, node: Node) -> list[Storage]:
    return [plan.view(a).buffer for a in node.args] + [plan.storage[id(node)]]


def _load(ctx: StepContext, view: L.StridedView, indices, dtype) -> ir.Value:
    off = strided_offset(ctx.b, view.offset, view.strides, indices)
    return T.load(ctx.b, ctx.elem(view.buffer, off), dtype)


def _index(ctx: StepContext, view: L.StridedView, indices, dtype) -> ir.Value:
    v = _load(ctx, view, indices, dtype)
    return ctx.b.sext(v, T.I64) if v.type.width < 64 else v


def _validate(ctx: StepContext, idx_node: Node, view: L.StridedView, size: int, axis: int,
              step_id: int) -> None:
    """Check every index of ``view`` against ``[-size, size)``; on failure fill the error
    record and return 1 from the step function."""
    b = ctx.b
    fn = b.function
    nest = LoopNest(b, view.shape, "chk")
    v = _index(ctx, view, nest.indices, idx_node.dtype)
    bad = b.or_(b.icmp_signed("<", v, T.I64(-size)), b.icmp_signed(">=", v, T.I64(size)))
    fail = fn.append_basic_block("index.error")
    ok = fn.append_basic_block("index.ok")
    b.cbranch(bad, fail, ok)
    b.position_at_end(fail)
    for slot, value in enumerate((T.I64(step_id), v, T.I64(axis), T.I64(size))):
        b.store(value, b.gep(ctx.err, [T.I64(slot)], source_etype=T.I64))
    b.ret(T.I32(1))
    b.position_at_end(ok)
    nest.close()


def _in_range(idx_node: Node, size: int) -> bool:
    """Whether every index ``idx_node`` holds is in ``[0, size)`` by construction:
    indices an ``index_check`` against ``size`` let through, or the position an argmax / argmin found along an axis of ``size`` > 0 elements (its kernel
    starts at position 0 and only ever moves to a position of its loop over that axis;
    an empty axis keeps the check)."""
    if idx_node.op == "index_check":
        return idx_node.attr("size") == size
    if idx_node.op not in ("argmax", "argmin") or size <= 0:
        return False
    x = idx_node.args[0]
    return len(x.shape) > 0 and x.shape[idx_node.attr("axis") % len(x.shape)] == size


def _checked(ctx: StepContext, idx_node: Node, view: L.StridedView, size: int, axis: int,
             step_id: int) -> bool:
    """Validate the indices (see :func:`_validate`) unless they are in range by
    construction; returns whether they may need wrapping (negative ones)."""
    if _in_range(idx_node, size):
        return False
    _validate(ctx, idx_node, view, size, axis, step_id)
    return True


def _wrap(b: ir.IRBuilder, v: ir.Value, size: int, wrap: bool = True) -> ir.Value:
    if not wrap:
        return v
    return b.select(b.icmp_signed("<", v, T.I64(0)), b.add(v, T.I64(size)), v)


def emit(ctx: StepContext, node: Node, step_id: int) -> None:
    {"take": _take, "gather": _gather, "gather_scatter": _gather_scatter,
     "scatter_add": _scatter_add, "index_put": _index_put,
     "index_check": _index_check}[node.op](ctx, node, step_id)


def _index_check(ctx: StepContext, node: Node, step_id: int) -> None:
    """Copy the indices, each checked in ``[0, size)`` before it is stored (one unsigned
    comparison: a negative index is a huge unsigned one)."""
    b = ctx.b
    (idx,) = node.args
    vi, out = ctx.plan.view(idx), ctx.plan.storage[id(node)]
    size = node.attr("size")
    nest = LoopNest(b, node.shape, "c")
    raw = _load(ctx, vi, nest.indices, idx.dtype)
    v = b.sext(raw, T.I64) if raw.type.width < 64 else raw
    fail = b.function.append_basic_block("check.error")
    ok = b.function.append_basic_block("check.ok")
    b.cbranch(b.icmp_unsigned(">=", v, T.I64(size)), fail, ok)
    b.position_at_end(fail)
    for slot, value in enumerate((T.I64(step_id), v, T.I64(0), T.I64(0))):
        b.store(value, b.gep(ctx.err, [T.I64(slot)], source_etype=T.I64))
    b.ret(T.I32(status.CHECK))
    b.position_at_end(ok)
    off = strided_offset(b, 0, L.contiguous_strides(node.shape), nest.indices)
    T.store(b, raw, ctx.elem(out, off), out.dtype)
    nest.close()


def _read_by_index(ctx: StepContext, node: Node, step_id: int):
    """The shared start of take / gather: operands, axis, views, the runtime bounds check
    of the indices, and the output storage."""
    x, idx = node.args
    axis = node.attr("axis") % len(x.shape)
    vx, vi = ctx.plan.view(x), ctx.plan.view(idx)
    n = x.shape[axis]
    # the dimension an error names: gather's axis; take is x[..., i] with one index
    # tensor (or a flat take), which PyTorch numbers among the index tensors: 0
    wrap = _checked(ctx, idx, vi, n, axis if node.op == "gather" else 0, step_id)
    return x, idx, axis, vx, vi, n, ctx.b, ctx.plan.storage[id(node)], wrap


def _take(ctx: StepContext, node: Node, step_id: int) -> None:
    x, idx, axis, vx, vi, n, b, out, _ = _read_by_index(ctx, node, step_id)
    nest = LoopNest(b, node.shape, "t")
    ind = nest.indices
    k = len(idx.shape)
    pos = _wrap(b, _index(ctx, vi, ind[axis:axis + k], idx.dtype), n)
    xi = list(ind[:axis]) + [pos] + list(ind[axis + k:])
    value = _load(ctx, vx, xi, x.dtype)
    off = strided_offset(b, 0, L.contiguous_strides(node.shape), ind)
    T.store(b, value, ctx.elem(out, off), out.dtype)
    nest.close()


def _gather(ctx: StepContext, node: Node, step_id: int) -> None:
    x, idx, axis, vx, vi, n, b, out, wrap = _read_by_index(ctx, node, step_id)
    strides = tuple(0 if x.shape[d] == 1 and d != axis else s for d, s in enumerate(vx.strides))
    vx = L.StridedView(vx.buffer, vx.shape, strides, vx.offset)
    nest = LoopNest(b, node.shape, "g")
    ind = list(nest.indices)
    pos = _wrap(b, _index(ctx, vi, ind, idx.dtype), n, wrap)
    value = _load(ctx, vx, ind[:axis] + [pos] + ind[axis + 1:], x.dtype)
    off = strided_offset(b, 0, L.contiguous_strides(node.shape), ind)
    T.store(b, value, ctx.elem(out, off), out.dtype)
    nest.close()


def _accumulate(ctx: StepContext, out: Storage, off: ir.Value, value: ir.Value) -> None:
    b = ctx.b
    ptr = ctx.elem(out, off)
    T.store(b, combine(b, "sum", out.dtype, T.load(b, ptr, out.dtype), value), ptr, out.dtype)


def _gather_scatter(ctx: StepContext, node: Node, step_id: int) -> None:
    g, idx = node.args
    axis = node.attr("axis") % len(node.shape)
    size = node.attr("size")
    vg, vi = ctx.plan.view(g), ctx.plan.view(idx)
    vg = L.StridedView(vg.buffer, idx.shape, _broadcast_strides(vg, idx.shape), vg.offset)
    wrap = _checked(ctx, idx, vi, size, axis, step_id)
    b, out = ctx.b, ctx.plan.storage[id(node)]
    ctx.memset0(out)
    nest = LoopNest(b, idx.shape, "s")
    ind = list(nest.indices)
    pos = _wrap(b, _index(ctx, vi, ind, idx.dtype), size, wrap)
    cs = L.contiguous_strides(node.shape)
    off = strided_offset(b, 0, cs, ind[:axis] + [pos] + ind[axis + 1:])
    _accumulate(ctx, out, off, _load(ctx, vg, ind, g.dtype))
    nest.close()


def _broadcast_strides(v: L.StridedView, shape) -> tuple[int, ...]:
    off = len(shape) - len(v.shape)
    return tuple(0 if d < off or v.shape[d - off] == 1 else v.strides[d - off]
                 for d in range(len(shape)))


def _scatter_add(ctx: StepContext, node: Node, step_id: int) -> None:
    g, idx = node.args
    axis, size = node.attr("axis"), node.attr("size")
    vg, vi = ctx.plan.view(g), ctx.plan.view(idx)
    _validate(ctx, idx, vi, size, axis, step_id)
    b, out = ctx.b, ctx.plan.storage[id(node)]
    ctx.memset0(out)
    k = len(idx.shape)
    nest = LoopNest(b, g.shape, "s")
    ind = list(nest.indices)
    pos = _wrap(b, _index(ctx, vi, ind[axis:axis + k], idx.dtype), size)
    cs = L.contiguous_strides(node.shape)
    off = strided_offset(b, 0, cs, ind[:axis] + [pos] + ind[axis + k:])
    _accumulate(ctx, out, off, _load(ctx, vg, ind, g.dtype))
    nest.close()


def _index_put(ctx: StepContext, node: Node, step_id: int) -> None:
    x, idx, v = node.args
    vx, vi, vv = (ctx.plan.view(a) for a in (x, idx, v))
    vv = L.StridedView(vv.buffer, idx.shape, _broadcast_strides(vv, idx.shape), vv.offset)
    n = x.shape[0]
    _validate(ctx, idx, vi, n, 0, step_id)
    b, out = ctx.b, ctx.plan.storage[id(node)]
    nest = LoopNest(b, x.shape, "c")
    T.store(b, _load(ctx, vx, nest.indices, x.dtype), ctx.elem(out, nest.indices[0]), out.dtype)
    nest.close()
    nest = LoopNest(b, idx.shape, "p")
    pos = _wrap(b, _index(ctx, vi, nest.indices, idx.dtype), n)
    value = T.convert(b, _load(ctx, vv, nest.indices, v.dtype), v.dtype, out.dtype)
    T.store(b, value, ctx.elem(out, pos), out.dtype)
    nest.close()
