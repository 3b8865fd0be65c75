"""Helpers shared by the operation modules: recognising scalars and tensors, turning
array-likes into tensors, normalising dims and shape arguments."""
from __future__ import annotations

import numbers

import numpy as np

from ..graph import dtypes
from ..graph.shapes import wrap_dim
from ..tensor import Tensor
from .creation import as_tensor, shape_arg     # (shape_arg: re-exported for the other modules)

__all__ = ["is_scalar", "to_tensor", "dims_arg", "shape_arg", "wrap_dim", "Tensor",
           "floating_kernel"]


def is_scalar(x) -> bool:
    return isinstance(x, (numbers.Number, np.number, np.bool_)) and not isinstance(x, Tensor)


def to_tensor(x, dtype=None) -> Tensor:
    """A Tensor for `x` (a Tensor is returned as is)."""
    if isinstance(x, Tensor):
        return x
    return as_tensor(x, dtype=dtype)


def dims_arg(dim, ndim: int) -> tuple[int, ...]:
    """Normalise `dim` (None, an int, or a sequence of ints) to sorted unique axes."""
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, (list, tuple)) and len(dim) == 0:
        return tuple(range(ndim))         # PyTorch: an empty dim list reduces everything
    if isinstance(dim, (list, tuple)):
        wrapped = [wrap_dim(d, ndim) for d in dim]
        axes = tuple(sorted(set(wrapped)))
        if len(axes) != len(dim):
            twice = next(a for k, a in enumerate(wrapped) if a in wrapped[:k])
            raise RuntimeError(f"dim {twice} appears multiple times in the list of dims")
        return axes if ndim else ()
    d = wrap_dim(dim, ndim)           # (a 0-d tensor takes dims -1 and 0, as PyTorch)
    return (d,) if ndim else ()


def float_dtype_of(x: Tensor) -> dtypes.DType:
    return x.dtype if x.dtype.is_floating_point else dtypes.get_default_dtype()


def floating_kernel(x: Tensor, kernel: str) -> None:
    """PyTorch's NotImplementedError for an integer / bool input of a floating-point
    kernel (its dispatch macro's text, naming the kernel)."""
    if not x.dtype.is_floating_point:
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{x.dtype.c_name}'")
