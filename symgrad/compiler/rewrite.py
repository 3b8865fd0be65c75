"""Graph rewrites. Every pass rebuilds the graph bottom-up from its outputs, so dead
nodes vanish and hash-consing merges common subexpressions; rules fire on each rebuilt
node until none applies.

* :func:`stabilize` — before differentiation, so gradients are stable too:
  log(sigmoid x) → -log1pexp(-x), log(1 - sigmoid x) → -log1pexp(x),
  log(1 + exp x) / log1p(exp x) → log1pexp x (log(1 + e^x) computed as max(x, 0) +
  log1p(e^-|x|): exact for every x, unlike softplus with its threshold of 20),
  log(sum(exp x)) → logsumexp with a max
  shift, log(exp(a) / b) → a - log b, and NaN-safe ``where``: the operands of the branch
  not taken are replaced by 1 inside domain-restricted subexpressions (sqrt, log, div,
  pow, ...), so its gradient cannot leak inf/NaN.
* :func:`simplify` — constant folding and algebraic identities that hold in IEEE
  arithmetic for every input, inf and NaN included (x*1, x+0, x-0, --x, x/1, exp(log x)
  and x/x where x is a known positive / nonzero constant, layout no-ops and
  compositions).  Not x-x -> 0 (inf - inf is NaN) nor log(exp x) -> x (exp overflows).
* :func:`transpose_products` — a transposed product ``(a @ b).T`` whose product has
  no other use becomes ``b.T @ a.T``: the same multiply-adds written straight in the
  wanted layout, instead of a product and a transposing copy (``linear``'s weight
  gradient, ``(x.T @ dz).T``, was a 784x256 product and a 1.6 MB transpose).

Every identity here is covered by the optimised == unoptimised tests and by the
differential tester (``tests/fuzz``), whose inputs include NaN and ±inf.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..graph.interpret import run_node
from ..graph.node import Node, const, make_node, toposort
from ..graph.primitives import PRIMITIVES, SHAPE_RULES

__all__ = ["rebuild", "simplify", "stabilize", "transpose_products", "mk", "count_nodes"]

FOLD_LIMIT = 1 << 16
# Folding never makes constant data out of (almost) nothing: a fold's result holds at most
# this many elements or no more than its largest constant operand.  An iota-built mask or
# identity (a jacobian's or hessian's seed rows, eye(100) = 10,000 doubles) stays a
# formula the kernel computes from its indices: as a constant it was ~250 kB of IR text
# that Python printed and LLVM parsed and copied, a third of such a compile.
FOLD_GROW = 256
_DOMAIN_RESTRICTED = {"log", "log1p", "sqrt", "rsqrt", "div", "pow", "reciprocal", "tan"}


def mk(op: str, /, *args: Node, **attrs) -> Node:
    """Build a node, computing its shape and dtype with the primitive's shape rule
    (``op`` is positional-only: a primitive may have an attribute of that name)."""
    shape, dt = SHAPE_RULES[op]([(a.shape, a.dtype) for a in args], **attrs)
    return make_node(op, tuple(args), tuple(sorted(attrs.items())), tuple(shape), dt)


def scalar(value, dtype) -> Node:
    return const(np.asarray(value, dtype=dtype.np), dtype)


def count_nodes(outputs) -> int:
    return sum(1 for n in toposort(outputs) if n.op not in ("input", "const"))


def rebuild(outputs: list[Node], rule: Callable[[Node], Node | None]) -> list[Node]:
    """Rebuild `outputs` bottom-up, applying `rule` at each node until it returns None."""
    memo: dict[int, Node] = {}
    for node in toposort(outputs):
        if not node.args:
            new = node
        else:
            args = tuple(memo[id(a)] for a in node.args)
            new = node if all(a is b for a, b in zip(args, node.args)) else \
                make_node(node.op, args, node.attrs, node.shape, node.dtype)
        for _ in range(16):
            r = rule(new)
            if r is None or r is new:
                break
            new = r
        memo[id(node)] = new
    return [memo[id(o)] for o in outputs]


# ---- helpers -------------------------------------------------------------------------
def const_value(n: Node):
    return n.attr("value").value if n.op == "const" else None


def is_const(n: Node, v) -> bool:
    val = const_value(n)
    return val is not None and val.size > 0 and bool(np.all(val == v))


def _is_zero(n: Node, negative: bool) -> bool:
    """Whether ``n`` is a constant zero -- for a floating dtype, every zero with the sign
    ``negative`` says (signed zeros: only the right one leaves a sum unchanged)."""
    val = const_value(n)
    if val is None or val.size == 0 or not bool(np.all(val == 0)):
        return False
    return val.dtype.kind not in "fc" or bool(np.all(np.signbit(val.real) == negative))


def _fit(x: Node, like: Node) -> Node | None:
    """x reshaped/expanded to like's shape and dtype, if that is pure layout."""
    if x.dtype is not like.dtype:
        return None
    if x.shape == like.shape:
        return x
    return mk("expand", x, shape=like.shape)


