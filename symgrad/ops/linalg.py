"""Linear-algebra primitives: matmul (numpy.matmul's broadcasting and PyTorch's error
texts) -- its shape rule, numpy rule, what the eager tape saves and its VJP, declared once
(:func:`symgrad.ops.define.primitive`)."""
from __future__ import annotations

import numpy as np

from ..graph.shapes import broadcast_shapes, numel
from . import lax
from .define import primitive


# ---- reverse-mode rules ------------------------------------------------------------
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
        if len(a2) == 2 and len(b2) == 2 and _column_major(ctx.input(1)):
            # b is a transposed matrix (linear's weight.t()): its cotangent in b's layout,
            # (gᵀ a)ᵀ, so the transpose back to the weight gives a C-ordered gradient
            gb = lax.transpose_last(lax.matmul(lax.transpose_last(g2), a))
        else:
            gb = lax.reshape(lax.sum_to(lax.matmul(lax.transpose_last(a), g2), b2), b_shape)
    return ga, gb


def _column_major(x) -> bool:
    """An eager 2-D value (array, or a Tensor's array) stored column-major: a transposed
    C-ordered matrix."""
    x = getattr(x, "_data", x)
    return (type(x) is np.ndarray and x.ndim == 2 and x.flags.f_contiguous
            and not x.flags.c_contiguous)


# ---- the primitives ----------------------------------------------------------------
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


primitive("matmul", 2, _matmul_shape, lambda a, b: np.matmul(a, b), saves=(0, 1),
          grad_name="MmBackward0", family="linalg", vjp=_matmul_vjp)
