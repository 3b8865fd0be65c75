"""``tensor[key]`` and ``tensor[key] = value`` with NumPy/PyTorch semantics: ints, slices,
None, Ellipsis, bool masks, integer index tensors. Basic indexing gives views (Select /
Slice); advanced indexing gathers (IndexBackward0); assignment is an in-place update
recorded as CopySlices."""
from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np

from ..graph import dtypes
from ..dispatch import bind
from ..tracing import _lifter, value_sized
from ..ops import lax
from ..graph.primitives import PRIMITIVES as P
from .common import Tensor, to_tensor
from ..graph.shapes import broadcast_shapes
from .shape import layout_view
from . import inplace
from .inplace import assign_positions
from ..autograd import grad_mode
from ..ops import lax as _lax
from .shape import expand
from .elementwise import where

if TYPE_CHECKING:
    from ..types import Index, TensorLike

__all__ = ["getitem", "setitem", "positions"]


_SEQUENCE_INDEX = ("Using a non-tuple sequence for multidimensional indexing is deprecated and "
                   "will be changed in pytorch 2.9; use x[tuple(seq)] instead of x[seq]. In "
                   "pytorch 2.9 this will be interpreted as tensor index, x[torch.tensor(seq)],"
                   " which will result either in an error or a different result")


def _sequence_as_tuple(key) -> bool:
    """PyTorch 2.13's (NumPy's old) rule: a list of fewer than 32 items holding a sequence,
    a tensor, a slice, None or Ellipsis indexes as the tuple of its items
    (``x[[[1, 0], [0, 0]]]`` is ``x[[1, 0], [0, 0]]``), with PyTorch's deprecation warning."""
    if type(key) is not list or len(key) >= 32:
        return False
    if any(k is None or k is Ellipsis or isinstance(k, (list, tuple, range, slice, str, Tensor,
                                                        np.ndarray)) for k in key):
        warnings.warn(_SEQUENCE_INDEX, UserWarning, stacklevel=4)
        return True
    return False


def _normalize(key, ndim):
    """The key as a tuple with Ellipsis expanded; index lists/arrays become Tensors."""
    if not isinstance(key, tuple):
        key = tuple(key) if _sequence_as_tuple(key) else (key,)
    out = []
    for k in key:
        if isinstance(k, range):           # (any sequence of ints, as torch's)
            k = list(k)
        if isinstance(k, (list, np.ndarray)) or (isinstance(k, Tensor) and k.dim() > 0):
            if isinstance(k, list):        # (an empty list: no indices, int64 as PyTorch's)
                k = np.asarray(k) if np.size(k) else np.asarray(k, dtype=np.int64)
            k = to_tensor(k)
            if k.dtype is dtypes.uint8:    # a mask, deprecated (PyTorch warns)
                warnings.warn(_UINT8_INDEX, UserWarning, stacklevel=4)
                k = lax.cast(k, dtypes.bool_)
        elif isinstance(k, Tensor):        # 0-d tensor: an int (or a bool / byte mask)
            k = (k if k.dtype is dtypes.bool_ else lax.cast(k, dtypes.bool_)
                 if k.dtype is dtypes.uint8 else _DynamicIndex(k) if _traced(k)
                 else _int_index(k))
        elif isinstance(k, (bool, np.bool_)):
            k = to_tensor(np.array(bool(k)))
        elif isinstance(k, np.integer):
            k = int(k)
        elif isinstance(k, str):
            raise TypeError(f"new(): invalid data type '{type(k).__name__}'")
        elif not (k is None or k is Ellipsis or isinstance(k, (int, slice))):
            raise IndexError("only integers, slices (`:`), ellipsis (`...`), None and long or "
                             "byte Variables are valid indices (got "
                             f"{type(k).__name__})")
        out.append(k)
    used = sum(_dims_used(k) for k in out)
    if sum(k is Ellipsis for k in out) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if used > ndim:
        raise IndexError(f"too many indices for tensor of dimension {ndim}")
    if any(k is Ellipsis for k in out):        # `in` would compare tensors with ==
        i = next(j for j, k in enumerate(out) if k is Ellipsis)
        out[i:i + 1] = [slice(None)] * (ndim - used)
    else:
        out += [slice(None)] * (ndim - used)
    return out


