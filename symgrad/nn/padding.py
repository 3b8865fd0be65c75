"""``nn.functional.pad`` as PyTorch 2.13's: the modes constant, reflect, replicate and
circular over the last 1 to 3 dims (constant: any number of dims), negative pads
(cropping), its argument checks in its order and its error texts, recorded as
``ConstantPadNdBackward0`` / ``ReflectionPad{1,2,3}DBackward0`` /
``ReplicationPad{1,2,3}DBackward0`` / ``CopySlices`` (circular).

The padding itself is :func:`symgrad.nn.windowing.pad` (a zero-filled ``pad_slice``, or a
``take`` with a fixed index array); a negative pad is a ``slice``.  Reflect and
replicate pad first and crop after (their index formula is relative to the uncropped
input, as PyTorch's kernels); circular crops first and wraps what is left (PyTorch's
``_pad_circular``); constant crops and pads independently per side."""
from __future__ import annotations

import numpy as np

from ..functions.common import to_tensor
from ..functions.composite import named
from ..ops import lax
from .windowing import pad as pad_axes

__all__ = ["pad", "pad_constant", "check_mode_padding", "MODES"]

MODES = ("constant", "reflect", "replicate", "circular")
_KERNEL = {"reflect": "reflection_pad", "replicate": "replication_pad"}
_GRAD = {"reflect": "ReflectionPad{}DBackward0", "replicate": "ReplicationPad{}DBackward0"}
_UNSUPPORTED = ("Padding size {} is not supported for {}D input tensor.\n"
                "Supported combinations for non-constant padding:\n"
                "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
                "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
                "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")


def _pad_arg(pad) -> tuple[int, ...]:
    """``pad`` as a tuple of ints, or PyTorch's argument-parser TypeError."""
    if not isinstance(pad, (tuple, list)):
        raise TypeError(f"pad(): argument 'pad' (position 2) must be tuple of ints, not "
                        f"{type(pad).__name__}")
    for i, v in enumerate(pad):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"pad(): argument 'pad' (position 2) must be tuple of ints, but "
                            f"found element of type {type(v).__name__} at pos {i}")
    return tuple(int(v) for v in pad)


