"""The abstract backward-graph node type: :class:`Node`, the class every ``grad_fn`` is an
instance of (recorded backward functions, AccumulateGrad and custom Functions' backward
nodes register themselves), and :class:`GradientEdge`.  Public as
``symgrad.autograd.graph.Node`` / ``GradientEdge``; kept apart from
:mod:`symgrad.autograd.graph` so the tape's node classes (:mod:`symgrad.autograd.nodes`)
register with it while ``graph`` uses them."""
from __future__ import annotations

import abc
from typing import NamedTuple

__all__ = ["Node", "GradientEdge"]


class Node(abc.ABC):
    """A node of the backward graph (``tensor.grad_fn``)."""

    @abc.abstractmethod
    def name(self) -> str:
        """The node's name, e.g. ``MulBackward0``."""

    @property
    @abc.abstractmethod
    def next_functions(self) -> tuple:
        """``(node, output number)`` per input of the forward operation."""

    @property
    @abc.abstractmethod
    def metadata(self) -> dict:
        """A dictionary for the user's own data."""

    @abc.abstractmethod
    def register_hook(self, fn):
        """``fn(grad_inputs, grad_outputs)`` after the node runs."""

    @abc.abstractmethod
    def register_prehook(self, fn):
        """``fn(grad_outputs)`` before the node runs."""


class GradientEdge(NamedTuple):
    """Where a tensor's gradient enters the graph: a node and its output number."""

    node: Node
    output_nr: int


Node.__module__ = GradientEdge.__module__ = "symgrad.autograd.graph"   # their public home
