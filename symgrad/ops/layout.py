"""Layout primitives: views (reshape, expand, permute, slice, select, flip, shear,
windows), windows (pad_slice, cat) and the window sum (col2im) -- for each, its shape rule, numpy rule, what the eager tape
saves and its VJP, declared once (:func:`symgrad.ops.define.primitive`).

``shear`` is the sliding-window view: along each of its ``pairs`` (axis, by, stride,
coef, offset, size), ``out[.., p, .., j, ..] = x[.., stride*p + coef*j + offset, .., j, ..]``
(``p`` indexes ``axis``, ``j`` indexes ``by``).  On an input broadcast along new kernel
axes it is every window of a convolution or a pooling (:func:`symgrad.ops.lax.windows`),
without a copy; its VJP is a zero-filled (dilating) ``pad_slice`` read through a
unit-stride shear the other way, so a window's gradient is views, one pad and the sum
over the kernel axes that undoes the broadcast -- primitives every backend has.

``windows`` is the sliding-window view of an array's last axes in one primitive (every
convolution's and pooling's): ``out[.., i, .., p, ..] = x[.., s*p + d*i, ..]`` (kernel
axes, then window positions).  Its VJP is ``col2im``: each window element's value
added where the windows read it, ``out[.., s*p + d*i, ..] += g[.., i, .., p, ..]``,
without the padded copy K times the input's size that the pad-and-shear form
materialises (in eager numpy as much as in compiled loops); col2im's VJP is the
windows of the cotangent."""
from __future__ import annotations

import numpy as np

from ..graph.shapes import broadcast_shapes
from . import lax
from .define import primitive


# ---- reverse-mode rules ------------------------------------------------------------
def _reshape_vjp(ctx, g):
    return (lax.reshape(g, ctx.in_avals[0][0]),)


def _expand_vjp(ctx, g):
    return (lax.sum_to(g, ctx.in_avals[0][0]),)


def _permute_vjp(ctx, g):
    perm = ctx.kwargs["perm"]
    return (lax.permute(g, tuple(np.argsort(perm).tolist())),)


def _slice_vjp(ctx, g):
    k = ctx.kwargs
    return (lax.pad_slice(g, ctx.in_avals[0][0], k["starts"], k["stops"], k["steps"]),)


def _pad_slice_vjp(ctx, g):
    k = ctx.kwargs
    return (lax.slice_(g, k["starts"], k["stops"], k["steps"]),)


def _select_vjp(ctx, g):
    k = ctx.kwargs
    shape = ctx.in_avals[0][0]
    axis, index = k["axis"], k["index"]
    index = index % shape[axis]
    g1 = lax.reshape(g, shape[:axis] + (1,) + shape[axis + 1:])
    starts = tuple(index if i == axis else 0 for i in range(len(shape)))
    stops = tuple(index + 1 if i == axis else s for i, s in enumerate(shape))
    return (lax.pad_slice(g1, shape, starts, stops, (1,) * len(shape)),)


def _flip_vjp(ctx, g):
    return (lax.apply("flip", g, axes=ctx.kwargs["axes"]),)


def _shear_vjp(ctx, g):
    return (lax.shear_transpose(g, ctx.in_avals[0][0], ctx.kwargs["pairs"]),)


def _cat_vjp(ctx, g):
    axis = ctx.kwargs["axis"]
    out, start = [], 0
    for (shape, _), need in zip(ctx.in_avals, ctx.needs_input_grad):
        stop = start + shape[axis]
        if need:
            starts = tuple(start if i == axis else 0 for i in range(len(shape)))
            stops = tuple(stop if i == axis else s for i, s in enumerate(g.shape))
            out.append(lax.slice_(g, starts, stops, (1,) * len(shape)))
        else:
            out.append(None)
        start = stop
    return tuple(out)


# ---- the primitives ----------------------------------------------------------------
def _permute_numpy(x, *, perm):
    """``np.transpose(x, perm)``, by the array's method (no Python-level wrapper)."""
    return x.transpose(perm) if type(x) is np.ndarray else np.transpose(x, perm)


def _reshape_numpy(x, *, shape):
    return x.reshape(shape) if type(x) is np.ndarray else np.reshape(x, shape)


primitive("reshape", 1, lambda av, *, shape: (shape, av[0][1]), _reshape_numpy,
          grad_name="ViewBackward0", family="view", vjp=_reshape_vjp)


