"""``conv_transpose1d`` / ``conv_transpose2d`` / ``conv_transpose3d`` of ``nn.functional``: PyTorch's arguments
(stride, padding, output_padding, groups, dilation, bias), its checks in its order and
its error texts (those of its native CPU kernels; float32 inputs reach oneDNN there,
whose texts say less), recorded as ``ConvolutionBackward0``.

A transposed convolution is the transpose of a convolution's input-to-output map (the
input gradient of :func:`symgrad.nn.convolution.convolve`), written with the same
primitives the other way round: one matrix product per group puts each input position's
contributions into columns (group, out channel x kernel, batch x positions), and the
transpose of the window view (:func:`symgrad.ops.lax.windows_transpose`: a dilating
``pad_slice``, a shear and the sum over the kernel axes -- col2im) adds them where they
land; the convolution's padding is then cropped and ``output_padding`` added as zeros.
Its gradients are those primitives' own: a convolution for the input, im2col + GEMM for
the weight."""
from __future__ import annotations

import math

from ..functions.common import to_tensor
from ..functions.composite import named
from ..ops import lax
from .convolution import batched, check_weight_dtype, check_weight_groups
from .padding import pad_constant
from .windowing import expand_param, ntuple

__all__ = ["conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "conv_transpose_nd", "transpose_convolve",
           "output_size"]


def output_size(spots, kernel, stride, padding, output_padding, dilation) -> list[int]:
    """PyTorch's output size of a transposed convolution, per spatial dim."""
    return [(p - 1) * s - 2 * pd + d * (k - 1) + op + 1 for p, k, s, pd, op, d in
            zip(spots, kernel, stride, padding, output_padding, dilation)]


