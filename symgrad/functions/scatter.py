"""Writing into positions as PyTorch names it: ``scatter`` (a source tensor or a value;
``reduce='add' | 'multiply'``), ``scatter_add``, ``scatter_reduce`` (sum, prod, mean,
amax, amin; ``include_self``) and ``index_add`` (their in-place forms are installed as
methods), with
PyTorch's index rules (an index no larger than the source, and than ``self`` apart from
``dim``), error texts and backward names.

Each is a write into the flattened tensor at the flat positions the index names (the
``index_put`` and ``scatter_add`` primitives; positions are integer arithmetic on the
index), so the gradients are the primitives' own: the overwritten positions of
``self`` get none, the source gets its positions' gradient (a gather), every order.

>>> import symgrad as torch
>>> torch.zeros(2, 3).scatter_add(1, torch.tensor([[0, 0], [2, 1]]), torch.ones(2, 2))
tensor([[2., 0., 0.],
        [0., 1., 1.]])
"""
from __future__ import annotations

import warnings

import numpy as np

from ..graph import dtypes
from ..ops import lax
from .common import Tensor, is_scalar, to_tensor, wrap_dim
from .composite import named
from .elementwise import NOT_IMPLEMENTED, NotImplementedBackward

__all__ = ["scatter", "scatter_add", "scatter_reduce", "index_add"]

_INDEX_TYPES = (dtypes.int64, dtypes.int32)


def _check_bounds(idx: Tensor, size: int, d: int) -> Tensor:
    """`idx` checked in [0, size) now (eager) or at every call (compiled)."""
    return lax.in_bounds(idx, size, f"index {{}} is out of bounds for dimension {d} with "
                                    f"size {size}")


def _checked(name: str, x: Tensor, dim: int, index, src) -> tuple[int, Tensor]:
    """PyTorch's scatter checks, in its order; returns (dim, index)."""
    idx = to_tensor(index)
    has_src = isinstance(src, Tensor)
    if idx.dtype not in _INDEX_TYPES:
        raise RuntimeError(f"{name}(): Expected dtype int32/int64 for index")
    if has_src and src.dtype is not x.dtype:
        raise RuntimeError(f"{name}(): Expected self.dtype to be equal to src.dtype")
    d = wrap_dim(dim, max(x.dim(), 1))
    if idx.numel() == 0:
        return d, idx
    if max(idx.dim(), 1) != max(x.dim(), 1):
        raise RuntimeError("Index tensor must have the same number of dimensions as self tensor")
    src_dims = "Index tensor must have the same number of dimensions as src tensor"
    if has_src and src.dim() == 0 and idx.dim() > 0:
        raise RuntimeError(src_dims)
    too_big = any(idx.shape[k] > x.shape[k] for k in range(x.dim()) if k != d)
    if has_src and not too_big:
        for k in range(idx.dim()):
            if k >= src.dim():
                wrap_dim(k, max(src.dim(), 1))          # PyTorch's IndexError
            too_big = too_big or idx.shape[k] > src.shape[k]
    if too_big:
        extra = f" and to be no larger size than src {list(src.shape)}" if has_src else ""
        raise RuntimeError(f"Expected index {list(idx.shape)} to be no larger than self "
                           f"{list(x.shape)} apart from dimension {d}{extra}")
    if has_src and max(src.dim(), 1) != max(idx.dim(), 1):
        raise RuntimeError(src_dims)
    return d, _check_bounds(idx, x.shape[d] if x.dim() else 1, d)


def _flat_positions(idx: Tensor, shape: tuple, d: int):
    """The flat position in a C-ordered tensor of ``shape`` of each element the index
    writes: its own coordinates with the index's value along ``d``."""
    strides = np.cumprod((1,) + tuple(shape[::-1]))[-2::-1] if shape else ()
    pos = lax.mul(lax.cast(idx, dtypes.int64), int(strides[d])) if shape else \
        lax.cast(idx, dtypes.int64)
    for k, stride in enumerate(strides):
        if k != d and idx.shape[k] > 1:
            coord = lax.apply("iota", shape=tuple(idx.shape), axis=k, dtype=dtypes.int64)
            pos = lax.add(pos, lax.mul(coord, int(stride)))
    return lax.reshape(pos, (idx.numel(),))


