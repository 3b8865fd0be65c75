"""Finding elements as PyTorch names it: ``nonzero`` / ``argwhere``, ``unique`` /
``unique_consecutive``, ``count_nonzero``, ``bincount``, ``searchsorted`` / ``bucketize``,
``tril_indices`` / ``triu_indices`` -- PyTorch's results, dtypes and errors.

``nonzero``, ``argwhere`` and ``unique`` have a size that depends on the input's values:
they need a concrete input (inside ``symgrad.compile`` a traced one breaks the graph:
the call runs uncompiled; under the gradient transforms it raises a TypeError); their results are indices or values without a gradient.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..dispatch import bind
from ..graph import dtypes
from ..graph.primitives import PRIMITIVES as P
from ..ops import lax
from ..tracing import value_sized
from .common import Tensor, dims_arg, to_tensor, wrap_dim

if TYPE_CHECKING:
    from ..types import DTypeLike

__all__ = ["nonzero", "argwhere", "unique", "unique_consecutive", "count_nonzero",
           "searchsorted", "bucketize", "tril_indices", "triu_indices", "bincount"]


def _concrete(x: Tensor, name: str) -> np.ndarray:
    if x._data is None:
        value_sized(name)
        raise TypeError(f"{name}'s result size depends on the input's values: inside "
                        f"symgrad.compile its input must be concrete (not computed from traced "
                        f"tensors)")
    return x._data


def _ints(a) -> Tensor:
    return Tensor._from_array(np.ascontiguousarray(a, dtype=np.int64), dtypes.int64)


def nonzero(input: Tensor, *, as_tuple: bool = False) -> Tensor | tuple[Tensor, ...]:
    """The indices of the nonzero elements, one row each (``as_tuple``: one 1-D tensor per
    dim); a 0-d input counts as 1-d for ``as_tuple``."""
    x = to_tensor(input)
    a = _concrete(x, "nonzero")
    if as_tuple:
        return tuple(_ints(i) for i in np.nonzero(np.atleast_1d(a)))
    if a.ndim == 0:                  # (one empty row for a nonzero 0-d input, none for 0)
        return _ints(np.zeros((int(bool(a)), 0)))
    return _ints(np.argwhere(a))


def argwhere(input: Tensor) -> Tensor:
    """``nonzero(input)``."""
    return nonzero(input)


def _unique_rows(a, dim):
    moved = np.moveaxis(a, dim, 0)
    flat = moved.reshape(moved.shape[0], -1)
    values, inverse, counts = np.unique(flat, axis=0, return_inverse=True, return_counts=True)
    return np.moveaxis(values.reshape((-1,) + moved.shape[1:]), 0, dim), inverse, counts


def unique(input: Tensor, sorted: bool = True, return_inverse: bool = False,
           return_counts: bool = False, dim: int | None = None
           ) -> Tensor | tuple[Tensor, ...]:
    """The distinct values (ascending; NaN elements each kept, as PyTorch), or the
    distinct slices along ``dim``; with ``return_inverse`` where each element went, with
    ``return_counts`` how often each value occurs."""
    x = to_tensor(input)
    a = _concrete(x, "unique")
    if dim is None:
        values, inverse, counts = np.unique(a.reshape(-1), return_inverse=True,
                                            return_counts=True, equal_nan=False)
        inverse = inverse.reshape(a.shape)
    else:
        values, inverse, counts = _unique_rows(a, wrap_dim(dim, max(a.ndim, 1)))
        inverse = inverse.reshape(-1)
    out = [Tensor._from_array(np.ascontiguousarray(values), x.dtype)]
    if return_inverse:
        out.append(_ints(inverse))
    if return_counts:
        out.append(_ints(counts))
    return out[0] if len(out) == 1 else tuple(out)


def unique_consecutive(input: Tensor, return_inverse: bool = False,
                       return_counts: bool = False, dim: int | None = None
                       ) -> Tensor | tuple[Tensor, ...]:
    """The input with runs of equal consecutive values (slices along ``dim``) collapsed."""
    x = to_tensor(input)
    a = _concrete(x, "unique_consecutive")
    axis = 0 if dim is None else wrap_dim(dim, max(a.ndim, 1))
    moved = np.moveaxis(a.reshape(-1) if dim is None else a, axis, 0)
    flat = moved.reshape(moved.shape[0], -1)
    starts = np.ones(flat.shape[0], bool)
    starts[1:] = (flat[1:] != flat[:-1]).any(axis=1)
    values = np.moveaxis(moved[starts], 0, axis)
    out = [Tensor._from_array(np.ascontiguousarray(values), x.dtype)]
    if return_inverse:
        inverse = np.cumsum(starts) - 1
        out.append(_ints(inverse.reshape(a.shape) if dim is None else inverse))
    if return_counts:
        out.append(_ints(np.diff(np.append(np.flatnonzero(starts), flat.shape[0]))))
    return out[0] if len(out) == 1 else tuple(out)


def count_nonzero(input: Tensor, dim: int | Sequence[int] | None = None) -> Tensor:
    """The number of nonzero elements (along ``dim``), int64."""
    x = to_tensor(input)
    nz = x if x.dtype is dtypes.bool_ else bind(P["ne"], x, 0)
    return lax.sum(lax.cast(nz, dtypes.int64), dims_arg(dim, x.dim()))


def searchsorted(sorted_sequence: Tensor, input: Tensor | float, *, out_int32: bool = False,
                 right: bool = False, side: str | None = None,
                 sorter: Tensor | None = None) -> Tensor:
    """Where each value of ``input`` would be inserted into (the matching row of)
    ``sorted_sequence`` to keep it sorted: before equal elements, after them with
    ``right=True`` / ``side='right'``."""
    seq = to_tensor(sorted_sequence)
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but "
                               f"got {side}")
        if right and side == "left":
            raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites, "
                               "got side of left while right was True")
        right = side == "right"
    if sorter is not None:
        seq = bind(P["gather"], seq, to_tensor(sorter), axis=seq.dim() - 1)
    scalar = not isinstance(input, Tensor)
    values = to_tensor(input, seq.dtype) if scalar else input
    if seq.dim() > 1 and tuple(seq.shape[:-1]) != tuple(values.shape[:-1]):
        raise RuntimeError(f"torch.searchsorted(): boundaries tensor should be 1 dimension or "
                           f"the first N-1 dimensions of boundaries tensor and input value "
                           f"tensor must match, but we got boundaries tensor {list(seq.shape)} "
                           f"and input value tensor {list(values.shape)}")
    return bind(P["searchsorted"], seq, values, right=bool(right), out_int32=bool(out_int32))


def bucketize(input: Tensor | float, boundaries: Tensor, *, out_int32: bool = False,
              right: bool = False) -> Tensor:
    """The bucket of ``boundaries`` (1-D, sorted) each value falls in:
    ``searchsorted(boundaries, input, right=right)``."""
    b = to_tensor(boundaries)
    if b.dim() != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({b.dim()})")
    return searchsorted(b, input, out_int32=out_int32, right=right)


def _triangle_indices(row, col, offset, dtype, lower):
    r, c = np.indices((row, col))
    keep = (c - r <= offset) if lower else (c - r >= offset)
    out = np.stack([r[keep], c[keep]]) if row * col else np.zeros((2, 0), np.int64)
    dt = dtypes.int64 if dtype is None else dtypes.as_dtype(dtype)
    return Tensor._from_array(np.ascontiguousarray(out.astype(dt.np)), dt)


def tril_indices(row: int, col: int, offset: int = 0, *, dtype: DTypeLike | None = None,
                 device: object = None, layout: object = None) -> Tensor:
    """(2, N): the row and column indices of the lower triangle of a row x col matrix
    (diagonals up to ``offset``), row by row."""
    return _triangle_indices(row, col, offset, dtype, True)


def triu_indices(row: int, col: int, offset: int = 0, *, dtype: DTypeLike | None = None,
                 device: object = None, layout: object = None) -> Tensor:
    """(2, N): the indices of the upper triangle (diagonals from ``offset`` on)."""
    return _triangle_indices(row, col, offset, dtype, False)


def bincount(input: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:
    """How often each value 0, 1, ... occurs in the 1-D non-negative integer ``input``
    (``weights``: their sums, in the weights' dtype)."""
    x = to_tensor(input)
    a = _concrete(x, "bincount")
    if a.ndim != 1 or x.dtype.category not in ("int",) or (a.size and a.min() < 0):
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if weights is None:
        return _ints(np.bincount(a, minlength=minlength))
    w = to_tensor(weights)
    if tuple(w.shape) != tuple(x.shape):
        raise RuntimeError("weights should be 1-d and have the same length as input")
    counts = np.bincount(a, weights=_concrete(w, "bincount").astype(np.float64),
                         minlength=minlength)
    dt = w.dtype if w.dtype.is_floating_point else dtypes.float64
    return Tensor._from_array(counts.astype(dt.np), dt)
