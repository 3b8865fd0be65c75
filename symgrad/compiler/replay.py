"""Applying a graph to tensors: each node's primitive bound again, in order, on the
tensors its inputs stand for -- eager values (recorded by the autograd tape) or traced
ones (nodes of the enclosing trace).  This is how a transform made of graphs (a batched
graph from ``vmap``, a gradient graph from ``grad`` called inside another trace) is
inlined where it is called."""
from __future__ import annotations

from typing import Any

from .. import dispatch
from ..graph.node import Node, toposort
from ..graph.primitives import PRIMITIVES
from ..tensor import Tensor

__all__ = ["replay"]


def replay(outputs: list[Node], env: dict[int, Any]) -> list[Tensor]:
    """``outputs`` with the input nodes ``id -> tensor`` of ``env`` replaced by those
    tensors.  An input node not in ``env`` belongs to an enclosing trace (a value the
    function closed over) and stays that node."""
    vals: dict[int, Any] = dict(env)
    for node in toposort(outputs):
        if id(node) in vals:
            continue
        if node.op == "const":
            vals[id(node)] = Tensor._from_array(node.attr("value").value, node.dtype)
        elif node.op == "input":
            vals[id(node)] = Tensor._from_node(node)
        else:
            vals[id(node)] = dispatch.bind(PRIMITIVES[node.op],
                                           *[vals[id(a)] for a in node.args], **dict(node.attrs))
    return [vals[id(o)] for o in outputs]
