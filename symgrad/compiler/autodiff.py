"""Symbolic reverse mode on the node DAG: :func:`grad_graph` walks the graph backwards and
applies each primitive's VJP rule to traced tensors, so gradients come out as ordinary
nodes — printable, optimisable, compilable and differentiable again."""
from __future__ import annotations

from typing import Sequence

from ..autograd import grad_mode
from ..ops import lax
from ..graph.primitives import PRIMITIVES
from ..ops.vjp import rule as vjp_rule
from ..graph.node import Node, toposort
from ..tensor import Tensor
from ..graph.node import const

__all__ = ["grad_graph", "NodeContext", "as_node"]


def _tensor(node: Node):
    return Tensor._from_node(node)


class NodeContext:
    """What a VJP rule sees for one node (same interface as a recorded Function)."""

    __slots__ = ("node", "prim", "needs_input_grad")

    def __init__(self, node: Node, needs):
        self.node = node
        self.prim = PRIMITIVES[node.op]
        self.needs_input_grad = needs

    def input(self, i: int):
        return _tensor(self.node.args[i])

    input_structure = input     # (a traced program has no in-place updates to check)

    @property
    def out(self):
        return _tensor(self.node)

    @property
    def in_avals(self):
        return tuple((a.shape, a.dtype) for a in self.node.args)

    @property
    def kwargs(self) -> dict:
        return dict(self.node.attrs)


def _depends(order: list[Node], wrt: Sequence[Node]) -> set[int]:
    dep = {id(w) for w in wrt}
    for node in order:
        if node.op in ("input", "const") or not PRIMITIVES[node.op].differentiable:
            continue
        if not node.dtype.is_floating_point:    # (a cast to an integer or bool: no path)
            continue
        if any(id(a) in dep for a in node.args):
            dep.add(id(node))
    return dep


def grad_graph(outputs: Sequence[Node], wrt: Sequence[Node],
               seeds: Sequence[Node] | None = None) -> list[Node]:
    """Nodes for sum_k seeds[k] · d outputs[k] / d wrt[j], for each j.

    Seeds default to ones (so scalar outputs give plain gradients). Inputs the outputs do
    not depend on get zeros.
    """
    state = grad_mode._state
    state.deriving += 1
    try:
        return _grad_graph(outputs, wrt, seeds)
    finally:
        state.deriving -= 1


def _grad_graph(outputs, wrt, seeds) -> list[Node]:
    order = toposort(outputs)
    dep = _depends(order, wrt)
    cot: dict[int, object] = {}
    with grad_mode.no_grad():
        for k, out in enumerate(outputs):
            g = _tensor(seeds[k]) if seeds is not None else lax.full(out.shape, 1, out.dtype)
            _add(cot, out, g)
        for node in reversed(order):
            g = cot.get(id(node))
            if g is None or node.op in ("input", "const"):
                continue
            if id(node) not in dep or not PRIMITIVES[node.op].differentiable:
                continue
            needs = tuple(id(a) in dep for a in node.args)
            grads = vjp_rule(node.op)(NodeContext(node, needs), g)
            for a, ga, need in zip(node.args, grads, needs):
                if need and ga is not None:
                    _add(cot, a, ga)
        result = []
        for w in wrt:
            g = cot.get(id(w))
            result.append(as_node(g if g is not None else lax.zeros(w.shape, w.dtype)))
    return result


def as_node(t) -> Node:
    """The node of a traced tensor; a const node for an eager one."""
    return t._node if t._node is not None else const(t._data, t.dtype)


def _add(cot, node, g):
    prev = cot.get(id(node))
    cot[id(node)] = g if prev is None else lax.add(prev, g)
