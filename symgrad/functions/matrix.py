"""Diagonals as PyTorch names them: ``diagonal`` (a view: writes through it reach its
base), ``diag`` (vector -> matrix with an offset, matrix -> vector), ``diag_embed`` and
``trace``, with PyTorch's checks, error texts and backward names.

A diagonal is read as a strided slice of the flattened matrix (permute the two dims
last, flatten them, take every ``m + 1``-th element from the first on the diagonal); a
diagonal is written (``diag_embed``, vector ``diag``) by the adjoint of that read, a
zero-filled ``pad_slice``. Their gradients are the same primitives the other way round,
so every order of derivative and the compiled code come with them.

>>> import symgrad as torch
>>> torch.diag(torch.tensor([1.0, 2.0]), 1)
tensor([[0., 1., 0.],
        [0., 0., 2.],
        [0., 0., 0.]])
"""
from __future__ import annotations

import numpy as np

from ..graph.shapes import wrap_dim
from ..ops import lax
from .common import Tensor, to_tensor
from .composite import named
from .reduction import sum as _sum
from .shape import make_view

__all__ = ["diagonal", "diag", "diag_embed", "trace"]


def _diag_len(n: int, m: int, offset: int) -> int:
    return max(0, min(n, m - offset) if offset >= 0 else min(n + offset, m))


def _dims(ndim: int, dim1: int, dim2: int) -> tuple[int, int]:
    d1, d2 = wrap_dim(dim1, ndim), wrap_dim(dim2, ndim)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return d1, d2


def _read_steps(shape: tuple, offset: int, d1: int, d2: int) -> list:
    """The layout primitives (name, attrs) that read the diagonal of ``shape``."""
    rest = [i for i in range(len(shape)) if i not in (d1, d2)]
    n, m = shape[d1], shape[d2]
    length = _diag_len(n, m, offset)
    lead = tuple(shape[i] for i in rest)
    start = (-offset * m if offset < 0 else offset) if length else 0
    stop = start + (length - 1) * (m + 1) + 1 if length else 0
    k = len(lead)
    return [("permute", {"perm": tuple(rest) + (d1, d2)}),
            ("reshape", {"shape": lead + (n * m,)}),
            ("slice", {"starts": (0,) * k + (start,), "stops": lead + (stop,),
                       "steps": (1,) * k + (m + 1,)})]


def _apply_steps(x, steps):
    for name, attrs in steps:
        x = lax.apply(name, x, **attrs)
    return x


def _strided_diagonal(a: np.ndarray, offset: int, d1: int, d2: int) -> np.ndarray:
    """The diagonal of ``a`` as a writeable numpy view (numpy's own is read-only)."""
    rest = [i for i in range(a.ndim) if i not in (d1, d2)]
    length = _diag_len(a.shape[d1], a.shape[d2], offset)
    first = [0] * a.ndim
    if length:
        first[d1], first[d2] = max(0, -offset), max(0, offset)
    start = a[tuple(slice(f, None) for f in first)] if length else a
    shape = tuple(a.shape[i] for i in rest) + (length,)
    strides = tuple(a.strides[i] for i in rest) + (a.strides[d1] + a.strides[d2],)
    return np.lib.stride_tricks.as_strided(start, shape, strides, writeable=True)


def diagonal(input: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """The diagonal ``offset`` (above the main one if positive) of the matrices spanned by
    ``dim1`` and ``dim2``, as a last dimension (``DiagonalBackward0``); a view of
    ``input``: writing into it writes ``input``."""
    x = to_tensor(input)
    d1, d2 = _dims(x.dim(), dim1, dim2)
    steps = _read_steps(tuple(x.shape), int(offset), d1, d2)
    out = named("DiagonalBackward0", lambda v: _apply_steps(v, steps), x)
    if x._data is not None and not x._data.flags.writeable:
        return out                      # (an expanded tensor: no view to write through)
    if out._data is not None:           # eager: numpy's strided view of x's storage
        out._data = _strided_diagonal(x._data, int(offset), d1, d2)
    # (traced: a view all the same, so a write through it reaches x -- see inplace.update)
    out = make_view(x, out, *steps[0])
    out._view_chain += tuple((name, tuple(sorted(attrs.items()))) for name, attrs in steps[1:])
    return out


def _embed(x, offset: int, d1: int, d2: int):
    """``x``'s last dimension written on diagonal ``offset`` of dims ``d1``, ``d2`` of a
    zero tensor (primitives only: a pad_slice of the flattened matrix)."""
    length = x.shape[-1]
    n = length + abs(offset)
    lead = tuple(x.shape[:-1])
    k = len(lead)
    start = -offset * n if offset < 0 else offset
    flat = lax.pad_slice(x, lead + (n * n,), (0,) * k + (start,),
                         lead + (start + (length - 1) * (n + 1) + 1 if length else 0,),
                         (1,) * k + (n + 1,))
    square = lax.reshape(flat, lead + (n, n))
    order = list(range(k))                 # where each output dim comes from
    for d, src in sorted(((d1, k), (d2, k + 1))):
        order.insert(d, src)
    return lax.permute(square, tuple(order))


def diag_embed(input: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """Matrices (in dims ``dim1``, ``dim2`` of the result) whose diagonal ``offset`` holds
    the last dimension of ``input``, zeros elsewhere (``DiagEmbedBackward0``)."""
    x = to_tensor(input)
    d1, d2 = _dims(x.dim() + 1, dim1, dim2)
    return named("DiagEmbedBackward0", lambda v: _embed(v, int(offset), d1, d2), x)


def diag(input: Tensor, diagonal: int = 0) -> Tensor:
    """A vector's square matrix with it on diagonal ``diagonal`` (``DiagEmbedBackward0``),
    or a copy of a matrix's diagonal ``diagonal`` (``DiagonalBackward0_copy``)."""
    x = to_tensor(input)
    if x.dim() not in (1, 2):
        raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {x.dim()}D")
    if x.dim() == 1:
        return named("DiagEmbedBackward0", lambda v: _embed(v, int(diagonal), 0, 1), x)
    steps = _read_steps(tuple(x.shape), int(diagonal), 0, 1)
    return named("DiagonalBackward0_copy", lambda v: _apply_steps(v, steps), x)


def trace(input: Tensor) -> Tensor:
    """The sum of a matrix's main diagonal (``TraceBackward0``); integers sum in int64."""
    x = to_tensor(input)
    if x.dim() != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {x.dim()}")
    if not x.dtype.is_floating_point:
        return _sum(diag(x))
    steps = _read_steps(tuple(x.shape), 0, 0, 1)
    return named("TraceBackward0", lambda v: lax.sum(_apply_steps(v, steps), (0,)), x)
