"""``max_pool1d`` / ``max_pool2d`` / ``avg_pool1d`` / ``avg_pool2d`` of
``nn.functional``: PyTorch's arguments (kernel_size, stride, padding, dilation,
ceil_mode, return_indices; count_include_pad, divisor_override), its checks and error
texts, recorded as ``MaxPool2DWithIndicesBackward0`` / ``AvgPool2DBackward0``.

A pooling is the windows of the padded input (a view, :func:`symgrad.ops.lax.windows`)
reduced over the kernel axes.  Max pooling takes each window's first maximal element
(``argmax``, then ``gather``), so its gradient reaches that element only, as
PyTorch's; padding reads as -inf.  Average pooling sums each window and divides by
PyTorch's divisor (the window's extent in the padded input, or its elements inside the
input without ``count_include_pad``; a partial last window of ``ceil_mode`` counts only
what it covers)."""
from __future__ import annotations

import math

import numpy as np

from ..dispatch import bind
from ..functions.common import to_tensor
from ..functions.composite import named
from ..graph.primitives import PRIMITIVES as P
from ..graph.shapes import wrap_dim
from ..ops import lax
from .windowing import ntuple, pad, window_count

__all__ = ["max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d", "first_max", "window_indices",
           "avg_windows"]


def _arg(value, name: str, what: str, allow_empty: bool = False) -> tuple[int, ...]:
    """A 2-D pooling argument as 2 ints: one int, or a sequence of 1 or 2 ints."""
    values = ntuple(value, 1)
    if allow_empty and not values:
        return ()
    if len(values) not in (1, 2):
        raise RuntimeError(f"{name}: {what}")
    return tuple(int(v) for v in values) * (2 // len(values))


def _plan(x, kernel, stride, padding, dilation, ceil_mode):
    """The output size and the extra padding after the input a ceil_mode window needs,
    per pooled dim, of a 2-D pooling -- after PyTorch's checks (``pooling_output_shape``,
    ``pool2d_shape_check``) in their order."""
    shape = tuple(x.shape)
    out, extra = [], []
    for d in range(2):
        k, s, p, dl, n = kernel[d], stride[d], padding[d], dilation[d], shape[d - 2]
        if s == 0:
            raise RuntimeError("stride should not be zero")
        if p < 0:
            raise RuntimeError(f"pad must be non-negative, but got pad: {p}")
        if p > int(((k - 1) * dl + 1) / 2):
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got "
                               f"pad={p}, kernel_size={k} and dilation={dl}")
        count = window_count(n, k, s, p, p, dl, ceil_mode)
        out.append(count)
        extra.append(max(0, (count - 1) * s + dl * (k - 1) + 1 - n - 2 * p))
    (kh, kw), (sh, sw), (dh, dw), (ph, pw) = kernel, stride, dilation, padding
    if kh <= 0 or kw <= 0:
        raise RuntimeError(f"kernel size should be greater than zero, but got kH: {kh} kW: {kw}")
    if sh <= 0 or sw <= 0:
        raise RuntimeError(f"stride should be greater than zero, but got dH: {sh} dW: {sw}")
    if dh <= 0 or dw <= 0:
        raise RuntimeError(f"dilation should be greater than zero, but got dilationH: {dh} "
                           f"dilationW: {dw}")
    if 0 in shape[-3:]:
        raise RuntimeError(f"Expected 3D or 4D (batch mode) tensor with optional 0 dim batch "
                           f"size for input, but got:{list(shape)}")
    if kw // 2 < pw or kh // 2 < ph:
        raise RuntimeError(f"pad should be smaller than or equal to half of kernel size, but got "
                           f"padW = {pw}, padH = {ph}, kW = {kw}, kH = {kh}")
    if out[0] < 1 or out[1] < 1:
        c, h, w = shape[-3:]
        raise RuntimeError(f"Given input size: ({c}x{h}x{w}). Calculated output size: "
                           f"({c}x{out[0]}x{out[1]}). Output size is too small")
    return out, extra


def _lowest(dtype):
    return -math.inf if dtype.is_floating_point else int(np.iinfo(dtype.np).min)


def first_max(win, n: int):
    """(each window's first maximal element, its position in the window) of ``win``
    (.., KH, KW, OH, OW), the windows over the last two axes of an ``n``-dim input."""
    lead, kernel, spots = tuple(win.shape[:n - 2]), win.shape[n - 2:n], tuple(win.shape[n:])
    flat = lax.reshape(win, lead + (math.prod(kernel),) + spots)
    at = bind(P["argmax"], flat.detach(), axis=n - 2, keepdim=True)
    return lax.reshape(lax.apply("gather", flat, at, axis=n - 2), lead + spots), at