_UINT8_INDEX = ("indexing with dtype torch.uint8 is now deprecated, please use a dtype "
                "torch.bool instead. (Triggered internally at /__w/pytorch/pytorch/aten/src/"
                "ATen/native/IndexingUtils.h:37.)")


class _DynamicIndex:
    """A traced integer in a key (``x[i]`` inside jit / compile / vmap with ``i`` an
    argument): the axis is picked by a gather of that position (JAX's dynamic indexing).
    An index out of range raises PyTorch's IndexError when the program runs (JAX clamps
    it into range: a silent other answer, which symgrad does not give)."""

    __slots__ = ("t",)

    def __init__(self, t: Tensor):
        if t.dtype.category != "int":
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        self.t = t

    def position(self, size: int) -> Tensor:
        """The index as a position in [0, size), negative counted from the end; one out
        of range is left as it is (the gather raises PyTorch's IndexError naming it)."""
        t = lax.cast(self.t, dtypes.int64)
        return t + ((t < 0) & (t >= -size)).long() * size


def _traced(k: Tensor) -> bool:
    lifter = _lifter[0]
    return k._data is None or (lifter is not None and lifter.is_outer(k))


def _int_index(k: Tensor) -> int:
    if k.dtype.category != "int":
        raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
    return int(k.item())


def _dims_used(k) -> int:
    if k is None or k is Ellipsis:
        return 0
    if isinstance(k, Tensor) and k.dtype is dtypes.bool_:
        return k.dim()
    return 1


def _is_advanced(k) -> bool:
    return isinstance(k, Tensor)


def getitem(x: Tensor, key: Index) -> Tensor:
    shape = x._data.shape if x._node is None else x._node.shape
    if type(key) is slice and shape:           # x[a:b], x[i]: the common cases, kept short
        return _slice_view(x, key, 0, key)
    if type(key) is int and shape:
        size = shape[0]
        if not -size <= key < size:
            raise IndexError(f"index {key} is out of bounds for dimension 0 with size {size}")
        key %= size
        data = x._data      # (the Ellipsis keeps a 0-d result a view, as the select rule)
        return layout_view("select", x, "SelectBackward0", {"axis": 0, "index": key},
                           None if data is None else data[key, ...])
    raw = key
    key = _normalize(key, x.dim())
    if any(_is_advanced(k) for k in key):
        if any(isinstance(k, _DynamicIndex) for k in key):
            raise IndexError("indexing with a traced integer together with index tensors is "
                             "not supported: make the integer a 1-element index tensor, or "
                             "use take_along_dim / gather")
        return _advanced(x, key)
    out, axis = x, 0
    dynamic = []                    # (axis of out, index): gathered after the basic part
    raw_pos = _raw_positions(raw, len(key))
    for j, k in enumerate(key):
        if isinstance(k, _DynamicIndex):
            dynamic.append((axis, k))
            axis += 1
        elif k is None:
            shape = tuple(out.shape[:axis]) + (1,) + tuple(out.shape[axis:])
            out = _view(out, "reshape", "UnsqueezeBackward0", shape=shape)
            axis += 1
        elif isinstance(k, int):
            size = out.shape[axis]
            if not -size <= k < size:      # PyTorch names the position in the key
                raise IndexError(f"index {k} is out of bounds for dimension {raw_pos[j]} with "
                                 f"size {size}")
            out = _view(out, "select", "SelectBackward0", axis=axis, index=k % size)
        else:
            out = _slice_view(out, k, axis, raw)
            axis += 1
    for axis, k in reversed(dynamic):           # (the last first: earlier axes stay put)
        out = bind(P["take"], out, k.position(out.shape[axis]), axis=axis,
                   grad_name="IndexBackward0")
    if out is x:
        out = _view(x, "reshape", "AliasBackward0", shape=tuple(x.shape))
    return out


