"""Integer polynomials in the runtime extent ``n``: the sizes, strides and offsets of a
shape-generic kernel.

A dimension that depends on the dynamic size is affine (``a*n + b``); products of
dimensions (strides, element counts) are polynomials.  :class:`Poly` does their
arithmetic in Python at lowering time, and :meth:`Poly.emit` turns one into i64 IR
computed from ``n`` at run time (a constant when it does not depend on ``n``).

>>> n = Poly.var()
>>> s = (n * 3 + 2) * Poly.const(4)
>>> s, s.at(5), s.is_const
(Poly(8, 12), 68, False)
"""
from __future__ import annotations

import llvmlite.ir as ir

from ..types import I64

__all__ = ["Poly", "affine"]


class Poly:
    """``c[0] + c[1]*n + c[2]*n**2 + ...`` with integer coefficients."""

    __slots__ = ("c",)

    def __init__(self, coefs) -> None:
        c = [int(v) for v in coefs]
        while len(c) > 1 and c[-1] == 0:
            c.pop()
        self.c = tuple(c) or (0,)

    @staticmethod
    def const(v: int) -> "Poly":
        return Poly((v,))

    @staticmethod
    def var() -> "Poly":
        return Poly((0, 1))

    @property
    def is_const(self) -> bool:
        return len(self.c) == 1

    @property
    def value(self) -> int:
        """The constant's value (only for :attr:`is_const`)."""
        assert self.is_const, self
        return self.c[0]

    def at(self, n: int) -> int:
        out = 0
        for coef in reversed(self.c):
            out = out * n + coef
        return out

    def __add__(self, other) -> "Poly":
        o = _poly(other)
        k = max(len(self.c), len(o.c))
        return Poly([(self.c[i] if i < len(self.c) else 0) + (o.c[i] if i < len(o.c) else 0)
                     for i in range(k)])

    __radd__ = __add__

    def __mul__(self, other) -> "Poly":
        o = _poly(other)
        out = [0] * (len(self.c) + len(o.c) - 1)
        for i, a in enumerate(self.c):
            for j, b in enumerate(o.c):
                out[i + j] += a * b
        return Poly(out)

    __rmul__ = __mul__

    def __neg__(self) -> "Poly":
        return Poly([-v for v in self.c])

    def __sub__(self, other) -> "Poly":
        return self + (-_poly(other))

    def __eq__(self, other) -> bool:
        return isinstance(other, (Poly, int)) and self.c == _poly(other).c

    def __hash__(self) -> int:
        return hash(self.c)

    def __repr__(self) -> str:
        return f"Poly({', '.join(map(str, self.c))})"

    def emit(self, b: ir.IRBuilder, n: ir.Value) -> ir.Value:
        """The value at run time (Horner's rule on the i64 ``n``)."""
        if self.is_const:
            return I64(self.c[0])
        out: ir.Value = I64(self.c[-1])
        for coef in reversed(self.c[:-1]):
            out = b.mul(out, n)
            if coef:
                out = b.add(out, I64(coef))
        return out


def _poly(v) -> Poly:
    return v if isinstance(v, Poly) else Poly.const(v)


def affine(a: int, b: int) -> Poly:
    """``a*n + b``."""
    return Poly((b, a))
