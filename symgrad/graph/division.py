"""The order in which both backends evaluate a product holding divisions.

Symbolic differentiation folds PyTorch's chain of backward steps into one product:
div's gradient in y, PyTorch's ``-g * ((x / y) / y)``, becomes sympy's ``-g*x*y**-2``,
and ``d/db a / (b*b + 1)`` becomes ``-2*a*b*(b**2 + 1)**-2``. Evaluated as written
(``y**2`` first, the numerator's product first) it overflows or loses precision where
PyTorch's order does not: ``y**2`` underflows to a subnormal for float32 y near 1e-20,
``2*b`` or ``a*b`` overflows near 3.4e38, and ``inf / inf`` or ``0 * inf`` turns into
NaN. The product is evaluated instead as a chain that alternates multiplications and
divisions -- one numerator factor, a division, the next factor, the next division, ... --
so each division follows the factor it scales, as in PyTorch's backward steps. The
numerator factors go in reverse name order: fusion names a formula's inputs in the order
it meets them from the root, and a gradient's cotangent is the first operand of the
rules' products (``g * partial``), so it is ``a0`` and is multiplied last, after the
partial is formed -- a zero cotangent times an infinite partial is NaN, as in PyTorch. A
power k <= :data:`SEQUENTIAL_DIVISIONS` of a divisor is k divisions, and such a power of
a numerator symbol k factors (``-2*g*x**2*(x**2 + 1)**-2``, the gradient of
``x / (x*x + 1)``, is ``g / d * x / d * x``: PyTorch's ``(x / d) / d`` first, 0 at
x = 1e300, where ``x**2 / d / d`` was inf / inf = NaN: fuzz seed 2029003166); the
numerator factors that share a symbol with a divisor come after the others (the inner
chain-rule factors), the numeric coefficient last.

A product that divides by nothing multiplies its compound factors first (powers, functions,
sums: in PyTorch each is an operation of its own, formed before the product that uses
it), then the formula's inputs in name order, the coefficient last (:func:`product_order`).
``-2*g*x*r**2`` (the gradient of ``c / (x*x + 1)``, r its reciprocal) is ``r*r`` first, as
in PyTorch, not ``g*x`` (which overflows for float32 x = 3e38, and times r*r = 0 is NaN).
The association of a product of several inputs is not kept by fusion: ``x*(y*z)`` runs
as ``(x*y)*z``, which differs from PyTorch only where a partial product overflows.
"""
from __future__ import annotations

from typing import NamedTuple

__all__ = ["SEQUENTIAL_DIVISIONS", "DivisionChain", "division_chain", "product_order"]

SEQUENTIAL_DIVISIONS = 3


class DivisionChain(NamedTuple):
    coeff: object           # the numeric coefficient (a sympy Number), applied last
    steps: tuple            # ("*" or "/", factor) in order, from 1 (the first is a "*")


def division_chain(e) -> DivisionChain | None:
    """How to evaluate the sympy product ``e``, or None if it divides by nothing."""
    coeff, rest = e.as_coeff_Mul()
    factors = type(e).make_args(rest)
    num, divisors = [], []
    for f in factors:
        if f.is_Pow and f.exp.is_Integer and f.exp < 0:
            k = -int(f.exp)
            if k <= SEQUENTIAL_DIVISIONS:
                divisors.extend([f.base] * k)
            else:
                divisors.append(f.base ** k)
        elif f.is_Pow and f.base.is_Symbol and f.exp.is_Integer \
                and 0 < f.exp <= SEQUENTIAL_DIVISIONS:
            num.extend([f.base] * int(f.exp))   # x**2 as x, x: each after a division
        else:
            num.append(f)
    if not divisors:
        return None
    den_symbols = set().union(*(d.free_symbols for d in divisors))
    num.reverse()       # sympy's order is by name: the cotangent a0 comes last
    free = [f for f in num if not (f.free_symbols & den_symbols)]
    inner = [f for f in num if f.free_symbols & den_symbols]
    # the cotangent after the partial it scales, as PyTorch's -g * ((x / y) / y) (g *
    # (x / y) overflowed first at float32 x = 3e38: fuzz seeds 2028007955, 2028003556)
    # -- unless it is the only numerator factor: g / y, not g * (1 / y)
    last = [free.pop()] if free and (free[:-1] or inner) else []
    num = free + inner
    steps = [("*", num.pop(0))] if num else []
    for d in divisors:
        steps.append(("/", d))
        if num:
            steps.append(("*", num.pop(0)))
    steps.extend(("*", f) for f in num + last)
    return DivisionChain(coeff, tuple(steps))


def product_order(e) -> DivisionChain:
    """How to evaluate the sympy product ``e``: its division chain if it divides, else
    its compound factors, then its symbols (each group in sympy's order), then the
    coefficient."""
    chain = division_chain(e)
    if chain is not None:
        return chain
    coeff, rest = e.as_coeff_Mul()
    factors = type(e).make_args(rest)
    ordered = [f for f in factors if not f.is_Symbol] + [f for f in factors if f.is_Symbol]
    return DivisionChain(coeff, tuple(("*", f) for f in ordered))
