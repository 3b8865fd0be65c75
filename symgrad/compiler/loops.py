"""Compiler passes for structured loops (:mod:`symgrad.ops.loops`).

* :func:`in_bodies` -- a graph pass made to reach inside loop bodies too (recursively),
  so a body is stabilised, simplified and fused like the program around it.
* :func:`share_loops` -- a loop whose result is a prefix of another loop's (the primal
  scan and the scan reverse mode adds to stack its carries: same body outputs first, same
  operands) runs once: the first becomes a slice of the second.
"""
from __future__ import annotations

from typing import Callable

from ..graph.body import Body
from ..graph.node import Node, make_node, toposort
from .rewrite import mk, rebuild

__all__ = ["in_bodies", "share_loops", "LOOP_OPS"]

LOOP_OPS = ("loop", "while")

Pass = Callable[[list[Node]], list[Node]]


def _has_loops(outputs) -> bool:
    return any(n.op in LOOP_OPS for n in toposort(outputs))


def in_bodies(graph_pass: Pass) -> Pass:
    """``graph_pass`` applied to the graph and to the body of every loop in it."""
    def run(outputs: list[Node]) -> list[Node]:
        outputs = graph_pass(outputs)
        if not _has_loops(outputs):
            return outputs
        done: dict[Body, Body] = {}

        def rule(n: Node):
            if n.op not in LOOP_OPS:
                return None
            attrs, changed = [], False
            for k, v in n.attrs:
                if isinstance(v, Body):
                    if v not in done:
                        new = Body(v.inputs, run(list(v.outputs)))
                        done[v] = new
                        done[new] = new
                    changed |= done[v] is not v
                    v = done[v]
                attrs.append((k, v))
            return make_node(n.op, n.args, tuple(attrs), n.shape, n.dtype) if changed else None
        return rebuild(outputs, rule)
    return run


def share_loops(outputs: list[Node]) -> list[Node]:
    """Loops whose result is a prefix of a larger loop's over the same operands become a
    slice of it."""
    loops = [n for n in toposort(outputs) if n.op == "loop"]
    if len(loops) < 2:
        return outputs
    replace: dict[int, Node] = {}
    for small in loops:
        for big in loops:
            if big is small or big.args != small.args or big.size <= small.size:
                continue
            if _prefix(small, big):
                replace[id(small)] = mk("slice", big, starts=(0,), stops=(small.size,),
                                        steps=(1,))
                break
    if not replace:
        return outputs
    return rebuild(outputs, lambda n: replace.get(id(n)))


def _prefix(small: Node, big: Node) -> bool:
    a, b = small.kwargs, big.kwargs
    if any(a[k] != b[k] for k in ("length", "reverse", "n_carry", "n_xs")):
        return False
    sb, bb = a["body"], b["body"]
    if sb.inputs != bb.inputs or bb.outputs[:len(sb.outputs)] != sb.outputs:
        return False
    sel = a["select"]      # outputs keep their indices: the extra ones come last
    return b["select"][:len(sel)] == sel and small.dtype is big.dtype
