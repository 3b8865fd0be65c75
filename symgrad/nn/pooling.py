"""``max_pool1d`` / ``max_pool2d`` / ``max_pool3d`` / ``avg_pool1d`` / ``avg_pool2d`` /
``avg_pool3d`` of ``nn.functional``: PyTorch's arguments (kernel_size, stride, padding,
dilation, ceil_mode, return_indices; count_include_pad, divisor_override), its checks and
error texts, recorded as ``MaxPool2DWithIndicesBackward0`` / ``AvgPool2DBackward0`` (3-D:
``MaxPool3DWithIndicesBackward0`` / ``AvgPool3DBackward0``).

A pooling over the last ``d`` axes (d = 2 or 3; 1-D pooling is 2-D pooling of a unit
height) is the windows of the padded input (a view, :func:`symgrad.ops.lax.windows`)
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
from .window_kernels import max_pool_kernel
from .windowing import ntuple, pad, window_count

__all__ = ["max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
           "first_max", "window_indices", "avg_windows"]


def _arg(value, name: str, what: str, allow_empty: bool = False, d: int = 2) -> tuple[int, ...]:
    """A ``d``-D pooling argument as ``d`` ints: one int, or a sequence of 1 or ``d``."""
    values = ntuple(value, 1)
    if allow_empty and not values:
        return ()
    if len(values) not in (1, d):
        raise RuntimeError(f"{name}: {what}")
    return tuple(int(v) for v in values) * (d // len(values))


_COUNT = {2: "two", 3: "three"}


def _pool_args(name, d, kernel_size, stride, padding, either=True):
    """(kernel, stride -- the kernel when omitted --, padding) of a ``d``-D pooling, with
    PyTorch's texts (max pooling's and 2-D average pooling's say "must either be")."""
    e, n = "either " if either else "", _COUNT[d]
    kernel = _arg(kernel_size, name, f"kernel_size must {e}be a single int, or a tuple of {n} "
                  f"ints", d=d)
    stride = () if stride is None else _arg(stride, name, f"stride must {e}be omitted, a single "
                                            f"int, or a tuple of {n} ints", True, d=d)
    pads = _arg(padding, name, f"padding must {e}be a single int, or a tuple of {n} ints", d=d)
    return kernel, stride or kernel, pads


def _output_sizes(x, kernel, stride, padding, dilation, ceil_mode):
    """The output size and the extra padding after the input a ceil_mode window needs,
    per pooled dim (the last ``len(kernel)``), after PyTorch's ``pooling_output_shape``
    checks."""
    shape = tuple(x.shape)
    d = len(kernel)
    out, extra = [], []
    for i in range(d):
        k, s, p, dl, n = kernel[i], stride[i], padding[i], dilation[i], shape[i - d]
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
    return out, extra


def _plan(x, kernel, stride, padding, dilation, ceil_mode):
    """:func:`_output_sizes` of a 2-D pooling, then ``pool2d_shape_check`` in its order."""
    out, extra = _output_sizes(x, kernel, stride, padding, dilation, ceil_mode)
    shape = tuple(x.shape)
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


