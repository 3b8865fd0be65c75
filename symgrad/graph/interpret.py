"""The numpy interpreter: evaluates a list of nodes with each primitive's numpy rule.
It is the reference semantics of a graph (the compiler's numpy backend runs on it)."""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from .primitives import NUMPY_RULES
from .node import Node, toposort
from .fpstate import quiet

__all__ = ["evaluate", "run_node"]


def run_node(node: Node, args: Sequence) -> np.ndarray:
    """Apply `node`'s primitive to argument arrays, returning an array of node's dtype."""
    res = NUMPY_RULES[node.op](*args, **dict(node.attrs))
    if type(res) is not np.ndarray or res.dtype != node.dtype.np:
        res = np.asarray(res, dtype=node.dtype.np)
    return res


def evaluate(outputs: Sequence[Node], inputs: Mapping[Node, np.ndarray]) -> list[np.ndarray]:
    """Values of `outputs` given arrays for the graph's input nodes.

    >>> from symgrad.graph.node import make_node
    >>> from symgrad.graph import dtypes
    >>> x = make_node("input", (), (("name", "x"),), (2,), dtypes.float64)
    >>> y = make_node("neg", (x,), (), (2,), dtypes.float64)
    >>> evaluate([y], {x: np.array([1.0, 2.0])})[0]
    array([-1., -2.])
    """
    env: dict[int, np.ndarray] = {}
    with quiet():
        for node in toposort(outputs):
            if node.op == "input":
                try:
                    env[id(node)] = np.asarray(inputs[node], dtype=node.dtype.np)
                except KeyError:
                    raise KeyError(f"no value given for input {node.attr('name')!r}") from None
            elif node.op == "const":
                env[id(node)] = node.attr("value").value
            else:
                env[id(node)] = run_node(node, [env[id(a)] for a in node.args])
    return [env[id(o)] for o in outputs]
