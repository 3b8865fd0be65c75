"""What convolution and pooling share: their integer arguments as tuples (PyTorch's
``_single`` / ``_pair`` and the convolution's parameter expansion, with its error
texts), padding an input (zeros, or PyTorch's reflect / replicate / circular modes),
and the number of windows along an axis (``ceil_mode`` included).

The windows themselves are a view (:func:`symgrad.ops.lax.windows`)."""
from __future__ import annotations

import numpy as np

from ..functions.common import to_tensor
from ..ops import lax

__all__ = ["ntuple", "expand_param", "pad", "window_count", "PAD_INDEX_MODES"]

# numpy.pad's name for each of PyTorch's index-based padding modes
PAD_INDEX_MODES = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def empty_dim(shape) -> int | None:
    """The first empty dimension after the batch one (what PyTorch's pooling checks
    refuse), or None.

    >>> empty_dim((2, 3, 0, 4)), empty_dim((0, 3, 4))
    (2, None)
    """
    return next((i for i in range(1, len(shape)) if shape[i] == 0), None)


def ntuple(value, n: int) -> tuple:
    """An int repeated ``n`` times, a sequence as a tuple (PyTorch's ``_ntuple``).

    >>> ntuple(3, 2), ntuple((1, 2), 2)
    ((3, 3), (1, 2))
    """
    if isinstance(value, (list, tuple)):
        return tuple(value)
    return (value,) * n


def expand_param(value, name: str, n: int) -> tuple[int, ...]:
    """A convolution parameter for ``n`` spatial dims: one value is repeated, else there
    must be ``n`` (PyTorch's ``expand_param_if_needed``)."""
    values = [int(v) for v in (value if isinstance(value, (list, tuple)) else (value,))]
    if len(values) == 1:
        return tuple(values) * n
    if len(values) != n:
        raise RuntimeError(f"expected {name} to be a single integer value or a list of {n} "
                           f"values to match the convolution dimensions, but got "
                           f"{name}={values}")
    return tuple(values)


def pad(x, lo, hi, mode: str = "zeros", value: float = 0.0):
    """``x`` padded by ``lo[i]`` / ``hi[i]`` elements before / after its last
    ``len(lo)`` axes: zeros (or ``value``: a window of the primitives, as ``where``
    over a zero pad), or by index (``take`` with a fixed index array) for PyTorch's
    reflect, replicate and circular modes."""
    n = len(x.shape)
    axes = range(n - len(lo), n)
    if not any(lo) and not any(hi):
        return x
    if mode in PAD_INDEX_MODES:
        for a, l, h in zip(axes, lo, hi):
            if l or h:
                idx = np.pad(np.arange(x.shape[a]), (l, h), mode=PAD_INDEX_MODES[mode])
                x = lax.take(x, to_tensor(idx), a)
        return x
    shape = list(x.shape)
    starts, stops = [0] * n, list(x.shape)
    for a, l, h in zip(axes, lo, hi):
        shape[a] += l + h
        starts[a], stops[a] = l, l + x.shape[a]
    out = lax.pad_slice(x, shape, starts, stops, (1,) * n)
    if value:
        inside = np.zeros(shape[n - len(lo):], bool)
        inside[tuple(slice(l, l + x.shape[a]) for a, l in zip(axes, lo))] = True
        out = lax.where(to_tensor(inside), out, value)
    return out


def window_count(size: int, kernel: int, stride: int, lo: int, hi: int, dilation: int = 1,
                 ceil_mode: bool = False) -> int:
    """The number of windows along an axis of ``size`` padded by ``lo`` and ``hi``; with
    ``ceil_mode`` a last partial window counts when it starts inside the input or its
    left padding (PyTorch's ``pooling_output_shape``).

    >>> window_count(8, 3, 2, 0, 0), window_count(8, 3, 2, 0, 0, ceil_mode=True)
    (3, 4)
    """
    span = size + lo + hi - dilation * (kernel - 1) - 1
    if ceil_mode:
        out = -(-span // stride) + 1
        if (out - 1) * stride >= size + lo:
            out -= 1
        return out
    return span // stride + 1 if span >= 0 else 0