def _plan3d(x, kernel, stride, padding, dilation, ceil_mode, fn_name, check_input_size=False):
    """:func:`_output_sizes` of a 3-D pooling, then ``pool3d_shape_check`` in its order."""
    out, extra = _output_sizes(x, kernel, stride, padding, dilation, ceil_mode)
    shape = tuple(x.shape)
    (kt, kh, kw), (st, sh, sw), (dt, dh, dw), (pt, ph, pw) = kernel, stride, dilation, padding
    if min(kernel) <= 0:
        raise RuntimeError(f"kernel size should be greater than zero, but got kT: {kt} kH: {kh} "
                           f"kW: {kw}")
    if min(stride) <= 0:
        raise RuntimeError(f"stride should be greater than zero, but got dT: {st} dH: {sh} "
                           f"dW: {sw}")
    if min(dilation) <= 0:
        raise RuntimeError(f"dilation should be greater than zero, but got dilationT: {dt} "
                           f"dilationH: {dh} dilationW: {dw}")
    for i, n in enumerate(shape):
        if n <= 0 and not (len(shape) == 5 and i == 0):
            raise RuntimeError(f"{fn_name}: Expected input's non-batch dimensions to have "
                               f"positive length, but input has a shape of {list(shape)} and "
                               f"non-batch dimension {n} has length zero!")
    t, h, w = shape[-3:]
    if check_input_size and (t < kt or h < kh or w < kw):
        raise RuntimeError(f"input image (T: {t} H: {h} W: {w}) smaller than kernel size "
                           f"(kT: {kt} kH: {kh} kW: {kw})")
    if kt // 2 < pt or kw // 2 < pw or kh // 2 < ph:
        raise RuntimeError(f"pad should be smaller than or equal to half of kernel size, but got "
                           f"kT: {kt} kW: {kw} kH: {kh} padT: {pt} padW: {pw} padH: {ph}")
    if min(out) < 1:
        c = shape[-4]
        raise RuntimeError(f"Given input size: ({c}x{t}x{h}x{w}). Calculated output size: "
                           f"({c}x{out[0]}x{out[1]}x{out[2]}). Output size is too small")
    return out, extra


def _lowest(dtype):
    return -math.inf if dtype.is_floating_point else int(np.iinfo(dtype.np).min)


def first_max(win, n: int, d: int = 2, first_valid=None):
    """(each window's chosen element, its position in the window) of ``win``
    (.., K1..Kd, O1..Od), the windows over the last ``d`` axes of an ``n``-dim input, as
    PyTorch's CPU kernels choose it (scanning ``val > max || isnan(val)``): the first
    maximal element, or the *last* NaN. ``first_valid`` [1, O1..Od] (padded windows): the
    first in-bounds element of each window, chosen where the maximum is the padding value
    (-inf, an integer's lowest): a padding cell is never chosen."""
    lead, kernel, spots = tuple(win.shape[:n - d]), win.shape[n - d:n], tuple(win.shape[n:])
    k, axis = math.prod(kernel), n - d
    flat = lax.reshape(win, lead + (k,) + spots)
    fixed = flat.detach()
    at = bind(P["argmax"], fixed, axis=axis, keepdim=True)
    if first_valid is not None or fixed.dtype.is_floating_point:
        chosen = lax.apply("gather", fixed, at, axis=axis)
        if first_valid is not None:
            lowest = _lowest(fixed.dtype)
            at = lax.where(lax.eq(chosen, lowest),
                           lax.expand(to_tensor(first_valid), tuple(at.shape)), at)
        if fixed.dtype.is_floating_point:
            nan = lax.cast(lax.unary("isnan", fixed), at.dtype)
            back = bind(P["argmax"], lax.apply("flip", nan, axes=(axis,)), axis=axis,
                        keepdim=True)
            at = lax.where(lax.unary("isnan", chosen), lax.sub(k - 1, back), at)
    return lax.reshape(lax.apply("gather", flat, at, axis=axis), lead + spots), at


def window_indices(at, table, shape):
    """The flat input position of each window's chosen element (``return_indices``):
    ``table`` [K1*..*Kd, O1..Od] (what each window element reads) picked by ``at``."""
    lead = len(at.shape) - table.ndim
    table = lax.expand(to_tensor(table), tuple(at.shape[:lead]) + table.shape)
    return lax.reshape(lax.apply("gather", table, at, axis=lead), shape)


