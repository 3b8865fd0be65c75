"""The VJP table: for each primitive, the rule mapping the output cotangent `g` to input
cotangents, written with primitive calls (:mod:`symgrad.ops.lax`), so the same rule
computes eager gradients and builds symbolic gradient graphs (and so composes for
higher-order derivatives).

A rule gets a context with ``input(i)`` (a saved input), ``out`` (the saved output),
``in_avals`` ((shape, dtype) per input), ``kwargs`` (attributes) and
``needs_input_grad``; it returns one cotangent (or None) per input. The rules here
(:data:`ARRAY_RULES`) also accept a bare numpy array as the cotangent and then compute
on arrays (lax runs numpy directly), which the eager backward engine uses when no graph
of the backward is needed.
"""
from __future__ import annotations

import weakref
from typing import Callable

import numpy as np

from .. import dispatch
from . import lax
from ..graph.primitives import NUMPY_RULES, PRIMITIVES, VJP_RULES, derivative_primitive, out_symbol
from ..graph.shapes import broadcast_shapes
from ..graph import dtypes

__all__ = ["elementwise_vjp", "where_vjp", "ARRAY_RULES"]


def masked_vjp(ctx, g):
    """The generic rule, but the cotangent is selected away (not multiplied by 0) where the
    partial is 0, as PyTorch's relu / clamp / maximum backward do: an inf or NaN cotangent
    does not leak into positions the result does not depend on."""
    return elementwise_vjp(ctx, g, masked=True)


def elementwise_vjp(ctx, g, masked=False):
    """The generic rule of every formula-defined primitive: g * d f / d x_i, summed over
    broadcast dimensions."""
    plan = _PLANS.get(ctx.prim)
    if plan is None:
        plan = _PLANS[ctx.prim] = _vjp_plan(ctx.prim)
    grads = []
    for i, need in enumerate(ctx.needs_input_grad):
        if not need:
            grads.append(None)
            continue
        kind, payload = plan[i]
        if kind == "zero":
            shape, dtype = ctx.in_avals[i]
            grads.append(lax.zeros(shape, dtype))
            continue
        if kind == "one":
            gi = g
        elif kind == "neg":
            gi = lax.neg(g)
        elif kind == "const":
            gi = lax.mul(g, payload)
        elif kind == "value":
            gi = lax.mul(g, _value(ctx, payload))
        else:
            d = _derivative(ctx, *payload, type(g) is np.ndarray)
            gi = lax.mul(g, d)
            if masked and not isinstance(d, float):
                gi = lax.where(lax.eq(d, 0), 0, gi)
        grads.append(lax.sum_to(gi, ctx.in_avals[i][0]))
    return tuple(grads)


# per primitive object (a redefined user primitive is a new object, so a plan can never
# describe an old formula); weak keys let replaced primitives go
_PLANS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _vjp_plan(prim):
    """Per input: how to form its cotangent from g (decided once per primitive)."""
    syms = prim.formula.symbols
    out = out_symbol()

    def ref(sym):
        return -1 if sym == out else syms.index(sym)
    plan = []
    for i in range(len(syms)):
        d = derivative_primitive(prim, i)
        if isinstance(d, tuple):
            plan.append(("prim", (d[0], tuple(ref(s) for s in d[1]))))
        elif d.is_number:
            plan.append(("zero", None) if d == 0 else ("one", None) if d == 1 else
                        ("neg", None) if d == -1 else ("const", float(d)))
        else:
            plan.append(("value", ref(d)))
    return plan


def _value(ctx, r):
    return ctx.out if r == -1 else ctx.input(r)


def _derivative(ctx, dprim, refs, as_array=False):
    """The partial derivative's values: a tensor (an array when `as_array`: the
    cotangent is one), or a number when it depends on scalar operands only (e.g.
    d(x / 2)/dx)."""
    vals = [_value(ctx, r) for r in refs]
    if not any(isinstance(v, dispatch.Tensor) for v in vals):
        return float(NUMPY_RULES[dprim.name](*vals))
    if as_array:
        like = None
        for i, v in enumerate(vals):
            if isinstance(v, dispatch.Tensor):
                vals[i] = v = v._data
                like = v.dtype
        return lax.as_array(NUMPY_RULES[dprim.name](*vals), like)
    return dispatch.bind(dprim, *vals)


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
    # divide the reduced cotangent, then broadcast: the same value per element as
    # expanding first, with the division done once per output element of the mean
    return (lax.expand(_keep(lax.div(g, float(n)), shape, k["axes"], k["keepdim"]), shape),)


def _keep(g, in_shape, axes, keepdim):
    """g with the reduced axes restored as size 1 (a 0-d g broadcasts as it is)."""
    if not keepdim and g.shape:
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
    ctx.out      # unused, but saved as PyTorch saves it: its version is checked here too
    others = lax.apply("prod_others", ctx.input(0), axes=k["axes"])
    gk = lax.expand(_keep(g, shape, k["axes"], k["keepdim"]), shape)
    return (lax.mul(gk, others),)