def _covered(src, idx: Tensor):
    """The part of ``src`` the index covers (its leading corner), flattened."""
    n = len(idx.shape)
    if tuple(src.shape) != tuple(idx.shape):
        src = lax.slice_(src, (0,) * n, tuple(idx.shape), (1,) * n)
    return lax.reshape(src, (idx.numel(),))


def _put(x, pos, values):
    flat = lax.reshape(x, (x.numel(),))
    return lax.reshape(lax.apply("index_put", flat, pos, values), tuple(x.shape))


def scatter(input: Tensor, dim: int, index: Tensor, src: Tensor | float | None = None, *,
            value: float | None = None, reduce: str | None = None) -> Tensor:
    """A copy of ``input`` with ``out[i][index[i][j]] = src[i][j]`` (for ``dim=1``), or
    ``value`` there (``ScatterBackward0`` / ``ScatterBackward1``)."""
    x = to_tensor(input)
    if src is None:
        src = value
    if not is_scalar(src):
        src = to_tensor(src)
    d, idx = _checked("scatter", x, dim, index, src)
    if reduce is not None:
        return _scatter_legacy_reduce(x, d, idx, src, reduce)
    if idx.numel() == 0:
        return x.clone()
    pos = _flat_positions(idx, tuple(x.shape), d)
    if is_scalar(src):
        fill = lax.full((idx.numel(),), src, x.dtype)
        return named("ScatterBackward1", lambda v: _put(v, pos, fill), x)
    return named("ScatterBackward0", lambda v, s: _put(v, pos, _covered(s, idx)), x, src)


_LEGACY = {"add": "sum", "multiply": "prod"}
_DEPRECATED = ("The reduce argument of torch.scatter with Tensor src is deprecated and will be "
               "removed in a future PyTorch release. Use torch.scatter_reduce instead for more "
               "reduction options. (Triggered internally at /__w/pytorch/pytorch/aten/src/ATen/"
               "native/TensorAdvancedIndexing.cpp:225.)")


def _scatter_legacy_reduce(x, d, idx, src, reduce):
    """``scatter(..., reduce='add' | 'multiply')``: the source (or value) added to or
    multiplied into ``x``. PyTorch has no derivative for it (``grad_fn=<NotImplemented>``,
    its backward raises); compiled code differentiates it as ``scatter_reduce``."""
    if reduce not in _LEGACY:
        raise RuntimeError("reduce argument must be either add or multiply.")
    if not is_scalar(src):
        warnings.warn(_DEPRECATED, UserWarning, stacklevel=3)
    if idx.numel() == 0:
        return x.clone()
    pos = _flat_positions(idx, tuple(x.shape), d)

    def run(v, w):
        flat = lax.reshape(v, (v.numel(),))
        out = lax.apply("scatter_reduce", flat, pos, _covered(w, idx), reduce=_LEGACY[reduce],
                        include_self=True)
        return lax.reshape(out, tuple(v.shape))
    if is_scalar(src):            # the value in self's dtype (an int tensor truncates it)
        fill = lax.full(tuple(idx.shape), x.dtype.np.type(src).item(), x.dtype)
        out = named(NOT_IMPLEMENTED, lambda v: run(v, fill), x)
    else:
        out = named(NOT_IMPLEMENTED, run, x, src)
    if out.grad_fn is not None:
        out.grad_fn._inner = NotImplementedBackward("scatter")
    return out


_REDUCTIONS = {"sum": "sum", "prod": "prod", "mean": "mean", "amax": "amax", "amin": "amin",
               "max": "amax", "min": "amin"}


