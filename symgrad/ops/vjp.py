"""The VJP table: for each primitive, the rule mapping the output cotangent `g` to input
cotangents, written with primitive calls (:mod:`symgrad.ops.lax`), so the same rule
computes eager gradients and builds symbolic gradient graphs (and so composes for
higher-order derivatives).

A rule gets a context with ``input(i)`` (a saved input), ``out`` (the saved output),
``in_avals`` ((shape, dtype) per input), ``kwargs`` (attributes) and
``needs_input_grad``; it returns one cotangent (or None) per input.
"""
from __future__ import annotations

import numpy as np
import sympy

from . import lax
from .registry import OUT, VJP_RULES, derivative_primitive
from .shapes import broadcast_shapes

__all__ = ["elementwise_vjp", "where_vjp"]


def elementwise_vjp(ctx, g):
    """The generic rule of every formula-defined primitive: g * d f / d x_i, summed over
    broadcast dimensions."""
    prim = ctx.prim
    syms = prim.formula.symbols
    grads = []
    for i, need in enumerate(ctx.needs_input_grad):
        if not need:
            grads.append(None)
            continue
        d = derivative_primitive(prim, i)
        gi = _times_partial(ctx, g, d, syms)
        if gi is None:
            shape, dtype = ctx.in_avals[i]
            grads.append(lax.zeros(shape, dtype))
            continue
        grads.append(lax.sum_to(gi, ctx.in_avals[i][0]))
    return tuple(grads)


def _value_of(ctx, sym, syms):
    return ctx.out if sym == OUT else ctx.input(syms.index(sym))


def _times_partial(ctx, g, d, syms):
    if isinstance(d, tuple):
        dprim, dsyms = d
        from ..dispatch import bind
        args = [_value_of(ctx, s, syms) for s in dsyms]
        if not any(hasattr(a, "_data") for a in args):   # only Python scalars (x / 2)
            from .registry import NUMPY_RULES
            return lax.mul(g, float(NUMPY_RULES[dprim.name](*(float(a) for a in args))))
        return lax.mul(g, bind(dprim, *args))
    if d.is_number:
        if d == 0:
            return None
        if d == 1:
            return g
        if d == -1:
            return lax.neg(g)
        return lax.mul(g, float(d))
    return lax.mul(g, _value_of(ctx, d, syms))


def where_vjp(ctx, g):
    """where(c, x, y): the cotangent goes to the selected operand (the condition has none)."""
    c = ctx.input(0)
    gx = lax.sum_to(lax.where(c, g, 0), ctx.in_avals[1][0]) if ctx.needs_input_grad[1] else None
    gy = lax.sum_to(lax.where(c, 0, g), ctx.in_avals[2][0]) if ctx.needs_input_grad[2] else None
    return None, gx, gy


def _reshape_vjp(ctx, g):
    return (lax.reshape(g, ctx.in_avals[0][0]),)


def _expand_vjp(ctx, g):
    return (lax.sum_to(g, ctx.in_avals[0][0]),)


def _permute_vjp(ctx, g):
    perm = ctx.kwargs["perm"]
    return (lax.permute(g, tuple(np.argsort(perm).tolist())),)


def _slice_vjp(ctx, g):
    k = ctx.kwargs
    return (lax.pad_slice(g, ctx.in_avals[0][0], k["starts"], k["stops"], k["steps"]),)


def _pad_slice_vjp(ctx, g):
    k = ctx.kwargs
    return (lax.slice_(g, k["starts"], k["stops"], k["steps"]),)


def _take_vjp(ctx, g):
    axis = ctx.kwargs["axis"]
    size = ctx.in_avals[0][0][axis]
    return lax.scatter_add(g, ctx.input(1), axis, size), None


def _scatter_add_vjp(ctx, g):
    return lax.take(g, ctx.input(1), ctx.kwargs["axis"]), None


