"""``prelu``, ``channel_shuffle`` and ``gumbel_softmax`` of ``nn.functional``, as ATen /
PyTorch compute them: PReLU's weight broadcast along the channel dim (dim 1), channel
shuffle as a (g, C / g) transpose of the channels, Gumbel-softmax from ``exponential_``
draws of the generator (PyTorch's numbers for the same seed), its ``hard`` form
straight-through."""
from __future__ import annotations

import warnings

from ..functions import elementwise as E
from ..functions.common import Tensor, to_tensor
from ..functions.creation import empty_like, zeros_like

__all__ = ["prelu", "channel_shuffle", "gumbel_softmax"]


def prelu(input, weight) -> Tensor:
    """``x`` where x > 0, else ``weight * x``, ``weight`` one value or one per channel."""
    x, w = to_tensor(input), to_tensor(weight)
    n = w.numel()
    if n != 1:
        if x.dim() == 0:
            raise RuntimeError("Not allow zero-dim input tensor.")
        channels = x.shape[1] if x.dim() > 1 else 1
        if channels != n:
            raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found "
                               f"parameter numbers = {n} and channel size = {channels}.")
    if w.dim() > 1:
        raise RuntimeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: "
                           f"ndim = {w.dim()}")
    if x.dim() != w.dim():
        shape = [1] * x.dim()
        if x.dim() > 1:
            shape[1] = n
        w = w.reshape(tuple(shape))
    return E.where(x > 0, x, w * x)


def channel_shuffle(input, groups: int) -> Tensor:
    """(N, C, *) -> the channels as (g, C / g) read transposed."""
    x = to_tensor(input)
    if x.dim() <= 2:
        raise RuntimeError(f"channel_shuffle expects input with > 2 dims, but got input with "
                           f"sizes {list(x.shape)}")
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of "
                           f"groups:{groups}")
    b, c = x.shape[0], x.shape[1]
    if c % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels "
                           f"and {groups} groups.")
    rest = tuple(x.shape[2:])
    return x.reshape((b, groups, c // groups) + rest).transpose(1, 2).reshape(tuple(x.shape))


def gumbel_softmax(logits, tau: float = 1, hard: bool = False, eps: float = 1e-10,
                   dim: int = -1) -> Tensor:
    """``softmax((logits + g) / tau)``, g ~ Gumbel(0, 1) (``-log`` of exponential draws);
    ``hard``: the one-hot of its argmax, with the soft sample's gradient."""
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", stacklevel=2)
    x = to_tensor(logits)
    gumbels = -empty_like(x).exponential_().log()
    y_soft = ((x + gumbels) / tau).softmax(dim)
    if not hard:
        return y_soft
    index = y_soft.max(dim, keepdim=True)[1]
    y_hard = zeros_like(x).scatter_(dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft
