"""``unfold`` (im2col) and ``fold`` (col2im) of ``nn.functional``: the sliding blocks of a
(N, C, H, W) input as columns (N, C * kh * kw, L), and their sum back into an image. Both
are one gather / scatter-add of the zero-padded image through the same flat index table
(so each is the other's adjoint, and their gradients are one another), with ATen's shape
checks and texts."""
from __future__ import annotations

import numpy as np

from ..functions.common import Tensor, to_tensor
from ..graph import dtypes
from .padding import pad

__all__ = ["unfold", "fold"]


def _pair(v, name: str) -> tuple:
    if isinstance(v, int):
        return (v, v)
    v = tuple(v)
    if len(v) != 2:
        raise RuntimeError(f"It is expected {name} equals to 2, but got size {len(v)}")
    return v


def _blocks(h, w, kernel, dilation, padding, stride) -> tuple:
    """Number of sliding blocks along each spatial dim."""
    return tuple((n + 2 * p - (d * (k - 1) + 1)) // s + 1
                 for n, k, d, p, s in zip((h, w), kernel, dilation, padding, stride))


def _index(hp, wp, kernel, dilation, stride, blocks) -> np.ndarray:
    """(kh * kw * L,) flat positions in the padded (hp, wp) image, kernel-major."""
    (kh, kw), (dh, dw), (sh, sw), (oh, ow) = kernel, dilation, stride, blocks
    rows = (np.arange(kh)[:, None, None, None] * dh + np.arange(oh)[None, None, :, None] * sh)
    cols = (np.arange(kw)[None, :, None, None] * dw + np.arange(ow)[None, None, None, :] * sw)
    return (rows * wp + cols).reshape(-1).astype(np.int64)


def _check_params(kernel, dilation, padding, stride) -> None:
    if min(kernel) <= 0:
        raise RuntimeError(f"kernel size should be greater than zero, but got kernel_height: "
                           f"{kernel[0]} kernel_width: {kernel[1]}")
    if min(dilation) <= 0:
        raise RuntimeError(f"dilation should be greater than zero, but got dilation_height: "
                           f"{dilation[0]} dilation_width: {dilation[1]}")
    if min(stride) <= 0:
        raise RuntimeError(f"stride should be greater than zero, but got stride_height: "
                           f"{stride[0]} stride_width: {stride[1]}")
    if min(padding) < 0:
        raise RuntimeError(f"padding should be non-negative, but got pad_height: {padding[0]} "
                           f"pad_width: {padding[1]}")


def unfold(input, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """The (N, C * kh * kw, L) columns of the sliding blocks of an (N, C, H, W) or
    (C, H, W) input."""
    x = to_tensor(input)
    kernel, dil = _pair(kernel_size, "kernel_size"), _pair(dilation, "dilation")
    padd, strd = _pair(padding, "padding"), _pair(stride, "stride")
    _check_params(kernel, dil, padd, strd)
    nd = x.dim()
    if nd in (1, 2):                    # (ATen reads input.size(nd) first)
        raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, {nd - 1}], "
                         f"but got {nd})")
    if not (nd in (3, 4) and all(s != 0 for s in x.shape[nd - 3:])):
        raise RuntimeError(f"Expected 3D or 4D (batch mode) tensor with possibly 0 batch size "
                           f"and other non-zero dimensions for input, but got: {list(x.shape)}")
    batched = nd == 4
    if not batched:
        x = x.unsqueeze(0)
    n, c, h, w = x.shape
    blocks = _blocks(h, w, kernel, dil, padd, strd)
    if min(blocks) < 1:
        raise RuntimeError(f"Given input with spatial size ({h}, {w}), kernel_size=({kernel[0]}, "
                           f"{kernel[1]}), dilation=({dil[0]}, {dil[1]}), padding=({padd[0]}, "
                           f"{padd[1]}), calculated shape of the array of sliding blocks as "
                           f"({blocks[0]}, {blocks[1]}), but its components must be at least "
                           f"one.")
    xp = pad(x, (padd[1], padd[1], padd[0], padd[0])) if any(padd) else x
    hp, wp = h + 2 * padd[0], w + 2 * padd[1]
    idx = _index(hp, wp, kernel, dil, strd, blocks)
    flat = xp.reshape(n, c, hp * wp)
    index = Tensor._from_array(np.broadcast_to(idx, (n, c, idx.size)).copy(), dtypes.int64)
    out = flat.gather(2, index).reshape(n, c * kernel[0] * kernel[1], blocks[0] * blocks[1])
    return out if batched else out.squeeze(0)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """The sum of (N, C * kh * kw, L) block columns into an (N, C, H, W) image (``unfold``'s
    adjoint)."""
    x = to_tensor(input)
    out_hw = _pair(output_size, "output_size")
    kernel, dil = _pair(kernel_size, "kernel_size"), _pair(dilation, "dilation")
    padd, strd = _pair(padding, "padding"), _pair(stride, "stride")
    _check_params(kernel, dil, padd, strd)
    nd = x.dim()
    if not (nd in (2, 3) and all(s != 0 for s in x.shape[nd - 2:])):
        raise RuntimeError(f"Expected 2D or 3D (batch mode) tensor for input with possibly 0 "
                           f"batch size and non-zero dimensions for input, but got: "
                           f"{list(x.shape)}")
    batched = nd == 3
    if not batched:
        x = x.unsqueeze(0)
    n, ckk, length = x.shape
    kk = kernel[0] * kernel[1]
    if ckk % kk:
        raise RuntimeError(f"Expected size of input's dimension 1 to be divisible by the product "
                           f"of kernel_size, but got input.size(1)={ckk} and kernel_size=("
                           f"{kernel[0]}, {kernel[1]}).")
    blocks = _blocks(out_hw[0], out_hw[1], kernel, dil, padd, strd)
    if blocks[0] * blocks[1] != length:
        raise RuntimeError(f"Given output_size=({out_hw[0]}, {out_hw[1]}), kernel_size=("
                           f"{kernel[0]}, {kernel[1]}), dilation=({dil[0]}, {dil[1]}), padding=("
                           f"{padd[0]}, {padd[1]}), stride=({strd[0]}, {strd[1]}), expected size "
                           f"of input's dimension 2 to match the calculated number of sliding "
                           f"blocks {blocks[0]} * {blocks[1]} = {blocks[0] * blocks[1]}, but got "
                           f"input.size(2)={length}.")
    if min(blocks) < 1:
        raise RuntimeError(f"Given output_size=({out_hw[0]}, {out_hw[1]}), kernel_size=("
                           f"{kernel[0]}, {kernel[1]}), dilation=({dil[0]}, {dil[1]}), padding=("
                           f"{padd[0]}, {padd[1]}), stride=({strd[0]}, {strd[1]}), calculated "
                           f"shape of the array of sliding blocks as ({blocks[0]}, {blocks[1]}), "
                           f"but its components must be at least one.")
    c = ckk // kk
    hp, wp = out_hw[0] + 2 * padd[0], out_hw[1] + 2 * padd[1]
    idx = _index(hp, wp, kernel, dil, strd, blocks)
    index = Tensor._from_array(np.broadcast_to(idx, (n, c, idx.size)).copy(), dtypes.int64)
    cols = x.reshape(n, c, kk * length)
    img = x.new_zeros((n, c, hp * wp)).scatter_add(2, index, cols).reshape(n, c, hp, wp)
    img = img[:, :, padd[0]:padd[0] + out_hw[0], padd[1]:padd[1] + out_hw[1]]
    return img if batched else img.squeeze(0)