def _gather_vjp(ctx, g):
    axis = ctx.kwargs["axis"]
    from ..dispatch import bind
    from .registry import PRIMITIVES
    size = ctx.in_avals[0][0][axis]
    return bind(PRIMITIVES["gather_scatter"], g, ctx.input(1), axis=axis, size=size), None


def _gather_scatter_vjp(ctx, g):
    from ..dispatch import bind
    from .registry import PRIMITIVES
    return bind(PRIMITIVES["gather"], g, ctx.input(1), axis=ctx.kwargs["axis"]), None


def _index_put_vjp(ctx, g):
    from ..dispatch import bind
    from .registry import PRIMITIVES
    idx = ctx.input(1)
    gx = gv = None
    if ctx.needs_input_grad[0]:
        gx = bind(PRIMITIVES["index_put"], g, idx, lax.zeros(idx.shape, g.dtype))
    if ctx.needs_input_grad[2]:
        gv = lax.take(g, idx, 0)
    return gx, None, gv


def _select_vjp(ctx, g):
    k = ctx.kwargs
    shape = ctx.in_avals[0][0]
    axis, index = k["axis"], k["index"]
    index = index % shape[axis]
    g1 = lax.reshape(g, shape[:axis] + (1,) + shape[axis + 1:])
    starts = tuple(index if i == axis else 0 for i in range(len(shape)))
    stops = tuple(index + 1 if i == axis else s for i, s in enumerate(shape))
    return (lax.pad_slice(g1, shape, starts, stops, (1,) * len(shape)),)


def _mean_vjp(ctx, g):
    k = ctx.kwargs
    shape = ctx.in_avals[0][0]
    n = 1
    for a in k["axes"]:
        n *= shape[a]
    gk = lax.expand(_keep(g, shape, k["axes"], k["keepdim"]), shape)
    return (lax.div(gk, float(n)),)


def _keep(g, in_shape, axes, keepdim):
    if not keepdim:
        g = lax.reshape(g, tuple(1 if i in axes else s for i, s in enumerate(in_shape)))
    return g


def _sum_vjp(ctx, g):
    k = ctx.kwargs
    shape = ctx.in_avals[0][0]
    return (lax.expand(_keep(g, shape, k["axes"], k["keepdim"]), shape),)


def _extremum_vjp(ctx, g):
    """Gradient split evenly among the elements equal to the extremum (as PyTorch's
    amax / amin and full max / min)."""
    k = ctx.kwargs
    x = ctx.input(0)
    shape, dtype = ctx.in_avals[0]
    out = lax.expand(_keep(ctx.out, shape, k["axes"], k["keepdim"]), shape)
    mask = lax.cast(lax.eq(x, out), dtype)
    count = lax.sum(mask, k["axes"], keepdim=True)
    gk = lax.expand(_keep(g, shape, k["axes"], k["keepdim"]), shape)
    return (lax.div(lax.mul(gk, mask), count),)


def _prod_vjp(ctx, g):
    k = ctx.kwargs
    shape = ctx.in_avals[0][0]
    from ..dispatch import bind
    from .registry import PRIMITIVES
    others = bind(PRIMITIVES["prod_others"], ctx.input(0), axes=k["axes"])
    gk = lax.expand(_keep(g, shape, k["axes"], k["keepdim"]), shape)
    return (lax.mul(gk, others),)


def _prod_others_vjp(ctx, g):
    """d/dx_j of prod_{k != i} x_k, contracted with g: sum_i g_i * prod_{k != i, j} x_k.
    Computed as (sum_i g_i * P_i) / x_j - g_j * P_j / x_j ... written without division:
    the product of all others except j and i is prod_others applied twice is not exact
    with zeros, so we use the identity on groups with at most one zero handled by
    where()."""
    axes = ctx.kwargs["axes"]
    x = ctx.input(0)
    from ..dispatch import bind
    from .registry import PRIMITIVES
    p = bind(PRIMITIVES["prod_others"], x, axes=axes)          # P_j = prod_{k != j} x_k
    s = lax.expand(lax.sum(lax.mul(g, p), axes, keepdim=True), x.shape)
    safe = lax.where(lax.eq(x, 0), 1, x)
    res = lax.div(lax.sub(s, lax.mul(g, p)), safe)
    # where x_j == 0 the quotient is undefined: sum over i != j of g_i prod_{k!=i,j} x_k
    x_zero_fixed = lax.where(lax.eq(x, 0), 1, x)
    p2 = bind(PRIMITIVES["prod_others"], x_zero_fixed, axes=axes)
    s2 = lax.expand(lax.sum(lax.mul(g, p2), axes, keepdim=True), x.shape)
    alt = lax.sub(s2, lax.mul(g, p2))
    return (lax.where(lax.eq(x, 0), alt, res),)