def _max_windows(v, kernel, stride, padding, dilation, extra):
    """(each window's chosen element, its position in the window) over v's last
    ``len(kernel)`` axes (see :func:`first_max`)."""
    hi = tuple(p + e for p, e in zip(padding, extra))
    xp = pad(v, padding, hi, value=_lowest(v.dtype))
    n, d = len(v.shape), len(kernel)
    first_valid = None
    if any(padding) or any(hi):
        out = tuple(v.shape[n - d:])
        out = tuple((a + p + h - dl * (kk - 1) - 1) // s + 1
                    for a, p, h, dl, kk, s in zip(out, padding, hi, dilation, kernel, stride))
        table = _flat_index(tuple(v.shape[n - d:]), kernel, stride, padding, dilation, out,
                            valid=True)
        first_valid = np.argmax(table, axis=0)[None]
    return first_max(lax.windows(xp, tuple(range(n - d, n)), kernel, stride, dilation), n, d,
                     first_valid)


def _flat_index(size, kernel, stride, padding, dilation, out, valid=False):
    """[prod(kernel), *out]: the flat input position (row-major over the pooled axes) each
    window element reads -- PyTorch's ``return_indices``; ``valid``: whether it reads
    inside the input (not the padding)."""
    d = len(kernel)
    flat = np.zeros((1,) * (2 * d), np.int64)
    inside = np.ones((1,) * (2 * d), bool)
    for i in range(d):
        shape = [1] * (2 * d)
        shape[i] = kernel[i]
        k = (np.arange(kernel[i]) * dilation[i]).reshape(shape)
        shape = [1] * (2 * d)
        shape[d + i] = out[i]
        o = (np.arange(out[i]) * stride[i] - padding[i]).reshape(shape)
        flat = flat * size[i] + (k + o)
        inside = inside & (k + o >= 0) & (k + o < size[i])
    return (inside if valid else flat).reshape((math.prod(kernel),) + tuple(out))


def _max_pool(name, x, kernel, stride, pads, dil, out, extra, return_indices):
    fn = lambda v: _max_windows(v, kernel, stride, pads, dil, extra)[0]
    eager = max_pool_kernel(kernel, stride, pads, dil, extra, out)
    if not return_indices:
        return named(name, fn, x, saves=(0,), kernel=eager)
    at = _max_windows(x.detach(), kernel, stride, pads, dil, extra)[1]
    table = _flat_index(tuple(x.shape[-len(kernel):]), kernel, stride, pads, dil, out)
    indices = window_indices(at, table, tuple(at.shape[:-len(kernel) - 1]) + tuple(out))
    # PyTorch's backward reads the indices it returns: saved and version-checked (an
    # in-place update of them before backward raises its error)
    return named(name, fn, x, saves=(0,), keeps=(indices,), kernel=eager), indices


def _max_pool2d(x, kernel, stride, pads, dil, ceil_mode, return_indices):
    out, extra = _plan(x, kernel, stride, pads, dil, ceil_mode)
    return _max_pool("MaxPool2DWithIndicesBackward0", x, kernel, stride, pads, dil, out, extra,
                     return_indices)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """2-D max pooling over (N, C, H, W) or (C, H, W) inputs, as PyTorch's.

    >>> import symgrad as torch
    >>> torch.nn.functional.max_pool2d(torch.arange(16.).reshape(1, 4, 4), 2)
    tensor([[[ 5.,  7.],
             [13., 15.]]])
    """
    x = to_tensor(input)
    kernel, stride, pads = _pool_args("max_pool2d", 2, kernel_size, stride, padding)
    dil = _arg(dilation, "max_pool2d", "dilation must be either a single int, or a tuple of two "
               "ints")
    if x.dim() not in (3, 4):
        raise RuntimeError("non-empty 3D or 4D (batch mode) tensor expected for input")
    return _max_pool2d(x, kernel, stride, pads, dil, ceil_mode, return_indices)


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """3-D max pooling over (N, C, T, H, W) or (C, T, H, W) inputs, as PyTorch's.

    >>> import symgrad as torch
    >>> torch.nn.functional.max_pool3d(torch.arange(8.).reshape(1, 2, 2, 2), 2)
    tensor([[[[7.]]]])
    """
    x = to_tensor(input)
    kernel, stride, pads = _pool_args("max_pool3d", 3, kernel_size, stride, padding)
    dil = _arg(dilation, "max_pool3d", "dilation must be either a single int, or a tuple of "
               "three ints", d=3)
    if x.dim() not in (4, 5):
        raise RuntimeError("non-empty 4D or 5D (batch mode) tensor expected for input")
    out, extra = _plan3d(x, kernel, stride, pads, dil, ceil_mode,
                         "max_pool3d_with_indices_out_cpu_template()")
    return _max_pool("MaxPool3DWithIndicesBackward0", x, kernel, stride, pads, dil, out, extra,
                     return_indices)


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
    """PyTorch's divisor of each window, [*out] (``avg_pool2d`` / ``avg_pool3d``'s CPU
    kernels)."""
    d = len(kernel)
    div = np.ones((), np.int64)
    full = np.ones((), np.int64)
    for i in range(d):
        start = np.arange(out[i]) * stride[i] - padding[i]
        end = np.minimum(start + kernel[i], size[i] + padding[i])
        shape = [1] * d
        shape[i] = out[i]
        full = full * (end - start).reshape(shape)
        div = div * (np.minimum(end, size[i]) - np.maximum(start, 0)).reshape(shape)
    return full if count_include_pad else div


