"""Structural primitives: layout, indexing, reductions, matmul, concatenation, casts.

Each is registered here with its shape rule and numpy rule; its VJP rule lives in
:mod:`symgrad.ops.vjp` (one table per transformation). Attributes are plain hashable
values (tuples of ints, dtypes).
"""
from __future__ import annotations

import numpy as np

from ..graph import dtypes
from ..dispatch import STRUCTURAL_SAVES
from ..graph.primitives import register_structural
from ..graph.shapes import broadcast_shapes, numel, reduce_shape

__all__ = ["STRUCTURAL"]


def _same_dtype(avals):
    return avals[0][1]


def _reg(name, nin, shape_rule, numpy_rule, *, saves=(), saves_out=False, **kw):
    STRUCTURAL_SAVES[name] = (tuple(saves), saves_out)
    return register_structural(name, nin, shape_rule, numpy_rule, **kw)


# --- layout -----------------------------------------------------------------------
def _reshape_numpy(x, *, shape):
    return x.reshape(shape) if type(x) is np.ndarray else np.reshape(x, shape)


_reg("reshape", 1, lambda av, *, shape: (shape, av[0][1]), _reshape_numpy,
     grad_name="ViewBackward0")
def _expand_numpy(x, *, shape):
    """``np.broadcast_to(x, shape)``: a read-only view with stride 0 on broadcast dims,
    built directly when x is C-contiguous (half the cost of np.broadcast_to's checks)."""
    if type(x) is np.ndarray and x.flags.c_contiguous and len(shape) >= x.ndim:
        lead = len(shape) - x.ndim
        strides = [0] * lead
        for n, stride, want in zip(x.shape, x.strides, shape[lead:]):
            if n == want:
                strides.append(stride)
            elif n == 1:
                strides.append(0)
            else:
                return np.broadcast_to(x, shape)        # raises numpy's error
        view = np.ndarray(shape, x.dtype, x, 0, tuple(strides))
        view.flags.writeable = False
        return view
    return np.broadcast_to(x, shape)


_reg("expand", 1, lambda av, *, shape: (broadcast_shapes(av[0][0], shape), av[0][1]),
     _expand_numpy, grad_name="ExpandBackward0")
_reg("permute", 1, lambda av, *, perm: (tuple(av[0][0][p] for p in perm), av[0][1]),
     lambda x, *, perm: np.transpose(x, perm), grad_name="PermuteBackward0")


def _slice_shape(av, *, starts, stops, steps):
    return tuple(len(range(a, b, c)) for a, b, c in zip(starts, stops, steps)), av[0][1]


def _slice_numpy(x, *, starts, stops, steps):
    return x[tuple(slice(a, b, c) for a, b, c in zip(starts, stops, steps))]


_reg("slice", 1, _slice_shape, _slice_numpy, grad_name="SliceBackward0")


def _pad_slice_numpy(g, *, shape, starts, stops, steps):
    out = np.zeros(shape, dtype=g.dtype)
    out[tuple(slice(a, b, c) for a, b, c in zip(starts, stops, steps))] = g
    return out


_reg("pad_slice", 1, lambda av, *, shape, starts, stops, steps: (shape, av[0][1]),
     _pad_slice_numpy)


# --- gather / scatter along one axis -----------------------------------------------
def _take_shape(av, *, axis):
    xs, idx = av[0][0], av[1][0]
    return xs[:axis] + tuple(idx) + xs[axis + 1:], av[0][1]


def _take_numpy(x, idx, *, axis):
    return np.take(x, idx, axis=axis)


_reg("take", 2, _take_shape, _take_numpy, saves=(1,), grad_name="IndexBackward0")


def _scatter_add_numpy(g, idx, *, axis, size):
    shape = g.shape[:axis] + (size,) + g.shape[axis + idx.ndim:]
    out = np.zeros(shape, dtype=g.dtype)
    gm = np.moveaxis(g.reshape(g.shape[:axis] + (-1,) + g.shape[axis + idx.ndim:]), axis, 0)
    om = np.moveaxis(out, axis, 0)
    np.add.at(om, idx.reshape(-1), gm)
    return out