def known_positive(n: Node) -> bool:
    val = const_value(n)
    if val is not None:
        return bool(np.all(val > 0))
    return n.op in ("expand", "reshape", "cast") and known_positive(n.args[0])


def known_nonzero(n: Node) -> bool:
    val = const_value(n)
    if val is not None:
        return bool(np.all(val != 0))
    return known_positive(n)


# ---- simplify --------------------------------------------------------------------------
def _fold(n: Node) -> Node | None:
    if n.op in ("input", "const", "expand"):
        return None
    if n.args and PRIMITIVES[n.op].kind == "elementwise" and all(
            a.op == "const" or _uniform(a) is not None for a in n.args) and \
            any(a.op != "const" for a in n.args):
        scalars = [_uniform(a) if a.op != "const" else a for a in n.args]
        if all(a.shape == () for a in scalars):       # fold on scalars, then broadcast
            small = mk(n.op, *scalars, **dict(n.attrs))
            folded = _fold(small)
            return mk("expand", folded, shape=n.shape) if folded is not None else None
    if n.size > FOLD_LIMIT and n.op != "full":
        return None
    if n.args and all(a.op == "const" for a in n.args) and \
            n.size <= max([FOLD_GROW] + [a.size for a in n.args]) or \
            (not n.args and n.op == "iota" and n.size <= FOLD_GROW) or \
            (not n.args and n.op == "full"):
        with np.errstate(all="ignore"):
            value = run_node(n, [a.attr("value").value for a in n.args])
        if value.ndim and value.size > 1 and (value == value.flat[0]).all():
            return mk("expand", const(value.flat[0], n.dtype), shape=n.shape)   # uniform
        return const(value, n.dtype)
    if n.op == "full" and n.shape:
        return mk("expand", scalar(n.attr("value"), n.dtype), shape=n.shape)
    return None


def _uniform(n: Node) -> Node | None:
    """The 0-d constant c when n is expand(c)."""
    if n.op == "expand" and n.args[0].op == "const" and n.args[0].shape == ():
        return n.args[0]
    return None


_EMPTY_REDUCTION = {"sum": 0, "prod": 1, "mean": float("nan")}


def _identity(n: Node) -> Node | None:
    op, a = n.op, n.args
    if op in ("stop_gradient", "custom_vjp", "checked_in_backward"):   # gradients are built:
        # done their job
        return a[0]
    if op in _EMPTY_REDUCTION and a and a[0].size == 0 and n.size:
        # a reduction over no elements is its identity: no loop accumulates nothing
        return mk("full", shape=n.shape, value=_EMPTY_REDUCTION[op], dtype=n.dtype)
    if op == "add":                  # (IEEE: only x + -0.0 is x; -0.0 + 0.0 is +0.0)
        if _is_zero(a[1], negative=True):
            return _fit(a[0], n)
        if _is_zero(a[0], negative=True):
            return _fit(a[1], n)
    elif op == "sub":                # (x - +0.0 is x, -0.0 - x is -x; 0.0 - 0.0 is +0.0)
        if _is_zero(a[1], negative=False):
            return _fit(a[0], n)
        if _is_zero(a[0], negative=True) and a[1].shape == n.shape and \
                not n.dtype.is_floating_point:
            # (floats: -0.0 - NaN keeps the NaN's sign, negation flips it -- signbit sees it)
            return mk("neg", a[1])
    elif op == "mul":
        for x, c in ((a[0], a[1]), (a[1], a[0])):
            if is_const(c, 1):
                return _fit(x, n)
            if is_const(c, -1) and x.shape == n.shape and not n.dtype.is_floating_point:
                return mk("neg", x)       # (floats: NaN * -1 keeps the NaN's sign)
    elif op == "div":
        if is_const(a[1], 1):
            return _fit(a[0], n)
        if a[0] is a[1] and known_nonzero(a[0]):
            return mk("full", shape=n.shape, value=1, dtype=n.dtype)
    elif op == "neg" and a[0].op == "neg":
        return a[0].args[0]
    elif op == "exp" and a[0].op == "log" and known_positive(a[0].args[0]):
        return a[0].args[0]
    elif op == "pow" and is_const(a[1], 1):
        return _fit(a[0], n)
    elif op == "pow" and is_const(a[1], 2) and a[0].shape == n.shape:
        return mk("mul", a[0], a[0])
    return _layout(n)


