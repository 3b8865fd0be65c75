"""Elementwise fusion: maximal single-consumer chains of same-shape elementwise nodes
(or one node with a scalar constant argument) become one ``fused`` node whose attribute is
the composed formula (symgrad's own type, :mod:`symgrad.graph.formula`: the primitives'
formulas substituted into each other, every operation kept in PyTorch's order; no sympy
is loaded). Bounded: a cluster stops growing at MAX_OPS operations, so formulas cannot
swell; nodes used more than once stay materialised (no recomputation)."""
from __future__ import annotations

from ..graph import formula as F
from ..graph.node import Node, make_node, toposort
from ..graph.primitives import PRIMITIVES

__all__ = ["fuse", "MAX_OPS", "cluster_formula"]

MAX_OPS = 64
_BOOL_OK = {"lt", "le", "gt", "ge", "eq", "ne", "logical_not", "logical_and", "logical_or",
            "isnan", "signbit"}


def _fusible(n: Node) -> bool:
    if n.op not in PRIMITIVES or PRIMITIVES[n.op].kind != "elementwise":
        return False
    if n.dtype.is_floating_point:
        return all(a.dtype.is_floating_point or a.dtype.category == "bool" for a in n.args)
    if n.dtype.category == "bool" and n.op in _BOOL_OK:
        return all(a.dtype.is_floating_point or a.dtype.category == "bool" for a in n.args)
    return False


def _consumers(outputs: list[Node]) -> dict[int, int]:
    """How many distinct nodes use each node (x * x uses x once)."""
    count: dict[int, int] = {}
    for n in toposort(outputs):
        for a in {id(a): a for a in n.args}.values():
            count[id(a)] = count.get(id(a), 0) + 1
    for o in outputs:
        count[id(o)] = count.get(id(o), 0) + 2       # outputs are always materialised
    return count


def _scalar_const(n: Node):
    if n.op == "expand" and n.args[0].op == "const" and n.args[0].shape == ():
        n = n.args[0]               # a uniform constant broadcast by the kernel itself
    if n.op == "const" and n.shape == () and n.dtype.is_floating_point:
        v = float(n.attr("value").value)
        # zero, infinities and NaN stay kernel inputs (a signed zero would print as the
        # integer 0 in the formula)
        if v == v and abs(v) != float("inf") and v != 0:
            return F.number(int(v) if v == int(v) else v)
    return None


class _Cluster:
    def __init__(self, root: Node, absorbable):
        self.inputs: list[Node] = []
        self._index: dict[int, int] = {}
        self.ops = 0
        self.absorbable = absorbable
        self.expr = self._build(root, top=True)

    def _symbol(self, n: Node) -> F.Expr:
        if id(n) not in self._index:
            self._index[id(n)] = len(self.inputs)
            self.inputs.append(n)
        return F.symbol(f"a{self._index[id(n)]}")

    def _build(self, n: Node, top: bool = False) -> F.Expr:
        # (recursion bounded by MAX_OPS: a cluster stops growing there)
        c = _scalar_const(n)
        if c is not None and not top:
            return c
        if not top and (not self.absorbable(n) or self.ops >= MAX_OPS):
            return self._symbol(n)
        self.ops += 1
        f = PRIMITIVES[n.op].formula
        args = [self._build(a) for a in n.args]
        # the primitive's formula over its arguments' formulas: nothing is rewritten, so
        # the composition computes each step as the unfused primitives do
        return F.substitute([f.node], dict(zip(f.fsymbols, args)))[0]


def cluster_formula(root: Node, absorbable) -> "tuple[F.Expr, list[Node], int]":
    """(formula, input nodes, operation count) of the cluster rooted at ``root``."""
    c = _Cluster(root, absorbable)
    return F.fold(c.expr), c.inputs, c.ops


def fuse(outputs: list[Node]) -> list[Node]:
    """Replace elementwise clusters by ``fused`` nodes."""
    consumers = _consumers(outputs)
    parent_shape: dict[int, tuple] = {}
    for n in toposort(outputs):
        for a in n.args:
            if _fusible(n):
                parent_shape.setdefault(id(a), n.shape)

    def absorbable(n: Node) -> bool:
        return (_fusible(n) and consumers.get(id(n), 0) == 1
                and parent_shape.get(id(n)) == n.shape)

    memo: dict[int, Node] = {}
    for n in toposort(outputs):
        if not n.args:
            memo[id(n)] = n
            continue
        if _fusible(n) and not absorbable(n):
            expr, inputs, ops = cluster_formula(n, absorbable)
            # one operation is fused too when it absorbs a scalar constant: the formula
            # then holds the number (x**0.5 is a square root, as in PyTorch's pow)
            if ops > 1 or ops == 1 and len(inputs) < len({id(a) for a in n.args}):
                args = tuple(memo[id(i)] for i in inputs)
                memo[id(n)] = make_node("fused", args, (("dtype", n.dtype), ("expr", expr),
                                                        ("shape", n.shape)), n.shape, n.dtype)
                continue
        args = tuple(memo.get(id(a), a) for a in n.args)
        memo[id(n)] = n if all(x is y for x, y in zip(args, n.args)) else \
            make_node(n.op, args, n.attrs, n.shape, n.dtype)
    return [memo[id(o)] for o in outputs]