def _scatter_add_shape(av, *, axis, size):
    gs, idx = av[0][0], av[1][0]
    return gs[:axis] + (size,) + gs[axis + len(idx):], av[0][1]


_reg("scatter_add", 2, _scatter_add_shape, _scatter_add_numpy, saves=(1,),
     grad_name="IndexPutBackward0")


def _gather_shape(av, *, axis):
    return av[1][0], av[0][1]


def _gather_numpy(x, idx, *, axis):
    return np.take_along_axis(x, idx, axis=axis)


_reg("gather", 2, _gather_shape, _gather_numpy, saves=(1,), grad_name="GatherBackward0")


def _gather_scatter_numpy(g, idx, *, axis, size):
    shape = g.shape[:axis] + (size,) + g.shape[axis + 1:]
    out = np.zeros(shape, dtype=g.dtype)
    grids = list(np.indices(idx.shape, sparse=True))
    grids[axis] = idx
    np.add.at(out, tuple(grids), g)
    return out


def _gather_scatter_shape(av, *, axis, size):
    gs = av[0][0]
    return gs[:axis] + (size,) + gs[axis + 1:], av[0][1]


_reg("gather_scatter", 2, _gather_scatter_shape, _gather_scatter_numpy, saves=(1,),
     grad_name="ScatterAddBackward0")


def _index_put_numpy(x, idx, v):
    out = np.array(x, copy=True)
    out[idx] = v
    return out


def _index_put_shape(av):
    return av[0][0], av[0][1]


# x is 1-D; idx: int positions; v: values of idx's shape. Copy of x with x[idx] = v.
_reg("index_put", 3, _index_put_shape, _index_put_numpy, saves=(1,),
     grad_name="IndexPutBackward0")


def _select_shape(av, *, axis, index):
    s = av[0][0]
    return s[:axis] + s[axis + 1:], av[0][1]


def _select_numpy(x, *, axis, index):
    # the Ellipsis keeps a 0-d result a view (x[0] of a vector), not a numpy scalar copy
    return x[(slice(None),) * axis + (index, Ellipsis)]


_reg("select", 1, _select_shape, _select_numpy, grad_name="SelectBackward0")


# --- reductions ----------------------------------------------------------------------
def _reduce_shape(av, *, axes, keepdim):
    return reduce_shape(av[0][0], axes, keepdim), av[0][1]


# reductions call the ufunc reductions directly: np.sum / np.mean / np.amax add a few µs of
# Python-level dispatch per call, which dominates small eager tensors
def _sum_numpy(x, *, axes, keepdim):
    return np.add.reduce(x, axis=axes, keepdims=keepdim)


_reg("sum", 1, _reduce_shape, _sum_numpy, grad_name="SumBackward1")


def _extreme_value(dtype, lowest: bool):
    if dtype.kind == "f":
        return -np.inf if lowest else np.inf
    if dtype.kind == "b":
        return not lowest
    info = np.iinfo(dtype)
    return info.min if lowest else info.max


# An empty reduction gives the identity (-inf for max) as logsumexp needs; the user-facing
# functions raise PyTorch's errors for empty reductions before binding.
def _amax_numpy(x, *, axes, keepdim):
    if x.size == 0:
        return np.amax(x, axis=axes, keepdims=keepdim, initial=_extreme_value(x.dtype, True))
    return np.maximum.reduce(x, axis=axes, keepdims=keepdim)


def _amin_numpy(x, *, axes, keepdim):
    if x.size == 0:
        return np.amin(x, axis=axes, keepdims=keepdim, initial=_extreme_value(x.dtype, False))
    return np.minimum.reduce(x, axis=axes, keepdims=keepdim)


_reg("amax", 1, _reduce_shape, _amax_numpy, saves=(0,), saves_out=True,
     grad_name="AmaxBackward0")
_reg("amin", 1, _reduce_shape, _amin_numpy, saves=(0,), saves_out=True,
     grad_name="AminBackward0")