def _layout(n: Node) -> Node | None:
    op, a = n.op, n.args
    x = a[0] if a else None
    if op in ("reshape", "expand") and x.shape == n.shape:
        return x
    if op == "reshape" and x.op == "reshape":
        return mk("reshape", x.args[0], shape=n.shape)
    if op == "permute":
        perm = n.attr("perm")
        if perm == tuple(range(len(perm))):
            return x
        if x.op == "permute":
            inner = x.attr("perm")
            return mk("permute", x.args[0], perm=tuple(inner[p] for p in perm))
    if op == "cast" and x.dtype is n.dtype:
        return x
    if op == "sum" and not n.attr("axes"):
        return x if x.shape == n.shape else None
    if op == "slice" and n.shape == x.shape and all(s == 1 for s in n.attr("steps")):
        return x
    return None


def simplify(outputs: list[Node]) -> list[Node]:
    def rule(n):
        return _fold(n) or _identity(n)
    return rebuild(outputs, rule)


# ---- stabilize ---------------------------------------------------------------------------
def _one_minus(n: Node) -> Node | None:
    """x when n is 1 - x."""
    if n.op == "sub" and is_const(n.args[0], 1) and n.args[1].shape == n.shape:
        return n.args[1]
    return None


def _one_plus(n: Node) -> Node | None:
    if n.op == "add":
        for c, x in ((n.args[0], n.args[1]), (n.args[1], n.args[0])):
            if is_const(c, 1) and x.shape == n.shape:
                return x
    return None


def _stable(n: Node) -> Node | None:
    if n.op == "log":
        x = n.args[0]
        if x.op == "sigmoid":                               # log σ(a) = -log(1 + e^-a)
            return mk("neg", mk("log1pexp", mk("neg", x.args[0])))
        inner = _one_minus(x)
        if inner is not None and inner.op == "sigmoid":     # log(1 - σ(a)) = -log(1 + e^a)
            return mk("neg", mk("log1pexp", inner.args[0]))
        inner = _one_plus(x)
        if inner is not None and inner.op == "exp":         # log(1 + e^a), stable
            return mk("log1pexp", inner.args[0])
        if x.op == "sum" and x.args[0].op == "exp":
            return _logsumexp(x.args[0].args[0], x.attr("axes"), x.attr("keepdim"), n)
        if x.op == "div" and x.args[0].op == "exp" and x.args[0].shape == n.shape:
            return mk("sub", x.args[0].args[0], mk("log", x.args[1]))
    if n.op == "log1p" and n.args[0].op == "exp":
        return mk("log1pexp", n.args[0].args[0])
    if n.op == "where":
        return _safe_where(n)
    return None


def _max_shifted(x: Node) -> bool:
    """x is (a - shift) with the shift derived from amax(a) (already stable)."""
    if x.op != "sub":
        return False
    t = x.args[1]
    while t.op in ("expand", "reshape", "cast", "where"):
        t = t.args[-1] if t.op == "where" else t.args[0]
    if t.op != "amax":
        return False
    a = t.args[0]
    while a.op in ("where", "stop_gradient"):     # lax.finite_max masks the infinities
        a = a.args[-1] if a.op == "where" else a.args[0]
    return a is x.args[0]