def window_indices(at, table, shape):
    """The flat input position of each window's chosen element (``return_indices``):
    ``table`` [KH*KW, OH, OW] (what each window element reads) picked by ``at``."""
    table = lax.expand(to_tensor(table), tuple(at.shape[:-3]) + table.shape)
    return lax.reshape(lax.apply("gather", table, at, axis=len(at.shape) - 3), shape)


def _max_windows(v, kernel, stride, padding, dilation, extra):
    """(each window's first maximal element, its position in the window) over v's last
    two axes."""
    xp = pad(v, padding, tuple(p + e for p, e in zip(padding, extra)), value=_lowest(v.dtype))
    n = len(v.shape)
    return first_max(lax.windows(xp, (n - 2, n - 1), kernel, stride, dilation), n)


def _flat_index(size, kernel, stride, padding, dilation, out):
    """[prod(kernel), *out]: the flat input position (row-major over the pooled axes) each
    window element reads -- PyTorch's ``return_indices``."""
    w, (kh, kw) = size[1], kernel
    rows = (np.arange(kh) * dilation[0])[:, None, None, None] + \
        (np.arange(out[0]) * stride[0] - padding[0])[None, None, :, None]
    cols = (np.arange(kw) * dilation[1])[None, :, None, None] + \
        (np.arange(out[1]) * stride[1] - padding[1])[None, None, None, :]
    return (rows * w + cols).reshape(kh * kw, out[0], out[1])


def _max_pool2d(x, kernel, stride, pads, dil, ceil_mode, return_indices):
    out, extra = _plan(x, kernel, stride, pads, dil, ceil_mode)
    res = named("MaxPool2DWithIndicesBackward0",
                lambda v: _max_windows(v, kernel, stride, pads, dil, extra)[0], x)
    if not return_indices:
        return res
    at = _max_windows(x.detach(), kernel, stride, pads, dil, extra)[1]
    table = _flat_index(tuple(x.shape[-2:]), kernel, stride, pads, dil, out)
    return res, window_indices(at, table, tuple(res.shape))


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """2-D max pooling over (N, C, H, W) or (C, H, W) inputs, as PyTorch's.

    >>> import symgrad as torch
    >>> torch.nn.functional.max_pool2d(torch.arange(16.).reshape(1, 4, 4), 2)
    tensor([[[ 5.,  7.],
             [13., 15.]]])
    """
    x = to_tensor(input)
    name = "max_pool2d"
    kernel = _arg(kernel_size, name, "kernel_size must either be a single int, or a tuple of "
                  "two ints")
    stride = () if stride is None else _arg(stride, name, "stride must either be omitted, a "
                                            "single int, or a tuple of two ints", True)
    pads = _arg(padding, name, "padding must either be a single int, or a tuple of two ints")
    dil = _arg(dilation, name, "dilation must be either a single int, or a tuple of two ints")
    if x.dim() not in (3, 4):
        raise RuntimeError("non-empty 3D or 4D (batch mode) tensor expected for input")
    return _max_pool2d(x, kernel, stride or kernel, pads, dil, ceil_mode, return_indices)


def _one(value, what: str, allow_empty: bool = False) -> int | None:
    """max_pool1d's reading of an argument: one int (or none, when allowed)."""
    values = ntuple(value, 1)
    if allow_empty and not values:
        return None
    if len(values) != 1:
        raise RuntimeError(f"max_pool1d() {what} but got size {len(values)}")
    return int(values[0])


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """1-D max pooling over (N, C, L) or (C, L) inputs, as PyTorch's (2-D pooling of a
    unit height, its own checks)."""
    x = to_tensor(input)
    k = _one(kernel_size, "kernel_size must be an int, list of ints or tuple of ints of size 1")
    s = None if stride is None else _one(stride, "stride must be None, an int, list of ints, "
                                         "or tuple of ints of size 1", True)
    p = _one(padding, "padding must be an int, list of ints, or tuple of ints of size 1")
    d = _one(dilation, "dilation must be an int, list of ints or tuple of ints of size 1")
    s = k if s is None else s
    if x.dim() not in (2, 3) or 0 in tuple(x.shape[-2:]):
        raise RuntimeError(f"max_pool1d: Expected 2D or 3D (batch mode) tensor with optional 0 "
                           f"dim batch size for input, but got:{list(x.shape)}")
    for what, v, ok in (("kernel_size", k, k > 0), ("stride", s, s > 0)):
        if not ok:
            raise RuntimeError(f"max_pool1d() {what} must be greater than zero, but got {v}")
    if p < 0:
        raise RuntimeError(f"max_pool1d() padding must be non-negative, but got {p}")
    if p > k // 2:
        raise RuntimeError(f"max_pool1d() padding should be at most half of kernel size, but got "
                           f"padding={p} and kernel_size={k}")
    if d <= 0:
        raise RuntimeError(f"max_pool1d() dilation must be greater than zero, but got {d}")
    n = window_count(x.shape[-1], k, s, p, p, d, ceil_mode)
    if n <= 0:
        raise RuntimeError(f"max_pool1d() Invalid computed output size: {n}")
    res = _max_pool2d(x.unsqueeze(-2), (1, k), (1, s), (0, p), (1, d), ceil_mode,
                      return_indices)
    if return_indices:
        return res[0].squeeze(-2), res[1].squeeze(-2)
    return res.squeeze(-2)


