"""Reading and writing at index tensors as PyTorch names it: ``take`` (flat positions),
``take_along_dim``, ``index_fill``, ``index_copy`` and ``index_put`` (a tuple of integer
index tensors and boolean masks; ``accumulate``). Their in-place forms are installed as
methods.

Each is built on the index primitives (``gather``, ``take``, ``index_put``,
``scatter_add``) at flat positions computed from the indices, so the gradients are the
primitives' own (PyTorch's: a written position of ``self`` gets none, a source value the
gradient of its position) and compiled code runs them too. Indices are checked with
PyTorch's texts -- eagerly the first bad one in order, in compiled code at every call
(``index_check``): no index outside the tensor is ever read or written.

>>> import symgrad as torch
>>> x = torch.arange(6.).reshape(2, 3)
>>> x.take(torch.tensor([0, -1])), x.index_fill(1, torch.tensor([0]), -1.)
(tensor([0., 5.]), tensor([[-1.,  1.,  2.],
        [-1.,  4.,  5.]]))
"""
from __future__ import annotations

import numpy as np

from ..dispatch import bind
from ..graph import dtypes
from ..graph.primitives import PRIMITIVES as P
from ..graph.shapes import broadcast_shapes
from ..ops import lax
from .common import Tensor, is_scalar, to_tensor, wrap_dim
from .composite import named
from .scatter import _flat_positions, _put
from .selection import gather

__all__ = ["take", "take_along_dim", "index_fill", "index_copy", "index_put"]

_ERRORS = {"IndexError": IndexError, "RuntimeError": RuntimeError}


def _type_name(t: Tensor) -> str:
    return t.dtype.c_name.capitalize()


def _wrapped(idx: Tensor, n: int, message: str, error: str = "IndexError") -> Tensor:
    """``idx`` (int64) with negative indices counted from the end, each checked in
    [-n, n): PyTorch's `error` with `message` formatted with the first bad index --
    eagerly now, traced at every call (two checks: one of the non-negative indices, one
    of the negated negative ones, whose message prints the minus sign)."""
    idx = lax.cast(idx, dtypes.int64)
    data = idx._data
    if data is not None:
        bad = (data >= n) | (data < -n)
        if bad.any():
            raise _ERRORS[error](message.format(int(data[bad].flat[0])))
        return lax.where(lax.apply("lt", idx, 0), lax.add(idx, n), idx)
    if n == 0:
        return lax.in_bounds(idx, 0, message, error)
    neg = lax.apply("lt", idx, 0)
    ahead = lax.in_bounds(lax.where(neg, 0, idx), n, message, error)
    behind = lax.in_bounds(lax.where(neg, lax.neg(idx), 0), n + 1,
                           message.replace("{}", "-{}"), error)
    return lax.where(neg, lax.sub(n, behind), ahead)


# ---- reading -------------------------------------------------------------------------
def take(input: Tensor, index: Tensor) -> Tensor:
    """The elements of ``input`` (read as 1-D) at ``index`` (int64, negative from the
    end), in ``index``'s shape (``TakeBackward0``)."""
    x, idx = to_tensor(input), to_tensor(index)
    if idx.dtype is not dtypes.int64:
        raise RuntimeError(f"take(): Expected a long tensor for index, but got {_type_name(idx)}")
    n = x.numel()
    pos = _wrapped(lax.reshape(idx, (idx.numel(),)), n,
                   f"out of range: tried to access index {{}} on a tensor of {n} elements.")
    shape = tuple(idx.shape)
    return named("TakeBackward0", lambda v: lax.reshape(
        bind(P["take"], lax.reshape(v, (n,)), pos, axis=0), shape), x)


