"""Elementwise fusion: maximal single-consumer chains of same-shape elementwise nodes
(or one node with a scalar constant argument) become one ``fused`` node whose attribute is
the composed sympy formula. Bounded: a
cluster stops growing at MAX_OPS operations, so formulas cannot swell; nodes used more
than once stay materialised (no recomputation)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..graph.node import Node, make_node, toposort
from ..graph.primitives import PRIMITIVES, _sympy, keep as _keep

if TYPE_CHECKING:
    import sympy

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
        # zero stays a kernel input: sympy would fold 0*x to 0 and 1/sqrt(0) to zoo,
        # where IEEE arithmetic (and PyTorch) gives NaN for x = inf and +inf
        if v == v and abs(v) != float("inf") and v != 0:
            sympy = _sympy()
            return sympy.Integer(int(v)) if v == int(v) else sympy.Float(v, 17)
    return None


class _Cluster:
    def __init__(self, root: Node, absorbable):
        self.inputs: list[Node] = []
        self._index: dict[int, int] = {}
        self.ops = 0
        self.unfaithful = False
        self.absorbable = absorbable
        self.expr = self._build(root, top=True)

    def _symbol(self, n: Node):
        if id(n) not in self._index:
            self._index[id(n)] = len(self.inputs)
            self.inputs.append(n)
        return _sympy().Symbol(f"a{self._index[id(n)]}", real=True)

    def _build(self, n: Node, top: bool = False):
        c = _scalar_const(n)
        if c is not None and not top:
            return c
        if not top and (not self.absorbable(n) or self.ops >= MAX_OPS):
            return self._symbol(n)
        self.ops += 1
        prim = PRIMITIVES[n.op]
        args = [self._build(a) for a in n.args]
        divisors = _divisor_positions(n.op)
        if divisors:
            # a number divided by stays a division (x / 3, as PyTorch divides), not a
            # product by its rounded reciprocal (sympy's Rational(1, 3)*x): 1 ulp apart
            keep = _keep()
            args = [keep(a) if i in divisors and a.is_Number else a
                    for i, a in enumerate(args)]
        try:
            expr = prim.formula.expr.xreplace(dict(zip(prim.formula.symbols, args)))
            merged = _merged_away(prim.formula, expr, args)
            if merged:
                keep = _keep()
                args = [keep(a) if i in merged else a for i, a in enumerate(args)]
                expr = prim.formula.expr.xreplace(dict(zip(prim.formula.symbols, args)))
        except (TypeError, ValueError):
            # sympy's evaluation of the composition failed (a branch folded to zoo, then
            # compared: relu -> floor -> rsqrt -> where): materialise the arguments
            expr = None
        if expr is None or not _faithful(prim.formula, expr, args):
            # sympy's automatic evaluation rewrote across the arguments (x - x -> 0,
            # x/x -> 1, sqrt(x)**2 -> x, exp(log x) -> x, (x**1.5)**2 -> x**3): exact
            # for real numbers, not for inf, NaN or negative x.  Materialise them.
            args = [self._symbol(a) for a in n.args]
            expr = prim.formula.expr.xreplace(dict(zip(prim.formula.symbols, args)))
            if not _faithful(prim.formula, expr, args):
                self.unfaithful = True
        return expr


def _merged_away(formula, expr, args) -> set[int]:
    """The arguments sympy's evaluation merged into the enclosing formula, which IEEE
    arithmetic does not allow (see :func:`~symgrad.graph.primitives.keep`): every
    argument that is an operation of its own -- a sum, a product, a power, a function --
    must stay a node of the composed formula, as PyTorch computes it before the step
    that uses it. Merged ones are numbers combined (``(x + 1) - 1`` to ``x``), a factor
    distributed (``3*(x + 1)``), a sum or product flattened into a larger one (another
    association: ``(x*2)*y`` as ``x*y*2``), powers of one base combined (``x*x/x`` to
    ``x``, ``x/(x*x)`` to ``1/x``, ``sqrt(x**4)`` to ``x**2``, ``1/(1/x)`` to ``x``), an
    integer power under a root turned into an absolute value. (Within one primitive's
    derivative, ``(x/y)/y`` written ``x*y**-2``, the order is restored by
    :mod:`symgrad.graph.division`.)"""
    return {i for i, a in enumerate(args) if a.args and not _holds(expr, a, args)}


def _holds(expr, part, args) -> bool:
    """Whether ``part`` (one of ``args``) is a node of ``expr``, the formula composed over
    ``args``: searched in the formula's own nodes, not inside the arguments. (sympy's
    ``has`` also finds a sum or product whose terms are a subset of a larger one's:
    ``(3*x**2/d).has(3*x**2)``, where the product was flattened -- evaluated in another
    order, ``x/d*x*3`` is -0 where PyTorch's ``(3*x**2) * (1/d)`` is inf * -0 = NaN: fuzz
    seed 2031002365.)"""
    stack = [expr]
    while stack:
        node = stack.pop()
        if node == part:
            return True
        if not any(node is a for a in args):
            stack.extend(node.args)
    return False


_divisors: dict[str, frozenset] = {}


def _divisor_positions(op: str) -> frozenset:
    """The operands primitive ``op``'s formula divides by (a negative power of them)."""
    if op not in _divisors:
        f = PRIMITIVES[op].formula
        sympy = _sympy()
        bases = {p.base for p in f.expr.atoms(sympy.Pow) if p.exp.is_negative}
        _divisors[op] = frozenset(i for i, s in enumerate(f.symbols) if s in bases)
    return _divisors[op]


