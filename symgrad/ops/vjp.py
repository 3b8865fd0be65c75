"""Reverse mode: the generic rule of formula-defined (elementwise) primitives, and the
lookup of any primitive's rule (:func:`rule`). A rule maps the output cotangent `g` to input
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

from typing import Callable

import numpy as np

from .. import dispatch
from ..graph.primitives import NUMPY_RULES, OUT, PRIMITIVES, VJP_RULES, derivative_primitive
from . import lax

__all__ = ["elementwise_vjp", "masked_vjp", "pow_vjp", "relu_vjp", "abs_vjp", "where_vjp",
           "no_vjp", "rule",
           "ARRAY_RULES"]


def masked_vjp(ctx, g):
    """The generic rule, but the cotangent is selected away (not multiplied by 0) where the
    partial is 0, as PyTorch's relu / clamp / maximum backward do: an inf or NaN cotangent
    does not leak into positions the result does not depend on."""
    return elementwise_vjp(ctx, g, masked=True)


def pow_vjp(ctx, g):
    """pow(x, y) as PyTorch's pow_backward_self: the cotangent of x is selected to 0
    where y == 0, not multiplied by the partial's 0, so an inf or NaN cotangent gives 0
    there (fuzz seed 2029001560). PyTorch's pow_backward_exponent multiplies the
    cotangent by its partial (0 where x == 0 and y >= 0): the generic rule's product."""
    return elementwise_vjp(ctx, g, masked=_pow_selected_away)


def _pow_selected_away(ctx, i):
    if i != 0:
        return False
    y = ctx.input(1)
    if isinstance(y, (int, float, np.generic)):
        return bool(y == 0)
    node = getattr(y, "_node", None)
    while node is not None and node.op == "expand":
        node = node.args[0]
    if node is not None and node.op == "const":     # x ** 2 traced: decided here, so
        v = np.asarray(node.attr("value").value)    # compiled code tests nothing
        if v.size and bool((v == v.flat[0]).all()):
            return bool(v.flat[0] == 0)
    return lax.eq(y, 0)


def relu_vjp(ctx, g):
    """relu's rule: on arrays (eager gradients, no graph) one selection -- the cotangent
    where the output is not <= 0 (positive, or NaN), else 0, PyTorch's
    ``threshold_backward`` -- instead of the masked generic rule's three passes
    (derivative, product, mask); on tensors the generic rule, whose graph keeps the
    output's history for second derivatives (zero, as PyTorch's)."""
    if type(g) is np.ndarray:
        out = ctx.out
        c = np.less_equal(getattr(out, "_data", out), 0)
        return (lax.zero_where(c, g) if c.shape == g.shape else lax.where(c, 0, g),)
    return masked_vjp(ctx, g)


def abs_vjp(ctx, g):
    """abs's rule: on arrays (eager gradients, no graph) ``g * sgn(x)`` with the sign as
    the difference of two comparisons (0 at 0 and at NaN, as PyTorch's ``sgn`` there),
    in int8 -- the generic rule evaluates the derivative's three-way select with
    ``np.where``, a mispredicted branch per element (20x PyTorch on 256 x 256); on
    tensors the generic rule (its graph serves second derivatives)."""
    if type(g) is np.ndarray:
        x = ctx.input(0)
        x = getattr(x, "_data", x)
        if type(x) is np.ndarray and x.dtype.kind == "f" and g.dtype.kind == "f":
            sgn = np.subtract(np.greater(x, 0).view(np.int8), np.less(x, 0).view(np.int8))
            gx = lax.as_array(np.multiply(g, sgn, dtype=g.dtype), None)   # (0-d: a scalar)
            return (lax.sum_to(gx, ctx.in_avals[0][0]),)
    return elementwise_vjp(ctx, g)


def elementwise_vjp(ctx, g, masked=False):
    """The generic rule of every formula-defined primitive: g * d f / d x_i, summed over
    broadcast dimensions. ``masked``: True selects the cotangent away where the partial
    is 0; a function ``(ctx, i)`` gives where (a boolean, or a Python bool for all)."""
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
        elif kind == "divide":
            gi = lax.div(g, _value(ctx, payload))
        else:
            d = _derivative(ctx, *payload, type(g) is np.ndarray)
            gi = lax.mul(g, d)
            if masked is True and not isinstance(d, float):
                gi = lax.where(lax.eq(d, 0), 0, gi)
            elif masked:                # the rule's own selection (pow_vjp)
                away = masked(ctx, i)
                if away is True:
                    grads.append(lax.zeros(*ctx.in_avals[i]))
                    continue
                if away is not False:
                    gi = lax.where(away, 0, gi)
        grads.append(lax.sum_to(gi, ctx.in_avals[i][0]))
    return tuple(grads)


# per primitive object (a redefined user primitive is a new object, so a plan can never
# describe an old formula; primitives hash by identity). A plain dict: a weak one makes
# a weak reference per lookup, on every node of every backward
_PLANS: dict = {}


def _vjp_plan(prim):
    """Per input: how to form its cotangent from g (decided once per primitive)."""
    syms = prim.formula.fsymbols

    def ref(sym):
        return -1 if sym is OUT else syms.index(sym)
    plan = []
    for i in range(len(syms)):
        d = derivative_primitive(prim, i)
        if isinstance(d, tuple):
            plan.append(("prim", (d[0], tuple(ref(s) for s in d[1]))))
        elif d.is_number:
            v = d.value
            plan.append(("zero", None) if v == 0 else ("one", None) if v == 1 else
                        ("neg", None) if v == -1 else ("const", float(v)))
        elif d.is_symbol:
            plan.append(("value", ref(d)))
        else:       # 1 / v: g / v, as PyTorch's div backward (g * (1/v) is 0 * inf = NaN
            plan.append(("divide", ref(d.args[1])))   # where g is 0 and v subnormal)
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


def no_vjp(ctx, g):
    """The rule of a primitive with no gradient (integer or boolean results, constants):
    every primitive has a rule, so every table covers every primitive."""
    return tuple(None for _ in ctx.in_avals)


def rule(name: str) -> Callable:
    """The reverse-mode rule of primitive ``name``: its own (``VJP_RULES``), else for an
    elementwise primitive the generic rule from its formula.

    >>> rule("exp") is elementwise_vjp, rule("argmax") is no_vjp
    (True, True)
    """
    own = VJP_RULES.get(name)
    if own is not None:
        return own
    if PRIMITIVES[name].kind == "elementwise":
        return elementwise_vjp
    raise KeyError(f"primitive {name!r} has no reverse-mode rule")


# Rules that take a cotangent that is a Tensor or a bare numpy array: written with lax
# calls only, on an array they compute with numpy directly (the backward engine's fast
# path). Every built-in primitive's rule joins (symgrad.ops.define); a rule not in this set
# (user-supplied, composites) always gets Tensors.
ARRAY_RULES: set[Callable] = {elementwise_vjp, masked_vjp, pow_vjp, relu_vjp, abs_vjp, where_vjp,
                              no_vjp}