def _prod_others_vjp(ctx, g):
    """d/dx_j of sum_i g_i prod_{k != i} x_k = sum_{i != j} g_i prod_{k != i, j} x_k: the
    prod_others_dot primitive (exact with zeros, O(n) per group)."""
    return (lax.apply("prod_others_dot", ctx.input(0), g, axes=ctx.kwargs["axes"]),)


def _group_last(x, axes):
    """x with its reduction axes moved last and flattened into one: (y, undo)."""
    keep = tuple(i for i in range(len(x.shape)) if i not in axes)
    perm = keep + tuple(axes)
    xp = lax.permute(x, perm)
    lead = tuple(x.shape[i] for i in keep)
    y = lax.reshape(xp, lead + (lax.size_of(tuple(x.shape[a] for a in axes)),))
    inv = tuple(np.argsort(perm).tolist())
    return y, lambda t: lax.permute(lax.reshape(t, xp.shape), inv)


def _prod_others_dot_vjp(ctx, u):
    """H(x, g)_j = sum_{i != j} g_i prod_{k != i, j} x_k is symmetric in (i, j), so its
    VJP in g is H(x, u). In x: d/dx_l sum_j u_j H_j = sum_j u'_j H(x with x_l = 1, g')_j with
    u', g' zero at l — batched over l as (.., n, n) rows, exact with zeros."""
    axes = ctx.kwargs["axes"]
    x, g = ctx.input(0), ctx.input(1)
    gx = gg = None
    if ctx.needs_input_grad[1]:
        gg = lax.sum_to(lax.apply("prod_others_dot", x, u, axes=axes), ctx.in_avals[1][0])
    if ctx.needs_input_grad[0]:
        xs, undo = _group_last(x, axes)
        gs, _ = _group_last(lax.expand(g, x.shape), axes)
        us, _ = _group_last(u, axes)
        n = xs.shape[-1]
        rows = xs.shape[:-1] + (n, n)
        eye = lax.eq(lax.apply("iota", shape=rows, axis=len(rows) - 2, dtype=_INT64()),
                     lax.apply("iota", shape=rows, axis=len(rows) - 1, dtype=_INT64()))

        def as_rows(t):
            return lax.expand(lax.reshape(t, t.shape[:-1] + (1, n)), rows)
        xr = lax.where(eye, lax.full((), 1, x.dtype), as_rows(xs))
        gr = lax.where(eye, lax.full((), 0, x.dtype), as_rows(gs))
        ur = lax.where(eye, lax.full((), 0, x.dtype), as_rows(us))
        h = lax.apply("prod_others_dot", xr, gr, axes=(len(rows) - 1,))
        gx = undo(lax.sum(lax.mul(ur, h), (len(rows) - 1,)))
    return gx, gg


def _INT64():
    return dtypes.int64


def _cumsum_vjp(ctx, g):
    axis = ctx.kwargs["axis"]
    f = lax.apply("flip", g, axes=(axis,))
    return (lax.apply("flip", lax.apply("cumsum", f, axis=axis), axes=(axis,)),)


def _flip_vjp(ctx, g):
    return (lax.apply("flip", g, axes=ctx.kwargs["axes"]),)


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


_STRUCTURAL_RULES = {
    "reshape": _reshape_vjp, "expand": _expand_vjp,
    "permute": _permute_vjp, "slice": _slice_vjp, "pad_slice": _pad_slice_vjp,
    "take": _take_vjp, "scatter_add": _scatter_add_vjp, "sum": _sum_vjp,
    "amax": _extremum_vjp, "amin": _extremum_vjp, "prod": _prod_vjp,
    "prod_others": _prod_others_vjp, "prod_others_dot": _prod_others_dot_vjp,
    "cumsum": _cumsum_vjp, "flip": _flip_vjp,
    "gather": _gather_vjp, "gather_scatter": _gather_scatter_vjp,
    "index_put": _index_put_vjp, "select": _select_vjp, "mean": _mean_vjp,
    "matmul": _matmul_vjp, "cat": _cat_vjp, "cast": _cast_vjp,
}
VJP_RULES.update(_STRUCTURAL_RULES)

# primitives with no gradient (integer/bool results or constants) still get an entry,
# so every table covers every primitive
def _no_vjp(ctx, g):
    return tuple(None for _ in ctx.in_avals)


for _name in ("argmax", "argmin", "full", "iota", "stop_gradient"):
    VJP_RULES[_name] = _no_vjp

def rule(name: str) -> Callable:
    """The reverse-mode rule of primitive ``name``: its own (``VJP_RULES``), else for an
    elementwise primitive the generic rule from its formula.

    >>> rule("exp") is elementwise_vjp, rule("sum") is _sum_vjp
    (True, True)
    """
    own = VJP_RULES.get(name)
    if own is not None:
        return own
    if PRIMITIVES[name].kind == "elementwise":
        return elementwise_vjp
    raise KeyError(f"primitive {name!r} has no reverse-mode rule")


# The rules above take a cotangent that is a Tensor or a bare numpy array: written with
# lax calls only, on an array they compute with numpy directly (the backward engine's
# fast path). A rule not in this set (user-supplied, composites) always gets Tensors.
ARRAY_RULES = frozenset({elementwise_vjp, masked_vjp, where_vjp, _no_vjp,
                         *_STRUCTURAL_RULES.values()})