def take_along_dim(input: Tensor, indices: Tensor, dim: int | None = None) -> Tensor:
    """``input``'s values at ``indices`` along ``dim`` (``gather`` after broadcasting the
    other dimensions of both; indices taken modulo the size, as PyTorch's kernel), or at
    flat positions when ``dim`` is None (``GatherBackward0``)."""
    x, idx = to_tensor(input), to_tensor(indices)
    if idx.dtype is not dtypes.int64:
        raise RuntimeError(f"torch.take_along_dim(): dtype of indices should be Long but got "
                           f"{_type_name(idx)}")
    if dim is None:
        return gather(x.reshape(-1), 0, idx.reshape(-1))
    if x.dim() == 0:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    d = wrap_dim(dim, x.dim())
    if x.dim() != idx.dim():
        raise RuntimeError(f"torch.take_along_dim(): input and indices should have the same "
                           f"number of dimensions, but got {x.dim()} dimensions for input, and "
                           f"{idx.dim()} dimensions for indices")
    common = list(broadcast_shapes(tuple(x.shape[:d]) + (1,) + tuple(x.shape[d + 1:]),
                                   tuple(idx.shape[:d]) + (1,) + tuple(idx.shape[d + 1:])))
    n = x.shape[d]
    if n == 0 and idx.numel():
        raise RuntimeError("ZeroDivisionError")
    xe = x.expand(*(common[:d] + [n] + common[d + 1:]))
    ie = idx.expand(*(common[:d] + [idx.shape[d]] + common[d + 1:]))
    if n:
        ie = lax.apply("remainder", ie, n)
    return named("GatherBackward0", lambda v: bind(P["gather"], v, ie, axis=d), xe)


# ---- writing -------------------------------------------------------------------------
def _axis_mask(idx1: Tensor, shape: tuple, d: int) -> Tensor:
    """A bool mask of ``shape``: true in the slices ``idx1`` (1-D, in range) names along d."""
    n = shape[d]
    hit = lax.apply("index_put", lax.zeros((n,), dtypes.int64), idx1,
                    lax.full(tuple(idx1.shape), 1, dtypes.int64))
    along = tuple(n if k == d else 1 for k in range(len(shape)))
    return lax.expand(lax.reshape(lax.eq(hit, 1), along), shape)


def index_fill(input: Tensor, dim: int, index: Tensor, value: float | Tensor) -> Tensor:
    """A copy of ``input`` with ``value`` in the slices ``index`` (0-d or 1-D int64,
    negative from the end) names along ``dim`` (``IndexFillBackward0`` for a number,
    ``IndexFillBackward1`` for a 0-d tensor, which gets the filled positions' gradient)."""
    x, idx = to_tensor(input), to_tensor(index)
    if idx.dtype is not dtypes.int64:
        raise IndexError("index_fill_(): Expected dtype int64 for index.")
    if idx.dim() > 1:
        raise RuntimeError("Index has to be a vector/scalar")
    if isinstance(value, Tensor) and value.dim():
        raise RuntimeError(f"index_fill_ only supports a 0-dimensional value tensor, but got "
                           f"tensor with {value.dim()} dimension(s).")
    if not isinstance(value, Tensor) and not is_scalar(value):
        raise TypeError(f"index_fill(): argument 'value' must be Number, not "
                        f"{type(value).__name__}")
    d = wrap_dim(dim, max(x.dim(), 1))
    shape = tuple(x.shape) or (1,)
    n = shape[d]
    idx1 = _wrapped(lax.reshape(idx, (idx.numel(),)), n,
                    f"index {{}} is out of bounds for dimension {d} with size {n}")
    if idx.numel() == 0:
        return x.clone()
    mask = lax.reshape(_axis_mask(idx1, shape, d), tuple(x.shape))
    if isinstance(value, Tensor):
        return named("IndexFillBackward1", lambda v, w: lax.where(
            mask, lax.expand(lax.cast(w, x.dtype), tuple(x.shape)), v), x, value)
    fill = x.dtype.np.type(value).item()         # in self's dtype (an int tensor truncates)
    return named("IndexFillBackward0", lambda v: lax.where(
        mask, lax.full(tuple(x.shape), fill, x.dtype), v), x)


