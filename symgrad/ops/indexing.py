"""Indexing primitives: take, gather and their transposes (scatter_add, gather_scatter),
index_put -- for each, its shape rule, numpy rule, what the eager tape saves and its VJP,
declared once (:func:`symgrad.ops.define.primitive`)."""
from __future__ import annotations

import numpy as np

from ..graph import dtypes
from . import lax
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
    return np.take(x, idx, axis=axis)


primitive("take", 2, _take_shape, _take_numpy, saves=(1,), grad_name="IndexBackward0",
          family="index", vjp=_take_vjp)


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


primitive("scatter_add", 2, _scatter_add_shape, _scatter_add_numpy, saves=(1,),
          grad_name="IndexPutBackward0", family="index", vjp=_scatter_add_vjp)


def _gather_shape(av, *, axis):
    return av[1][0], av[0][1]


def _gather_numpy(x, idx, *, axis):
    return np.take_along_axis(x, idx, axis=axis)


primitive("gather", 2, _gather_shape, _gather_numpy, saves=(1,), grad_name="GatherBackward0",
          family="index", vjp=_gather_vjp)


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


# ---- sorting -------------------------------------------------------------------------------
def _argsort_shape(av, *, axis, descending):
    return av[0][0], dtypes.int64


def _argsort_numpy(x, *, axis, descending):
    """Stable sort order along ``axis``; NaN last ascending and first descending, as
    PyTorch orders it."""
    if not descending:
        return np.argsort(x, axis=axis, kind="stable")
    if x.dtype.kind == "f":
        nan_last = ~np.isnan(x)                    # False (NaN) sorts first
        return np.lexsort((-x, nan_last), axis=axis)
    return np.argsort(~x if x.dtype.kind in "iub" else -x, axis=axis, kind="stable")


primitive("argsort", 1, _argsort_shape, _argsort_numpy, differentiable=False, family="other")
