"""PyTorch's check of the gradients a backward node returns (``validate_outputs``): a
gradient must broadcast to its input's shape (it is then summed to that shape) and takes
the input's dtype. Custom Functions' backward results and nodes whose saved tensors came
back through unpack hooks go through it."""
from __future__ import annotations

from ..graph.shapes import broadcast_shapes
from ..ops import lax

__all__ = ["valid_gradient", "broadcast_shapes_or_none"]


def broadcast_shapes_or_none(a, b):
    try:
        return broadcast_shapes(a, b)
    except (ValueError, RuntimeError):
        return None


def valid_gradient(name: str, index: int, g, shape: tuple, dtype):
    """Gradient `g` for input `index` (of shape `shape`, dtype `dtype`) of node `name`,
    summed to the shape and cast to the dtype; PyTorch's error when it cannot be."""
    if tuple(g.shape) != shape:
        if broadcast_shapes_or_none(shape, tuple(g.shape)) != tuple(g.shape):
            raise RuntimeError(f"Function {name} returned an invalid gradient at index "
                               f"{index} - got {list(g.shape)} but expected shape compatible "
                               f"with {list(shape)}")
        g = lax.sum_to(g, shape)
    if g._dtype is not dtype:
        g = lax.cast(g, dtype)
    return g
