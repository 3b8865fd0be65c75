"""Strided views whose sizes, strides and offset are polynomials in the runtime extent.

Every node of a shape-generic kernel that is not a view gets a contiguous buffer; a
layout op (expand, permute, reshape, slice, select, flip, windows) is index arithmetic on its
argument's view (:func:`view_of`), as in :mod:`codegen.layout` but with
:class:`~codegen.dynamic.poly.Poly` numbers.  A reshape of a view that is not
contiguous (and does not only add or drop size-1 dims) has no view: its argument is
materialised first (:func:`needs_copy`).
"""
from __future__ import annotations

from dataclasses import dataclass

from symgrad.graph.node import Node

from ..classify import VIEW_OPS as _VIEW_FAMILY

from .poly import Poly, affine

__all__ = ["RView", "contiguous", "view_of", "broadcast_to", "VIEW_OPS", "needs_copy"]

VIEW_OPS = _VIEW_FAMILY - {"shear"}    # what view_of computes (shear: no runtime-extent view)
ONE = Poly.const(1)


@dataclass(frozen=True)
class RView:
    """Elements ``buffer[offset + sum(strides[d] * idx[d])]`` for idx in ``shape``."""

    buffer: int                    # id() of the node owning the storage
    shape: tuple[Poly, ...]
    strides: tuple[Poly, ...]
    offset: Poly

    @property
    def is_contiguous(self) -> bool:
        want = contiguous(self.buffer, self.shape).strides
        return self.offset == 0 and all(n == ONE or s == w for n, s, w in
                                        zip(self.shape, self.strides, want))


def contiguous(buffer: int, shape: tuple[Poly, ...]) -> RView:
    strides, acc = [], ONE
    for n in reversed(shape):
        strides.append(acc)
        acc = acc * n
    return RView(buffer, tuple(shape), tuple(reversed(strides)), Poly.const(0))


def broadcast_to(v: RView, shape: tuple[Poly, ...]) -> RView:
    """``v`` read at the indices of ``shape`` (numpy's right-aligned broadcasting)."""
    off = len(shape) - len(v.shape)
    strides = tuple(Poly.const(0) if v.shape[d] == ONE and shape[d + off] != ONE else s
                    for d, s in enumerate(v.strides))
    return RView(v.buffer, tuple(shape), (Poly.const(0),) * off + strides, v.offset)


def _squeeze_pairs(src, dst):
    s = [d for d, n in enumerate(src) if n != ONE]
    t = [d for d, n in enumerate(dst) if n != ONE]
    if [src[d] for d in s] != [dst[d] for d in t]:
        return None
    return list(zip(s, t))


def needs_copy(node: Node, arg_view: RView, shape: tuple[Poly, ...]) -> bool:
    """True if reshape ``node`` of ``arg_view`` to ``shape`` cannot be a view."""
    return not arg_view.is_contiguous and _squeeze_pairs(arg_view.shape, shape) is None


def view_of(node: Node, arg: RView, shape: tuple[Poly, ...], sym_attrs: dict) -> RView:
    """The view of layout node ``node`` (result dims ``shape``) over its argument's view."""
    op = node.op
    if op == "expand":
        return broadcast_to(arg, shape)
    if op == "permute":
        perm = node.attr("perm")
        return RView(arg.buffer, shape, tuple(arg.strides[p] for p in perm), arg.offset)
    if op == "reshape":
        if arg.is_contiguous:
            v = contiguous(arg.buffer, shape)
            return RView(arg.buffer, shape, v.strides, arg.offset)
        strides = [Poly.const(0)] * len(shape)
        for s, t in _squeeze_pairs(arg.shape, shape):
            strides[t] = arg.strides[s]
        return RView(arg.buffer, shape, tuple(strides), arg.offset)
    if op == "slice":
        starts = sym_attrs.get("starts")
        offset, strides = arg.offset, []
        for d, stride in enumerate(arg.strides):
            step = node.attr("steps")[d]
            if starts is not None:
                start = affine(*starts[d])
            else:      # static along this axis: Python's rule on the static extent
                start = Poly.const(slice(node.attr("starts")[d], node.attr("stops")[d],
                                         step).indices(arg.shape[d].value)[0])
            offset = offset + start * stride
            strides.append(stride * step)
        return RView(arg.buffer, shape, tuple(strides), offset)
    if op == "select":
        axis = node.attr("axis")
        if "index" in sym_attrs:
            index = affine(*sym_attrs["index"])
        else:
            i = node.attr("index")
            index = Poly.const(i + arg.shape[axis].value if i < 0 else i)
        return RView(arg.buffer, shape, arg.strides[:axis] + arg.strides[axis + 1:],
                     arg.offset + index * arg.strides[axis])
    if op == "flip":
        axes = {a % len(arg.shape) for a in node.attr("axes")} if arg.shape else set()
        offset, strides = arg.offset, list(arg.strides)
        for d in axes:
            offset = offset + (arg.shape[d] - 1) * arg.strides[d]
            strides[d] = -arg.strides[d]
        return RView(arg.buffer, shape, tuple(strides), offset)
    if op == "windows":          # kernel axes, then positions: x[.., s*p + d*i]
        r = len(node.attr("kernel"))
        lead, last = arg.strides[:len(arg.strides) - r], arg.strides[len(arg.strides) - r:]
        return RView(arg.buffer, shape,
                     lead + tuple(t * d for t, d in zip(last, node.attr("dilation")))
                     + tuple(t * s for t, s in zip(last, node.attr("stride"))), arg.offset)
    raise KeyError(op)
