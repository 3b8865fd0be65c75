"""Indexing primitives: take, gather and their transposes (scatter_add, gather_scatter),
index_put, index_check (PyTorch's bounds check of an index), scatter_reduce (sum / prod / mean / amax / amin at flat positions) -- for each, its shape rule, numpy rule, what the eager tape saves and its VJP,
declared once (:func:`symgrad.ops.define.primitive`)."""
from __future__ import annotations

import numpy as np

from ..autograd.nodes import delayed_error
from ..graph import dtypes
from . import lax, tie_order
from .define import primitive


# ---- reverse-mode rules ------------------------------------------------------------
def _take_vjp(ctx, g):
    axis = ctx.kwargs["axis"]
    size = ctx.in_avals[0][0][axis]
    return lax.scatter_add(g, ctx.input(1), axis, size), None


def _scatter_add_vjp(ctx, g):
    return lax.take(g, ctx.input(1), ctx.kwargs["axis"]), None


def _gather_vjp(ctx, g):
    axis = ctx.kwargs["axis"]
    size = ctx.in_avals[0][0][axis]
    return lax.apply("gather_scatter", g, ctx.input(1), axis=axis, size=size), None


def _gather_scatter_vjp(ctx, g):
    return lax.apply("gather", g, ctx.input(1), axis=ctx.kwargs["axis"]), None


def _index_put_vjp(ctx, g):
    idx = ctx.input(1)
    gx = gv = None
    if ctx.needs_input_grad[0]:
        gx = lax.apply("index_put", g, idx, lax.zeros(idx.shape, g.dtype))
    if ctx.needs_input_grad[2]:
        gv = lax.take(g, idx, 0)
    return gx, None, gv


# ---- the primitives ----------------------------------------------------------------
def _take_shape(av, *, axis):
    xs, idx = av[0][0], av[1][0]
    return xs[:axis] + tuple(idx) + xs[axis + 1:], av[0][1]


def _take_numpy(x, idx, *, axis):
    try:
        return np.take(x, idx, axis=axis)
    except IndexError:      # (as compiled code says it: codegen.lower.indexing)
        n = x.shape[axis]
        bad = (idx >= n) | (idx < -n)
        raise IndexError(f"index {int(idx[bad].flat[0])} is out of bounds for dimension 0 "
                         f"with size {n}") from None


primitive("take", 2, _take_shape, _take_numpy, saves=(1,), grad_name="IndexBackward0",
          family="index", vjp=_take_vjp).edges = 1


def _scatter_add_numpy(g, idx, *, axis, size):
    shape = g.shape[:axis] + (size,) + g.shape[axis + idx.ndim:]
    out = np.zeros(shape, dtype=g.dtype)
    # (idx.size, not -1: numpy cannot infer an axis of an empty array)
    gm = np.moveaxis(g.reshape(g.shape[:axis] + (idx.size,) + g.shape[axis + idx.ndim:]), axis, 0)
    om = np.moveaxis(out, axis, 0)
    np.add.at(om, idx.reshape(-1), gm)
    return out


def _scatter_add_shape(av, *, axis, size):
    gs, idx = av[0][0], av[1][0]
    return gs[:axis] + (size,) + gs[axis + len(idx):], av[0][1]


primitive("scatter_add", 2, _scatter_add_shape, _scatter_add_numpy, saves=(1,),
          grad_name="IndexPutBackward0", family="index", vjp=_scatter_add_vjp)


def _gather_shape(av, *, axis):
    return av[1][0], av[0][1]


def _gather_numpy(x, idx, *, axis):
    return np.take_along_axis(x, idx, axis=axis)


primitive("gather", 2, _gather_shape, _gather_numpy, saves=(1,), grad_name="GatherBackward0",
          family="index", vjp=_gather_vjp).edges = 1


def _gather_scatter_numpy(g, idx, *, axis, size):
    shape = g.shape[:axis] + (size,) + g.shape[axis + 1:]
    out = np.zeros(shape, dtype=g.dtype)
    if idx.shape[axis] == 1 and idx.shape == g.shape:     # one index per lane: no collisions
        np.put_along_axis(out, idx, g, axis)
        return out
    grids = list(np.indices(idx.shape, sparse=True))
    grids[axis] = idx
    np.add.at(out, tuple(grids), g)
    return out


def _gather_scatter_shape(av, *, axis, size):
    gs = av[0][0]
    return gs[:axis] + (size,) + gs[axis + 1:], av[0][1]


primitive("gather_scatter", 2, _gather_scatter_shape, _gather_scatter_numpy, saves=(1,),
          grad_name="ScatterAddBackward0", family="index", vjp=_gather_scatter_vjp)