def avg_windows(v, kernel, stride, padding, extra, divisor):
    """The sum of each window over v's last ``len(kernel)`` axes (padded by ``padding`` and
    the ``extra`` after), divided by ``divisor`` (truncating for integers)."""
    n, d = len(v.shape), len(kernel)
    axes = tuple(range(n - d, n))
    xp = pad(v, padding, tuple(p + e for p, e in zip(padding, extra)))
    total = lax.sum(lax.windows(xp, axes, kernel, stride, (1,) * d), axes)
    if not v.dtype.is_floating_point:             # integers: truncated division
        q = lax.apply("floor_divide", lax.unary("abs", total), divisor)
        return lax.mul(lax.unary("sign", total), q)
    return lax.div(total, divisor)


def _avg_pool(name, x, kernel, stride, pads, out, extra, count_include_pad, divisor_override):
    if divisor_override is not None:
        divisor = divisor_override
    else:
        table = _divisor(tuple(x.shape[-len(kernel):]), kernel, stride, pads, out,
                         count_include_pad)
        uniform = (table == table.flat[0]).all()
        divisor = int(table.flat[0]) if uniform else to_tensor(table.astype(x.dtype.np))
    return named(name, lambda v: avg_windows(v, kernel, stride, pads, extra, divisor), x)


def _avg_pool2d(x, kernel, stride, pads, ceil_mode, count_include_pad, divisor_override):
    if x.dim() < 3:
        wrap_dim(-3, x.dim())                     # PyTorch's IndexError
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    out, extra = _plan(x, kernel, stride, pads, (1, 1), ceil_mode)
    return _avg_pool("AvgPool2DBackward0", x, kernel, stride, pads, out, extra,
                     count_include_pad, divisor_override)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """2-D average pooling over (N, C, H, W) or (C, H, W) inputs, as PyTorch's."""
    kernel, stride, pads = _pool_args("avg_pool2d", 2, kernel_size, stride, padding)
    return _avg_pool2d(to_tensor(input), kernel, stride, pads, ceil_mode, count_include_pad,
                       divisor_override)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """3-D average pooling over (N, C, T, H, W) or (C, T, H, W) inputs, as PyTorch's."""
    x = to_tensor(input)
    kernel, stride, pads = _pool_args("avg_pool3d", 3, kernel_size, stride, padding, False)
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    if x.dim() not in (4, 5):
        raise RuntimeError("non-empty 4D or 5D (batch mode) tensor expected for input")
    out, extra = _plan3d(x, kernel, stride, pads, (1, 1, 1), ceil_mode, "avg_pool3d()", True)
    return _avg_pool("AvgPool3DBackward0", x, kernel, stride, pads, out, extra,
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
