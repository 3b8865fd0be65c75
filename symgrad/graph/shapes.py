"""Shape arithmetic shared by the front end and the primitives: broadcasting with
PyTorch's error text, dimension wrapping, reshape inference."""
from __future__ import annotations

import operator

import numpy as np

__all__ = ["broadcast_shapes", "wrap_dim", "infer_reshape", "numel", "reduce_shape"]


def broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """NumPy/PyTorch broadcasting; RuntimeError with PyTorch's text on mismatch."""
    if len(shapes) == 1:
        return tuple(shapes[0])
    ndim = max(len(s) for s in shapes)
    out = list((1,) * (ndim - len(shapes[0])) + tuple(shapes[0]))
    for s in shapes[1:]:
        off = ndim - len(s)
        for j in range(ndim - 1, off - 1, -1):   # PyTorch checks from the last dim
            d, o = s[j - off], out[j]
            if o == d or d == 1:
                continue
            if o == 1:
                out[j] = d
                continue
            raise RuntimeError(f"The size of tensor a ({o}) must match the size of tensor b "
                               f"({d}) at non-singleton dimension {j}")
    return tuple(out)


def wrap_dim(dim: int, ndim: int) -> int:
    """Normalise a possibly negative dim (an int, a numpy integer, an integer tensor:
    PyTorch takes any ``__index__``), with PyTorch's IndexError text. A traced tensor (a
    Python int argument of a compiled function) raises the error naming static_argnums."""
    if type(dim) is not int:
        if isinstance(dim, (bool, np.bool_)) or not hasattr(type(dim), "__index__"):
            raise TypeError(f"dim must be an int, got {type(dim).__name__}")
        dim = operator.index(dim)
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}],"
                         f" but got {dim})")
    return dim % n


def numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def infer_reshape(shape, size: int) -> tuple[int, ...]:
    """Resolve one -1 in `shape` for a tensor of `size` elements (PyTorch's errors)."""
    for s in shape:
        if type(s) is not int:
            shape = tuple(int(s) for s in shape)
            break
    else:
        shape = tuple(shape)
    if numel(shape) == size and (not shape or min(shape) >= 0):
        return shape                                # the common case: nothing to infer
    neg = [i for i, s in enumerate(shape) if s == -1]
    if len(neg) > 1:
        raise RuntimeError("only one dimension can be inferred")
    for s in shape:
        if s < -1:
            raise RuntimeError(f"invalid shape dimension {s}")
    if neg:
        rest = numel(s for s in shape if s != -1)
        if rest == 0 or size % rest:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {size}")
        shape = tuple(size // rest if s == -1 else s for s in shape)
    if numel(shape) != size:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {size}")
    return shape


def reduce_shape(shape, axes: tuple[int, ...], keepdim: bool) -> tuple[int, ...]:
    if keepdim:
        return tuple(1 if i in axes else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in axes)
