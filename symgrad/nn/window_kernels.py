"""Eager kernels (:class:`~symgrad.functions.kernels.Kernel`) of max pooling and of
zero-padded, ungrouped convolution: what ``named`` runs on eager floating-point tensors
instead of recording the primitives the composites are written with.

Both read the windows of the padded input as strided views, one per kernel element
(``xp[.., d*i : d*i + s*(o-1) + 1 : s]``), never gathering:

* max pooling keeps a running maximum over those views and the kernel element it came
  from (the first maximal element in the input -- never a padding cell --, or the last
  NaN, as PyTorch's CPU kernel and ``pooling.first_max``); its backward adds the cotangent where that element was chosen into one
  strided view of the input's gradient per kernel element, the last element first, so
  that overlapping windows sum in PyTorch's order (window by window);
* convolution copies the windows once into columns (channel x kernel, batch x
  positions) and multiplies them by the weight in one matrix product, as the
  primitives do (the same bits); its backward is two matrix products and the same
  strided adds (col2im).

What the backward needs (the chosen elements, the columns) is kept from the forward
in the kernel's closure: one kernel per call."""
from __future__ import annotations

import math

import numpy as np

from ..functions.kernels import Kernel
from ..graph.primitives import NUMPY_RULES

__all__ = ["max_pool_kernel", "conv_kernel"]


def _regions(kernel, stride, dilation, out) -> list[tuple]:
    """Per kernel element (row-major), the strided slices of the padded input it reads
    in every window."""
    return [tuple(slice(d * i, d * i + s * (o - 1) + 1, s)
                  for i, s, d, o in zip(at, stride, dilation, out))
            for at in np.ndindex(*kernel)]


def _padded(x, lo, hi, value):
    """``x`` padded by ``lo`` / ``hi`` over its last ``len(lo)`` axes with ``value``."""
    if not any(lo) and not any(hi):
        return x
    r = len(lo)
    lead = x.shape[:x.ndim - r]
    xp = np.full(lead + tuple(n + a + b for n, a, b in zip(x.shape[x.ndim - r:], lo, hi)),
                 value, x.dtype)
    xp[(Ellipsis,) + _inside(x.shape[x.ndim - r:], lo)] = x
    return xp


def _inside(size, lo) -> tuple:
    return tuple(slice(a, a + n) for n, a in zip(size, lo))


def _add_back(g_parts, shape, size, lo, regions, tiles: bool, trailing: int = 0):
    """The input gradient of shape ``shape`` (padded spatial ``size``) from one
    contribution per region, added into a zero gradient the last region first
    (PyTorch's order of accumulation; ``0 + -0`` is ``+0`` as there), the padding
    cropped. ``tiles``: the regions cover the padded input once (their contributions
    are written, plus zero). ``trailing``: axes after the spatial ones (a layout with
    the batch innermost: long contiguous runs for numpy's strided adds)."""
    r = len(size)
    end = len(shape) - trailing
    lead, tail = shape[:end - r], shape[end:]
    at = (slice(None),) * len(lead)
    after = (slice(None),) * trailing
    first = g_parts(len(regions) - 1)
    dt = first.dtype
    gp = (np.empty if tiles else np.zeros)(lead + tuple(size) + tail, dt)
    for k in range(len(regions) - 1, -1, -1):
        part = first if k == len(regions) - 1 else g_parts(k)
        view = gp[at + regions[k] + after]
        np.add(part, dt.type(0) if tiles else view, out=view)
    if tuple(size) == tuple(shape[len(lead):end]):
        return gp
    return gp[at + _inside(shape[len(lead):end], lo) + after]


def _tiles(size, kernel, stride, dilation, out) -> bool:
    """Whether the windows cover an input of padded ``size`` once each."""
    return all((d == 1 or k == 1) and s == k and o * s == n
               for n, k, s, d, o in zip(size, kernel, stride, dilation, out))


