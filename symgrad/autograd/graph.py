"""``symgrad.autograd.graph``, as ``torch.autograd.graph``: :class:`Node`, the abstract
class every ``grad_fn`` is an instance of (recorded backward functions, AccumulateGrad,
custom Functions' backward nodes register themselves), and gradient edges.

>>> import symgrad as torch
>>> x = torch.ones(2, requires_grad=True)
>>> isinstance((x * 2).grad_fn, torch.autograd.graph.Node)
True
"""
from __future__ import annotations

import abc
from typing import NamedTuple

__all__ = ["Node", "GradientEdge", "get_gradient_edge"]


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


def get_gradient_edge(tensor) -> GradientEdge:
    """The gradient edge of `tensor` (its grad_fn, or a leaf's AccumulateGrad)."""
    if not tensor.requires_grad:
        raise RuntimeError("It is not possible to get the gradient edge for a Tensor that "
                           "does not require gradients")
    if tensor.grad_fn is not None:
        return GradientEdge(tensor.grad_fn, tensor._output_nr)
    from .nodes import accumulator    # late: nodes registers its classes with Node here
    return GradientEdge(accumulator(tensor), 0)