def transpose_convolve(y, w, b, stride, padding, output_padding, dilation, groups: int):
    """The transposed convolution of ``y`` (N, C_in, *P) with ``w`` (C_in,
    C_out/groups, *K) as primitives (see the module docstring); arguments checked."""
    r = len(w.shape) - 2
    n, cin, spots = y.shape[0], y.shape[1], tuple(y.shape[2:])
    kernel, cout = tuple(w.shape[2:]), w.shape[1] * groups
    per_group = w.shape[1] * math.prod(kernel)
    y2 = lax.reshape(lax.permute(y, (1, 0) + tuple(range(2, 2 + r))),
                     (groups, cin // groups, n * math.prod(spots)))
    w2 = lax.reshape(w, (groups, cin // groups, per_group))
    if groups == 1:
        y2, w2 = lax.reshape(y2, y2.shape[1:]), lax.reshape(w2, w2.shape[1:])
    cols = lax.reshape(lax.matmul(lax.transpose_last(w2), y2), (cout,) + kernel + (n,) + spots)
    win = lax.permute(cols, (r + 1, 0) + tuple(range(1, r + 1)) + tuple(range(r + 2, 2 * r + 2)))
    reach = tuple((p - 1) * s + d * (k - 1) + 1 for p, k, s, d in
                  zip(spots, kernel, stride, dilation))
    full = lax.windows_transpose(win, (n, cout) + reach, tuple(range(2, 2 + r)), kernel,
                                 stride, dilation)
    out = pad_constant(full, tuple(-p for p in padding),
                       tuple(op - p for op, p in zip(output_padding, padding)))
    if b is not None:
        out = lax.add(out, lax.expand(lax.reshape(b, (cout,) + (1,) * r), out.shape))
    return out


def _dims(values, what: str, r: int, fill: int = 1) -> str:
    """PyTorch's ``what_height: .. what_width: ..`` of its 2-D kernel (1-D as height
    ``fill``)."""
    names = ("height", "width") if r <= 2 else ("depth", "height", "width")
    values = ((fill,) * (2 - r) + tuple(values)) if r < 2 else tuple(values)
    return " ".join(f"{what}_{nm}: {v}" for nm, v in zip(names, values))


def _check(x, w, b, stride, padding, output_padding, dilation, groups, r):
    """PyTorch's checks of ``_convolution`` (transposed) and of its CPU kernel
    (``slow_conv_transpose2d_shape_check``), in their order."""
    if b is not None and b.dtype is not x.dtype and x.dtype.name == "float32":
        raise RuntimeError(f"Input type ({x.dtype.tensor_type}) and bias type "
                           f"({b.dtype.tensor_type}) should be the same or input should be a "
                           "MKLDNN tensor and bias is a dense tensor")
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    for bad, text in ((min(padding) < 0, "negative padding"),
                      (min(output_padding) < 0, "negative output_padding"),
                      (min(stride) <= 0, "non-positive stride")):
        if bad:
            raise RuntimeError(f"{text} is not supported")
    if min(dilation) < 0:
        raise RuntimeError("dilation should be greater than zero")
    check_weight_groups(x, w, groups)
    ws, shape = list(w.shape), list(x.shape)
    if 0 in shape[2:]:
        raise RuntimeError(f"Only zero batch or zero channel inputs are supported, but got "
                           f"input shape: {shape}")
    if shape[1] != ws[0]:
        raise RuntimeError(f"Given transposed=1, weight of size {ws}, expected input{shape} to "
                           f"have {ws[0]} channels, but got {shape[1]} channels instead")
    if b is not None and (b.dim() != 1 or b.shape[0] != ws[1] * groups):
        raise RuntimeError(f"Given transposed=1, weight of size {ws}, expected bias to be "
                           f"1-dimensional with {ws[1] * groups} elements, but got bias of "
                           f"size {list(b.shape)} instead")
    if min(dilation) == 0:
        raise RuntimeError(f"dilation should be greater than zero, but got "
                           f"{_dims(dilation, 'dilation', r).replace(' dilation_', ', dilation_')}")
    if any(op >= s and op >= d for op, s, d in zip(output_padding, stride, dilation)):
        raise RuntimeError("output padding must be smaller than either stride or dilation, "
                           f"but got {_dims(output_padding, 'output_padding', r, 0)} "
                           f"{_dims(stride, 'stride', r)} {_dims(dilation, 'dilation', r)}")
    out = output_size(shape[2:], ws[2:], stride, padding, output_padding, dilation)
    if min(out) < 1:
        pad1 = (1,) * (2 - r) if r < 2 else ()
        raise RuntimeError(f"Given input size per channel: "
                           f"({' x '.join(map(str, pad1 + tuple(shape[2:])))}). Calculated "
                           f"output size per channel: ({' x '.join(map(str, pad1 + tuple(out)))}"
                           f"). Output size is too small")
    check_weight_dtype(x, w)


def conv_transpose_nd(name: str, r: int, input, weight, bias, stride, padding, output_padding,
                      groups, dilation):
    """``conv_transpose1d`` (r = 1) / ``conv_transpose2d`` (r = 2) / ``conv_transpose3d``
    (r = 3)."""
    x, w = to_tensor(input), to_tensor(weight)
    b = None if bias is None else to_tensor(bias)
    for what, value in (("padding", padding), ("output_padding", output_padding)):
        if isinstance(value, str):
            raise TypeError(f"{name}(): argument '{what}' must be tuple of ints, not str")
    x, unbatched = batched(x, r, name)
    stride, padding, output_padding, dilation = (
        expand_param(ntuple(v, r), what, w.dim() - 2) for v, what in
        ((stride, "stride"), (padding, "padding"), (output_padding, "output_padding"),
         (dilation, "dilation")))
    _check(x, w, b, stride, padding, output_padding, dilation, groups, r)
    if b is not None and b.dtype is not x.dtype:       # PyTorch's native kernel casts it
        b = b.to(x.dtype)
    args = (x, w) if b is None else (x, w, b)
    out = named("ConvolutionBackward0",
                lambda xv, wv, bv=None: transpose_convolve(xv, wv, bv, stride, padding,
                                                           output_padding, dilation, groups),
                *args)
    return out.squeeze(0) if unbatched else out


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """1-D transposed convolution over (N, C, L) or (C, L) inputs, as PyTorch's; ``weight``
    is (C_in, C_out / groups, K)."""
    return conv_transpose_nd("conv_transpose1d", 1, input, weight, bias, stride, padding,
                             output_padding, groups, dilation)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """2-D transposed convolution over (N, C, H, W) or (C, H, W) inputs, as PyTorch's;
    ``weight`` is (C_in, C_out / groups, KH, KW).

    >>> import symgrad as torch
    >>> x = torch.ones(1, 1, 2, 2)
    >>> torch.nn.functional.conv_transpose2d(x, torch.ones(1, 1, 2, 2), stride=2).shape
    torch.Size([1, 1, 4, 4])
    """
    return conv_transpose_nd("conv_transpose2d", 2, input, weight, bias, stride, padding,
                             output_padding, groups, dilation)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """3-D transposed convolution over (N, C, D, H, W) or (C, D, H, W) inputs, as
    PyTorch's; ``weight`` is (C_in, C_out / groups, KD, KH, KW)."""
    return conv_transpose_nd("conv_transpose3d", 3, input, weight, bias, stride, padding,
                             output_padding, groups, dilation)
