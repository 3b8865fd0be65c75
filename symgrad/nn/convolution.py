"""``conv1d`` / ``conv2d`` / ``conv3d`` of ``nn.functional``: PyTorch's arguments (stride, padding --
numbers, ``'same'`` or ``'valid'`` --, dilation, groups, bias), its checks in its order
and its error texts, recorded as ``ConvolutionBackward0``.

A convolution is im2col + GEMM written with primitives: the windows of the padded input
are a view (:func:`symgrad.ops.lax.windows`), copied once into columns laid out
(group, channel x kernel, batch x positions), and multiplied by the weight in one matrix
product per group.  Eager mode runs that as a copy and a BLAS call; the gradients are
the primitives' own (symbolic: the columns' cotangent goes back through the window view
as a dilating pad and a sum, col2im), and compiled code lowers every piece natively."""
from __future__ import annotations

import math
import warnings

from ..functions.common import to_tensor
from ..functions.composite import named
from ..ops import lax
from .padding import check_mode_padding
from .window_kernels import conv_kernel
from .windowing import expand_param, ntuple, pad

__all__ = ["conv1d", "conv2d", "conv3d", "conv_nd", "convolve", "same_padding", "batched",
           "check_weight_groups", "check_weight_dtype"]


def same_padding(kernel, dilation) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(before, after) padding per spatial dim keeping the size (``padding='same'``):
    ``dilation*(k - 1)`` in total, the odd element after."""
    total = [d * (k - 1) for k, d in zip(kernel, dilation)]
    lo = tuple(t // 2 for t in total)
    return lo, tuple(t - l for t, l in zip(total, lo))


def convolve(x, w, b, stride, lo, hi, dilation, groups: int, mode: str = "zeros"):
    """The convolution of ``x`` (N, C, *S) with ``w`` (O, C/groups, *K), padding
    ``lo``/``hi`` per spatial dim, as primitives (see the module docstring); arguments
    checked."""
    r = len(w.shape) - 2
    n, c = x.shape[0], x.shape[1]
    o, kernel = w.shape[0], tuple(w.shape[2:])
    xp = pad(x, lo, hi, mode)
    win = lax.windows(xp, tuple(range(2, 2 + r)), kernel, stride, dilation)   # N C *K *P
    spots = tuple(win.shape[2 + r:])
    per_group = c // groups * math.prod(kernel)
    # columns (group, channel x kernel, batch x positions): one copy of the windows
    cols = lax.permute(win, (1,) + tuple(range(2, 2 + r)) + (0,) + tuple(range(2 + r, 2 + 2 * r)))
    cols = lax.reshape(cols, (groups, per_group, n * math.prod(spots)))
    w2 = lax.reshape(w, (groups, o // groups, per_group))
    if groups == 1:
        cols, w2 = lax.reshape(cols, cols.shape[1:]), lax.reshape(w2, w2.shape[1:])
    out = lax.reshape(lax.matmul(w2, cols), (o, n) + spots)
    out = lax.permute(out, (1, 0) + tuple(range(2, 2 + r)))
    if b is not None:
        out = lax.add(out, lax.expand(lax.reshape(b, (o,) + (1,) * r), out.shape))
    return out


def batched(x, r: int, name: str):
    """``x`` with a batch dim (PyTorch's batchify): (tensor, whether one was added)."""
    if x.dim() == r + 1:
        return x.unsqueeze(0), True
    if x.dim() != r + 2:
        raise RuntimeError(f"Expected {r + 1}D (unbatched) or {r + 2}D (batched) input to "
                           f"{name}, but got input of size: {list(x.shape)}")
    return x, False


def _string_padding(padding: str, w, stride, dilation, r: int, warn: bool = True):
    """(lo, hi) for ``'valid'`` / ``'same'`` (PyTorch's ``_convolution_mode``)."""
    if padding == "valid":
        return (0,) * r, (0,) * r
    if padding != "same":
        raise RuntimeError(f"Invalid padding string: '{padding}'")
    for name, value in (("stride", stride), ("dilation", dilation)):
        values = ntuple(value, 1)
        if len(values) not in (1, r):
            raise RuntimeError(f"{name} cannot broadcast to {r} dimensions")
    if any(s != 1 for s in ntuple(stride, 1)):
        raise RuntimeError("padding='same' is not supported for strided convolutions")
    dil = expand_param(dilation, "dilation", r)
    lo, hi = same_padding(tuple(w.shape[2:]), dil)
    if lo != hi and warn:
        warnings.warn("Using padding='same' with even kernel lengths and odd dilation may "
                      "require a zero-padded copy of the input be created", UserWarning,
                      stacklevel=4)
    return lo, hi


def check_weight_groups(x, w, groups: int) -> None:
    """PyTorch's checks of a convolution weight's rank and its groups (transposed too)."""
    ws = list(w.shape)
    if w.dim() != x.dim():
        raise RuntimeError(f"Expected {w.dim()}-dimensional input for {w.dim()}-dimensional "
                           f"weight {ws}, but got {x.dim()}-dimensional input of size "
                           f"{list(x.shape)} instead")
    if ws[0] < groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be at least {groups} "
                           f"at dimension 0, but got weight of size {ws} instead")
    if ws[0] % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by "
                           f"{groups} at dimension 0, but got weight of size [{ws}] instead")


