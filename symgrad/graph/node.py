"""Hash-consed, immutable expression nodes and their traversal.

A :class:`Node` is one primitive applied to argument nodes with static attributes; its
shape and dtype are fixed when it is built. Structurally equal nodes are the same object
(hash-consing), so common subexpressions merge for free and identity comparison is
structural comparison. :func:`toposort` is iterative, so 100,000-node chains are fine.
"""
from __future__ import annotations

import hashlib
import weakref
from typing import Callable, Iterable

import numpy as np

from .dtypes import DType

__all__ = ["Node", "make_node", "const", "stop_gradient_node", "toposort", "structural_key",
           "Constant"]


class Constant:
    """A hashable wrapper around a numpy array used as the attribute of a `const` node."""

    __slots__ = ("value", "_key")

    def __init__(self, value: np.ndarray):
        value = np.array(value, order="C")       # (ascontiguousarray would make 0-d 1-d)
        value.setflags(write=False)
        self.value = value
        if value.size <= 16:
            self._key = (value.dtype.str, value.shape, value.tobytes())
        else:
            digest = hashlib.blake2b(value.tobytes(), digest_size=16).hexdigest()
            self._key = (value.dtype.str, value.shape, digest)

    def __hash__(self) -> int:
        return hash(self._key)

    def __eq__(self, other) -> bool:
        return isinstance(other, Constant) and self._key == other._key

    def __repr__(self) -> str:
        if self.value.ndim == 0:
            return repr(self.value.item())
        return f"array{list(self.value.shape)}"


class Node:
    """One primitive application. Do not construct directly: use :func:`make_node`.

    >>> from symgrad.graph import dtypes
    >>> a = make_node("input", (), (("name", "a"),), (2,), dtypes.float32)
    >>> make_node("neg", (a,), (), (2,), dtypes.float32) is make_node("neg", (a,), (), (2,), dtypes.float32)
    True
    """

    __slots__ = ("op", "args", "attrs", "shape", "dtype", "__weakref__")

    op: str
    args: tuple["Node", ...]
    attrs: tuple
    shape: tuple[int, ...]
    dtype: DType

    def attr(self, name: str, default=None):
        for k, v in self.attrs:
            if k == name:
                return v
        return default

    @property
    def kwargs(self) -> dict:
        return dict(self.attrs)

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def __repr__(self) -> str:
        return f"Node({self.op}, shape={self.shape}, dtype={self.dtype.name})"

    def __setstate__(self, state) -> None:
        """A node from a pickle (a compiled function's program travelling to another
        process): a partial derivative primitive it applies (``tanh.d0``, derived on
        first use) is derived in this process too, so that every rule table knows it."""
        slots = state[1] if isinstance(state, tuple) else state
        for name, value in slots.items():
            object.__setattr__(self, name, value)
        if self.op not in _LEAF_OPS:
            from .primitives import PRIMITIVES, resolve   # late: primitives builds nodes
            if self.op not in PRIMITIVES:
                resolve(self.op)


_LEAF_OPS = frozenset(("input", "const"))


_TABLE: "weakref.WeakValueDictionary[tuple, Node]" = weakref.WeakValueDictionary()


def make_node(op: str, args: tuple, attrs: tuple, shape: tuple, dtype: DType) -> Node:
    """The unique node for this structure (created on first request)."""
    key = (op, tuple(map(id, args)), attrs, shape, dtype)
    node = _TABLE.get(key)
    if node is None:
        node = object.__new__(Node)
        node.op, node.args, node.attrs, node.shape, node.dtype = op, args, attrs, shape, dtype
        _TABLE[key] = node
    return node


def const(value, dtype: DType) -> Node:
    """A constant node holding `value` (cast to `dtype`)."""
    arr = np.asarray(value, dtype=dtype.np)
    return make_node("const", (), (("value", Constant(arr)),), arr.shape, dtype)


def stop_gradient_node(node: Node) -> Node:
    """``stop_gradient(node)``: the same value, no gradient through it (a traced
    ``detach()``)."""
    if node.op == "stop_gradient":
        return node
    return make_node("stop_gradient", (node,), (), node.shape, node.dtype)


def toposort(outputs: Iterable[Node], stop: Iterable[int] = (),
             children: Callable | None = None) -> list[Node]:
    """All nodes reachable from `outputs`, each after its arguments (iterative DFS);
    nodes whose id is in `stop` are neither listed nor looked past. `children`: a node's
    arguments, for graphs of other objects (default: ``node.args``)."""
    order: list[Node] = []
    seen: set[int] = set(stop)
    for root in outputs:
        if id(root) in seen:
            continue
        stack = [(root, False)]
        while stack:
            node, expanded = stack.pop()
            if expanded:
                order.append(node)
                continue
            if id(node) in seen:
                continue
            seen.add(id(node))
            stack.append((node, True))
            for a in reversed(node.args if children is None else children(node)):
                if id(a) not in seen:
                    stack.append((a, False))
    return order


def structural_key(outputs: list[Node]) -> str:
    """A stable (cross-process) digest of the graph structure under `outputs`."""
    index: dict[int, int] = {}
    h = hashlib.blake2b(digest_size=20)
    for i, node in enumerate(toposort(outputs)):
        index[id(node)] = i
        parts = (node.op, [index[id(a)] for a in node.args],
                 [(k, v._key if isinstance(v, Constant) else v) for k, v in node.attrs],
                 node.shape, node.dtype.name)
        h.update(repr(parts).encode())
    h.update(repr([index[id(o)] for o in outputs]).encode())
    return h.hexdigest()