def _slice_view(x, k: slice, axis: int, raw):
    """x sliced by `k` along `axis` (x itself where PyTorch skips a whole-dim slice)."""
    shape = x._data.shape if x._node is None else x._node.shape
    start, stop, step = k.indices(shape[axis])
    if k.step is not None and k.step <= 0:
        raise ValueError("step must be greater than zero")
    if _whole(k, shape[axis]) and not isinstance(raw, slice):
        return x                           # PyTorch skips it (but x[:] alone is a Slice)
    stop = max(stop, start)
    rest = len(shape) - axis - 1
    attrs = {"starts": (0,) * axis + (start,) + (0,) * rest,
             "stops": tuple(shape[:axis]) + (stop,) + tuple(shape[axis + 1:]),
             "steps": (1,) * axis + (step,) + (1,) * rest}
    data = x._data          # (axis 0: the numpy view here, as the slice rule makes it)
    return layout_view("slice", x, "SliceBackward0", attrs,
                       data[start:stop:step] if axis == 0 and data is not None else None)


def _whole(k: slice, size: int) -> bool:
    """PyTorch's test for a slice it leaves out, on the slice as written: start 0, step 1,
    stop at least the size (so ``-3:`` of a size-3 dim is still sliced)."""
    return ((k.start is None or k.start == 0) and (k.step is None or k.step == 1)
            and (k.stop is None or k.stop >= size))


def _raw_key(key):
    return key if isinstance(key, tuple) else (key,)


def _raw_positions(raw, n):
    """For each entry of a normalised key of length n, its position in the raw key."""
    raw = _raw_key(raw)
    e = next((i for i, k in enumerate(raw) if k is Ellipsis), None)
    if e is None:
        return list(range(n))
    fill = n - (len(raw) - 1)             # the slices the ellipsis stands for
    return [i if i < e else e if i < e + fill else i - fill + 1 for i in range(n)]


def _view(x, prim, name, **attrs):
    return layout_view(prim, x, name, attrs)


def _single_take_axis(key):
    """The axis of a lone integer index tensor among full slices, else None."""
    adv = [i for i, k in enumerate(key) if _is_advanced(k)]
    if len(adv) != 1 or key[adv[0]].dtype is dtypes.bool_:
        return None
    if all(k == slice(None) for i, k in enumerate(key) if i != adv[0]):
        return adv[0]
    return None


def _advanced(x, key):
    axis = _single_take_axis(key)
    if axis is not None:
        idx = key[axis]
        if idx.dtype.category != "int":
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        if idx._data is not None:
            _check_bounds(idx._data, x.shape[axis], 0)
        return bind(P["take"], x, lax.cast(idx, dtypes.int64), axis=axis,
                    grad_name="IndexBackward0")
    pos = positions(x, key)
    flat = lax.reshape(x, (x.numel(),))
    return bind(P["take"], flat, Tensor._from_array(pos, dtypes.int64), axis=0,
                grad_name="IndexBackward0")


def _check_bounds(idx: np.ndarray, size: int, dim: int):
    """PyTorch's error for an index tensor: the first bad value, and `dim` counts the index
    tensors before this one (PyTorch moves the indexed dimensions to the front)."""
    bad = (idx >= size) | (idx < -size)
    if bad.any():
        value = idx.reshape(-1)[np.argmax(bad.reshape(-1))]
        raise IndexError(f"index {value} is out of bounds for dimension {dim} with size {size}")


