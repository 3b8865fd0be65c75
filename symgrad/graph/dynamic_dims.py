"""How a program's sizes depend on one runtime extent ``n``: the contract between the
front end, which finds it (:mod:`symgrad.compiler.dynamic`), and a backend compiling one
kernel for every ``n`` (``codegen.dynamic``).

Every integer that varies with ``n`` is affine in it, written ``(a, b)`` for ``a*n + b``
(a static size is ``(0, size)``).  Keys are ``id(node)`` of the nodes of the program at
one reference size; entries not listed do not depend on ``n``.

* ``shapes``: each node's dimensions;
* ``scalars``: uniform constants whose value depends on ``n`` (a mean's count):
  ``("affine", p, q)`` for ``p*n + q``, ``("inverse", p, q)`` for ``1/(p*n + q)``;
* ``exprs``: formulas of ``fused`` nodes whose numbers move with ``n`` (a folded mean's
  ``1/n``), rewritten over the symbol :meth:`DynamicDims.size_symbol` (``n`` as a float);
* ``attrs``: a slice's normalised ``starts`` (a tuple of affine pairs) or a select's
  ``index``, where they move with ``n``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from . import formula as F

__all__ = ["DynamicDims"]


@dataclass
class DynamicDims:
    shapes: dict = field(default_factory=dict)
    scalars: dict = field(default_factory=dict)
    attrs: dict = field(default_factory=dict)
    exprs: dict = field(default_factory=dict)
    minimum: int = 2            # the smallest n the kernel is for (0 and 1 are specialised)

    @classmethod
    def size_symbol(cls):
        """The formula symbol (:mod:`symgrad.graph.formula`) standing for ``n`` in
        :attr:`exprs`."""
        return F.symbol("_size_n")

    def dims(self, node) -> tuple:
        """The node's dimensions as affine pairs."""
        got = self.shapes.get(id(node))
        return got if got is not None else tuple((0, d) for d in node.shape)