def _cumsum_vjp(ctx, g):
    from ..dispatch import bind
    from .registry import PRIMITIVES
    axis = ctx.kwargs["axis"]
    f = bind(PRIMITIVES["flip"], g, axes=(axis,))
    return (bind(PRIMITIVES["flip"], bind(PRIMITIVES["cumsum"], f, axis=axis), axes=(axis,)),)


def _flip_vjp(ctx, g):
    from ..dispatch import bind
    from .registry import PRIMITIVES
    return (bind(PRIMITIVES["flip"], g, axes=ctx.kwargs["axes"]),)


def _matmul_vjp(ctx, g):
    """numpy.matmul's VJP: 1-D operands are promoted to matrices, batch dims summed."""
    a_shape, b_shape = ctx.in_avals[0][0], ctx.in_avals[1][0]
    a2 = (1,) + a_shape if len(a_shape) == 1 else a_shape
    b2 = b_shape + (1,) if len(b_shape) == 1 else b_shape
    out2 = broadcast_shapes(a2[:-2], b2[:-2]) + (a2[-2], b2[-1])
    g2 = lax.reshape(g, out2)
    ga = gb = None
    if ctx.needs_input_grad[0]:
        b = lax.reshape(ctx.input(1), b2)
        ga = lax.reshape(lax.sum_to(lax.matmul(g2, lax.transpose_last(b)), a2), a_shape)
    if ctx.needs_input_grad[1]:
        a = lax.reshape(ctx.input(0), a2)
        gb = lax.reshape(lax.sum_to(lax.matmul(lax.transpose_last(a), g2), b2), b_shape)
    return ga, gb


def _cat_vjp(ctx, g):
    axis = ctx.kwargs["axis"]
    out, start = [], 0
    for (shape, _), need in zip(ctx.in_avals, ctx.needs_input_grad):
        stop = start + shape[axis]
        if need:
            starts = tuple(start if i == axis else 0 for i in range(len(shape)))
            stops = tuple(stop if i == axis else s for i, s in enumerate(g.shape))
            out.append(lax.slice_(g, starts, stops, (1,) * len(shape)))
        else:
            out.append(None)
        start = stop
    return tuple(out)


def _cast_vjp(ctx, g):
    return (lax.cast(g, ctx.in_avals[0][1]),)


VJP_RULES.update({
    "reshape": _reshape_vjp, "expand": _expand_vjp,
    "permute": _permute_vjp, "slice": _slice_vjp, "pad_slice": _pad_slice_vjp,
    "take": _take_vjp, "scatter_add": _scatter_add_vjp, "sum": _sum_vjp,
    "amax": _extremum_vjp, "amin": _extremum_vjp, "prod": _prod_vjp,
    "prod_others": _prod_others_vjp, "cumsum": _cumsum_vjp, "flip": _flip_vjp,
    "gather": _gather_vjp, "gather_scatter": _gather_scatter_vjp,
    "index_put": _index_put_vjp, "select": _select_vjp, "mean": _mean_vjp,
    "matmul": _matmul_vjp, "cat": _cat_vjp, "cast": _cast_vjp,
})

# primitives with no gradient (integer/bool results or constants) still get an entry,
# so every table covers every primitive
for _name in ("argmax", "argmin", "full", "iota"):
    VJP_RULES[_name] = lambda ctx, g: tuple(None for _ in ctx.in_avals)