def _mean_numpy(x, *, axes, keepdim):
    n = 1
    for a in axes:
        n *= x.shape[a]
    total = np.add.reduce(x, axis=axes, keepdims=keepdim, dtype=x.dtype)
    # the operator, not np.true_divide: ~10x cheaper on the numpy scalar of a full
    # reduction, and a Python int divisor keeps x's dtype
    return total / n if n else np.full_like(total, np.nan)


_reg("mean", 1, _reduce_shape, _mean_numpy, grad_name="MeanBackward1")


def _prod_numpy(x, *, axes, keepdim):
    return np.multiply.reduce(x, axis=axes, keepdims=keepdim)


_reg("prod", 1, _reduce_shape, _prod_numpy, saves=(0,), saves_out=True,
     grad_name="ProdBackward1")


def _prod_others_numpy(x, *, axes):
    """For each element, the product of the other elements of its reduction group
    (exact with zeros: exclusive products from both sides)."""
    if x.size == 0:
        return np.ones_like(x)
    keep = [i for i in range(x.ndim) if i not in axes]
    perm = keep + list(axes)
    xt = np.transpose(x, perm)
    lead = xt.shape[:len(keep)]
    flat = xt.reshape(lead + (-1,))
    ones = np.ones(lead + (1,), dtype=x.dtype)
    left = np.cumprod(np.concatenate([ones, flat[..., :-1]], axis=-1), axis=-1)
    right = np.flip(np.cumprod(np.concatenate([ones, np.flip(flat, -1)[..., :-1]], -1), -1), -1)
    res = (left * right).reshape(xt.shape)
    return np.transpose(res, np.argsort(perm))


_reg("prod_others", 1, lambda av, *, axes: (av[0][0], av[0][1]), _prod_others_numpy,
     saves=(0,))


def _prod_others_dot_numpy(x, g, *, axes):
    """H_j = sum_{i != j} g_i prod_{k != i, j} x_k over each reduction group: the VJP of
    prod_others, exact with zeros (no division). Scans with exclusive products L, R:
    H_j = R_j sum_{i<j} g_i L_i prod_{i<m<j} x_m + L_j sum_{i>j} g_i R_i prod_{j<m<i} x_m."""
    if x.size == 0:
        return np.zeros_like(x)
    keep = [i for i in range(x.ndim) if i not in axes]
    perm = keep + list(axes)
    xt, gt = np.transpose(x, perm), np.transpose(np.broadcast_to(g, x.shape), perm)
    lead = xt.shape[:len(keep)]
    xf, gf = xt.reshape(lead + (-1,)), gt.reshape(lead + (-1,))
    n = xf.shape[-1]
    ones = np.ones(lead + (1,), dtype=x.dtype)
    left = np.cumprod(np.concatenate([ones, xf[..., :-1]], axis=-1), axis=-1)
    right = np.flip(np.cumprod(np.concatenate([ones, np.flip(xf, -1)[..., :-1]], -1), -1), -1)
    a = np.zeros_like(xf)
    b = np.zeros_like(xf)
    for j in range(1, n):
        a[..., j] = a[..., j - 1] * xf[..., j - 1] + gf[..., j - 1] * left[..., j - 1]
    for j in range(n - 2, -1, -1):
        b[..., j] = b[..., j + 1] * xf[..., j + 1] + gf[..., j + 1] * right[..., j + 1]
    res = (a * right + left * b).reshape(xt.shape)
    return np.transpose(res, np.argsort(perm))


_reg("prod_others_dot", 2, lambda av, *, axes: (av[0][0], av[0][1]), _prod_others_dot_numpy,
     saves=(0, 1))


def _arg_shape(av, *, axis, keepdim):
    return reduce_shape(av[0][0], (axis,), keepdim), dtypes.int64


def _argmax_numpy(x, *, axis, keepdim):
    return np.argmax(x, axis=axis, keepdims=keepdim)


def _argmin_numpy(x, *, axis, keepdim):
    return np.argmin(x, axis=axis, keepdims=keepdim)


_reg("argmax", 1, _arg_shape, _argmax_numpy, differentiable=False)
_reg("argmin", 1, _arg_shape, _argmin_numpy, differentiable=False)


def _cumsum_numpy(x, *, axis):
    return np.cumsum(x, axis=axis, dtype=x.dtype)


