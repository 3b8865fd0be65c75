"""The ``fused`` primitive: one elementwise kernel given by a formula of symgrad's own type
(:mod:`symgrad.graph.formula`) over its inputs (symbols ``a0, a1, ...``), produced by the
compiler's fusion pass. Like every primitive it has a shape rule, a numpy rule (the formula
evaluated once per expression, each shared operation once) and a VJP rule (the formula's
derivatives, themselves fused). No sympy is involved."""
from __future__ import annotations

import functools

import numpy as np

from ..graph import formula as F
from ..graph.primitives import PRIMITIVES, fused_symbols, register_structural
from ..graph.fpstate import quiet
from ..dispatch import bind
from . import lax

__all__ = ["fused_kernel"]


@functools.lru_cache(maxsize=4096)
def fused_kernel(expr: F.Expr, n: int):
    """A numpy function of n arrays computing `expr`."""
    return F.lambdify(fused_symbols(n), expr)


def _shape(avals, *, expr, dtype, shape):
    return tuple(shape), dtype


def _numpy(*arrays, expr, dtype, shape):
    with quiet():
        res = fused_kernel(expr, len(arrays))(*arrays)
    res = np.asarray(res, dtype=dtype.np)
    if res.shape != shape:
        res = np.broadcast_to(res, shape).copy()
    return res


def _vjp(ctx, g):
    expr = ctx.kwargs["expr"]
    syms = fused_symbols(len(ctx.in_avals))
    out = []
    for i, need in enumerate(ctx.needs_input_grad):
        if not need:
            out.append(None)
            continue
        d = F.diff(expr, syms[i])
        dt = ctx.in_avals[i][1]
        if d.is_number and d.value == 0:
            out.append(lax.zeros(ctx.in_avals[i][0], dt))
            continue
        inputs = [ctx.input(j) for j in range(len(syms))]
        dval = bind(PRIMITIVES["fused"], *inputs, expr=d, dtype=ctx.kwargs["dtype"],
                    shape=ctx.kwargs["shape"])
        out.append(lax.sum_to(lax.mul(g, dval), ctx.in_avals[i][0]))
    return tuple(out)


register_structural("fused", -1, _shape, _numpy, _vjp, grad_name="FusedBackward0",
                    family="elementwise", saves=tuple(range(64)))