def _divisor(size, kernel, stride, padding, out, count_include_pad):
    """PyTorch's divisor of each window, [*out] (``avg_pool2d``'s CPU kernel)."""
    div = np.ones((), np.int64)
    full = np.ones((), np.int64)
    for d in range(2):
        start = np.arange(out[d]) * stride[d] - padding[d]
        end = np.minimum(start + kernel[d], size[d] + padding[d])
        shape = [1, 1]
        shape[d] = out[d]
        full = full * (end - start).reshape(shape)
        div = div * (np.minimum(end, size[d]) - np.maximum(start, 0)).reshape(shape)
    return full if count_include_pad else div


def avg_windows(v, kernel, stride, padding, extra, divisor):
    """The sum of each window over v's last two axes (padded by ``padding`` and the
    ``extra`` after), divided by ``divisor`` (truncating for integers)."""
    n = len(v.shape)
    xp = pad(v, padding, tuple(p + e for p, e in zip(padding, extra)))
    total = lax.sum(lax.windows(xp, (n - 2, n - 1), kernel, stride, (1, 1)), (n - 2, n - 1))
    if not v.dtype.is_floating_point:             # integers: truncated division
        q = lax.apply("floor_divide", lax.unary("abs", total), divisor)
        return lax.mul(lax.unary("sign", total), q)
    return lax.div(total, divisor)


def _avg_pool2d(x, kernel, stride, pads, ceil_mode, count_include_pad, divisor_override):
    if x.dim() < 3:
        wrap_dim(-3, x.dim())                     # PyTorch's IndexError
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    out, extra = _plan(x, kernel, stride, pads, (1, 1), ceil_mode)
    if divisor_override is not None:
        divisor = divisor_override
    else:
        table = _divisor(tuple(x.shape[-2:]), kernel, stride, pads, out, count_include_pad)
        uniform = (table == table.flat[0]).all()
        divisor = int(table.flat[0]) if uniform else to_tensor(table.astype(x.dtype.np))
    return named("AvgPool2DBackward0",
                 lambda v: avg_windows(v, kernel, stride, pads, extra, divisor), x)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """2-D average pooling over (N, C, H, W) or (C, H, W) inputs, as PyTorch's."""
    name = "avg_pool2d"
    kernel = _arg(kernel_size, name, "kernel_size must either be a single int, or a tuple of "
                  "two ints")
    stride = () if stride is None else _arg(stride, name, "stride must either be omitted, a "
                                            "single int, or a tuple of two ints", True)
    pads = _arg(padding, name, "padding must either be a single int, or a tuple of two ints")
    return _avg_pool2d(to_tensor(input), kernel, stride or kernel, pads, ceil_mode,
                       count_include_pad, divisor_override)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    """1-D average pooling over (N, C, L) or (C, L) inputs, as PyTorch's (2-D pooling of a
    unit height)."""
    x = to_tensor(input)
    if x.dim() not in (2, 3):
        raise RuntimeError(f"Expected 2 to 3 dimensions, but got {x.dim()}-dimensional tensor "
                           f"for argument #1 'self' (while checking arguments for avg_pool1d)")
    args = {}
    for what, value in (("kernel_size", kernel_size), ("stride", stride), ("padding", padding)):
        values = ntuple(value, 1) if value is not None else ()
        if len(values) > 1 or (not values and what != "stride"):
            raise RuntimeError(f"avg_pool1d() argument '{what}' should contain one int "
                               f"(got {len(values)})")
        args[what] = int(values[0]) if values else None
    k, s, p = args["kernel_size"], args["stride"], args["padding"]
    return _avg_pool2d(x.unsqueeze(-2), (1, k), (1, k if s is None else s), (0, p), ceil_mode,
                       count_include_pad, None).squeeze(-2)
