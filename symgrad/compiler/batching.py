"""Batching of a graph: the same computation for a stack of values of some inputs.

:func:`batch_graph` rebuilds the nodes that depend on the *batched* inputs with one more
leading axis (the batch), leaving the rest of the graph shared and unbatched -- a
transform of the symbolic graph, as JAX's ``vmap`` is of a jaxpr.  ``jacobian`` and
``hessian`` use it: the rows of a jacobian are the gradient graph (linear in its seed)
batched over the rows of an identity, one kernel over all rows instead of one kernel per
row.

Each primitive family has one rule: elementwise (any arity, broadcasting), reductions
and scans along axes, layout (reshape, expand, permute, slice, select, flip, shear,
pad_slice, cat, windows, col2im), matmul and structured loops (their bodies batched);
other primitives declare how they batch on their record (``Primitive.batching``: the
dense solvers, as numpy's LAPACK takes leading batch axes, and the SVD's parts).  A primitive without a rule (indexing, ...) makes :func:`batch_graph`
return None and the caller falls back to unbatched graphs.

>>> import numpy as np
>>> from symgrad.graph.node import const
>>> from symgrad.graph import dtypes
>>> x = const(np.arange(3.0), dtypes.float64)
>>> y = mk("mul", x, x)
>>> stack = const(np.ones((2, 3)), dtypes.float64)
>>> batch_graph([y], {id(x): stack}, 2)[0].shape
(2, 3)
"""
from __future__ import annotations

from typing import Callable

from ..graph.body import Body
from ..graph.node import Node, toposort
from ..graph.shapes import numel
from ..ops import loops
from ..graph.primitives import PRIMITIVES, family_of
from .rewrite import mk

__all__ = ["batch_graph"]


Rule = Callable[[Node, list, list, int], Node]


def batch_graph(outputs: list[Node], batched: dict[int, Node], size: int) -> list[Node] | None:
    """``outputs`` with every input ``id -> replacement`` in ``batched`` replaced by a
    stack of ``size`` values along a new leading axis; every output gets that axis
    (broadcast when it does not depend on the batched inputs).  None when a node on the
    way has no batching rule."""
    env: dict[int, tuple[Node, bool]] = {}
    for node in toposort(outputs):
        if id(node) in batched:
            env[id(node)] = (batched[id(node)], True)
            continue
        if not node.args:
            env[id(node)] = (node, False)
            continue
        args = [env[id(a)] for a in node.args]
        if not any(flag for _, flag in args):
            same = all(new is old for (new, _), old in zip(args, node.args))
            env[id(node)] = (node if same else _remake(node, [n for n, _ in args]), False)
            continue
        rule = _rule(node.op)
        new = None if rule is None else rule(node, [n for n, _ in args],
                                             [f for _, f in args], size)
        if new is None:           # (no rule, or none for a node inside a loop's body)
            return None
        env[id(node)] = (new, True)
    out = []
    for o in outputs:
        new, flag = env[id(o)]
        out.append(new if flag else _broadcast(new, size))
    return out


def _remake(node: Node, args: list[Node]) -> Node:
    return mk(node.op, *args, **dict(node.attrs))


def _rule(op: str) -> Rule | None:
    family = family_of(op)
    if family in ("elementwise", "conversion"):        # conversion: cast, stop_gradient
        return _elementwise
    if family == "reduction":
        return _reduce
    if family in ("scan", "arg-reduction"):
        return _along_axis
    return _RULES.get(op) or _BY_DECLARATION.get(PRIMITIVES[op].batching)


# ---- helpers ------------------------------------------------------------------------------
def _unbatched_shape(node: Node, flag: bool) -> tuple[int, ...]:
    return node.shape[1:] if flag else node.shape


