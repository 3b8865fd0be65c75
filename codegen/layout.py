"""Layout ops as index arithmetic: affine index maps and strided views.

A loop nest over a shape has loop indices ``i0, i1, ...``.  Inside it, a node is read
at an *index map*: one :data:`Affine` expression of the loop indices per dimension of
the node.  Layout primitives (expand, permute, slice, select, flip, shear, windows, reshape that
only adds or removes size-1 dimensions) never move data: :func:`translate` rewrites the map
of their result into the map of their argument.  A materialised array is a
:class:`StridedView` (buffer, offset, strides in elements); the address of an element
is then affine in the loop indices (:func:`address`), which is what LLVM's loop
vectoriser needs.  General reshapes of strided views use numpy's no-copy rule
(:func:`reshape_view`) and fail (None) when a copy is unavoidable.

>>> m = identity(2)                       # loop over a 2-D shape
>>> v = StridedView("x", (3, 4), (4, 1), 0)
>>> address(v, m)                         # 4*i0 + i1
(0, ((0, 4), (1, 1)))
>>> address(v, translate_permute((1, 0), identity(2)))  # reading x.T
(0, ((0, 1), (1, 4)))
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Hashable, Sequence

__all__ = ["Affine", "IndexMap", "const", "var", "add", "scale", "identity", "StridedView",
           "contiguous_strides", "address", "broadcast_map", "translate", "reshape_view",
           "view_strides", "is_contiguous", "squeeze_pairs"]

# An affine expression c + sum(coef * i_dim): (c, ((dim, coef), ...)) sorted by dim.
Affine = tuple[int, tuple[tuple[int, int], ...]]
IndexMap = tuple[Affine, ...]


def const(c: int) -> Affine:
    return (int(c), ())


def var(dim: int, coef: int = 1, c: int = 0) -> Affine:
    return (int(c), ((dim, int(coef)),) if coef else ())


def add(a: Affine, b: Affine) -> Affine:
    terms = dict(a[1])
    for d, k in b[1]:
        terms[d] = terms.get(d, 0) + k
    return (a[0] + b[0], tuple(sorted((d, k) for d, k in terms.items() if k)))


def scale(a: Affine, k: int, c: int = 0) -> Affine:
    """k * a + c."""
    if k == 0:
        return const(c)
    return (a[0] * k + c, tuple((d, coef * k) for d, coef in a[1]))


def identity(rank: int) -> IndexMap:
    return tuple(var(d) for d in range(rank))


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(strides))


@dataclass(frozen=True)
class StridedView:
    """Elements ``buffer[offset + sum(strides[d] * idx[d])]`` for idx in ``shape``."""

    buffer: Hashable
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int

    @staticmethod
    def contiguous(buffer: Hashable, shape: Sequence[int]) -> "StridedView":
        return StridedView(buffer, tuple(shape), contiguous_strides(shape), 0)


def is_contiguous(v: StridedView) -> bool:
    """True if ``v`` is a C-contiguous block (size-1 dimensions may have any stride)."""
    want = contiguous_strides(v.shape)
    return all(n == 1 or s == w for n, s, w in zip(v.shape, v.strides, want))


def address(v: StridedView, m: IndexMap) -> Affine:
    """Element offset of ``v`` at index map ``m`` (affine in the loop indices)."""
    out = const(v.offset)
    for s, a in zip(v.strides, m):
        if s:
            out = add(out, scale(a, s))
    return out


def view_strides(v_shape: Sequence[int], addr: Affine) -> tuple[int, tuple[int, ...]]:
    """(offset, strides) of a view whose address at the identity map is ``addr``."""
    coefs = dict(addr[1])
    return addr[0], tuple(coefs.get(d, 0) for d in range(len(v_shape)))


def broadcast_map(arg_shape: Sequence[int], out_shape: Sequence[int], m: IndexMap) -> IndexMap:
    """Map of an argument broadcast (numpy rules, right-aligned) to ``out_shape``."""
    off = len(out_shape) - len(arg_shape)
    return tuple(const(0) if n == 1 and out_shape[d + off] != 1 else m[d + off]
                 for d, n in enumerate(arg_shape))


def translate_permute(perm: Sequence[int], m: IndexMap) -> IndexMap:
    out: list[Any] = [None] * len(perm)
    for j, p in enumerate(perm):
        out[p] = m[j]
    return tuple(out)


def squeeze_pairs(src: Sequence[int], dst: Sequence[int]) -> list[tuple[int, int]] | None:
    """For a reshape that only inserts/removes size-1 dims: pairs (src dim, dst dim) of the
    non-1 dimensions; None for a reshape that regroups elements."""
    s = [d for d, n in enumerate(src) if n != 1]
    t = [d for d, n in enumerate(dst) if n != 1]
    if [src[d] for d in s] != [dst[d] for d in t]:
        return None
    return list(zip(s, t))


def translate(op: str, attrs: dict, arg_shape: Sequence[int], out_shape: Sequence[int],
              m: IndexMap) -> IndexMap | None:
    """Index map of the argument of layout op ``op`` given the map ``m`` of its result;
    None if the op cannot be expressed as index arithmetic (general reshape)."""
    if op == "expand":
        return broadcast_map(arg_shape, out_shape, m)
    if op == "permute":
        return translate_permute(attrs["perm"], m)
    if op == "slice":
        out = []
        for d, n in enumerate(arg_shape):
            start, _, step = slice(attrs["starts"][d], attrs["stops"][d], attrs["steps"][d]).indices(n)
            out.append(scale(m[d], step, start))
        return tuple(out)
    if op == "select":
        axis, index = attrs["axis"], attrs["index"]
        index = index + arg_shape[axis] if index < 0 else index
        return m[:axis] + (const(index),) + m[axis:]
    if op == "flip":
        axes = {a % len(arg_shape) for a in attrs["axes"]} if arg_shape else set()
        return tuple(scale(a, -1, arg_shape[d] - 1) if d in axes else a for d, a in enumerate(m))
    if op == "shear":                       # sliding windows: one axis moves with another
        out = list(m)
        for axis, by, stride, coef, offset, _ in attrs["pairs"]:
            out[axis] = add(scale(m[axis], stride, offset), scale(m[by], coef))
        return tuple(out)
    if op == "windows":                     # kernel axes, then positions: x[.., s*p + d*i]
        r = len(attrs["kernel"])
        lead = len(arg_shape) - r
        return m[:lead] + tuple(add(scale(m[lead + r + a], s), scale(m[lead + a], d))
                                for a, (s, d) in enumerate(zip(attrs["stride"], attrs["dilation"])))
    if op == "reshape":
        pairs = squeeze_pairs(arg_shape, out_shape)
        if pairs is None:
            return None
        out = [const(0)] * len(arg_shape)
        for s, t in pairs:
            out[s] = m[t]
        return tuple(out)
    raise KeyError(op)


def reshape_view(v: StridedView, shape: Sequence[int]) -> StridedView | None:
    """``v`` reshaped to ``shape`` without copying (numpy's rule), or None."""
    shape = tuple(shape)
    if is_contiguous(v) or 0 in shape:      # (an empty view reads nothing: any strides)
        return StridedView(v.buffer, shape, contiguous_strides(shape), v.offset)
    old = [(n, s) for n, s in zip(v.shape, v.strides) if n != 1]
    new_strides = [0] * len(shape)
    new_dims = [d for d, n in enumerate(shape) if n != 1]
    i = j = 0
    while i < len(old) and j < len(new_dims):
        np_, op_ = shape[new_dims[j]], old[i][0]
        i1, j1 = i + 1, j + 1
        while np_ != op_:
            if np_ < op_:
                np_ *= shape[new_dims[j1]]
                j1 += 1
            else:
                op_ *= old[i1][0]
                i1 += 1
        for k in range(i, i1 - 1):       # old dims of the group must be contiguous
            if old[k][1] != old[k + 1][1] * old[k + 1][0]:
                return None
        stride = old[i1 - 1][1]
        for k in range(j1 - 1, j - 1, -1):
            new_strides[new_dims[k]] = stride
            stride *= shape[new_dims[k]]
        i, j = i1, j1
    return StridedView(v.buffer, shape, tuple(new_strides), v.offset)


def broadcast_shape_of(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...]:
    """numpy's broadcast of two shapes (assumed compatible)."""
    n = max(len(a), len(b))
    a = (1,) * (n - len(a)) + tuple(a)
    b = (1,) * (n - len(b)) + tuple(b)
    return tuple(x if y == 1 else y for x, y in zip(a, b))
