"""``max_unpool2d``: the partial inverse of ``max_pool2d(..., return_indices=True)`` --
each input value put at its index in a zero (N, C, H_out, W_out) output, as PyTorch's
(later duplicates overwrite earlier ones, in each plane's row-major order).

A composite of ``index_put`` into zeros, recorded as ``MaxUnpool2DBackward0``: its
gradient is the formula's (the output's cotangent gathered at the indices, as PyTorch's
``max_pool_double_backward``), eager and compiled alike. Sizes and errors as PyTorch's
(``_unpool_output_size`` and the CPU kernel's checks).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..functions.common import Tensor, to_tensor
from ..functions.composite import named
from ..graph import dtypes
from ..ops import lax
from .windowing import empty_dim, ntuple

__all__ = ["max_unpool2d", "unpool_output_size"]


def unpool_output_size(input_shape: Sequence[int], kernel: tuple, stride: tuple,
                       padding: tuple, output_size: Sequence[int] | None) -> tuple[int, ...]:
    """The unpooled spatial size: ``(in - 1) * stride + kernel - 2 * padding`` per dim, or
    ``output_size`` (its last dims) when it is within one stride of that."""
    d = len(kernel)
    default = [(input_shape[len(input_shape) - d + i] - 1) * stride[i] + kernel[i]
               - 2 * padding[i] for i in range(d)]
    if output_size is None:
        return tuple(default)
    output_size = tuple(output_size)
    if len(output_size) == d + 2:
        output_size = output_size[2:]
    if len(output_size) != d:
        raise ValueError(f"output_size should be a sequence containing {d} or {d + 2} elements, "
                         f"but it has a length of '{len(output_size)}'")
    for i in range(d):
        lo, hi = default[i] - stride[i], default[i] + stride[i]
        if not lo < output_size[i] < hi:
            raise ValueError(f'invalid output_size "{output_size}" (dim {i} must be between '
                             f'{lo} and {hi})')
    return tuple(int(s) for s in output_size)


def max_unpool2d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0,
                 output_size: Sequence[int] | None = None) -> Tensor:
    """Values of ``input`` (N, C, H, W) or (C, H, W) placed at ``indices`` (flat positions
    in each output plane, as ``max_pool2d`` returns them) of a zero output.

    >>> import symgrad as torch
    >>> F = torch.nn.functional
    >>> y, i = F.max_pool2d(torch.tensor([[[[1., 2], [4, 3]]]]), 2, return_indices=True)
    >>> F.max_unpool2d(y, i, 2)
    tensor([[[[0., 0.],
              [4., 0.]]]])
    """
    x, idx = to_tensor(input), to_tensor(indices)
    kernel = tuple(int(k) for k in ntuple(kernel_size, 2))
    stride = kernel if stride is None else tuple(int(s) for s in ntuple(stride, 2))
    pads = tuple(int(p) for p in ntuple(padding, 2))
    oh, ow = unpool_output_size(tuple(x.shape), kernel, stride, pads, output_size)
    _check(x, idx, oh, ow)
    lead = tuple(x.shape[:-2])
    planes = int(np.prod(lead, dtype=np.int64))
    area = oh * ow
    # flat positions in the whole output: each plane's offset plus its indices
    offsets = lax.reshape(_plane_offsets(planes, area), lead + (1, 1))
    pos = lax.reshape(lax.add(idx.detach(), lax.expand(offsets, tuple(idx.shape))),
                      (idx.numel(),))
    out_shape = lead + (oh, ow)

    def unpool(v):
        zeros = lax.full((planes * area,), 0, v.dtype)
        flat = lax.apply("index_put", zeros, pos, lax.reshape(v, (v.numel(),)))
        return lax.reshape(flat, out_shape)
    return named("MaxUnpool2DBackward0", unpool, x, keeps=(idx,))


def _plane_offsets(planes: int, area: int):
    return Tensor._from_array(np.arange(planes, dtype=np.int64) * area, dtypes.int64)


def _check(x: Tensor, idx: Tensor, oh: int, ow: int) -> None:
    """The CPU kernel's checks, with its texts (it reports the last invalid index)."""
    if idx.dtype is not dtypes.int64:
        raise RuntimeError(f"elements in indices should be type int64 but got: "
                           f"{idx.dtype.c_name}")
    if tuple(idx.shape) != tuple(x.shape):
        raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor "
                           f"({list(x.shape)}) but got indices tensor with shape: "
                           f"{list(idx.shape)}")
    d = empty_dim(tuple(x.shape))
    if x.dim() not in (3, 4):
        raise RuntimeError(f"Input to max_unpooling2d should be a 3d or 4d Tensor, but got a "
                           f"tensor with {x.dim()} dimensions.")
    if d is not None:
        raise RuntimeError(f"max_unpooling2d_forward_out_cpu(): Expected input to have non-zero "
                           f"size for non-batch dimensions, but got {list(x.shape)} with "
                           f"dimension {d} being empty.")
    if not x.dtype.is_floating_point:
        raise NotImplementedError(f"\"max_unpool2d\" not implemented for '{x.dtype.c_name}'")
    if idx._data is not None and idx.numel():
        bad = (idx._data < 0) | (idx._data >= oh * ow)
        if bad.any():
            raise RuntimeError(f"Found an invalid max index: {int(idx._data[bad][-1])} "
                               f"(output volumes are of size {oh}x{ow})")
