"""``interpolate`` of ``nn.functional`` (and ``upsample`` / ``upsample_nearest`` /
``upsample_bilinear``): modes ``nearest``, ``nearest-exact``, ``linear``, ``bilinear``,
``trilinear``, ``bicubic`` (with ``align_corners``) and ``area`` -- PyTorch's output
sizes, source indices and weights (ATen's ``UpSample.h`` formulas, in float32 for float32
input as ATen computes them), checks, error texts and backward names.

Each spatial dim is interpolated separately, the last dim first, as ATen's CPU kernel
nests its sums: a weighted sum of ``take``s along the dim (so the gradient is their
scatter-add, compiled and differentiable again).
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from ..dispatch import bind
from ..functions.common import Tensor, to_tensor
from ..functions.composite import named
from ..graph import dtypes
from ..graph.primitives import PRIMITIVES as P
from ..ops import lax
from .adaptive import adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d

__all__ = ["interpolate", "upsample", "upsample_nearest", "upsample_bilinear"]

_MODES = {"nearest": (1, 2, 3), "nearest-exact": (1, 2, 3), "linear": (1,), "bilinear": (2,),
          "trilinear": (3,), "bicubic": (2,), "area": (1, 2, 3)}
_INTERPOLATING = ("linear", "bilinear", "bicubic", "trilinear")
_NAMES = {"nearest": "UpsampleNearest{d}DBackward0",
          "nearest-exact": "UpsampleNearestExact{d}DBackward0",
          "linear": "UpsampleLinear1DBackward0", "bilinear": "UpsampleBilinear2DBackward0",
          "trilinear": "UpsampleTrilinear3DBackward0", "bicubic": "UpsampleBicubic2DBackward0"}
_CUBIC_A = -0.75


# ---- PyTorch's index and weight formulas (ATen UpSample.h), per spatial dim ---------------
def _scale(in_size, out_size, align_corners, scale, ft):
    """area_pixel_compute_scale in floating type `ft`."""
    if align_corners:
        return ft(in_size - 1) / ft(out_size - 1) if out_size > 1 else ft(0)
    if scale is not None and scale > 0:
        return ft(1.0 / scale)
    return ft(in_size) / ft(out_size)


def _nearest(in_size, out_size, scale, exact):
    """nearest_idx / nearest_exact_idx: floor(dst * s) (exact: (dst + 0.5) s) in float."""
    dst = np.arange(out_size)
    if not exact and out_size == in_size:
        return dst
    if not exact and out_size == 2 * in_size:
        return dst >> 1
    s = _scale(in_size, out_size, False, scale, np.float32)
    pos = dst.astype(np.float32) + np.float32(0.5) if exact else dst.astype(np.float32)
    return np.minimum(np.floor(pos * s).astype(np.int64), in_size - 1)


def _source(in_size, out_size, align_corners, scale, ft, cubic):
    """area_pixel_compute_source_index, and guard_index_and_lambda: (index, lambda)."""
    s = _scale(in_size, out_size, align_corners, scale, ft)
    dst = np.arange(out_size).astype(ft)
    if align_corners:
        real = s * dst
    else:
        real = s * (dst + ft(0.5)) - ft(0.5)
        if not cubic:
            real = np.where(real < 0, ft(0), real).astype(ft)
    index = np.minimum(np.floor(real).astype(np.int64), in_size - 1)
    lam = np.minimum(np.maximum(real - index.astype(ft), ft(0)), ft(1)).astype(ft)
    return index, lam


def _linear_taps(in_size, out_size, align_corners, scale, ft):
    index, lam = _source(in_size, out_size, align_corners, scale, ft, False)
    upper = index + (index < in_size - 1)
    return [(index, (ft(1) - lam).astype(ft)), (upper, lam)]


def _cubic_taps(in_size, out_size, align_corners, scale, ft):
    index, t = _source(in_size, out_size, align_corners, scale, ft, True)
    a = ft(_CUBIC_A)

    def conv1(x):
        return ((a + ft(2)) * x - (a + ft(3))) * x * x + ft(1)

    def conv2(x):
        return ((a * x - ft(5) * a) * x + ft(8) * a) * x - ft(4) * a
    x2 = ft(1) - t
    weights = [conv2(t + ft(1)), conv1(t), conv1(x2), conv2(x2 + ft(1))]
    return [(np.clip(index - 1 + j, 0, in_size - 1), w.astype(ft))
            for j, w in enumerate(weights)]


# ---- the op ---------------------------------------------------------------------------------
def _const(a, dt):
    return Tensor._from_array(np.ascontiguousarray(a), dt)


def _along(v, axis, taps, dt):
    """sum_j take(v, index_j, axis) * weight_j, left to right."""
    tail = (1,) * (v.dim() - axis - 1)
    out = None
    for index, weight in taps:
        term = lax.mul(bind(P["take"], v, _const(index, dtypes.int64), axis=axis),
                       _const(weight.reshape((-1,) + tail), dt))
        out = term if out is None else lax.add(out, term)
    return out


def _sizes(x, d, size, scale_factor, recompute):
    """(output sizes, the scales the kernel reads) as F.interpolate computes them."""
    spatial = list(x.shape[2:])
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        if recompute:
            raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
        if isinstance(size, (list, tuple)):
            _same_rank(size, spatial, ("output", "output size of", "output size", "o"))
            out = [int(s) for s in size]
        else:
            out = [int(size)] * d
        return out, [None] * d
    if scale_factor is None:
        raise ValueError("either size or scale_factor should be defined")
    if isinstance(scale_factor, (list, tuple)):
        _same_rank(scale_factor, spatial, ("scale_factor", "scale_factor of shape",
                                           "scale_factor", "s"))
        scales = [float(s) for s in scale_factor]
    else:
        scales = [float(scale_factor)] * d
    if recompute:
        return [math.floor(float(n) * s) for n, s in zip(spatial, scales)], [None] * d
    return [int(n * s) for n, s in zip(spatial, scales)], scales


def _same_rank(given, spatial, words):
    """PyTorch's ValueError when `given` (a size or scale tuple) has another length than
    the spatial dims; `words`: how the message names it."""
    if len(given) == len(spatial):
        return
    what, as_shown, fmt, letter = words
    raise ValueError(f"Input and {what} must have the same number of spatial dimensions, but "
                     f"got input with spatial dimensions of {spatial} and {as_shown} {given}. "
                     f"Please provide input tensor in (N, C, d1, d2, ...,dK) format and {fmt} "
                     f"in ({letter}1, {letter}2, ...,{letter}K) format.")


def _check_sizes(spatial, out):
    letters = "DHW"[3 - len(out):]
    if min(spatial) > 0 and min(out) > 0:
        return
    ins = ", ".join(f"{c}: {n}" for c, n in zip(letters, spatial))
    outs = ", ".join(f"{c}: {n}" for c, n in zip(letters, out))
    raise RuntimeError(f"Input and output sizes should be greater than 0, but got input "
                       f"({ins}) output ({outs})")


def interpolate(input: Tensor, size=None, scale_factor=None, mode: str = "nearest",
                align_corners: bool | None = None, recompute_scale_factor: bool | None = None,
                antialias: bool = False) -> Tensor:
    """Resize the spatial dims of (N, C, d1, ...) ``input`` to ``size`` or by
    ``scale_factor``, as ``torch.nn.functional.interpolate``.

    >>> import symgrad as torch
    >>> torch.nn.functional.interpolate(torch.tensor([[[1.0, 2.0]]]), scale_factor=2,
    ...                                 mode="linear")
    tensor([[[1.0000, 1.2500, 1.7500, 2.0000]]])
    """
    x = to_tensor(input)
    d = x.dim() - 2
    if mode in _INTERPOLATING:
        align_corners = bool(align_corners)
    elif align_corners is not None:
        raise ValueError("align_corners option can only be set with the interpolating modes: "
                         "linear | bilinear | bicubic | trilinear")
    if mode not in _MODES or d not in (1, 2, 3):
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported "
                                  f"(got {x.dim()}D) for the modes: nearest | linear | bilinear "
                                  f"| bicubic | trilinear | lanczos | area | nearest-exact (got "
                                  f"{mode})")
    if d not in _MODES[mode]:
        raise NotImplementedError(f"Got {x.dim()}D input, but {mode} mode needs "
                                  f"{_MODES[mode][0] + 2}D input")
    if antialias:
        raise NotImplementedError("symgrad: interpolate(antialias=True) is not supported; "
                                  "use antialias=False")
    out, scales = _sizes(x, d, size, scale_factor,
                         bool(recompute_scale_factor) or (mode == "area" and size is None))
    _check_sizes(list(x.shape[2:]), out)
    if mode == "area":
        pool = (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d)[d - 1]
        return pool(x, tuple(out) if d > 1 else out[0])
    if not x.dtype.is_floating_point:
        kind = "nearest" if mode.startswith("nearest") else \
            "cubic" if mode == "bicubic" else "linear"
        raise NotImplementedError(f"\"compute_indices_weights_{kind}\" not implemented for "
                                  f"'{x.dtype.c_name.capitalize()}'")
    ft = x.dtype.np.type
    plan = []
    for k in reversed(range(d)):          # the last dim first, as ATen nests its sums
        n, o, s = x.shape[2 + k], out[k], scales[k]
        if mode.startswith("nearest"):
            plan.append((2 + k, [(_nearest(n, o, s, mode == "nearest-exact"), None)]))
        elif mode == "bicubic":
            plan.append((2 + k, _cubic_taps(n, o, align_corners, s, ft)))
        else:
            plan.append((2 + k, _linear_taps(n, o, align_corners, s, ft)))

    def fn(v):
        for axis, taps in plan:
            if taps[0][1] is None:
                v = bind(P["take"], v, _const(taps[0][0], dtypes.int64), axis=axis)
            else:
                v = _along(v, axis, taps, x.dtype)
        return v
    return named(_NAMES[mode].format(d=d), fn, x)


def upsample(input: Tensor, size=None, scale_factor=None, mode: str = "nearest",
             align_corners: bool | None = None) -> Tensor:
    """The deprecated ``F.upsample``: :func:`interpolate`."""
    _deprecated("upsample")
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input: Tensor, size=None, scale_factor=None) -> Tensor:
    """The deprecated ``F.upsample_nearest``: nearest :func:`interpolate`."""
    _deprecated("upsample_nearest")
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input: Tensor, size=None, scale_factor=None) -> Tensor:
    """The deprecated ``F.upsample_bilinear``: bilinear with ``align_corners=True``."""
    _deprecated("upsample_bilinear")
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


def _deprecated(name: str) -> None:
    warnings.warn(f"`nn.functional.{name}` is deprecated. Use `nn.functional.interpolate` "
                  "instead.", UserWarning, stacklevel=3)