def _logsumexp(x: Node, axes, keepdim, n: Node) -> Node | None:
    """log(sum(exp(x))) shifted by x's largest finite element (as lax.finite_max), a
    constant for the gradient."""
    if _max_shifted(x):
        return None
    inf = scalar(float("inf"), x.dtype)
    a = mk("stop_gradient", x)
    masked = mk("where", mk("eq", mk("abs", a), inf), scalar(float("-inf"), x.dtype), a)
    m = mk("amax", masked, axes=axes, keepdim=True)
    finite = mk("where", mk("eq", mk("abs", m), inf), scalar(0, m.dtype), m)
    shifted = mk("sub", x, mk("expand", finite, shape=x.shape))
    s = mk("log", mk("sum", mk("exp", shifted), axes=axes, keepdim=True))
    out = mk("add", s, finite)
    return out if out.shape == n.shape else mk("reshape", out, shape=n.shape)


def _safe_where(n: Node) -> Node | None:
    c, a, b = n.args
    new_a = _guard(a, c, take=True)
    new_b = _guard(b, c, take=False)
    if new_a is a and new_b is b:
        return None
    return mk("where", c, new_a, new_b)


def _guard(branch: Node, c: Node, take: bool) -> Node:
    """branch with its elementwise leaves replaced by where(c, leaf, 1) (take=True) or
    where(c, 1, leaf), if its elementwise cone has a domain-restricted operation."""
    cone = _elementwise_cone(branch)
    if not any(n.op in _DOMAIN_RESTRICTED for n in cone.values()):
        return branch
    memo: dict[int, Node] = {}

    def sub(node: Node) -> Node:
        if id(node) in memo:
            return memo[id(node)]
        if id(node) in cone:
            args = tuple(sub(a) for a in node.args)
            if all(a.shape == b.shape for a, b in zip(args, node.args)):
                out = make_node(node.op, args, node.attrs, node.shape, node.dtype)
            else:       # a guarded leaf broadcast up to c's shape: the node follows it
                out = mk(node.op, *args, **dict(node.attrs))
        elif node.op == "const" or not node.dtype.is_floating_point or _guarded(node, c, take):
            out = node
        else:           # (may broadcast the leaf up to c's shape; the where broadcasts anyway)
            one = scalar(1, node.dtype)
            out = mk("where", c, node, one) if take else mk("where", c, one, node)
        memo[id(node)] = out
        return out
    return sub(branch)


def _guarded(node: Node, c: Node, take: bool) -> bool:
    """Whether ``node`` is already a leaf guarded by :func:`_guard` for ``c`` (the rule
    fires again on the ``where`` it built: without this every pass wrapped the leaves once
    more, up to ``rebuild``'s 16 rounds)."""
    return (node.op == "where" and node.args[0] is c
            and is_const(node.args[2] if take else node.args[1], 1))


def _elementwise_cone(root: Node) -> dict[int, Node]:
    cone: dict[int, Node] = {}
    stack = [root]
    while stack:
        n = stack.pop()
        if id(n) in cone or n.op in ("input", "const") or n.op not in PRIMITIVES:
            continue
        if (PRIMITIVES[n.op].kind != "elementwise" or n.op == "where") and not (
                n.op == "cast" and n.dtype.is_floating_point):   # (a branch promoted to
            continue                                             # the other's dtype)
        cone[id(n)] = n
        stack.extend(n.args)
    return cone


def stabilize(outputs: list[Node]) -> list[Node]:
    return rebuild(outputs, _stable)


def transpose_products(outputs: list[Node]) -> list[Node]:
    """``permute(matmul(a, b))`` swapping the last two axes (batch axes kept) ->
    ``matmul(b^T, a^T)`` when the product has no other use (an output counts as one)."""
    uses: dict[int, int] = {}
    for n in toposort(outputs):
        for a in n.args:
            uses[id(a)] = uses.get(id(a), 0) + 1
    for o in outputs:
        uses[id(o)] = uses.get(id(o), 0) + 1

    def rule(n: Node) -> Node | None:
        if n.op != "permute" or not n.args or n.args[0].op != "matmul":
            return None
        prod = n.args[0]
        a, b = prod.args
        nd = len(n.shape)
        swap = tuple(range(nd - 2)) + (nd - 1, nd - 2)
        if nd < 2 or n.attr("perm") != swap or uses.get(id(prod), 0) != 1:
            return None
        if len(a.shape) != nd or len(b.shape) != nd:     # 1-D operands, broadcast batch ranks
            return None
        return mk("matmul", mk("permute", b, perm=swap), mk("permute", a, perm=swap))

    return rebuild(outputs, rule)