def index_copy(input: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    """A copy of ``input`` whose slices ``index`` (0-d or 1-D int64) names along ``dim``
    are ``source``'s slices in turn (a repeated index: the last one; ``IndexCopyBackward0``:
    the written slices of input get no gradient, every source slice its own)."""
    x, idx, s = to_tensor(input), to_tensor(index), to_tensor(source)
    if idx.dtype is not dtypes.int64:
        raise RuntimeError(f"index_copy_(): Expected a long tensor for index, but got "
                           f"{_type_name(idx)}")
    if idx.dim() > 1:
        raise IndexError(f"index_copy_(): Index should have dimension 1 or 0 (got {idx.dim()})")
    d = wrap_dim(dim, max(x.dim(), 1))
    n_src = s.shape[d] if s.dim() > d else 1
    if idx.numel() != n_src:
        raise IndexError(f"index_copy_(): Number of indices ({idx.numel()}) should be equal to "
                         f"source.size(dim) ({n_src})")
    dest = [v for k, v in enumerate(x.shape) if k != d]
    src = [v for k, v in enumerate(s.shape) if k != d]
    if x.dim() > 1 and dest != src:
        raise RuntimeError(f"index_copy_(): Source/destination tensor must have same slice "
                           f"shapes. Destination slice shape: {' '.join(map(str, dest))} at "
                           f"dimension {d} and source slice shape: {' '.join(map(str, src))} "
                           f"at dimension 0.")
    if s.dtype is not x.dtype:
        raise RuntimeError(f"index_copy_(): self and source expected to have the same dtype, "
                           f"but got (self) {_type_name(x)} and (source) {_type_name(s)}")
    shape = tuple(x.shape) or (1,)
    n = shape[d]
    idx1 = lax.in_bounds(lax.cast(lax.reshape(idx, (idx.numel(),)), dtypes.int64), n,
                         f"index_copy_(): index {{}} is out of bounds for dimension {d} with "
                         f"size {n}", "IndexError")
    if idx.numel() == 0:
        return x.clone()
    sshape = shape[:d] + (idx.numel(),) + shape[d + 1:]
    along = tuple(idx.numel() if k == d else 1 for k in range(len(shape)))
    pos = _flat_positions(lax.expand(lax.reshape(idx1, along), sshape), shape, d)
    size = x.numel()
    return named("IndexCopyBackward0", lambda v, w: lax.reshape(
        _put(lax.reshape(v, (size,)), pos, lax.reshape(w, (pos.shape[0],))), tuple(x.shape)),
        x, s)


def _index_tensors(x: Tensor, indices) -> tuple[list[Tensor], tuple]:
    """``index_put``'s indices as one int64 tensor per leading dimension of x (a mask
    becomes the positions of its true elements), with PyTorch's checks; and the shape
    they index: x's, with a unit dimension where a 0-d mask stands (it selects all of x
    or nothing, as a mask over such a dimension)."""
    if not isinstance(indices, (tuple, list)):
        raise TypeError(f"index_put(): argument 'indices' (position 1) must be tuple of "
                        f"Tensors, not {type(indices).__name__}")
    for i, k in enumerate(indices):
        if not isinstance(k, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 0, but got "
                            f"{type(k).__name__}")
    used = sum(k.dim() if k.dtype is dtypes.bool_ else 1 for k in indices)
    if used > x.dim():
        raise IndexError(f"too many indices for tensor of dimension {x.dim()} (got {used})")
    out, axis, shape = [], 0, list(x.shape)
    for k in indices:
        if k.dtype is dtypes.uint8:
            raise RuntimeError("masked_fill_ only supports boolean masks, but got mask with "
                               "dtype unsigned char")
        if k.dtype is dtypes.bool_:
            mshape = tuple(x.shape[axis:axis + k.dim()])
            if tuple(k.shape) != mshape:
                j = next(i for i, (a, b) in enumerate(zip(k.shape, mshape)) if a != b)
                raise IndexError(f"The shape of the mask {list(k.shape)} at index {j} does not "
                                 f"match the shape of the indexed tensor {list(x.shape)} at "
                                 f"index {axis + j}")
            if k._data is None:
                raise TypeError("index_put with a boolean mask needs its values (the number "
                                "of true elements decides the shape): inside symgrad.compile "
                                "use symgrad.where, or integer index tensors")
            out.extend(Tensor._from_array(p.astype(np.int64), dtypes.int64)
                       for p in np.nonzero(np.atleast_1d(k._data)))
            if k.dim() == 0:
                shape.insert(len(out) - 1, 1)
            axis += k.dim()
        elif k.dtype.category != "int":
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        else:
            out.append(lax.cast(k, dtypes.int64))
            axis += 1
    return out, tuple(shape)


def index_put(input: Tensor, indices: tuple[Tensor, ...] | list[Tensor], values: Tensor,
              accumulate: bool = False) -> Tensor:
    """A copy of ``input`` with ``values`` (broadcast to the indexing result) written at
    ``input[indices]`` -- or added there, repeated positions adding up, when
    ``accumulate`` (``IndexPutBackward0``). ``indices``: a tuple of int index tensors
    (broadcast together, negative from the end) and bool masks for the leading dims."""
    x = to_tensor(input)
    if not isinstance(values, Tensor):
        raise TypeError(f"index_put(): argument 'values' (position 2) must be Tensor, not "
                        f"{type(values).__name__}")
    idxs, xshape = _index_tensors(x, indices)
    if not idxs:
        raise RuntimeError("sym_strides() called on an undefined Tensor")
    try:
        common = broadcast_shapes(*(tuple(k.shape) for k in idxs))
    except RuntimeError:
        raise IndexError(f"shape mismatch: indexing tensors could not be broadcast together "
                         f"with shapes {', '.join(str(list(k.shape)) for k in idxs)}") from None
    rest = xshape[len(idxs):]
    result = tuple(common) + rest
    try:
        ok = broadcast_shapes(tuple(values.shape), result) == result
    except RuntimeError:
        ok = False
    if not ok:
        raise RuntimeError(f"shape mismatch: value tensor of shape {list(values.shape)} cannot "
                           f"be broadcast to indexing result of shape {list(result)}")
    if values.dtype is not x.dtype:
        raise RuntimeError(f"Index put requires the source and destination dtypes match, got "
                           f"{_type_name(x)} for the destination and {_type_name(values)} for "
                           f"the source.")
    strides = np.cumprod((1,) + xshape[::-1])[-2::-1]
    pos = None
    for k, t in enumerate(idxs):
        n = xshape[k]
        w = _wrapped(t, n, f"index {{}} is out of bounds for dimension {k} with size {n}")
        w = lax.mul(lax.expand(w, tuple(common)), int(strides[k]))
        pos = w if pos is None else lax.add(pos, w)
    pos = lax.expand(lax.reshape(pos, tuple(common) + (1,) * len(rest)), result)
    for j in range(len(rest)):
        coord = lax.apply("iota", shape=result, axis=len(common) + j, dtype=dtypes.int64)
        pos = lax.add(pos, lax.mul(coord, int(strides[len(idxs) + j])))
    count, size = int(np.prod(result)), x.numel()
    pos = lax.reshape(pos, (count,))
    if count == 0:
        return x.clone()

    def run(v, w):
        flat = lax.reshape(lax.expand(w, result), (count,))
        if accumulate:
            added = lax.scatter_add(flat, pos, 0, size)
            return lax.add(v, lax.reshape(added, tuple(x.shape)))
        return lax.reshape(_put(lax.reshape(v, (size,)), pos, flat), tuple(x.shape))
    return named("IndexPutBackward0", run, x, values)
