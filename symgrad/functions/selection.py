"""Selecting, masking and sorting as PyTorch names them: ``masked_fill``, ``tril`` /
``triu``, ``gather``, ``index_select``, ``split`` / ``chunk`` / ``unbind`` / ``narrow``,
``square``, ``sort``,
``argsort``, ``topk``, ``masked_select``; PyTorch's checks, error texts and backward names, on the
primitives (where, gather, take, slice, argsort)."""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..dispatch import bind
from ..graph import dtypes
from ..graph.primitives import PRIMITIVES as P
from ..ops import lax
from ..tracing import value_sized
from .common import Tensor, to_tensor, wrap_dim
from .composite import named
from .elementwise import pow as _pow, where
from .reduction import return_types
from .shape import make_view, multi_output_views
from ..graph.shapes import broadcast_shapes

__all__ = ["masked_fill", "tril", "triu", "gather", "index_select", "split", "chunk",
           "unbind", "narrow",
           "square", "sort", "argsort", "topk", "masked_select"]


def square(input: Tensor) -> Tensor:
    """``input ** 2`` (``PowBackward0``, as PyTorch records it)."""
    return _pow(to_tensor(input), 2)


def masked_fill(input: Tensor, mask: Tensor, value: float | Tensor) -> Tensor:
    """``value`` where ``mask`` is True, ``input`` elsewhere (``MaskedFillBackward0``)."""
    x, m = to_tensor(input), to_tensor(mask)
    if m.dtype is not dtypes.bool_:
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with "
                           f"dtype {_C_TYPE_NAMES.get(m.dtype.name, m.dtype.name)}")
    if isinstance(value, Tensor) and value.dim() != 0:
        raise RuntimeError(f"masked_fill_ only supports a 0-dimensional value tensor, but got "
                           f"tensor with {value.dim()} dimension(s).")
    if isinstance(value, Tensor):       # an input of the node: it gets the filled
        return named("MaskedFillBackward1",   # positions' gradient (as index_fill's)
                     lambda v, w: where(m, lax.cast(w, x.dtype), v), x, value)
    fill = _scalar_in(value, x.dtype)
    return named("MaskedFillBackward0", lambda v: where(m, fill, v), x)


# the C++ type names PyTorch's messages print (its typeid demangled)
_C_TYPE_NAMES = {"int64": "long int", "int32": "int", "int16": "short int",
                 "int8": "signed char", "uint8": "unsigned char", "float32": "float",
                 "float64": "double", "float16": "c10::Half", "bfloat16": "c10::BFloat16"}


def _scalar_in(value, dt):
    """Python number `value` converted to dtype `dt` as PyTorch converts a Scalar
    argument (the result keeps the tensor's dtype: 2.7 -> 2 in an int tensor): NaN,
    infinities and out-of-range values raise its overflow error for integer dtypes
    (unsigned ones take negative values modulo 2**bits, as C++ does)."""
    if dt is dtypes.bool_:
        return bool(value)
    if dt.is_floating_point:
        return dt.np.type(value).item()
    info = np.iinfo(dt.np)
    low = -info.max if info.min == 0 else info.min
    if not (math.isfinite(value) and low <= value <= info.max):
        c_name = {"int64": "int64_t", "int32": "int", "int16": "int16_t", "int8": "int8_t",
                  "uint8": "uint8_t"}[dt.name]
        raise RuntimeError(f"value cannot be converted to type {c_name} without overflow")
    return int(value) % (info.max + 1) if info.min == 0 else int(value)


def _triangle(name: str, x: Tensor, diagonal: int, lower: bool) -> Tensor:
    x = to_tensor(x)
    if x.dim() < 2:
        raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
    r, c = x.shape[-2], x.shape[-1]
    i, j = np.arange(r)[:, None], np.arange(c)[None, :]
    keep = (j - i <= diagonal) if lower else (j - i >= diagonal)
    mask = Tensor._from_array(np.broadcast_to(keep, tuple(x.shape)).copy(), dtypes.bool_)
    zero = lax.full((), 0, x.dtype)
    return named(f"{name.capitalize()}Backward0", lambda v: where(mask, v, zero), x)


