"""``symgrad.autograd.graph``, as ``torch.autograd.graph``: :class:`Node`, the abstract
class every ``grad_fn`` is an instance of (recorded backward functions, AccumulateGrad,
custom Functions' backward nodes register themselves), gradient edges, and the
saved-tensor hooks (``saved_tensors_hooks``, ``save_on_cpu``,
``disable_saved_tensors_hooks``; their state is :mod:`symgrad.autograd.saved_hooks`).

>>> import symgrad as torch
>>> x = torch.ones(2, requires_grad=True)
>>> isinstance((x * 2).grad_fn, torch.autograd.graph.Node)
True
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Generator
from typing import Any

from . import saved_hooks
from .node_type import GradientEdge, Node
from .nodes import accumulator

__all__ = ["Node", "GradientEdge", "get_gradient_edge", "saved_tensors_hooks", "save_on_cpu",
           "disable_saved_tensors_hooks"]


def get_gradient_edge(tensor) -> GradientEdge:
    """The gradient edge of `tensor` (its grad_fn, or a leaf's AccumulateGrad)."""
    if not tensor.requires_grad:
        raise RuntimeError("It is not possible to get the gradient edge for a Tensor that "
                           "does not require gradients")
    if tensor.grad_fn is not None:
        return GradientEdge(tensor.grad_fn, tensor._output_nr)
    return GradientEdge(accumulator(tensor), 0)


class saved_tensors_hooks:
    """Every tensor an operation saves for backward while this context is active goes
    through ``pack_hook(tensor)`` (run under no_grad; it may return any object) when it
    is saved, and ``unpack_hook(packed)`` (which must return a tensor) each time the
    backward -- or ``grad_fn._saved_*``, ``ctx.saved_tensors`` -- reads it. Nested
    contexts: the innermost pair applies.

    >>> import symgrad as torch
    >>> a = torch.ones(3, requires_grad=True)
    >>> with torch.autograd.graph.saved_tensors_hooks(lambda t: t.detach() * 0 + 2,
    ...                                               lambda p: p):
    ...     y = (a * a).sum()
    >>> y.backward(); a.grad
    tensor([4., 4., 4.])
    """

    def __init__(self, pack_hook: Callable[[Any], Any], unpack_hook: Callable[[Any], Any]
                 ) -> None:
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self) -> None:
        saved_hooks.push(self.pack_hook, self.unpack_hook)

    def __exit__(self, *args: object) -> None:
        saved_hooks.pop()


class save_on_cpu(saved_tensors_hooks):
    """Saved tensors are kept on the CPU and moved back to their device for backward.
    symgrad's tensors live on the CPU: each saved tensor is kept as ``(device,
    tensor.cpu())`` and read back with ``.to(device)``, PyTorch's pair of hooks.
    `pin_memory` copies into a new tensor (pinned memory needs CUDA)."""

    def __init__(self, pin_memory: bool = False, device_type: str = "cuda") -> None:
        def pack_to_cpu(tensor):
            if not pin_memory:
                return (tensor.device, tensor.cpu())
            return (tensor.device, tensor.detach().clone())    # (a new tensor)

        def unpack_from_cpu(packed):
            device, tensor = packed
            return tensor.to(device, non_blocking=pin_memory)

        super().__init__(pack_to_cpu, unpack_from_cpu)


@contextlib.contextmanager
def disable_saved_tensors_hooks(error_message: str) -> Generator[None, None, None]:
    """Inside, setting saved-tensor hooks -- or saving a tensor while some are set --
    raises ``RuntimeError(error_message)``."""
    previous = saved_hooks.disabled_message()
    try:
        saved_hooks.set_disabled(error_message)
        yield
    finally:
        saved_hooks.set_disabled(previous)
