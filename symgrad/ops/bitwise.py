"""The ``bitwise`` primitive: ``and``, ``or``, ``xor``, ``lshift``, ``rshift`` of two
integer arrays of one dtype, as ATen's CPU kernels compute them -- a left shift by a
negative count or by the width or more gives 0, a right shift by those counts gives the
sign (the shift by width - 1; unsigned: by the width, 0). Bool operands of ``&``, ``|``,
``^`` are the logical primitives; this one is for integers.

Not differentiable (integer results); compiled code runs this numpy rule.
"""
from __future__ import annotations

import numpy as np

from ..graph.shapes import broadcast_shapes
from .define import primitive

OPS = ("and", "or", "xor", "lshift", "rshift")


def _shape(av, *, op):
    return broadcast_shapes(tuple(av[0][0]), tuple(av[1][0])), av[0][1]


def _shift(a, b, op):
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    bits = a.dtype.itemsize * 8
    signed = a.dtype.kind == "i"
    count = b.astype(np.dtype(f"i{b.dtype.itemsize}"), copy=False)  # (as a signed count)
    if op == "lshift":
        bad = (count < 0) | (count >= bits)
        unsigned = np.dtype(f"u{a.dtype.itemsize}")
        res = np.left_shift(a.astype(unsigned, copy=False),
                            np.where(bad, 0, count).astype(unsigned)).astype(a.dtype,
                                                                            copy=False)
        return np.where(bad, np.zeros((), a.dtype), res)
    top = bits - signed
    bad = (count < 0) | (count >= top)
    if not signed:          # (numpy shifts by the width or more are undefined in C)
        return np.where(bad, np.zeros((), a.dtype),
                        np.right_shift(a, np.where(bad, 0, count).astype(a.dtype)))
    return np.right_shift(a, np.where(bad, top, count).astype(a.dtype))


def _numpy(a, b, *, op):
    if op in ("lshift", "rshift"):
        return _shift(a, b, op)
    return {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op](a, b)


primitive("bitwise", 2, _shape, _numpy, differentiable=False, family="other")