def max_pool_kernel(kernel, stride, padding, dilation, extra, out) -> Kernel:
    """Max pooling over the last ``len(kernel)`` axes, padded by ``padding`` before and
    ``padding + extra`` after with -inf, ``out`` windows per axis (see the module
    docstring). The chosen elements are kept as one mask per kernel element."""
    hi = tuple(p + e for p, e in zip(padding, extra))
    regions = _regions(kernel, stride, dilation, out)
    kept = [None, None]

    def forward(x):
        xp = _padded(x, padding, hi, -np.inf)
        views = [xp[(Ellipsis,) + reg] for reg in regions]
        best = views[0]
        for v in views[1:]:
            best = np.maximum(best, v)           # (NaN wins)
        if len(views) == 1:
            best = best.copy()
        inside = None
        if xp is not x:             # padding cells are never chosen (all -inf: the first real)
            ok = _padded(np.ones(x.shape[x.ndim - len(kernel):], bool), padding, hi, False)
            inside = [ok[reg] for reg in regions]
        nan = not np.isfinite(np.add.reduce(best.ravel())) and bool(np.isnan(best).any())
        found, masks = None, []
        for k, v in enumerate(views):   # the first maximal element of each window
            hit = np.equal(v, best)
            if inside is not None:
                hit &= inside[k]
            if found is None:
                found = hit.copy()
            else:
                hit &= ~found
                found |= hit
            masks.append(hit)
        if nan:                     # ... or the last NaN (PyTorch: val > max || isnan(val))
            taken = None
            for k in range(len(views) - 1, -1, -1):
                hit = np.isnan(views[k])
                if taken is None:
                    taken = hit.copy()
                else:
                    hit &= ~taken
                    taken |= hit
                masks[k] |= hit
        zero = best == 0
        if zero.any():              # the chosen element's sign (max(-0, +0) is either)
            for k, v in enumerate(views):
                np.copyto(best, v, where=masks[k] & zero)
        kept[:] = masks, (x.shape, xp.shape)
        return best

    def backward(g, inputs, res):
        masks, (shape, padded) = kept
        size = padded[len(padded) - len(kernel):]
        zero = g.dtype.type(0)
        if np.isfinite(np.add.reduce(g.ravel())):
            part = lambda k: np.multiply(g, masks[k])       # noqa: E731
        else:                       # (inf * 0 is NaN: a select)
            part = lambda k: np.where(masks[k], g, zero)    # noqa: E731
        return (_add_back(part, shape, size, padding, regions,
                          _tiles(size, kernel, stride, dilation, out)),)
    return Kernel(forward, backward)


def conv_kernel(stride, lo, hi, dilation) -> Kernel:
    """Convolution of (N, C, *S) by (O, C, *K) (+ bias (O,)), zero padding ``lo`` /
    ``hi``, one group (see the module docstring)."""
    matmul = NUMPY_RULES["matmul"]
    kept = [None]

    def forward(x, w, b=None):
        r = w.ndim - 2
        n, c, o, kernel = x.shape[0], x.shape[1], w.shape[0], w.shape[2:]
        xp = _padded(x, lo, hi, 0)
        out = tuple((p - d * (k - 1) - 1) // s + 1
                    for p, k, s, d in zip(xp.shape[2:], kernel, stride, dilation))
        lead, last = xp.strides[:2], xp.strides[2:]
        win = np.lib.stride_tricks.as_strided(
            xp, (n, c) + kernel + out,
            lead + tuple(d * t for d, t in zip(dilation, last)) +
            tuple(s * t for s, t in zip(stride, last)), writeable=False)
        # columns (channel x kernel, batch x positions): one copy of the windows
        cols = win.transpose((1,) + tuple(range(2, 2 + r)) + (0,) +
                             tuple(range(2 + r, 2 + 2 * r)))
        cols = cols.reshape(c * math.prod(kernel), n * math.prod(out))
        w2 = w.reshape(o, c * math.prod(kernel))
        y = matmul(w2, cols).reshape((o, n) + out)
        res = np.empty((n, o) + out, x.dtype)
        perm = (1, 0) + tuple(range(2, 2 + r))
        if b is None:
            np.copyto(res, y.transpose(perm))
        else:
            np.add(y.transpose(perm), b.reshape((o,) + (1,) * r), out=res)
        kept[0] = cols, w2.copy(), x.shape, xp.shape, kernel, out, b is not None
        return res

    def backward(g, inputs, res, needs):
        cols, w2, shape, padded, kshape, out, has_bias = kept[0]
        r = len(out)
        n, c, o = shape[0], shape[1], w2.shape[0]
        g2 = np.ascontiguousarray(np.swapaxes(g, 0, 1)).reshape(o, n * math.prod(out))
        gw = matmul(g2, cols.T).reshape((o, c) + kshape) if needs[1] else None
        bias = (np.add.reduce(g, axis=(0,) + tuple(range(2, 2 + r))),) if has_bias else ()
        if not needs[0]:            # (a network's first layer: no input gradient to build)
            return (None, gw) + bias
        # the columns' gradient with the batch innermost, (C, *K, *P, N): per kernel
        # element one (C, *P, N) contribution, added by long contiguous runs
        gt = np.ascontiguousarray(np.moveaxis(g, 0, -1)).reshape(o, n * math.prod(out))
        gcols = matmul(w2.T, gt).reshape((c,) + kshape + out + (n,))
        regions = _regions(kshape, stride, dilation, out)
        ats = list(np.ndindex(*kshape))

        def part(k):
            return gcols[(slice(None),) + ats[k]]
        gx = _add_back(part, (c,) + shape[2:] + (n,), padded[2:], lo, regions,
                       _tiles(padded[2:], kshape, stride, dilation, out), trailing=1)
        return (np.ascontiguousarray(np.moveaxis(gx, -1, 0)), gw) + bias
    return Kernel(forward, backward, takes_needs=True)