def check_weight_dtype(x, w) -> None:
    """PyTorch's error for a weight of another dtype than the input (float32 inputs reach
    oneDNN, whose text differs)."""
    if w.dtype is not x.dtype:
        if x.dtype.name == "float32":
            raise RuntimeError(f"Input type ({x.dtype.tensor_type}) and weight type "
                               f"({w.dtype.tensor_type}) should be the same or input should "
                               "be a MKLDNN tensor and weight is a dense tensor")
        raise RuntimeError(f"expected scalar type {x.dtype.c_name} but found {w.dtype.c_name}")


def _check(x, w, b, stride, lo, hi, dilation, groups):
    """PyTorch's checks of ``_convolution`` / ``check_shape_forward``, in its order."""
    k = x.dim()
    if b is not None and b.dtype is not x.dtype:
        raise RuntimeError(f"Input type ({x.dtype.cpp_name}) and bias type "
                           f"({b.dtype.cpp_name}) should be the same")
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    if min(lo + hi) < 0:
        raise RuntimeError("negative padding is not supported")
    if min(stride) <= 0:
        raise RuntimeError("non-positive stride is not supported")
    if min(dilation) < 0:
        raise RuntimeError("dilation should be greater than zero")
    if min(dilation) == 0:
        raise RuntimeError("non-positive dilation is not supported")
    check_weight_groups(x, w, groups)
    ws = list(w.shape)
    if x.shape[1] != ws[1] * groups:
        raise RuntimeError(f"Given groups={groups}, weight of size {ws}, expected "
                           f"input{list(x.shape)} to have {ws[1] * groups} channels, but got "
                           f"{x.shape[1]} channels instead")
    if b is not None and (b.dim() != 1 or b.shape[0] != ws[0]):
        raise RuntimeError(f"Given weight of size {ws}, expected bias to be 1-dimensional "
                           f"with {ws[0]} elements, but got bias of size {list(b.shape)} "
                           "instead")
    sizes = [x.shape[2 + i] + lo[i] + hi[i] for i in range(k - 2)]
    spans = [dilation[i] * (ws[2 + i] - 1) + 1 for i in range(k - 2)]
    if any(s < kk for s, kk in zip(sizes, spans)):
        raise RuntimeError(f"Calculated padded input size per channel: "
                           f"({' x '.join(map(str, sizes))}). Kernel size: "
                           f"({' x '.join(map(str, spans))}). Kernel size can't be greater "
                           "than actual input size")
    check_weight_dtype(x, w)


def conv_nd(name: str, r: int, input, weight, bias, stride, padding, dilation, groups,
            mode: str = "zeros"):
    """``conv1d`` (r = 1) / ``conv2d`` (r = 2) / ``conv3d`` (r = 3); ``mode``: the padding mode of the Conv
    modules (zeros, reflect, replicate, circular)."""
    x, w = to_tensor(input), to_tensor(weight)
    b = None if bias is None else to_tensor(bias)
    x, unbatched = batched(x, r, name)
    if isinstance(padding, str):
        lo, hi = _string_padding(padding, w, stride, dilation, w.dim() - 2, mode == "zeros")
        padding = 0
    else:
        lo = hi = None
    stride = expand_param(ntuple(stride, r), "stride", w.dim() - 2)
    pads = expand_param(ntuple(padding, r), "padding", w.dim() - 2)
    dilation = expand_param(ntuple(dilation, r), "dilation", w.dim() - 2)
    if lo is None:
        lo = hi = pads
    if mode != "zeros":
        check_mode_padding(x, lo, hi, mode)
    _check(x, w, b, stride, lo, hi, dilation, groups)
    args = (x, w) if b is None else (x, w, b)
    eager = conv_kernel(stride, lo, hi, dilation) if groups == 1 and mode == "zeros" else None
    out = named("ConvolutionBackward0",
                lambda xv, wv, bv=None: convolve(xv, wv, bv, stride, lo, hi, dilation, groups,
                                                 mode), *args, saves=(0, 1), kernel=eager)
    return out.squeeze(0) if unbatched else out


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D convolution (cross-correlation) over (N, C, L) or (C, L) inputs, as PyTorch's."""
    return conv_nd("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution (cross-correlation) over (N, C, H, W) or (C, H, W) inputs, as
    PyTorch's.

    >>> import symgrad as torch
    >>> x = torch.ones(1, 1, 3, 3)
    >>> torch.nn.functional.conv2d(x, torch.ones(1, 1, 2, 2), padding=1).shape
    torch.Size([1, 1, 4, 4])
    """
    return conv_nd("conv2d", 2, input, weight, bias, stride, padding, dilation, groups)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-D convolution (cross-correlation) over (N, C, D, H, W) or (C, D, H, W) inputs, as
    PyTorch's."""
    return conv_nd("conv3d", 3, input, weight, bias, stride, padding, dilation, groups)
