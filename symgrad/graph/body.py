"""The body of a structured loop: a sub-program held as a node attribute.

A :class:`Body` is a graph with its own ``input`` nodes (the loop's carry, the current
slice of the scanned arrays, loop-invariant values) and its output nodes (the next carry,
the slice of the stacked results).  It is hashable and compares by structure, so two
loops with the same body are the same node (hash-consing), and its ``repr`` is a stable
digest, so a program holding it has a stable cache key.  :meth:`Body.run` evaluates it
with the numpy interpreter (the reference semantics of a loop's iteration).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .node import Node, structural_key, toposort
from .primitives import NUMPY_RULES
from .program import Program

__all__ = ["Body"]


class Body:
    """A sub-program: ``inputs`` (``input`` nodes, in calling order) -> ``outputs``."""

    __slots__ = ("inputs", "outputs", "_key", "_order", "_hash", "__weakref__")

    def __init__(self, inputs: Sequence[Node], outputs: Sequence[Node]):
        self.inputs = tuple(inputs)
        self.outputs = tuple(outputs)
        for n in self.inputs:
            if n.op != "input":
                raise ValueError(f"a loop body's inputs must be input nodes, got {n.op}")
        digest = structural_key(list(self.outputs) + list(self.inputs))
        self._key = (digest, len(self.inputs), len(self.outputs))
        self._hash = hash(self._key)
        self._order = None

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other) -> bool:
        return isinstance(other, Body) and self._key == other._key

    def __repr__(self) -> str:
        return f"body#{self._key[0][:12]}"

    @property
    def in_avals(self) -> list[tuple[tuple[int, ...], object]]:
        return [(n.shape, n.dtype) for n in self.inputs]

    @property
    def out_avals(self) -> list[tuple[tuple[int, ...], object]]:
        return [(n.shape, n.dtype) for n in self.outputs]

    def nodes(self) -> list[Node]:
        if self._order is None:
            self._order = toposort(list(self.outputs))
        return self._order

    def run(self, args: Sequence[np.ndarray]) -> list[np.ndarray]:
        """The outputs for these input values (numpy, no floating-point warnings: the
        caller sets the error state)."""
        env: dict[int, np.ndarray] = {id(n): a for n, a in zip(self.inputs, args)}
        for node in self.nodes():
            key = id(node)
            if key in env:
                continue
            if node.op == "const":
                env[key] = node.attr("value").value
                continue
            if node.op == "input":
                raise KeyError(f"loop body input {node.attr('name')!r} is not one of its inputs")
            res = NUMPY_RULES[node.op](*[env[id(a)] for a in node.args], **dict(node.attrs))
            if type(res) is not np.ndarray or res.dtype != node.dtype.np:
                res = np.asarray(res, dtype=node.dtype.np)
            env[key] = res
        return [env[id(o)] for o in self.outputs]

    def as_text(self, indent: str = "    ") -> str:
        """The body as a program listing (inputs ``c0``, ``x0``, ``k0`` ... as named)."""
        prog = Program(list(self.inputs), [n.attr("name") for n in self.inputs],
                       list(self.outputs), [f"out{i}" for i in range(len(self.outputs))])
        return "\n".join(indent + line for line in prog.as_text().splitlines())