def _faithful(formula, expr, args) -> bool:
    """Whether composing ``formula`` over ``args`` into ``expr`` kept every argument the
    formula uses: no free symbol lost (a cancellation) and every argument that applies
    a function or a fractional power still present."""
    sympy = _sympy()
    if not _kept(formula.expr, expr, formula.symbols, args):
        return False
    # each branch too: maximum's tie branch (x + y) / 2 is 0 for y = -x, NaN in IEEE
    # arithmetic where x is NaN (fuzz seed 2028006050)
    mapping = dict(zip(formula.symbols, args))
    for pw in formula.expr.atoms(sympy.Piecewise):
        for e, _ in pw.args:
            if not _kept(e, e.xreplace(mapping), formula.symbols, args):
                return False
    return True


def _kept(part, composed, symbols, args) -> bool:
    """Whether ``composed`` (``part`` of a formula over ``args``) still holds every
    argument ``part`` uses: their symbols, and each function or fractional power."""
    sympy = _sympy()
    free = composed.free_symbols
    used = part.free_symbols
    for s, a in zip(symbols, args):
        if s not in used:
            continue
        if not a.free_symbols <= free:
            return False
        if isinstance(a, sympy.Function) or (
                isinstance(a, sympy.Pow) and not a.exp.is_integer):
            if not composed.has(a):
                return False
    return True


def cluster_formula(root: Node, absorbable) -> "tuple[sympy.Expr, list[Node], int]":
    """(formula, input nodes, operation count) of the cluster rooted at ``root``; the
    count is 0 when no formula over it is faithful to IEEE arithmetic (then it stays
    unfused)."""
    c = _Cluster(root, absorbable)
    return c.expr, c.inputs, (0 if c.unfaithful else c.ops)


def _real_finite(expr) -> bool:
    """Whether sympy's automatic evaluation kept the composed formula real and free of
    special values (sqrt(-1) -> I, 1/0 -> zoo): else the cluster stays unfused."""
    sympy = _sympy()
    return not expr.has(sympy.I, sympy.zoo, sympy.nan, sympy.oo, -sympy.oo)


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
            if (ops > 1 or ops == 1 and len(inputs) < len({id(a) for a in n.args})) \
                    and _real_finite(expr):
                args = tuple(memo[id(i)] for i in inputs)
                memo[id(n)] = make_node("fused", args, (("dtype", n.dtype), ("expr", expr),
                                                        ("shape", n.shape)), n.shape, n.dtype)
                continue
        args = tuple(memo.get(id(a), a) for a in n.args)
        memo[id(n)] = n if all(x is y for x, y in zip(args, n.args)) else \
            make_node(n.op, args, n.attrs, n.shape, n.dtype)
    return [memo[id(o)] for o in outputs]