def _expand_numpy(x, *, shape):
    """``np.broadcast_to(x, shape)``: a read-only view with stride 0 on broadcast dims,
    built directly when x is C-contiguous (half the cost of np.broadcast_to's checks)."""
    if type(x) is np.ndarray and x.flags.c_contiguous and len(shape) >= x.ndim:
        lead = len(shape) - x.ndim
        strides = [0] * lead
        for n, stride, want in zip(x.shape, x.strides, shape[lead:]):
            if n == want:
                strides.append(stride)
            elif n == 1:
                strides.append(0)
            else:
                return np.broadcast_to(x, shape)        # raises numpy's error
        view = np.ndarray(shape, x.dtype, x, 0, tuple(strides))
        view.flags.writeable = False
        return view
    return np.broadcast_to(x, shape)


primitive("expand", 1, lambda av, *, shape: (broadcast_shapes(av[0][0], shape), av[0][1]),
          _expand_numpy, grad_name="ExpandBackward0", family="view", vjp=_expand_vjp)
primitive("permute", 1, lambda av, *, perm: (tuple(av[0][0][p] for p in perm), av[0][1]),
          _permute_numpy, grad_name="PermuteBackward0",
          family="view", vjp=_permute_vjp)


def _slice_shape(av, *, starts, stops, steps):
    return tuple(len(range(a, b, c)) for a, b, c in zip(starts, stops, steps)), av[0][1]


def _slice_numpy(x, *, starts, stops, steps):
    return x[tuple(slice(a, b, c) for a, b, c in zip(starts, stops, steps))]


primitive("slice", 1, _slice_shape, _slice_numpy, grad_name="SliceBackward0",
          family="view", vjp=_slice_vjp)


def _pad_slice_numpy(g, *, shape, starts, stops, steps):
    out = np.zeros(shape, dtype=g.dtype)
    out[tuple(slice(a, b, c) for a, b, c in zip(starts, stops, steps))] = g
    return out


primitive("pad_slice", 1, lambda av, *, shape, starts, stops, steps: (shape, av[0][1]),
          _pad_slice_numpy, family="window", vjp=_pad_slice_vjp)


def _select_shape(av, *, axis, index):
    s = av[0][0]
    return s[:axis] + s[axis + 1:], av[0][1]


def _select_numpy(x, *, axis, index):
    # the Ellipsis keeps a 0-d result a view (x[0] of a vector), not a numpy scalar copy
    return x[(slice(None),) * axis + (index, Ellipsis)]


primitive("select", 1, _select_shape, _select_numpy, grad_name="SelectBackward0",
          family="view", vjp=_select_vjp)


def _flip_numpy(x, *, axes):
    return np.flip(x, axes)


primitive("flip", 1, lambda av, *, axes: (av[0][0], av[0][1]), _flip_numpy,
          grad_name="FlipBackward0", family="view", vjp=_flip_vjp)


def _shear_shape(av, *, pairs):
    shape = av[0][0]
    out = list(shape)
    axes = [p[0] for p in pairs]
    for axis, by, stride, coef, offset, size in pairs:
        if not (0 <= axis < len(shape) and 0 <= by < len(shape)) or by in axes \
                or axes.count(axis) > 1 or stride < 1 or size < 0:
            raise ValueError(f"shear: invalid pair {(axis, by, stride, coef, offset, size)} "
                             f"for shape {tuple(shape)}")
        low, high = lax.shear_extent(coef, offset, shape[by])
        if size and shape[by] and (low < 0 or high + stride * (size - 1) >= shape[axis]):
            raise ValueError(f"shear: windows of axis {axis} reach {low}.."
                             f"{high + stride * (size - 1)}, outside 0..{shape[axis] - 1}")
        out[axis] = size
    return tuple(out), av[0][1]


def _shear_numpy(x, *, pairs):
    """A strided view of x (no copy): the pairs only change strides and the start."""
    shape, strides = list(x.shape), list(x.strides)
    start = [slice(None)] * x.ndim
    for axis, by, stride, coef, offset, size in pairs:
        shape[axis] = size
    if 0 in shape:
        return np.zeros(shape, x.dtype)
    for axis, by, stride, coef, offset, size in pairs:
        start[axis] = slice(offset, None)
        strides[axis] = stride * x.strides[axis]
        strides[by] += coef * x.strides[axis]
    return np.lib.stride_tricks.as_strided(x[tuple(start)], shape, strides, writeable=False)


primitive("shear", 1, _shear_shape, _shear_numpy, grad_name="AsStridedBackward0",
          family="view", vjp=_shear_vjp)


def _cat_shape(av, *, axis):
    base = list(av[0][0])
    base[axis] = sum(s[axis] for s, _ in av)
    return tuple(base), av[0][1]