def positions(x: Tensor, key) -> np.ndarray:
    """Flat positions in `x` selected by a (normalised) key — computed on the index values,
    so index tensors must be concrete."""
    np_key = []
    # the tensor PyTorch indexes with tensors: x after the integer indices (selects)
    kept = [s for s, k in zip(x.shape, [k for k in key if k is not None])
            if not isinstance(k, int)]
    kept += list(x.shape[len([k for k in key if k is not None]):])
    dim = n_index = gaxis = 0            # position in `kept`, index tensors seen, in x
    for axis, k in enumerate(key):
        if isinstance(k, Tensor):
            if k._data is None:
                if k.dtype is dtypes.bool_:
                    value_sized("boolean-mask indexing x[mask]")
                raise TypeError("indexing with several or boolean traced index tensors is not "
                                "supported inside symgrad.compile; index one dimension at a "
                                "time with an integer tensor, or use symgrad.where")
            if k.dtype is dtypes.bool_:
                mshape = tuple(x.shape[gaxis:gaxis + k.dim()])
                if tuple(k.shape) != mshape:
                    j = next((i for i, (a, b) in enumerate(zip(k.shape, mshape)) if a != b),
                             min(len(mshape), k.dim() - 1))
                    raise IndexError(f"The shape of the mask {list(k.shape)} at index {j} does "
                                     f"not match the shape of the indexed tensor {kept} at "
                                     f"index {dim + j}")
                n_index += k.dim()
            elif k.dtype.category != "int":
                raise IndexError("tensors used as indices must be long, int, byte or bool "
                                 "tensors")
            else:
                _check_bounds(k._data, x.shape[gaxis], n_index)
                n_index += 1
            dim += max(k.dim(), 1)
            gaxis += k.dim() if k.dtype is dtypes.bool_ else 1
            np_key.append(k._data)
        else:
            if k is not None and not isinstance(k, int):
                dim += 1
            gaxis += k is not None
            np_key.append(k)
    grid = np.arange(x.numel(), dtype=np.int64).reshape(tuple(x.shape))
    # PyTorch applies integer indices first (as selects): they do not take part in the
    # placement of the advanced-index dimensions, as they would in numpy
    first, rest = [], []
    for k in np_key:
        if isinstance(k, int):
            first.append(k)
        else:
            if k is not None:
                first.extend([slice(None)] * (k.ndim if getattr(k, "dtype", None) == np.bool_
                                              else 1))
            rest.append(k)
    try:
        if len(rest) != len(np_key):
            grid = grid[tuple(first)]
        return np.array(grid[tuple(rest)], dtype=np.int64)   # keeps 0-d keys 0-d
    except IndexError as e:
        msg = str(e).replace("axis", "dimension")
        raise IndexError(msg) from None


def setitem(x: Tensor, key: Index, value: TensorLike) -> Tensor | None:
    """``x[key] = value``: an in-place update of x (and of the base x is a view of)."""
    if isinstance(value, (list, tuple, np.ndarray)):
        value = to_tensor(np.asarray(value)) if not isinstance(value, Tensor) else value
    if (any(isinstance(k, Tensor) and k.dtype is dtypes.uint8
            for k in (key if isinstance(key, tuple) else (key,)))
            and (not isinstance(value, Tensor) or value.numel() == 1)):
        # PyTorch fills a one-element value through masked_fill_, which refuses bytes
        raise RuntimeError("masked_fill_ only supports boolean masks, but got mask with "
                           "dtype unsigned char")
    for k in (key if isinstance(key, tuple) else (key,)):
        if isinstance(k, slice) and k.step is not None and k.step <= 0:
            raise ValueError("slice step cannot be zero" if k.step == 0 else
                             "step must be greater than zero")
    if "_view_meta" in x.__dict__ and grad_mode.is_grad_enabled() and (
            x.requires_grad or (isinstance(value, Tensor) and value.requires_grad)):
        _check_view_setitem(x, key)
    nkey = _normalize(key, x.dim())
    nkey = [k.position(x.shape[j]) if isinstance(k, _DynamicIndex) else k
            for j, k in enumerate(nkey)] if any(isinstance(k, _DynamicIndex) for k in nkey) \
        else nkey
    if x._base is None and _selects_all(x, nkey, allow_index=False):
        return _set_whole(x, value)
    if any(isinstance(k, Tensor) and k._data is None for k in nkey):
        return _set_traced(x, nkey, value)
    pos = positions(x, nkey)        # with None: the shape of PyTorch's indexing result
    if isinstance(value, Tensor):
        value = _fit_value(value, pos.shape, any(_is_advanced(k) for k in nkey))
    if (any(_is_advanced(k) for k in nkey) and x._base is None
            and _selects_all(x, nkey, allow_index=True)):
        # only index tensors and whole slices: PyTorch runs index_put_ on x itself; an
        # int, a partial slice or None first makes a view, and the write is a CopySlices
        assign_positions(x, pos, value, "IndexPutBackward0")
    else:
        assign_positions(x, pos, value)


