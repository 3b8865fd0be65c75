"""Helpers shared by the operation modules: recognising scalars and tensors, turning
array-likes into tensors, normalising dims and shape arguments."""
from __future__ import annotations

import numbers

import numpy as np

from ..graph import dtypes
from ..graph.shapes import wrap_dim
from ..tensor import Tensor

__all__ = ["is_scalar", "to_tensor", "dims_arg", "shape_arg", "wrap_dim", "Tensor",
           "floating_kernel"]


def is_scalar(x) -> bool:
    return isinstance(x, (numbers.Number, np.number, np.bool_)) and not isinstance(x, Tensor)


def to_tensor(x, dtype=None) -> Tensor:
    """A Tensor for `x` (a Tensor is returned as is)."""
    if isinstance(x, Tensor):
        return x
    from .creation import as_tensor  # late: eager-core cycle (see docs/architecture.md)
    return as_tensor(x, dtype=dtype)


def shape_arg(size) -> tuple[int, ...]:
    """Accept f(2, 3), f((2, 3)), f([2, 3]) and f(torch.Size([2, 3]))."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = size[0]
    out = []
    for s in size:
        if isinstance(s, Tensor):
            s = int(s)
        if not isinstance(s, (int, np.integer)) or isinstance(s, bool):
            raise TypeError(f"expected a sequence of integers for the size, got "
                            f"{type(s).__name__}")
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: "
                               f"{list(size)}")
        out.append(int(s))
    return tuple(out)


def dims_arg(dim, ndim: int) -> tuple[int, ...]:
    """Normalise `dim` (None, an int, or a sequence of ints) to sorted unique axes."""
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, (list, tuple)) and len(dim) == 0:
        return tuple(range(ndim))         # PyTorch: an empty dim list reduces everything
    if isinstance(dim, (list, tuple)):
        axes = tuple(sorted({wrap_dim(d, ndim) for d in dim}))
        if len(axes) != len(dim):
            raise RuntimeError("dim appears multiple times in the list of dims")
        return axes if ndim else ()
    return (wrap_dim(dim, ndim),) if ndim else ()


def float_dtype_of(x: Tensor) -> dtypes.DType:
    return x.dtype if x.dtype.is_floating_point else dtypes.get_default_dtype()


def floating_kernel(x: Tensor, kernel: str) -> None:
    """PyTorch's NotImplementedError for an integer / bool input of a floating-point
    kernel (its dispatch macro's text, naming the kernel)."""
    if not x.dtype.is_floating_point:
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{x.dtype.c_name}'")