_reg("cumsum", 1, lambda av, *, axis: (av[0][0], av[0][1]), _cumsum_numpy,
     grad_name="CumsumBackward0")


def _flip_numpy(x, *, axes):
    return np.flip(x, axes)


_reg("flip", 1, lambda av, *, axes: (av[0][0], av[0][1]), _flip_numpy,
     grad_name="FlipBackward0")


# --- matmul --------------------------------------------------------------------------
def _matmul_shape(av):
    """numpy.matmul semantics (1-D operands included) with PyTorch's error texts."""
    (a, da), (b, db) = av
    if da is not db:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: "
                           f"{da.cpp_name} != {db.cpp_name}")
    if len(a) == 0 or len(b) == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are "
                           f"{len(a)}D and {len(b)}D")
    if len(a) == 1 and len(b) == 1:
        if a[0] != b[0]:
            raise RuntimeError(f"inconsistent tensor size, expected tensor [{a[0]}] and src "
                               f"[{b[0]}] to have the same number of elements, but got "
                               f"{a[0]} and {b[0]} elements respectively")
        return (), da
    if len(b) == 1:
        if a[-1] != b[0]:
            raise RuntimeError(f"size mismatch, got input ({a[-2]}), mat ({a[-2]}x{a[-1]}), "
                               f"vec ({b[0]})")
        return tuple(a[:-1]), da
    if len(a) == 1:
        if a[0] != b[-2]:
            _batch_mismatch(b[:-2], a[0], b)
            raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied (1x{a[0]} and "
                               f"{b[-2]}x{b[-1]})")
        return tuple(b[:-2]) + (b[-1],), da
    batch = broadcast_shapes(a[:-2], b[:-2])
    if a[-1] != b[-2]:
        _batch_mismatch(batch, a[-1], b)
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied "
                           f"({numel(a[:-1])}x{a[-1]} and {b[-2]}x{b[-1]})")
    return batch + (a[-2], b[-1]), da


def _batch_mismatch(batch, k, b):
    """PyTorch's text when a batched right operand (run as bmm over the broadcast batch)
    has the wrong inner size."""
    if len(b) >= 3:
        n = numel(batch)
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{n}, {k}] but got: [{n}, {b[-2]}].")


_reg("matmul", 2, _matmul_shape, lambda a, b: np.matmul(a, b), saves=(0, 1),
     grad_name="MmBackward0")


# --- concatenation, casts, constants ---------------------------------------------------
def _cat_shape(av, *, axis):
    base = list(av[0][0])
    base[axis] = sum(s[axis] for s, _ in av)
    return tuple(base), av[0][1]


# detach() of a traced tensor (and any result computed under no_grad in a trace): the
# value unchanged, no gradient through it -- JAX's stop_gradient.  simplify() removes it
# once the gradient graph is built.
_reg("stop_gradient", 1, lambda av: (av[0][0], av[0][1]), lambda x: x, differentiable=False)
_reg("cat", -1, _cat_shape, lambda *xs, axis: np.concatenate(xs, axis=axis),
     grad_name="CatBackward0")
_reg("cast", 1, lambda av, *, dtype: (av[0][0], dtype),
     lambda x, *, dtype: x.astype(dtype.np), grad_name="ToCopyBackward0")
_reg("full", 0, lambda av, *, shape, value, dtype: (shape, dtype),
     lambda *, shape, value, dtype: np.full(shape, value, dtype=dtype.np),
     differentiable=False)
_reg("iota", 0, lambda av, *, shape, axis, dtype: (shape, dtype),
     lambda *, shape, axis, dtype: np.broadcast_to(
         np.arange(shape[axis], dtype=dtype.np).reshape(
             [-1 if i == axis else 1 for i in range(len(shape))]), shape).copy(),
     differentiable=False)

STRUCTURAL = ("reshape", "expand", "permute", "slice", "pad_slice", "take", "scatter_add",
              "gather", "gather_scatter", "index_put", "select", "mean", "sum", "amax", "amin", "prod", "prod_others", "prod_others_dot", "argmax", "argmin", "cumsum",
              "flip", "matmul", "cat", "cast", "full", "iota", "stop_gradient")