def _check_view_setitem(x: Tensor, key) -> None:
    """``x[key] = v`` on a view PyTorch refuses to update (see inplace.check_view_update):
    it writes through the view its basic indexing makes last (an int: Select, a partial
    slice: Slice, None: Unsqueeze), else into x itself (index_put_, ``x[:]``)."""
    keys = key if isinstance(key, tuple) else (key,)
    used = sum(k is not None and k is not Ellipsis for k in keys)
    name, d = None, 0
    for k in keys:
        if k is Ellipsis:
            d += max(x.dim() - used, 0)
        elif k is None:
            name = "Unsqueeze"
        elif isinstance(k, (int, np.integer)) and not isinstance(k, bool):
            name, d = "Select", d + 1
        elif isinstance(k, slice):
            n = x.shape[d] if d < x.dim() else 1
            if k.indices(n) != (0, n, 1):       # (a whole dimension: no view made)
                name = "Slice"
            d += 1
        else:
            d += 1
    # (no history for the view when x has none: PyTorch's text names no node then)
    inplace.check_view_update(x, name if x.requires_grad else None, 0)


def _set_traced(x: Tensor, nkey, value) -> None:
    """``x[key] = value`` inside a trace with a traced index: one integer index tensor
    after whole slices only (``x[i] = v``, ``x[:, i] = v``) is ``index_put_`` (the
    leading slices as broadcast ranges, as PyTorch's indexing does); other keys are
    refused, saying which."""
    j = next(n for n, k in enumerate(nkey) if isinstance(k, Tensor))
    k = nkey[j]
    if k.dtype is dtypes.bool_ and _set_masked(x, nkey, j, k, value):
        return
    if (k.dtype.category != "int" or any(isinstance(o, Tensor) for o in nkey[j + 1:])
            or not all(isinstance(o, slice) and _whole(o, x.shape[a])
                       for a, o in enumerate(nkey) if a != j)):
        raise TypeError("inside symgrad.compile, x[key] = value with a traced index tensor "
                        "takes one integer index tensor after whole slices (x[i] = v, "
                        "x[:, i] = v); use index_put_ or symgrad.where for other keys")
    lead = [_lax.reshape(_lax.apply("iota", shape=(x.shape[a],), axis=0, dtype=dtypes.int64),
                         (x.shape[a],) + (1,) * (j - 1 - a + k.dim())) for a in range(j)]
    if not isinstance(value, Tensor):
        value = _lax.full((), value, x.dtype)
    x.index_put_(tuple(lead) + (k,), value.to(x.dtype))


