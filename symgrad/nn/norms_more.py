"""``instance_norm``, ``local_response_norm`` and ``rms_norm`` of ``nn.functional``, as ATen
composes them: instance norm is batch norm of the input viewed as one sample of ``N * C``
channels (running statistics repeated per sample, their update averaged back);
local response norm divides by ``(k + alpha * mean of x^2 over size neighbouring
channels)^beta`` (zero-padded average pooling); RMS norm multiplies by
``rsqrt(mean(x^2) + eps)`` over the normalised dims (``eps`` by default the dtype's
machine epsilon)."""
from __future__ import annotations

import math

import numpy as np

from ..autograd import grad_mode
from ..functions.common import Tensor, to_tensor
from .normalization import batch_norm
from .padding import pad
from .pooling import avg_pool2d, avg_pool3d

__all__ = ["instance_norm", "local_response_norm", "rms_norm"]


def _verify_spatial_size(shape) -> None:
    if math.prod(tuple(shape[2:])) == 1:
        raise ValueError(f"Expected more than 1 spatial element when training, got input size "
                         f"{shape}")


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats: bool = True, momentum: float = 0.1,
                  eps: float = 1e-5) -> Tensor:
    """Normalises each (sample, channel) of an (N, C, ...) input over its positions."""
    x = to_tensor(input)
    if use_input_stats:
        _verify_spatial_size(x.shape)
    if x.dim() < 2:
        raise RuntimeError(f"instance_norm expects an input of at least 2 dimensions, got "
                           f"{x.dim()}")
    b, c = x.shape[0], x.shape[1]
    shaped = x.reshape((1, b * c) + tuple(x.shape[2:]))

    def repeat(t):
        return None if t is None else to_tensor(t).repeat(b)
    rm, rv = repeat(running_mean), repeat(running_var)
    out = batch_norm(shaped, rm, rv, repeat(weight), repeat(bias), use_input_stats, momentum,
                     eps)
    with grad_mode.no_grad():
        for running, repeated in ((running_mean, rm), (running_var, rv)):
            if running is not None:
                running.copy_(repeated.view(b, c).mean(0))
    return out.view(tuple(x.shape))


def local_response_norm(input, size: int, alpha: float = 1e-4, beta: float = 0.75,
                        k: float = 1.0) -> Tensor:
    """``x / (k + alpha * avg over the size channels around c of x^2)^beta``."""
    x = to_tensor(input)
    dim = x.dim()
    if dim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality                          input "
                         f"(got {dim} dimensions)")
    if x.numel() == 0:
        return x
    div = x.mul(x)
    if dim == 3:
        div = div.unsqueeze(1)
        div = pad(div, (0, 0, size // 2, (size - 1) // 2))
        div = avg_pool2d(div, (size, 1), stride=1).squeeze(1)
    else:
        sizes = tuple(x.shape)
        div = div.view(sizes[0], 1, sizes[1], sizes[2], -1)
        div = pad(div, (0, 0, 0, 0, size // 2, (size - 1) // 2))
        div = avg_pool3d(div, (size, 1, 1), stride=1).squeeze(1)
        div = div.view(sizes)
    div = div.mul(alpha).add(k).pow(beta)
    return x / div


def rms_norm(input, normalized_shape, weight=None, eps: float | None = None) -> Tensor:
    """``x * rsqrt(mean(x^2 over the last len(normalized_shape) dims) + eps) * weight``."""
    x = to_tensor(input)
    shp = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    k = len(shp)
    if k > x.dim() or tuple(x.shape[x.dim() - k:]) != shp:
        raise RuntimeError(f"Given normalized_shape={list(shp)}, expected input with shape "
                           f"[*{', '.join(str(s) for s in shp)}], but got input of size"
                           f"{list(x.shape)}")
    if weight is not None and tuple(to_tensor(weight).shape) != shp:
        raise RuntimeError(f"Expected weight to be of same shape as normalized_shape, but got "
                           f"weight of shape {list(to_tensor(weight).shape)} and "
                           f"normalized_shape = {list(shp)}")
    if eps is None:
        eps = float(np.finfo(x.dtype.np).eps)
    dims = tuple(range(x.dim() - k, x.dim()))
    y = x * (x.pow(2).mean(dims, keepdim=True) + eps).rsqrt()
    return y * to_tensor(weight) if weight is not None else y