def tril(input: Tensor, diagonal: int = 0) -> Tensor:
    """The lower triangle (and ``diagonal`` diagonals above the main one); zeros above."""
    return _triangle("tril", input, diagonal, lower=True)


def triu(input: Tensor, diagonal: int = 0) -> Tensor:
    """The upper triangle (from ``diagonal`` on); zeros below."""
    return _triangle("triu", input, diagonal, lower=False)


def _index(index, message: str) -> Tensor:
    """`index` as a Tensor of int64 or int32 (PyTorch's index dtypes), else `message`."""
    idx = to_tensor(index)
    if idx.dtype not in (dtypes.int64, dtypes.int32):
        raise RuntimeError(message)
    return idx


def gather(input: Tensor, dim: int, index: Tensor, *, sparse_grad: bool = False) -> Tensor:
    """``out[i][j][k] = input[i][index[i][j][k]][k]`` for ``dim=1`` (``GatherBackward0``);
    ``index`` has ``input``'s rank and is no larger than it in the other dimensions."""
    x, idx = to_tensor(input), _index(index, "gather(): Expected dtype int32/int64 for index")
    d = wrap_dim(dim, max(x.dim(), 1))
    if x.dim() == 0 and idx.dim() <= 1:        # PyTorch reads a 0-d tensor as 1-d here
        return gather(x.reshape(1), 0, idx.reshape(-1)).reshape(tuple(idx.shape))
    if idx.dim() != x.dim():
        raise RuntimeError("Index tensor must have the same number of dimensions as input "
                           "tensor")
    for k in range(x.dim()):
        if k != d and idx.shape[k] > x.shape[k]:
            raise RuntimeError(f"Size does not match at dimension {k} expected index "
                               f"{list(idx.shape)} to be no larger than self "
                               f"{list(x.shape)} apart from dimension {d}")
    n = x.shape[d] if x.dim() else 1
    idx = lax.in_bounds(idx, n, f"index {{}} is out of bounds for dimension {d} with size {n}")
    if any(idx.shape[k] < x.shape[k] for k in range(x.dim()) if k != d):
        starts = (0,) * x.dim()
        stops = tuple(x.shape[k] if k == d else idx.shape[k] for k in range(x.dim()))
        return named("GatherBackward0", lambda v: bind(
            P["gather"], lax.slice_(v, starts, stops, (1,) * x.dim()), idx, axis=d), x)
    return bind(P["gather"], x, idx, axis=d, grad_name="GatherBackward0")


def index_select(input: Tensor, dim: int, index: Tensor) -> Tensor:
    """The slices ``index`` (1-D, int64) of ``input`` along ``dim``
    (``IndexSelectBackward0``)."""
    x, idx = to_tensor(input), _index(index, "index_select(): Expected dtype int32 or int64 for "
                                                    "index")
    if idx.dim() > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    d = wrap_dim(dim, max(x.dim(), 1))
    n = x.shape[d] if x.dim() else 1
    if x.dim() == 0 and idx.numel() != 1:
        raise RuntimeError(f"index_select(): Index to scalar can have only 1 value, got "
                           f"{idx.numel()} value(s)")
    if x.dim() > 1 and d == 1:      # (PyTorch's CPU kernel for dim 1, its own check)
        idx1 = lax.in_bounds(idx.reshape(-1), n,
                             f"INDICES element is out of DATA bounds, id={{}} axis_dim={n}")
    else:
        idx1 = lax.in_bounds(idx.reshape(-1), n, "index out of range in self", "IndexError")
    if x.dim() == 0:        # (a 0-d input: a 0-d result)
        return named("IndexSelectBackward0", lambda v: lax.reshape(bind(
            P["take"], lax.reshape(v, (1,)), idx1, axis=0), ()), x)
    return named("IndexSelectBackward0", lambda v: bind(P["take"], v, idx1, axis=d), x)