def _lift(node: Node, flag: bool, rank: int, size: int) -> Node:
    """``node`` as a batched value of unbatched rank ``rank`` (leading 1s inserted after
    the batch axis; an unbatched value gets a batch axis of 1, broadcasting)."""
    shape = _unbatched_shape(node, flag)
    want = (size if flag else 1,) + (1,) * (rank - len(shape)) + shape
    return node if node.shape == want else mk("reshape", node, shape=want)


def _broadcast(node: Node, size: int) -> Node:
    lifted = mk("reshape", node, shape=(1,) + node.shape)
    return mk("expand", lifted, shape=(size,) + node.shape)


def _stacked(node: Node, flag: bool, size: int) -> Node:
    return node if flag else _broadcast(node, size)


def _attrs(node: Node, **changes) -> dict:
    attrs = dict(node.attrs)
    attrs.update(changes)
    return attrs


# ---- rules --------------------------------------------------------------------------------
def _elementwise(node, args, flags, size):
    rank = len(node.shape)
    lifted = [_lift(a, f, rank, size) if f else a for a, f in zip(args, flags)]
    return mk(node.op, *lifted, **dict(node.attrs))


def _reduce(node, args, flags, size):
    rank = len(node.args[0].shape)
    axes = tuple(a % rank + 1 for a in node.attr("axes")) if rank else ()
    return mk(node.op, args[0], **_attrs(node, axes=axes))


def _along_axis(node, args, flags, size):
    rank = len(node.args[0].shape)
    return mk(node.op, args[0], **_attrs(node, axis=node.attr("axis") % max(rank, 1) + 1))


def _reshape(node, args, flags, size):
    return mk("reshape", args[0], shape=(size,) + tuple(node.attr("shape")))


def _expand(node, args, flags, size):
    shape = tuple(node.attr("shape"))
    return mk("expand", _lift(args[0], True, len(shape), size), shape=(size,) + shape)


def _permute(node, args, flags, size):
    return mk("permute", args[0], perm=(0,) + tuple(p + 1 for p in node.attr("perm")))


def _slice(node, args, flags, size):
    return mk("slice", args[0], starts=(0,) + tuple(node.attr("starts")),
              stops=(size,) + tuple(node.attr("stops")), steps=(1,) + tuple(node.attr("steps")))


def _pad_slice(node, args, flags, size):
    return mk("pad_slice", args[0], shape=(size,) + tuple(node.attr("shape")),
              starts=(0,) + tuple(node.attr("starts")), stops=(size,) + tuple(node.attr("stops")),
              steps=(1,) + tuple(node.attr("steps")))


def _select(node, args, flags, size):
    rank = len(node.args[0].shape)
    return mk("select", args[0], axis=node.attr("axis") % rank + 1, index=node.attr("index"))


def _flip(node, args, flags, size):
    rank = len(node.args[0].shape)
    return mk("flip", args[0], axes=tuple(a % rank + 1 for a in node.attr("axes")))


def _shear(node, args, flags, size):
    return mk("shear", args[0], pairs=tuple((a + 1, b + 1) + tuple(rest)
                                            for a, b, *rest in node.attr("pairs")))


def _trailing(node, args, flags, size):
    """Primitives on an array's last axes (windows, col2im): the same attributes."""
    return mk(node.op, args[0], **dict(node.attrs))


def _cat(node, args, flags, size):
    rank = len(node.shape)
    parts = [_stacked(a, f, size) for a, f in zip(args, flags)]
    return mk("cat", *parts, axis=node.attr("axis") % rank + 1)


def _matmul(node, args, flags, size):
    """Both operands as stacks of matrices of one batch rank, then one product."""
    (a, fa), (b, fb) = zip(args, flags)
    sa, sb = _unbatched_shape(a, fa), _unbatched_shape(b, fb)
    if len(sa) == 1:                                  # a vector: one row
        a = mk("reshape", a, shape=((size,) if fa else ()) + (1,) + sa)
        sa = (1,) + sa
    if len(sb) == 1:                                  # a vector: one column
        b = mk("reshape", b, shape=((size,) if fb else ()) + sb + (1,))
        sb = sb + (1,)
    rank = max(len(sa), len(sb))
    product = mk("matmul", _lift(a, fa, rank, size), _lift(b, fb, rank, size))
    return mk("reshape", product, shape=(size,) + node.shape)


