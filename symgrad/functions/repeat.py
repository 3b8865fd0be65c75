"""Repeating as PyTorch names it: ``Tensor.repeat`` and ``tile`` (whole copies along each
dimension, ``RepeatBackward0``) and ``repeat_interleave`` (each element repeated in place:
a reshape of a broadcast for a number, an ``index_select`` for a tensor of counts), with
PyTorch's errors. Repeats are broadcasts, so their gradients are sums -- primitives.

>>> import symgrad as torch
>>> torch.tensor([1, 2]).repeat(2, 2)
tensor([[1, 2, 1, 2],
        [1, 2, 1, 2]])
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..dispatch import bind
from ..graph import dtypes
from ..graph.primitives import PRIMITIVES as P
from ..ops import lax
from .common import Tensor, to_tensor, wrap_dim
from .composite import named
from .selection import index_select

__all__ = ["repeat", "tile", "repeat_interleave"]


def _sizes(sizes) -> tuple[int, ...]:
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = sizes[0]
    return tuple(int(s) for s in sizes)


def _tiled(x, reps: tuple[int, ...]):
    """``x`` (with leading 1s up to ``len(reps)`` dims) copied ``reps[k]`` times along each
    dim k: interleave size-1 axes, broadcast them, merge."""
    shape = (1,) * (len(reps) - len(x.shape)) + tuple(x.shape)
    split = tuple(v for s in shape for v in (1, s))
    wide = tuple(v for r, s in zip(reps, shape) for v in (r, s))
    out = lax.expand(lax.reshape(x, split), wide)
    return lax.reshape(out, tuple(r * s for r, s in zip(reps, shape)))


def repeat(input: Tensor, *sizes: int | Sequence[int]) -> Tensor:
    """``input`` repeated ``sizes[k]`` times along each dimension (leading new dimensions
    when there are more sizes than dimensions), ``RepeatBackward0``."""
    x = to_tensor(input)
    reps = _sizes(sizes)
    if len(reps) < x.dim():
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number "
                           "of dimensions of tensor")
    shape = (1,) * (len(reps) - x.dim()) + tuple(x.shape)
    for r, s in zip(reps, shape):
        if r < 0:
            out = [a * b for a, b in zip(reps, shape)]
            bad = next(v for v in out if v < 0)
            raise RuntimeError(f"Trying to create tensor with negative dimension {bad}: {out}")
    if all(r == 1 for r in reps):        # (a copy, as PyTorch's: never x's own memory)
        return named("RepeatBackward0", lambda v: bind(P["copy"], _tiled(v, reps)), x)
    return named("RepeatBackward0", lambda v: _tiled(v, reps), x)


def tile(input: Tensor, *dims: int | Sequence[int]) -> Tensor:
    """``input.repeat(dims)`` with ``dims`` padded by leading 1s to ``input``'s rank."""
    x = to_tensor(input)
    reps = _sizes(dims)
    return repeat(x, (1,) * (x.dim() - len(reps)) + reps)


def _counts_to_indices(counts: Tensor, output_size: int | None = None) -> Tensor:
    """Each position repeated by its count; `output_size` must be the counts' sum."""
    data = counts._eager_data("repeat_interleave with a tensor of repeats")
    if (data < 0).any():
        raise RuntimeError("repeats can not be negative")
    if output_size is not None:
        if output_size < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension "
                               f"{output_size}: [{output_size}]")
        if int(data.sum()) != output_size:
            raise RuntimeError("allocated size does not match required size")
    return Tensor._from_array(np.repeat(np.arange(data.size, dtype=np.int64), data.reshape(-1)),
                              dtypes.int64)


def repeat_interleave(input: Tensor, repeats: int | Tensor | None = None,
                      dim: int | None = None, *, output_size: int | None = None) -> Tensor:
    """Each element (each slice along ``dim``; of the flattened input without ``dim``)
    repeated ``repeats`` times, or ``repeats[i]`` times for slice i; with only a tensor of
    counts, the indices repeated by their counts."""
    x = to_tensor(input)
    counts = x if repeats is None else repeats
    if isinstance(counts, Tensor) and counts.dtype.category != "int":
        raise NotImplementedError(f"\"repeat_interleave_cpu\" not implemented for "
                                  f"'{counts.dtype.c_name}'")
    if repeats is None:                       # repeat_interleave(counts)
        if x.dim() > 1:
            raise RuntimeError("repeats must be 0-dim or 1-dim tensor")
        return _counts_to_indices(x.reshape(-1), output_size)
    if dim is None:
        x = x.reshape(-1)
        d = 0
    else:
        d = wrap_dim(dim, max(x.dim(), 1))
    if isinstance(repeats, Tensor):
        if repeats.dim() > 1:
            raise RuntimeError("repeats must be 0-dim or 1-dim tensor")
        n = x.shape[d] if x.dim() else 1
        if repeats.numel() not in (1, n):
            raise RuntimeError(f"repeats must have the same size as input along dim, but got "
                               f"repeats.size(0) = {repeats.numel()} and input.size({d}) = {n}")
        counts = repeats.reshape(-1).expand(n) if repeats.numel() == 1 else repeats.reshape(-1)
        return index_select(x, d, _counts_to_indices(counts, output_size))
    r = int(repeats)
    if r < 0:
        raise RuntimeError("Repeats must be non-negative")
    if x.dim() == 0:
        x = x.reshape(1)
    shape = tuple(x.shape)
    if output_size is not None and output_size != shape[d] * r:
        raise RuntimeError(f"repeat_interleave: Invalid output_size, expected {shape[d] * r} "
                           f"but got {output_size}")
    wide = shape[:d + 1] + (r,) + shape[d + 1:]
    out = lax.expand(lax.reshape(x, shape[:d + 1] + (1,) + shape[d + 1:]), wide)
    return bind(P["reshape"], out, shape=shape[:d] + (shape[d] * r,) + shape[d + 1:],
                grad_name="ViewBackward0")