def _sides(pad: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(before, after) per padded axis, first padded axis first (``pad`` starts with the
    last axis)."""
    r = len(pad) // 2
    return (tuple(pad[2 * (r - 1 - i)] for i in range(r)),
            tuple(pad[2 * (r - 1 - i) + 1] for i in range(r)))


def check_mode_padding(x, lo, hi, mode: str) -> None:
    """PyTorch's checks of the reflect / replicate / circular kernels for ``lo`` / ``hi``
    over the last ``len(lo)`` axes of ``x`` (also what ``Conv*d(padding_mode=...)``
    raises, as those pad with ``F.pad``)."""
    r, shape = len(lo), list(x.shape)
    spatial = shape[x.dim() - r:]
    if mode == "circular":
        for i in range(r):
            if lo[i] > spatial[i] or hi[i] > spatial[i]:
                raise RuntimeError("Padding value causes wrapping around more than once.")
            if spatial[i] + lo[i] + hi[i] < 0:
                raise RuntimeError("Negative padding value is resulting in an empty dimension")
            # PyTorch leaves such a pad's elements unset (it wraps what the crop left once)
            left = spatial[i] - max(0, -lo[i]) - max(0, -hi[i])
            if max(lo[i], hi[i]) > left:
                raise RuntimeError("Padding value causes wrapping around more than once.")
        return
    if x.dtype.name == "bool":
        raise NotImplementedError(f"\"{_KERNEL[mode]}{r}d\" not implemented for 'Bool'")
    if 0 in shape[x.dim() - r - 1:]:
        raise RuntimeError(f"Expected {r + 1}D or {r + 2}D (batch mode) tensor with possibly 0 "
                           f"batch size and other non-zero dimensions for input, but got: "
                           f"{shape}")
    if mode == "reflect":
        for i in reversed(range(r)):            # the last dim first, as PyTorch
            if lo[i] >= spatial[i] or hi[i] >= spatial[i]:
                raise RuntimeError(f"Argument #{4 + 2 * (r - 1 - i)}: Padding size should be "
                                   f"less than the corresponding input dimension, but got: "
                                   f"padding ({lo[i]}, {hi[i]}) at dimension "
                                   f"{x.dim() - r + i} of input {shape}")
    out = [n + a + b for n, a, b in zip(spatial, lo, hi)]
    if all(o < 1 for o in out):                 # PyTorch checks "any output >= 1"
        names = "DHW"[3 - r:]
        space = " " if mode == "replicate" and r == 2 else ""
        given = ", ".join(f"{k}: {n}" for k, n in zip(names, spatial))
        calc = " ".join(f"{k}: {o}" for k, o in zip(names, out))
        raise RuntimeError(f"input ({given}{space}) is too small. Calculated output {calc}")
    for o in out:
        if o < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {o}: "
                               f"{shape[:x.dim() - r] + out}")


def _crop(x, lo, hi):
    """``x`` without ``-lo[i]`` / ``-hi[i]`` elements at the start / end of its last
    ``len(lo)`` axes where those are negative."""
    if all(v >= 0 for v in lo + hi):
        return x
    n, r = len(x.shape), len(lo)
    starts, stops = [0] * n, list(x.shape)
    for i in range(r):
        a = n - r + i
        starts[a] = max(0, -lo[i])
        stops[a] = max(starts[a], x.shape[a] - max(0, -hi[i]))
    return lax.slice_(x, starts, stops, (1,) * n)


def _positive(v):
    return tuple(max(0, p) for p in v)


def pad_constant(v, lo, hi, value=0):
    """``v`` padded with ``value`` by ``lo[i]`` / ``hi[i]`` before / after its last
    ``len(lo)`` axes, cropped where those are negative (no checks)."""
    return pad_axes(_crop(v, lo, hi), _positive(lo), _positive(hi), value=value)


def _by_index(v, lo, hi, mode):
    if mode == "circular":
        return pad_axes(_crop(v, lo, hi), _positive(lo), _positive(hi), mode)
    padded = pad_axes(v, _positive(lo), _positive(hi), mode)
    return _crop(padded, lo, hi)


def _fill(value, dtype):
    """The pad value as the tensor's dtype turns it (truncated for integers)."""
    if dtype.name == "bool":
        return bool(value)
    if not dtype.is_floating_point:
        return int(value)
    return float(value)


def pad(input, pad, mode: str = "constant", value=None):
    """``input`` padded by ``pad`` = (before, after) of the last dim, then of the one
    before, ...: ``value`` (constant mode, default 0), the input mirrored about its edge
    (``'reflect'``), its edge repeated (``'replicate'``) or wrapped around
    (``'circular'``); a negative pad crops.

    >>> import symgrad as torch
    >>> torch.nn.functional.pad(torch.arange(4.).reshape(1, 4), (2, 1), mode="reflect")
    tensor([[2., 1., 0., 1., 2., 3., 2.]])
    """
    x = to_tensor(input)
    if not isinstance(mode, str):
        raise TypeError(f"pad(): argument 'mode' (position 3) must be str, not "
                        f"{type(mode).__name__}")
    if mode not in MODES:
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if value is not None and (isinstance(value, (str, bytes)) or not np.isscalar(value)):
        raise TypeError(f"pad(): argument 'value' (position 4) must be float, not "
                        f"{type(value).__name__}")
    pad = _pad_arg(pad)
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) > 2 * x.dim():
        raise RuntimeError(f"Padding length should be less than or equal to two times the "
                           f"input dimension but got padding length {len(pad)} and input of "
                           f"dimension {x.dim()}")
    lo, hi = _sides(pad)
    if mode == "constant":
        sizes = [n + a + b for n, a, b in zip(x.shape[x.dim() - len(lo):], lo, hi)]
        if any(s < 0 for s in sizes):
            raise RuntimeError("narrow(): length must be non-negative.")
        fill = _fill(0 if value is None else value, x.dtype)
        return named("ConstantPadNdBackward0", lambda v: pad_constant(v, lo, hi, fill), x)
    if value is not None and value != 0:
        raise RuntimeError(f"Padding mode \"{mode}\" doesn't take in value argument")
    r = len(lo)
    if not (1 <= r <= 3 and x.dim() in (r + 1, r + 2)):
        raise NotImplementedError(_UNSUPPORTED.format(len(pad), x.dim()))
    check_mode_padding(x, lo, hi, mode)
    grad = "CopySlices" if mode == "circular" else _GRAD[mode].format(r)
    return named(grad, lambda v: _by_index(v, lo, hi, mode), x)