def _set_masked(x: Tensor, nkey, j: int, mask: Tensor, value) -> bool:
    """``x[mask] = v`` (``x[:, mask] = v``) with a traced boolean mask and a value whose
    shape does not depend on the mask's count (a scalar, or broadcast along the masked
    axis): ``x.copy_(where(mask, v, x))`` -- a static shape. A value with one element per
    True (its size depends on the mask's values) takes the graph break inside
    ``symgrad.compile`` and is refused elsewhere. False: another key (the caller's error)."""
    if (any(isinstance(o, Tensor) for o in nkey[j + 1:]) or mask.dim() == 0
            or not all(isinstance(o, slice) and _whole(o, x.shape[a])
                       for a, o in enumerate(nkey) if a != j)):
        return False
    end = j + mask.dim()
    if tuple(mask.shape) != tuple(x.shape[j:end]):
        mshape = tuple(x.shape[j:end])
        n = next((i for i, (a, b) in enumerate(zip(mask.shape, mshape)) if a != b),
                 min(len(mshape), mask.dim() - 1))
        raise IndexError(f"The shape of the mask {list(mask.shape)} at index {n} does not "
                         f"match the shape of the indexed tensor {list(x.shape)} at index "
                         f"{j + n}")
    rest = tuple(x.shape[end:])
    if isinstance(value, Tensor):
        v = value
        while v.dim() > len(rest) + j + 1 and v.shape[0] == 1:    # (PyTorch drops them)
            v = lax.reshape(v, tuple(v.shape[1:]))
        if v.dim() > len(rest):
            if v.dim() > len(rest) + j + 1 or v.shape[v.dim() - len(rest) - 1] != 1:
                value_sized("x[mask] = value with one value per True element")
                raise TypeError("inside a traced function, x[mask] = value with a traced "
                                "boolean mask takes a scalar or a value broadcast along "
                                "the masked elements; one value per True element has a "
                                "size depending on the mask's values")
            at = v.dim() - len(rest) - 1
            v = lax.reshape(v, tuple(v.shape[:at]) + (1,) * mask.dim()
                            + tuple(v.shape[at + 1:]))
        v = v.to(x.dtype)
    else:
        v = _lax.full((), value, x.dtype)
    m = lax.reshape(mask, (1,) * j + tuple(mask.shape) + (1,) * len(rest))
    _set_whole(x, where(m, v, x))
    return True


def _selects_all(x: Tensor, nkey, allow_index: bool) -> bool:
    """The key is only slices PyTorch skips (see _whole) — and index tensors if allowed."""
    axis = 0
    for k in nkey:
        if isinstance(k, Tensor) and allow_index and k.dim():   # (a 0-d mask is a view)
            axis += k.dim() if k.dtype is dtypes.bool_ else 1
        elif isinstance(k, slice) and _whole(k, x.shape[axis]):
            axis += 1
        else:
            return False
    return True


def _set_whole(x: Tensor, value):
    """``x[:] = value`` with nothing to slice: PyTorch's copy_to, i.e. ``fill_`` for a
    scalar or 0-d value (FillBackward3) and ``copy_`` otherwise (CopyBackwards)."""
    if not isinstance(value, Tensor):
        value = _lax.full((), value, x.dtype)
    if value.dim() == 0 and x.dim() != 0:         # (equal shapes copy_, even 0-d ones)
        return x.fill_(value)
    if tuple(value.shape) != tuple(x.shape):
        value = _fit_value(value, tuple(x.shape), False)
    return x.copy_(value)


def _fit_value(value: Tensor, shape, advanced: bool) -> Tensor:
    """PyTorch drops leading size-1 dims of the value (``slicePrefix1sSize``); a value that
    still does not broadcast raises expand's error for a basic key (index_put_'s "shape
    mismatch" for an advanced one is raised by assign_positions)."""
    while value.dim() > len(shape) and value.shape[0] == 1:
        value = lax.reshape(value, tuple(value.shape[1:]))
    if not advanced:
        try:
            ok = broadcast_shapes(tuple(value.shape), tuple(shape)) == tuple(shape)
        except RuntimeError:
            ok = False
        if not ok:
            expand(value, *shape)          # raises PyTorch's text
    return value