def scatter_reduce(input: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *,
                   include_self: bool = True, _name: str = "scatter_reduce",
                   _src_position: int = 4) -> Tensor:
    """``input`` with the values of ``src`` reduced into the positions ``index`` names
    along ``dim`` (``reduce``: ``"sum"``, ``"prod"``, ``"mean"``, ``"amax"``, ``"amin"``),
    ``input``'s own value taking part unless ``include_self=False``
    (``ScatterReduceBackward0``; amax / amin share the gradient evenly among ties).

    >>> import symgrad as torch
    >>> torch.tensor([1., 2., 3.]).scatter_reduce(0, torch.tensor([0, 0, 2]),
    ...                                            torch.tensor([5., 4., 1.]), "amax")
    tensor([5., 2., 3.])
    """
    x = to_tensor(input)
    if not isinstance(src, Tensor):
        raise TypeError(f"{_name}(): argument 'src' (position {_src_position}) must be Tensor, "
                        f"not {type(src).__name__}")
    if not isinstance(reduce, str):
        raise TypeError(f"{_name}(): argument 'reduce' (position {_src_position + 1}) must be "
                        f"str, not {type(reduce).__name__}")
    if not isinstance(include_self, (bool, np.bool_)):
        raise TypeError(f"{_name}(): argument 'include_self' must be bool, not "
                        f"{type(include_self).__name__}")
    d, idx = _checked("scatter", x, dim, index, src)
    if reduce not in _REDUCTIONS:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got "
                           f"{reduce}")
    reduce = _REDUCTIONS[reduce]
    if reduce == "mean" and x.dtype is dtypes.bool_:
        raise NotImplementedError('"scatter_gather_tensor_cpu_reduce_mean" not implemented '
                                  "for 'Bool'")
    if idx.numel() == 0:
        return x.clone()
    pos = _flat_positions(idx, tuple(x.shape), d)

    def run(v, w):
        flat = lax.reshape(lax.checked_in_backward(v, idx), (v.numel(),))
        out = lax.apply("scatter_reduce", flat, pos, _covered(w, idx), reduce=reduce,
                        include_self=bool(include_self))
        return lax.reshape(out, tuple(v.shape))
    return named("ScatterReduceBackward0", run, x, src)


def scatter_add(input: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """``input`` plus ``src`` added at the positions ``index`` names along ``dim``
    (repeated positions add up; ``ScatterAddBackward0``)."""
    x, s = to_tensor(input), to_tensor(src)
    d, idx = _checked("scatter", x, dim, index, s)
    if idx.numel() == 0:
        return x.clone()
    pos = _flat_positions(idx, tuple(x.shape), d)

    def run(v, w):
        added = lax.scatter_add(_covered(w, idx), pos, 0, v.numel())
        # (v's gradient reads no index: a compiled one checks them all the same)
        return lax.add(lax.checked_in_backward(v, idx), lax.reshape(added, tuple(v.shape)))
    return named("ScatterAddBackward0", run, x, s)


def index_add(input: Tensor, dim: int, index: Tensor, source: Tensor, *,
              alpha: float = 1) -> Tensor:
    """``input`` plus ``alpha * source`` whose slices along ``dim`` are added at the slices
    ``index`` (1-D) names (``IndexAddBackward0``)."""
    x, s, idx = to_tensor(input), to_tensor(source), to_tensor(index)
    if idx.dtype not in _INDEX_TYPES:
        raise RuntimeError(f"index_add_(): Expected dtype int32/int64 for index but got: "
                           f"{idx.dtype.c_name.capitalize()}")
    if idx.dim() > 1:
        raise IndexError(f"index_add_(): Index is supposed to be a vector, but got dim: "
                         f"{idx.dim()} with type: {idx.dtype.c_name.capitalize()} and size: "
                         f"{list(idx.shape)}")
    d = wrap_dim(dim, max(x.dim(), 1))
    n_src = s.shape[d] if s.dim() else 1
    if idx.numel() != n_src:
        raise RuntimeError(f"index_add_(): Number of indices ({idx.numel()}) should be equal to "
                           f"source.size(dim): ({n_src}), for dim: {d}")
    if s.dtype is not x.dtype:
        raise RuntimeError(f"index_add_(): self ({x.dtype.c_name.capitalize()}) and source "
                           f"({s.dtype.c_name.capitalize()}) must have the same scalar type")
    idx1 = lax.cast(lax.reshape(idx, (idx.numel(),)), dtypes.int64)
    if x.dim() <= 1:        # PyTorch's 1-D kernel checks with its own text and type
        idx1 = lax.in_bounds(idx1, x.shape[d] if x.dim() else 1, "index out of range in self",
                             "IndexError")
    else:
        idx1 = _check_bounds(idx1, x.shape[d], d)

    def run(v, w):
        if not w.shape:
            w = lax.reshape(w, (1,))
        added = lax.scatter_add(w, idx1, d, v.shape[d] if v.shape else 1)
        if alpha != 1:
            added = lax.mul(added, alpha)
        return lax.add(lax.checked_in_backward(v, idx1), lax.reshape(added, tuple(v.shape)))
    return named("IndexAddBackward0", run, x, s)