def _index_put_numpy(x, idx, v):
    out = np.array(x, copy=True)
    out[idx] = v
    return out


def _index_put_shape(av):
    return av[0][0], av[0][1]
# x is 1-D; idx: int positions; v: values of idx's shape. Copy of x with x[idx] = v.


primitive("index_put", 3, _index_put_shape, _index_put_numpy, saves=(1,),
          grad_name="IndexPutBackward0", family="index", vjp=_index_put_vjp)


_INDEX_ERRORS = {"RuntimeError": RuntimeError, "IndexError": IndexError}


def _index_check_numpy(idx, *, size, message, error):
    """idx itself when every index is in [0, size) (PyTorch's bounds: no wrapping of
    negative indices), else `error` (its name) with `message` formatted with the first
    bad index."""
    bad = (idx < 0) | (idx >= size)
    if bad.any():
        v = int(idx[bad].flat[0])
        if v < 0 and "-{}" in message:
            # a check of negated negative indices (message "-{}") sees a negative one
            # only where negating overflowed: -2**63 is itself, printed as it is
            message = message.replace("-{}", "{}")
        raise _INDEX_ERRORS[error](message.format(v))
    return idx


# the runtime bounds check of gather / index_select / scatter's indices: a copy of its
# argument that raises on a bad index (elementwise for batching; compiled code checks
# natively, codegen.lower.indexing, and raises through this numpy rule on the bad value)
primitive("index_check", 1, lambda av, *, size, message, error: av[0], _index_check_numpy,
          differentiable=False, family="index")


# ---- scatter_reduce: a reduction of values into flat positions ----------------------------
_REDUCE_AT = {"sum": np.add, "prod": np.multiply, "mean": np.add, "amax": np.maximum,
              "amin": np.minimum}


def _reduce_identity(dtype, reduce):
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if dtype.kind == "f":
        return -np.inf if reduce == "amax" else np.inf
    info = np.iinfo(dtype) if dtype.kind in "iu" else None
    if info is None:                                     # bool
        return reduce == "amin"
    return info.min if reduce == "amax" else info.max


def _scatter_reduce_numpy(x, pos, src, *, reduce, include_self):
    """A copy of x (1-D) with the values ``src`` reduced into the positions ``pos`` (with
    x's own value there when ``include_self``); ``mean`` divides by the number of values
    (integers: floor division, as PyTorch); NaN propagates through amax / amin."""
    out = np.array(x, copy=True)
    if not include_self:
        out[pos] = _reduce_identity(out.dtype, reduce)
    _REDUCE_AT[reduce].at(out, pos, src)           # (maximum / minimum propagate NaN)
    if reduce == "mean":
        count = np.bincount(pos, minlength=out.shape[0]) + int(bool(include_self))
        count = np.maximum(count, 1).astype(out.dtype)
        out = out // count if out.dtype.kind in "iub" else (out / count).astype(out.dtype)
    return out


def _scatter_reduce_vjp(ctx, g):
    """PyTorch's ``scatter_reduce_backward`` (1-D, flat positions): sum and mean pass the
    cotangent (over the number of values for mean); amax / amin share it evenly among the
    values equal to the result (self counted whenever it equals the result, as PyTorch
    does); prod divides the result by the value, with the zeros handled by products taken
    again with them set to 1. Without include_self, self's covered positions get none."""
    x, pos, src, out = ctx.input(0), ctx.input(1), ctx.input(2), ctx.out
    arrays = type(g) is np.ndarray          # no graph of the backward: values only
    if arrays:
        x, pos, src, out = (getattr(v, "_data", v) for v in (x, pos, src, out))
    reduce, include_self = ctx.kwargs["reduce"], ctx.kwargs["include_self"]
    n = ctx.in_avals[0][0][0]
    real = dtypes.from_numpy_dtype(g.dtype) if arrays else g.dtype
    like = g.dtype                          # what lax.full takes: an array's dtype gives one

    def gather(t):
        return lax.take(t, pos, 0)

    def count(t):          # per position: the sum of the values of t scattered there
        return lax.scatter_add(t, pos, 0, n)

    if reduce == "sum":
        gx, gs = g, gather(g)
    elif reduce == "mean":
        total = count(lax.full(tuple(src.shape), 1, like))
        if include_self:
            total = lax.add(total, 1)
        total = lax.where(lax.eq(total, 0), 1, total)
        gx, gs = lax.div(g, total), lax.div(gather(g), gather(total))
    elif reduce in ("amax", "amin"):
        self_is = lax.cast(lax.eq(x, out), real)
        src_is = lax.cast(lax.eq(src, gather(out)), real)
        shared = lax.div(g, lax.add(self_is, count(src_is)))
        gx, gs = lax.mul(self_is, shared), lax.mul(src_is, gather(shared))
    else:
        gx = gs = None
        if ctx.needs_input_grad[0]:
            masked_x = lax.where(lax.eq(x, 0), 1, x)
            again = lax.apply("scatter_reduce", masked_x, pos, src, reduce="prod",
                              include_self=include_self)
            gx = lax.div(lax.mul(g, again), masked_x)
        if ctx.needs_input_grad[2]:
            gs = _prod_src_grad(x, pos, src, out, g, include_self, count, gather, real)
    if gx is not None and not include_self:
        ones = lax.full(tuple(pos.shape), 1, like)
        covered = lax.apply("index_put", lax.zeros((n,), like), pos, ones)
        gx = lax.where(lax.eq(covered, 1), 0, gx)
    return gx, None, gs


