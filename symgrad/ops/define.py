"""How a built-in structural primitive is declared: once, in the file of its family
(:mod:`~symgrad.ops.layout`, :mod:`~symgrad.ops.indexing`, :mod:`~symgrad.ops.reductions`,
:mod:`~symgrad.ops.linalg`, :mod:`~symgrad.ops.conversion`), with every front-end fact
about it in one call -- shape and dtype rule, numpy rule, family, what the eager tape
saves, reverse-mode rule. (Elementwise primitives are declared by a formula:
:mod:`symgrad.ops.formulas`.)"""
from __future__ import annotations

from typing import Callable

from ..graph.primitives import Primitive, register_structural
from .vjp import ARRAY_RULES, no_vjp

__all__ = ["primitive", "BUILTIN_STRUCTURAL"]

BUILTIN_STRUCTURAL: list[str] = []       # in declaration order


def primitive(name: str, nin: int, shape_rule: Callable, numpy_rule: Callable, *,
              family: str, vjp: Callable | None = None, saves: tuple[int, ...] = (),
              saves_out: bool = False, **kw) -> Primitive:
    """Register built-in primitive ``name``: ``family`` (see
    :data:`symgrad.graph.primitives.FAMILIES`), ``vjp`` (None: not differentiable),
    ``saves`` / ``saves_out`` (the inputs / whether the output the eager tape keeps for
    the backward rule)."""
    rule = vjp if vjp is not None else no_vjp
    ARRAY_RULES.add(rule)                  # built-in rules are written with lax calls
    BUILTIN_STRUCTURAL.append(name)
    return register_structural(name, nin, shape_rule, numpy_rule, rule, family=family,
                               saves=saves if saves == "all" else tuple(saves), saves_out=saves_out, **kw)