# detach() of a traced tensor (and any result computed under no_grad in a trace): the
# value unchanged, no gradient through it -- JAX's stop_gradient.  simplify() removes it
# once the gradient graph is built.


def _windows_shape(av, *, kernel, stride, dilation):
    shape, r = av[0][0], len(kernel)
    if not (r >= 1 and len(stride) == len(dilation) == r and len(shape) >= r
            and min(stride) >= 1 and min(dilation) >= 1 and min(kernel) >= 1):
        raise ValueError(f"windows: invalid kernel {kernel}, stride {stride}, dilation "
                         f"{dilation} for shape {tuple(shape)}")
    lead, size = tuple(shape[:len(shape) - r]), shape[len(shape) - r:]
    spans = [d * (k - 1) + 1 for k, d in zip(kernel, dilation)]
    if any(n < span for n, span in zip(size, spans)):
        raise ValueError(f"windows: kernel spans {spans} do not fit in {tuple(size)}")
    spots = tuple((n - span) // s + 1 for n, span, s in zip(size, spans, stride))
    return lead + tuple(kernel) + spots, av[0][1]


def _windows_numpy(x, *, kernel, stride, dilation):
    """A strided view of x (no copy)."""
    shape = _windows_shape((((x.shape), None),), kernel=kernel, stride=stride,
                           dilation=dilation)[0]
    r = len(kernel)
    lead, last = x.strides[:x.ndim - r], x.strides[x.ndim - r:]
    strides = lead + tuple(d * t for d, t in zip(dilation, last)) + \
        tuple(s * t for s, t in zip(stride, last))
    if 0 in shape:
        return np.zeros(shape, x.dtype)
    return np.lib.stride_tricks.as_strided(x, shape, strides, writeable=False)


def _windows_vjp(ctx, g):
    k = ctx.kwargs
    shape = ctx.in_avals[0][0]
    return (lax.apply("col2im", g, size=tuple(shape[len(shape) - len(k["kernel"]):]),
                      stride=k["stride"], dilation=k["dilation"]),)


primitive("windows", 1, _windows_shape, _windows_numpy, grad_name="AsStridedBackward0",
          family="view", vjp=_windows_vjp)


def _col2im_parts(shape, size):
    """(leading dims, kernel, window counts) of a col2im operand of ``shape``."""
    r = len(size)
    lead = tuple(shape[:len(shape) - 2 * r])
    return lead, tuple(shape[len(lead):len(lead) + r]), tuple(shape[len(lead) + r:])


def _col2im_shape(av, *, size, stride, dilation):
    shape, r = av[0][0], len(size)
    if not (r >= 1 and len(stride) == len(dilation) == r and len(shape) >= 2 * r
            and min(stride) >= 1 and min(dilation) >= 1):
        raise ValueError(f"col2im: invalid size {size}, stride {stride}, dilation {dilation} "
                         f"for an operand of shape {tuple(shape)}")
    lead, kernel, spots = _col2im_parts(shape, size)
    for n, k, p, s, d in zip(size, kernel, spots, stride, dilation):
        if k and p and s * (p - 1) + d * (k - 1) >= n:
            raise ValueError(f"col2im: {p} windows of {k} (stride {s}, dilation {d}) reach "
                             f"past {n}")
    return lead + tuple(size), av[0][1]


def _col2im_numpy(g, *, size, stride, dilation):
    """One strided add per kernel element (each a plain slice: no overlap within it)."""
    lead, kernel, spots = _col2im_parts(g.shape, size)
    out = np.zeros(lead + tuple(size), g.dtype)
    if 0 in kernel or 0 in spots:
        return out
    rest = (slice(None),) * len(size)
    for at in np.ndindex(*kernel):
        region = tuple(slice(d * i, d * i + s * (p - 1) + 1, s)
                       for i, s, d, p in zip(at, stride, dilation, spots))
        out[(Ellipsis,) + region] += g[(Ellipsis,) + at + rest]
    return out


def _col2im_vjp(ctx, g):
    k = ctx.kwargs
    kernel = _col2im_parts(ctx.in_avals[0][0], k["size"])[1]
    return (lax.apply("windows", g, kernel=kernel, stride=k["stride"], dilation=k["dilation"]),)


primitive("col2im", 1, _col2im_shape, _col2im_numpy, grad_name="Col2ImBackward0",
          family="window-sum", vjp=_col2im_vjp)


primitive("cat", -1, _cat_shape, lambda *xs, axis: np.concatenate(xs, axis=axis),
          grad_name="CatBackward0", family="window", vjp=_cat_vjp)