def _matrices(node, args, flags, size):
    """A solver of the last two axes over any leading ones (inv, det, cholesky, ...): the
    batch is one more leading axis. Several operands (solve's A and B) are lifted to one
    rank, so that their leading axes broadcast as the primitive's own do."""
    if len(args) == 1:
        return mk(node.op, args[0], **dict(node.attrs))
    rank = max(len(_unbatched_shape(a, f)) for a, f in zip(args, flags))
    return mk(node.op, *(_lift(a, f, rank, size) for a, f in zip(args, flags)),
              **dict(node.attrs))


def _stacked_operands(node, args, flags, size):
    """Every operand given the batch axis (U, S or Vᵀ read from a factorisation: the
    matrix and its packed factors)."""
    return mk(node.op, *(_stacked(a, f, size) for a, f in zip(args, flags)), **dict(node.attrs))


def _custom_vjp(node, args, flags, size):
    """Gradients are built before batching: a custom_vjp node is its forward value."""
    return _stacked(args[0], flags[0], size)


def _loop(node, args, flags, size):
    """A scan over a batch: one loop whose body is the body batched (carries always
    batched, scanned arrays and closed-over values where they are), its packed result
    laid out again as one row per example."""
    kw = node.kwargs
    body, T, m, p = kw["body"], kw["length"], kw["n_carry"], kw["n_xs"]
    operands, batched = [], []
    for i, (a, f) in enumerate(zip(args, flags)):
        if i < m:
            operands.append(_stacked(a, f, size))
            f = True
        elif i < m + p and f:                      # (B, T, ...) -> (T, B, ...)
            operands.append(mk("permute", a, perm=(1, 0) + tuple(range(2, len(a.shape)))))
        else:
            operands.append(a)
        batched.append(f)
    level = loops.next_level(body)
    inputs, mapping = [], {}
    for k, (n, f) in enumerate(zip(body.inputs, batched)):
        if f:
            mapping[id(n)] = loops.body_input(level, k, n.attr("name"), (size,) + n.shape,
                                              n.dtype)
        inputs.append(mapping.get(id(n), n))
    outs = batch_graph(list(body.outputs), mapping, size)
    if outs is None:
        return None
    new_body = Body(inputs, outs)
    packed = mk("loop", *operands, **_attrs(node, body=new_body))
    avals = loops.output_avals(new_body, T, m)
    rows, offset = [], 0
    for i in kw["select"]:
        shape = tuple(avals[i][0])
        count = numel(shape)
        piece = mk("reshape", mk("slice", packed, starts=(offset,), stops=(offset + count,),
                                 steps=(1,)), shape=shape)
        if i >= m:                                 # stacked results: (T, B, ...) -> (B, T, ...)
            piece = mk("permute", piece, perm=(1, 0) + tuple(range(2, len(shape))))
        rows.append(mk("reshape", piece, shape=(size, count // size)))
        offset += count
    return rows[0] if len(rows) == 1 else mk("cat", *rows, axis=1)


_RULES: dict[str, Rule] = {
    "reshape": _reshape, "expand": _expand, "permute": _permute, "slice": _slice,
    "pad_slice": _pad_slice, "select": _select, "flip": _flip, "shear": _shear, "cat": _cat,
    "windows": _trailing, "col2im": _trailing,
    "matmul": _matmul, "custom_vjp": _custom_vjp, "loop": _loop,
    "index_check": _elementwise,                  # (a bounds check: any index's own)
}
# primitives declaring how they batch (``Primitive.batching``): dense solvers and parts of
# a factorisation
_BY_DECLARATION: dict[str, Rule] = {"leading": _matrices, "stacked": _stacked_operands}
