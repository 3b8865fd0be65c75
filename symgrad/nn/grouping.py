"""``group_norm`` and ``pixel_shuffle`` / ``pixel_unshuffle`` of ``nn.functional``:
normalisation over groups of channels (biased variance, then a per-channel affine map)
and the sub-pixel rearrangement of channels into space and back -- PyTorch's checks,
error texts and backward names, on primitives."""
from __future__ import annotations

import numpy as np

from ..dispatch import bind
from ..functions.common import Tensor, to_tensor
from ..functions.composite import named
from ..graph.primitives import PRIMITIVES as P
from ..ops import lax

__all__ = ["group_norm", "pixel_shuffle", "pixel_unshuffle"]


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """(x - mean) / sqrt(var + eps) over each group of ``C / num_groups`` channels (and
    all positions) of (N, C, ...) ``input``, then ``* weight + bias`` per channel
    (``NativeGroupNormBackward0``)."""
    x = to_tensor(input)
    if x.dim() < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received "
                           f"{x.dim()}")
    n, c = x.shape[0], x.shape[1]
    if c % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by "
                           f"num_groups, but got input of shape {list(x.shape)} and "
                           f"num_groups={num_groups}")
    for what, a in (("weight", weight), ("bias", bias)):
        if a is not None and (to_tensor(a).dim() != 1 or to_tensor(a).numel() != c):
            raise RuntimeError(f"Expected {what} to be a vector of size equal to the number of "
                               f"channels in input, but got {what} of shape "
                               f"{list(to_tensor(a).shape)} and input of shape {list(x.shape)}")
    args = [x] + [to_tensor(a) for a in (weight, bias) if a is not None]
    spatial = tuple(x.shape[2:])
    grouped = (n, num_groups, (c // num_groups) * int(np.prod(spatial, dtype=np.int64)))
    per_channel = (1, c) + (1,) * len(spatial)

    def fn(v, *wb):
        g = lax.reshape(v, grouped)
        mean = bind(P["mean"], g, axes=(2,), keepdim=True)
        centred = lax.sub(g, mean)
        var = bind(P["mean"], lax.mul(centred, centred), axes=(2,), keepdim=True)
        y = lax.reshape(lax.mul(centred, lax.unary("rsqrt", lax.add(var, float(eps)))),
                        tuple(v.shape))
        it = iter(wb)
        if weight is not None:
            y = lax.mul(y, lax.reshape(next(it), per_channel))
        if bias is not None:
            y = lax.add(y, lax.reshape(next(it), per_channel))
        return y
    return named("NativeGroupNormBackward0", fn, *args, saves=tuple(range(len(args))))


def _checked(name: str, what: str, input, factor) -> tuple[Tensor, int]:
    x, r = to_tensor(input), int(factor)
    if x.dim() < 3:
        raise RuntimeError(f"{name} expects input to have at least 3 dimensions, but got input "
                           f"with {x.dim()} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"{name} expects a positive {what}, but got {r}")
    return x, r


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """(*, C r², H, W) -> (*, C, H r, W r) (``PixelShuffleBackward0``)."""
    x, r = _checked("pixel_shuffle", "upscale_factor", input, upscale_factor)
    c, h, w = x.shape[-3:]
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be "
                           f"divisible by the square of upscale_factor, but input.size(-3)={c} "
                           f"is not divisible by {r * r}")
    return _rearranged("PixelShuffleBackward0", x, (c // (r * r), r, r, h, w), (0, 3, 1, 4, 2),
                       (c // (r * r), h * r, w * r))


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """(*, C, H r, W r) -> (*, C r², H, W) (``PixelUnshuffleBackward0``)."""
    x, r = _checked("pixel_unshuffle", "downscale_factor", input, downscale_factor)
    c, h, w = x.shape[-3:]
    for what, size in (("height", h), ("width", w)):
        if size % r:
            raise RuntimeError(f"pixel_unshuffle expects {what} to be divisible by "
                               f"downscale_factor, but input.size({-2 if what == 'height' else -1}"
                               f")={size} is not divisible by {r}")
    return _rearranged("PixelUnshuffleBackward0", x, (c, h // r, r, w // r, r), (0, 2, 4, 1, 3),
                       (c * r * r, h // r, w // r))


def _rearranged(name, x, split, perm, out):
    """The last three dims of x split to ``split``, permuted by ``perm``, merged to
    ``out`` (recorded as ``name``)."""
    lead = tuple(x.shape[:-3])
    k = len(lead)

    def fn(v):
        order = tuple(range(k)) + tuple(k + i for i in perm)
        moved = lax.permute(lax.reshape(v, lead + split), order)
        return lax.reshape(moved, lead + out)
    return named(name, fn, x)
