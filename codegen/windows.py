"""pad_slice and cat without materialising: loop segmentation.

Reading ``pad_slice(x)`` at index ``j`` gives ``x[j - start]`` inside the window and 0
outside; reading ``cat(x0, x1, ...)`` gives the input whose range holds ``j``.  Inside a
loop the index along such an axis is ``c + a * i_k`` for one loop variable ``i_k``
(``a = +-1``), so each condition holds on an interval of ``i_k``.  The loop over ``i_k``
is split at the interval ends (*cuts*) into segments in which every condition is
constant: the body is emitted once per segment with the conditions folded away, and
the big middle segment vectorises like any elementwise loop.  No copy, no zero fill,
no masked loads.  Rosenbrock's gradient ``pad(h, [0:n-1]) + pad(g, [1:n])`` becomes
three loops over ``[0,1)``, ``[1,n-1)``, ``[n-1,n)``.

Windows that cannot be segmented (a non-unit slice step, an index that is not a single
loop variable with coefficient +-1, too many segments) are materialised instead.

>>> from codegen import layout as L
>>> ranges = [(0, 3), (3, 5)]                   # cat of sizes 3 and 2 along the axis
>>> cuts_for(ranges, L.var(0, 1), 5)            # read at i0 in a loop of extent 5
[(0, 3)]
"""
from __future__ import annotations

from typing import Sequence

from symgrad.graph.node import Node

from . import layout as L

__all__ = ["window_ranges", "cuts_for", "window_cuts", "MAX_SEGMENTS", "inside",
           "translated_arg_maps"]

MAX_SEGMENTS = 16


def window_ranges(node: Node) -> list[tuple[int, list[tuple[int, int]]]] | None:
    """For each windowed dim: (dim, [(lo, hi) per argument]) -- pad_slice has one
    argument; None if the window has a step other than 1."""
    if node.op == "pad_slice":
        out = []
        for d, n in enumerate(node.shape):
            start, stop, step = slice(node.attr("starts")[d], node.attr("stops")[d],
                                      node.attr("steps")[d]).indices(n)
            if step != 1:
                return None
            if (start, stop) != (0, n):
                out.append((d, [(start, max(start, stop))]))
        return out
    axis = node.attr("axis") % len(node.shape)
    ranges, lo = [], 0
    for a in node.args:
        ranges.append((lo, lo + a.shape[axis]))
        lo += a.shape[axis]
    return [(axis, ranges)]


def cuts_for(ranges: Sequence[tuple[int, int]], a: L.Affine, extents) -> list[tuple[int, int]] | None:
    """Cuts (loop dim, position) making ``lo <= a < hi`` constant for every range; None
    if ``a`` is not constant and not ``c +- i_k``."""
    const, terms = a
    if not terms:
        return []
    if len(terms) != 1 or terms[0][1] not in (1, -1):
        return None
    k, coef = terms[0]
    n = extents if isinstance(extents, int) else extents[k]
    cuts = set()
    for lo, hi in ranges:
        for bound in (lo, hi):
            pos = bound - const if coef == 1 else const - bound + 1
            if 0 < pos < n:
                cuts.add(pos)
    return [(k, p) for p in sorted(cuts)]


def window_cuts(node: Node, m: L.IndexMap, extents) -> list[tuple[int, int]] | None:
    """All cuts needed to read window ``node`` at map ``m``; None if impossible."""
    spec = window_ranges(node)
    if spec is None:
        return None
    out: list[tuple[int, int]] = []
    for d, ranges in spec:
        c = cuts_for(ranges, m[d], extents)
        if c is None:
            return None
        out.extend(c)
    return out


def inside(a: L.Affine, lo: int, hi: int, at: dict[int, int]) -> bool:
    """Whether ``lo <= a < hi`` with loop variables at the sample point ``at``."""
    v = a[0] + sum(coef * at[k] for k, coef in a[1])
    return lo <= v < hi


def translated_arg_maps(node: Node, m: L.IndexMap) -> list[L.IndexMap]:
    """The index map of each argument when it supplies the value (shifted windows)."""
    if node.op == "pad_slice":
        starts = []
        for d, n in enumerate(node.shape):
            start, _, _ = slice(node.attr("starts")[d], node.attr("stops")[d],
                                node.attr("steps")[d]).indices(n)
            starts.append(start)
        return [tuple(L.add(a, L.const(-s)) for a, s in zip(m, starts))]
    axis = node.attr("axis") % len(node.shape)
    out, lo = [], 0
    for arg in node.args:
        out.append(m[:axis] + (L.add(m[axis], L.const(-lo)),) + m[axis + 1:])
        lo += arg.shape[axis]
    return out