_PROD_TWICE = ("scatter_reduce(): Double backward is unsupported for src when >1 zeros in src "
               "are scattered to the same position in self")


def _prod_src_grad(x, pos, src, out, g, include_self, count, gather, real):
    zero = lax.eq(src, 0)
    zeros_there = gather(count(lax.cast(zero, real)))
    single = lax.apply("logical_and", zero, lax.eq(zeros_there, 1))
    again = lax.apply("scatter_reduce", x, pos, lax.where(single, 1, src), reduce="prod",
                      include_self=include_self)
    gs = lax.where(single, gather(lax.mul(g, again)),
                   lax.div(gather(lax.mul(g, out)), lax.where(zero, 1, src)))
    if type(g) is np.ndarray:
        return gs
    several = getattr(zeros_there, "_data", zeros_there)
    if several is None:         # traced: compiled code checks at every call
        bad = lax.cast(lax.apply("gt", zeros_there, 1), dtypes.int64)
        return lax.checked_in_backward(gs, lax.in_bounds(bad, 1, _PROD_TWICE))
    if (several > 1).any():
        gs = delayed_error((gs,), _PROD_TWICE, link=True)[0]
    return gs


def _checked_in_backward_vjp(ctx, g):
    """The cotangent, made to depend on the checked indices ``c`` (so a derivative
    program runs their check): selected where ``min(c) >= 0``, which the check has made
    true -- the value is the cotangent's own, bit for bit."""
    c = ctx.input(1)
    n = int(np.prod(c.shape))
    low = lax.apply("amin", lax.reshape(c, (n,)), axes=(0,), keepdim=False)
    shape = tuple(g.shape)
    ok = lax.expand(lax.reshape(lax.apply("ge", low, 0), (1,) * len(shape)), shape)
    return lax.where(ok, g, lax.zeros(shape, g.dtype)), None


# x itself; its derivative runs the check that produced the integers ``c`` (an
# index_check): a compiled gradient checks indices its value does not read, and a
# derivative PyTorch refuses raises its error (c's check fails) at every call. Removed
# once gradients are built (compiler.rewrite).
primitive("checked_in_backward", 2, lambda av: av[0], lambda x, c: x, saves=(1,),
          family="conversion", vjp=_checked_in_backward_vjp)


def _scatter_reduce_shape(av, *, reduce, include_self):
    return av[0][0], av[0][1]


primitive("scatter_reduce", 3, _scatter_reduce_shape, _scatter_reduce_numpy, saves=(0, 1, 2),
          saves_out=True, grad_name="ScatterReduceBackward0", family="other",
          vjp=_scatter_reduce_vjp)


# ---- sorting -------------------------------------------------------------------------------
def _argsort_shape(av, *, axis, descending, ties="stable"):
    return av[0][0], dtypes.int64


def _argsort_numpy(x, *, axis, descending, ties="stable"):
    """Sort order along ``axis``; NaN last ascending and first descending, as PyTorch
    orders it. ``ties``: "stable" (equal values in their order), "sort" (PyTorch's
    ``sort(stable=False)``), or ("topk", k, sorted): the first k are PyTorch's ``topk``
    indices (see :mod:`symgrad.ops.tie_order`)."""
    if not descending:
        order = np.argsort(x, axis=axis, kind="stable")
    elif x.dtype.kind == "f":
        nan_last = ~np.isnan(x)                    # False (NaN) sorts first
        order = np.lexsort((-x, nan_last), axis=axis)
    else:
        order = np.argsort(~x if x.dtype.kind in "iub" else -x, axis=axis, kind="stable")
    if ties == "stable" or x.size == 0:
        return order
    if ties == "sort":
        return tie_order.sort_order(x, order, axis, descending)
    _, k, sorted_ = ties
    return tie_order.topk_order(x, order, axis, k, descending, sorted_)


primitive("argsort", 1, _argsort_shape, _argsort_numpy, differentiable=False, family="other")