def split(tensor: Tensor, split_size_or_sections: int | Sequence[int],
          dim: int = 0) -> tuple[Tensor, ...]:
    """Pieces of ``split_size`` along ``dim`` (the last one smaller), or of the given
    sizes (``SplitBackward0`` / ``SplitWithSizesBackward0``)."""
    x = to_tensor(tensor)
    d = wrap_dim(dim, max(x.dim(), 1))
    n = x.shape[d]
    if isinstance(split_size_or_sections, int):
        size = split_size_or_sections
        if size < 0 or (size == 0 and n != 0):
            raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got "
                               f"dimension size of {n}" if size == 0 else
                               f"split expects split_size be non-negative, but got "
                               f"split_size={size}")
        sizes = [size] * (n // size) + ([n % size] if n % size else []) if size else [0]
        name = "SplitBackward0"
    else:
        sizes = [int(s) for s in split_size_or_sections]
        if sum(sizes) != n:
            raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n} "
                               f"(input tensor's size at dimension {d}), but got "
                               f"split_sizes={sizes}")
        name = "SplitWithSizesBackward0"
    out, start = [], 0
    for s in sizes:        # views of x, as PyTorch's pieces
        attrs = {"starts": tuple(start if k == d else 0 for k in range(x.dim())),
                 "stops": tuple(start + s if k == d else x.shape[k] for k in range(x.dim())),
                 "steps": (1,) * x.dim()}
        out.append(make_view(x, bind(P["slice"], x, grad_name=name, **attrs), "slice", attrs))
        start += s
    return multi_output_views(tuple(out))


def chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    """``chunks`` pieces (or fewer) of ``ceil(size / chunks)`` along ``dim``."""
    x = to_tensor(input)
    if chunks <= 0:
        raise RuntimeError("chunk expects `chunks` to be greater than 0, got: " + str(chunks))
    d = wrap_dim(dim, max(x.dim(), 1))
    n = x.shape[d]
    return split(x, max(-(-n // chunks), 1) if n else 0, d) if n else \
        split(x, [0] * chunks, d)


def unbind(input: Tensor, dim: int = 0) -> tuple[Tensor, ...]:
    """The slices of ``input`` along ``dim`` with that dim removed, views
    (``UnbindBackward0``)."""
    x = to_tensor(input)
    if x.dim() == 0:
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    d = wrap_dim(dim, x.dim())
    return multi_output_views(tuple(
        make_view(x, bind(P["select"], x, grad_name="UnbindBackward0", axis=d, index=i),
                  "select", {"axis": d, "index": i}) for i in range(x.shape[d])))


def narrow(input: Tensor, dim: int, start: int | Tensor, length: int) -> Tensor:
    """``length`` elements of ``input`` along ``dim`` from ``start`` (negative: from the
    end), a view (``SliceBackward0``)."""
    x = to_tensor(input)
    if x.dim() == 0:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    if length < 0:
        raise RuntimeError("narrow(): length must be non-negative.")
    d = wrap_dim(dim, x.dim())
    n = x.shape[d]
    start = int(start.item()) if isinstance(start, Tensor) else int(start)
    if not -n <= start <= n:
        raise IndexError(f"start out of range (expected to be in range of [{-n}, {n}], but "
                         f"got {start})")
    if start < 0:
        start += n
    if start + length > n:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size "
                           f"({n}).")
    attrs = {"starts": tuple(start if k == d else 0 for k in range(x.dim())),
             "stops": tuple(start + length if k == d else x.shape[k] for k in range(x.dim())),
             "steps": (1,) * x.dim()}
    return make_view(x, bind(P["slice"], x, grad_name="SliceBackward0", **attrs), "slice",
                     attrs)


def argsort(input: Tensor, dim: int = -1, descending: bool = False,
            stable: bool = False) -> Tensor:
    """The indices that sort ``input`` along ``dim`` (NaN sorts as the largest value;
    ties in their original order with ``stable=True``, else in PyTorch's CPU order)."""
    return _order(to_tensor(input), dim, descending, "stable" if stable else "sort")


def _order(x: Tensor, dim: int, descending: bool, ties) -> Tensor:
    """The argsort primitive along `dim`; `ties`: how equal values are ordered (see
    symgrad.ops.indexing's argsort: PyTorch's sort, stable sort or topk)."""
    if x.dim() == 0:
        wrap_dim(dim, 1)
        return lax.full((), 0, dtypes.int64) if x._node is None else \
            bind(P["argsort"], x.reshape(1), axis=0, descending=bool(descending)).reshape(())
    return bind(P["argsort"], x, axis=wrap_dim(dim, x.dim()), descending=bool(descending),
                ties=ties)


def sort(input: Tensor, dim: int = -1, descending: bool = False,
         stable: bool = False) -> return_types.sort:
    """``(values, indices)`` of ``input`` sorted along ``dim`` (``SortBackward0``)."""
    x = to_tensor(input)
    idx = argsort(x, dim, descending, stable)
    if x.dim() == 0:
        return return_types.sort(x.clone(), idx)
    d = wrap_dim(dim, x.dim())
    values = named("SortBackward0", lambda v: bind(P["gather"], v, idx, axis=d), x, keeps=(idx,))
    return return_types.sort(values, idx)


def topk(input: Tensor, k: int, dim: int = -1, largest: bool = True,
         sorted: bool = True) -> return_types.topk:
    """The ``k`` largest (``largest=False``: smallest) elements along ``dim`` and their
    indices, in order (``TopkBackward0``)."""
    x = to_tensor(input)
    d = wrap_dim(dim, max(x.dim(), 1))
    n = x.shape[d] if x.dim() else 1
    if not 0 <= k <= n:
        raise RuntimeError("selected index k out of range")
    if x.dtype is dtypes.bool_:
        raise RuntimeError("topk does not support bool dtypes on CPU")
    if x.dim() == 0:
        return return_types.topk(x.clone(), lax.full((), 0, dtypes.int64))
    order = _order(x, d, largest, ("topk", int(k), bool(sorted)))
    starts = (0,) * x.dim()
    stops = tuple(k if a == d else s for a, s in enumerate(x.shape))
    idx = lax.slice_(order, starts, stops, (1,) * x.dim())
    values = named("TopkBackward0", lambda v: bind(P["gather"], v, idx, axis=d), x, keeps=(idx,))
    return return_types.topk(values, idx)


def masked_select(input: Tensor, mask: Tensor) -> Tensor:
    """The elements of ``input`` where ``mask`` (broadcast together) is True, as a 1-D
    tensor (``MaskedSelectBackward0``). Its size depends on the mask's values: inside
    ``symgrad.compile`` a traced mask breaks the graph (the call runs uncompiled)."""
    x, m = to_tensor(input), to_tensor(mask)
    if m.dtype is not dtypes.bool_:
        raise RuntimeError("masked_select: expected BoolTensor for mask")
    shape = broadcast_shapes(tuple(m.shape), tuple(x.shape))
    if m._data is None:
        value_sized("masked_select")
        raise TypeError("masked_select's result size depends on the mask's values: inside "
                        "symgrad.compile the mask must be concrete (not computed from traced "
                        "tensors); use symgrad.where to keep the shape")
    pos = Tensor._from_array(np.flatnonzero(np.broadcast_to(m._data, shape)), dtypes.int64)
    n = math.prod(shape)
    lead = (1,) * (len(shape) - x.dim())

    def fn(v):
        wide = lax.expand(lax.reshape(v, lead + tuple(v.shape)), shape)
        return bind(P["take"], lax.reshape(wide, (n,)), pos, axis=0)
    return named("MaskedSelectBackward0", fn, x)
