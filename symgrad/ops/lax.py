"""Thin, unnamed primitive calls on Tensors, used by VJP rules and composite ops.

Each function binds exactly one primitive (or a fixed tiny sequence) with no PyTorch
argument handling: callers pass canonical arguments (tuples of ints, matching dtypes).
Works on eager and traced tensors alike.
"""
from __future__ import annotations

from .. import dispatch
from .registry import PRIMITIVES as P
from .shapes import numel

__all__ = ["add", "sub", "mul", "div", "neg", "where", "eq", "cast", "reshape", "expand",
           "permute", "sum", "sum_to", "full", "zeros", "matmul", "transpose_last",
           "slice_", "pad_slice", "take", "scatter_add", "unary", "finite_or_zero"]


def unary(name: str, x):
    return dispatch.bind(P[name], x)


def add(a, b):
    return dispatch.bind(P["add"], a, b)


def sub(a, b):
    return dispatch.bind(P["sub"], a, b)


def mul(a, b):
    return dispatch.bind(P["mul"], a, b)


def div(a, b):
    return dispatch.bind(P["div"], a, b)


def neg(a):
    return dispatch.bind(P["neg"], a)


def where(c, a, b):
    return dispatch.bind(P["where"], c, a, b)


def eq(a, b):
    return dispatch.bind(P["eq"], a, b)


def cast(x, dtype):
    return x if x.dtype is dtype else dispatch.bind(P["cast"], x, dtype=dtype)


def reshape(x, shape):
    shape = tuple(shape)
    return x if x.shape == shape else dispatch.bind(P["reshape"], x, shape=shape)


def expand(x, shape):
    shape = tuple(shape)
    return x if x.shape == shape else dispatch.bind(P["expand"], x, shape=shape)


def permute(x, perm):
    perm = tuple(perm)
    return x if perm == tuple(range(len(perm))) else dispatch.bind(P["permute"], x, perm=perm)


def sum(x, axes, keepdim=False):
    return dispatch.bind(P["sum"], x, axes=tuple(axes), keepdim=keepdim)


def sum_to(g, shape):
    """Sum `g` down to `shape` (the adjoint of broadcasting `shape` to g.shape)."""
    shape = tuple(shape)
    if g.shape == shape:
        return g
    lead = len(g.shape) - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, s in enumerate(shape) if s == 1 and g.shape[lead + i] != 1)
    out = sum(g, axes, keepdim=False) if axes else g
    return reshape(out, shape)


def full(shape, value, dtype):
    return dispatch.bind(P["full"], shape=tuple(shape), value=value, dtype=dtype)


def zeros(shape, dtype):
    return full(shape, 0, dtype)


def matmul(a, b):
    return dispatch.bind(P["matmul"], a, b)


def transpose_last(x):
    n = len(x.shape)
    return permute(x, tuple(range(n - 2)) + (n - 1, n - 2))


def slice_(x, starts, stops, steps):
    return dispatch.bind(P["slice"], x, starts=tuple(starts), stops=tuple(stops), steps=tuple(steps))


def pad_slice(g, shape, starts, stops, steps):
    return dispatch.bind(P["pad_slice"], g, shape=tuple(shape), starts=tuple(starts),
                stops=tuple(stops), steps=tuple(steps))


def take(x, idx, axis):
    return dispatch.bind(P["take"], x, idx, axis=axis)


def scatter_add(g, idx, axis, size):
    return dispatch.bind(P["scatter_add"], g, idx, axis=axis, size=size)


def finite_or_zero(m):
    """m where finite, else 0 — the shift used by max-shifted softmax / logsumexp, so an
    all -inf (or +inf) row does not turn into NaN."""
    inf = dispatch.bind(P["eq"], unary("abs", m), float("inf"))
    return where(inf, 0, m)


def size_of(shape) -> int:
    return numel(shape)
