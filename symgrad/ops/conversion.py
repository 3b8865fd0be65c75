"""Creation and conversion primitives: full, iota, cast, stop_gradient -- for each, its
shape rule, numpy rule and VJP, declared once (:func:`symgrad.ops.define.primitive`)."""
from __future__ import annotations

import numpy as np

from . import lax
from .define import primitive


# ---- reverse-mode rules ------------------------------------------------------------
def _cast_vjp(ctx, g):
    return (lax.cast(g, ctx.in_avals[0][1]),)


# ---- the primitives ----------------------------------------------------------------


primitive("stop_gradient", 1, lambda av: (av[0][0], av[0][1]), lambda x: x, differentiable=False,
          family="conversion")
primitive("cast", 1, lambda av, *, dtype: (av[0][0], dtype),
          lambda x, *, dtype: x.astype(dtype.np), grad_name="ToCopyBackward0",
          family="conversion", vjp=_cast_vjp)
primitive("full", 0, lambda av, *, shape, value, dtype: (shape, dtype),
          lambda *, shape, value, dtype: np.full(shape, value, dtype=dtype.np),
          differentiable=False, family="creation")
primitive("iota", 0, lambda av, *, shape, axis, dtype: (shape, dtype),
          lambda *, shape, axis, dtype: np.broadcast_to(
              np.arange(shape[axis], dtype=dtype.np).reshape(
                  [-1 if i == axis else 1 for i in range(len(shape))]), shape).copy(),
          differentiable=False, family="creation")
