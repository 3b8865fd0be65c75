"""Reduction primitives: sum, mean, amax, amin, prod (and the two products prod's
gradient is made of), argmax / argmin, the cumsum and logcumsumexp scans -- for each, its shape rule, numpy
rule, what the eager tape saves and its VJP, declared once
(:func:`symgrad.ops.define.primitive`)."""
from __future__ import annotations

import numpy as np

from ..graph import dtypes
from ..graph.shapes import reduce_shape
from . import lax
from .define import primitive


# ---- reverse-mode rules ------------------------------------------------------------
def _mean_vjp(ctx, g):
    k = ctx.kwargs
    shape = ctx.in_avals[0][0]
    n = 1
    for a in k["axes"]:
        n *= shape[a]
    # divide the reduced cotangent, then broadcast: the same value per element as
    # expanding first, with the division done once per output element of the mean
    return (lax.expand(_keep(lax.div(g, float(n)), shape, k["axes"], k["keepdim"]), shape),)


def _keep(g, in_shape, axes, keepdim):
    """g with the reduced axes restored as size 1 (a 0-d g broadcasts as it is)."""
    if not keepdim and g.shape:
        g = lax.reshape(g, tuple(1 if i in axes else s for i, s in enumerate(in_shape)))
    return g


def _sum_vjp(ctx, g):
    k = ctx.kwargs
    shape = ctx.in_avals[0][0]
    return (lax.expand(_keep(g, shape, k["axes"], k["keepdim"]), shape),)


def _extremum_vjp(ctx, g):
    """Gradient split evenly among the elements equal to the extremum (as PyTorch's
    amax / amin and full max / min)."""
    k = ctx.kwargs
    x = ctx.input(0)
    shape, dtype = ctx.in_avals[0]
    out = lax.expand(_keep(ctx.out, shape, k["axes"], k["keepdim"]), shape)
    mask = lax.cast(lax.eq(x, out), dtype)
    count = lax.sum(mask, k["axes"], keepdim=True)
    gk = lax.expand(_keep(g, shape, k["axes"], k["keepdim"]), shape)
    return (lax.div(lax.mul(gk, mask), count),)


def _prod_vjp(ctx, g):
    k = ctx.kwargs
    shape = ctx.in_avals[0][0]
    ctx.out      # unused, but saved as PyTorch saves it: its version is checked here too
    others = lax.apply("prod_others", ctx.input(0), axes=k["axes"])
    gk = lax.expand(_keep(g, shape, k["axes"], k["keepdim"]), shape)
    return (lax.mul(gk, others),)


def _prod_others_vjp(ctx, g):
    """d/dx_j of sum_i g_i prod_{k != i} x_k = sum_{i != j} g_i prod_{k != i, j} x_k: the
    prod_others_dot primitive (exact with zeros, O(n) per group)."""
    return (lax.apply("prod_others_dot", ctx.input(0), g, axes=ctx.kwargs["axes"]),)


def _group_last(x, axes):
    """x with its reduction axes moved last and flattened into one: (y, undo)."""
    keep = tuple(i for i in range(len(x.shape)) if i not in axes)
    perm = keep + tuple(axes)
    xp = lax.permute(x, perm)
    lead = tuple(x.shape[i] for i in keep)
    y = lax.reshape(xp, lead + (lax.size_of(tuple(x.shape[a] for a in axes)),))
    inv = tuple(np.argsort(perm).tolist())
    return y, lambda t: lax.permute(lax.reshape(t, xp.shape), inv)


def _prod_others_dot_vjp(ctx, u):
    """H(x, g)_j = sum_{i != j} g_i prod_{k != i, j} x_k is symmetric in (i, j), so its
    VJP in g is H(x, u). In x: d/dx_l sum_j u_j H_j = sum_j u'_j H(x with x_l = 1, g')_j with
    u', g' zero at l — batched over l as (.., n, n) rows, exact with zeros."""
    axes = ctx.kwargs["axes"]
    x, g = ctx.input(0), ctx.input(1)
    gx = gg = None
    if ctx.needs_input_grad[1]:
        gg = lax.sum_to(lax.apply("prod_others_dot", x, u, axes=axes), ctx.in_avals[1][0])
    if ctx.needs_input_grad[0]:
        xs, undo = _group_last(x, axes)
        gs, _ = _group_last(lax.expand(g, x.shape), axes)
        us, _ = _group_last(u, axes)
        n = xs.shape[-1]
        rows = xs.shape[:-1] + (n, n)
        eye = lax.eye_mask(rows)

        def as_rows(t):
            return lax.expand(lax.reshape(t, t.shape[:-1] + (1, n)), rows)
        xr = lax.where(eye, lax.full((), 1, x.dtype), as_rows(xs))
        gr = lax.where(eye, lax.full((), 0, x.dtype), as_rows(gs))
        ur = lax.where(eye, lax.full((), 0, x.dtype), as_rows(us))
        h = lax.apply("prod_others_dot", xr, gr, axes=(len(rows) - 1,))
        gx = undo(lax.sum(lax.mul(ur, h), (len(rows) - 1,)))
    return gx, gg


def _cumsum_vjp(ctx, g):
    axis = ctx.kwargs["axis"]
    f = lax.apply("flip", g, axes=(axis,))
    return (lax.apply("flip", lax.apply("cumsum", f, axis=axis), axes=(axis,)),)


# ---- the primitives ----------------------------------------------------------------
def _reduce_shape(av, *, axes, keepdim):
    return reduce_shape(av[0][0], axes, keepdim), av[0][1]


# reductions call the ufunc reductions directly: np.sum / np.mean / np.amax add a few µs of
# Python-level dispatch per call, which dominates small eager tensors
def _sum_numpy(x, *, axes, keepdim):
    acc = _accumulator(x.dtype)
    if acc == x.dtype:
        return np.add.reduce(x, axis=axes, keepdims=keepdim)
    return np.add.reduce(x, axis=axes, keepdims=keepdim, dtype=acc).astype(x.dtype)


primitive("sum", 1, _reduce_shape, _sum_numpy, grad_name="SumBackward1",
          family="reduction", vjp=_sum_vjp)


def _extreme_value(dtype, lowest: bool):
    if dtype.kind == "f":
        return -np.inf if lowest else np.inf
    if dtype.kind == "b":
        return not lowest
    info = np.iinfo(dtype)
    return info.min if lowest else info.max


# An empty reduction gives the identity (-inf for max) as logsumexp needs; the user-facing
# functions raise PyTorch's errors for empty reductions before binding.
def _amax_numpy(x, *, axes, keepdim):
    if x.size == 0:
        return np.amax(x, axis=axes, keepdims=keepdim, initial=_extreme_value(x.dtype, True))
    return np.maximum.reduce(x, axis=axes, keepdims=keepdim)


def _amin_numpy(x, *, axes, keepdim):
    if x.size == 0:
        return np.amin(x, axis=axes, keepdims=keepdim, initial=_extreme_value(x.dtype, False))
    return np.minimum.reduce(x, axis=axes, keepdims=keepdim)


primitive("amax", 1, _reduce_shape, _amax_numpy, saves=(0,), saves_out=True,
          grad_name="AmaxBackward0", family="reduction", vjp=_extremum_vjp)
primitive("amin", 1, _reduce_shape, _amin_numpy, saves=(0,), saves_out=True,
          grad_name="AminBackward0", family="reduction", vjp=_extremum_vjp)


def _mean_numpy(x, *, axes, keepdim):
    n = 1
    for a in axes:
        n *= x.shape[a]
    acc = _accumulator(x.dtype)
    total = np.add.reduce(x, axis=axes, keepdims=keepdim, dtype=acc)
    if not n:
        return np.full_like(total, np.nan, dtype=x.dtype)
    # the operator, not np.true_divide: ~10x cheaper on the numpy scalar of a full
    # reduction, and a Python int divisor keeps x's dtype
    return total / n if acc == x.dtype else (total / n).astype(x.dtype)


primitive("mean", 1, _reduce_shape, _mean_numpy, grad_name="MeanBackward1",
          family="reduction", vjp=_mean_vjp)


def _prod_numpy(x, *, axes, keepdim):
    return np.multiply.reduce(x, axis=axes, keepdims=keepdim)


primitive("prod", 1, _reduce_shape, _prod_numpy, saves=(0,), saves_out=True,
          grad_name="ProdBackward1", family="reduction", vjp=_prod_vjp)


def _accumulator(dtype):
    """The dtype a sum, a mean or a scan of products accumulates in: float64 for
    narrower floats, else its own. PyTorch's CPU cumprod / cumsum do (at::acc_type: a
    float32 running product that overflows is finite again in double once a small
    factor follows), the LLVM backend's sums do (float64 block sums); for numpy's sums
    it keeps partial sums from overflowing float32 (inf + -inf = NaN where the sum is
    inf: fuzz seed 2028003556)."""
    dtype = np.dtype(dtype)
    return np.dtype(np.float64) if dtype.kind == "f" and dtype.itemsize < 8 else dtype


def _exclusive_products(flat):
    """(left, right): for each element of the last axis, the product of the elements
    before it and of those after it, in :func:`_accumulator`."""
    acc = _accumulator(flat.dtype)
    ones = np.ones(flat.shape[:-1] + (1,), dtype=acc)
    left = np.cumprod(np.concatenate([ones, flat[..., :-1]], axis=-1), axis=-1, dtype=acc)
    right = np.flip(np.cumprod(np.concatenate([ones, np.flip(flat, -1)[..., :-1]], -1), -1,
                               dtype=acc), -1)
    return left, right


def _prod_others_numpy(x, *, axes):
    """For each element, the product of the other elements of its reduction group
    (exact with zeros: exclusive products from both sides)."""
    if x.size == 0:
        return np.ones_like(x)
    keep = [i for i in range(x.ndim) if i not in axes]
    perm = keep + list(axes)
    xt = np.transpose(x, perm)
    lead = xt.shape[:len(keep)]
    flat = xt.reshape(lead + (-1,))
    left, right = _exclusive_products(flat)
    res = (left * right).astype(x.dtype, copy=False).reshape(xt.shape)
    return np.transpose(res, np.argsort(perm))


primitive("prod_others", 1, lambda av, *, axes: (av[0][0], av[0][1]), _prod_others_numpy,
          saves=(0,), family="reduction-gradient", vjp=_prod_others_vjp)


def _prod_others_dot_numpy(x, g, *, axes):
    """H_j = sum_{i != j} g_i prod_{k != i, j} x_k over each reduction group: the VJP of
    prod_others, exact with zeros (no division). Scans with exclusive products L, R:
    H_j = R_j sum_{i<j} g_i L_i prod_{i<m<j} x_m + L_j sum_{i>j} g_i R_i prod_{j<m<i} x_m."""
    if x.size == 0:
        return np.zeros_like(x)
    keep = [i for i in range(x.ndim) if i not in axes]
    perm = keep + list(axes)
    xt, gt = np.transpose(x, perm), np.transpose(np.broadcast_to(g, x.shape), perm)
    lead = xt.shape[:len(keep)]
    xf, gf = xt.reshape(lead + (-1,)), gt.reshape(lead + (-1,))
    n = xf.shape[-1]
    left, right = _exclusive_products(xf)
    xf, gf = xf.astype(left.dtype, copy=False), gf.astype(left.dtype, copy=False)
    a = np.zeros_like(xf)
    b = np.zeros_like(xf)
    for j in range(1, n):
        a[..., j] = a[..., j - 1] * xf[..., j - 1] + gf[..., j - 1] * left[..., j - 1]
    for j in range(n - 2, -1, -1):
        b[..., j] = b[..., j + 1] * xf[..., j + 1] + gf[..., j + 1] * right[..., j + 1]
    res = (a * right + left * b).astype(x.dtype, copy=False).reshape(xt.shape)
    return np.transpose(res, np.argsort(perm))


primitive("prod_others_dot", 2, lambda av, *, axes: (av[0][0], av[0][1]), _prod_others_dot_numpy,
          saves=(0, 1), family="reduction-gradient", vjp=_prod_others_dot_vjp)


def _arg_shape(av, *, axis, keepdim):
    return reduce_shape(av[0][0], (axis,), keepdim), dtypes.int64


SHORT_ARG_AXIS = 16        # argmax along at most this many elements: one pass per element
SHORT_ARG_MIN_SIZE = 4096  # ... of arrays at least this large (numpy's own is fine below)


def _short_argmax(x, axis: int):
    """``np.argmax(x, axis)`` along a short axis (max pooling's windows): the maximum by
    ``np.maximum`` (NaN wins, as numpy's and PyTorch's argmax), then the first position
    holding it (or the first NaN) -- a few whole-array passes, where numpy runs one
    small reduction per output element (10x slower for 2x2 windows)."""
    xs = np.moveaxis(x, axis, 0)
    top = xs[0]
    for j in range(1, xs.shape[0]):
        top = np.maximum(top, xs[j])
    idx = np.zeros(top.shape, np.int64)
    found = np.zeros(top.shape, bool)
    for j in range(xs.shape[0]):
        hit = xs[j] == top
        if x.dtype.kind in "fc":
            hit |= np.isnan(xs[j])
        idx += (hit & ~found) * np.int64(j)
        found |= hit
    return idx


def _argmax_numpy(x, *, axis, keepdim):
    n = x.shape[axis] if x.ndim else 1
    if 1 < n <= SHORT_ARG_AXIS and x.size >= SHORT_ARG_MIN_SIZE and x.dtype.kind in "fiu":
        idx = _short_argmax(x, axis)
        return np.expand_dims(idx, axis) if keepdim else idx
    if type(x) is np.ndarray:       # (the method: no Python-level wrapper)
        return x.argmax(axis=axis, keepdims=keepdim)
    return np.argmax(x, axis=axis, keepdims=keepdim)


def _argmin_numpy(x, *, axis, keepdim):
    if type(x) is np.ndarray:
        return x.argmin(axis=axis, keepdims=keepdim)
    return np.argmin(x, axis=axis, keepdims=keepdim)


primitive("argmax", 1, _arg_shape, _argmax_numpy, differentiable=False,
          family="arg-reduction")
primitive("argmin", 1, _arg_shape, _argmin_numpy, differentiable=False, family="arg-reduction")


def _cumsum_numpy(x, *, axis):
    """PyTorch's CPU scan: a running sum from +0 (so -0 never shows: ``+ 0``) in
    :func:`_accumulator` (float32 in double), rounded to x's dtype."""
    acc = _accumulator(x.dtype)
    total = np.cumsum(x, axis=axis, dtype=acc)
    if acc.kind == "f":
        total += 0.0
    return total.astype(x.dtype, copy=False)


primitive("cumsum", 1, lambda av, *, axis: (av[0][0], av[0][1]), _cumsum_numpy,
          grad_name="CumsumBackward0", family="scan", vjp=_cumsum_vjp)


# ---- cumprod: numpy's scan; its gradient exact where the input has zeros --------------------
def _cumprod_numpy(x, *, axis):
    return np.cumprod(x, axis=axis, dtype=_accumulator(x.dtype)).astype(x.dtype, copy=False)


def _cumprod_grad_values(x, g, out, axis):
    """d/dx_i of sum_k g_k out_k = sum_{k >= i} g_k prod_{j <= k, j != i} x_j, in O(n) per
    lane (numpy, for a backward that builds no graph): before a lane's first zero z it is
    the reversed cumulative sum of g * out divided by x; at z, out_{z-1} times
    sum_{k >= z} g_k prod_{z < j <= k} x_j; after z, 0 -- PyTorch's case analysis."""
    x, g, out = (np.moveaxis(np.asarray(a), axis, -1) for a in (x, g, out))
    zero = x == 0
    seen = np.cumsum(zero, axis=-1)
    before, first = seen == 0, zero & (seen == 1)
    with np.errstate(all="ignore"):
        rev = np.flip(np.cumsum(np.flip(np.where(before, g * out, 0), -1), -1), -1)
        grad = np.where(before, rev / np.where(before, x, 1), 0)
        after = np.cumprod(np.where(before | first, 1, x), axis=-1)
        at_zero = np.sum(np.where(before, 0, g * after), -1, keepdims=True) * \
            np.prod(np.where(before, x, 1), -1, keepdims=True)
    grad = np.where(first, at_zero, grad).astype(x.dtype)
    return np.moveaxis(grad, -1, axis)


def _cumprod_vjp(ctx, g):
    """With no graph of the backward being built, the O(n) values above; otherwise the
    same sum as a formula of primitives, differentiable again: for each i, the cumulative
    product of x with x_i set to 1, read at k >= i (O(n^2) per lane, as PyTorch's
    double-backward path)."""
    axis = ctx.kwargs["axis"]
    x = ctx.input(0)
    if type(g) is np.ndarray:
        return (_cumprod_grad_values(getattr(x, "_data", x), g,
                                     getattr(ctx.out, "_data", ctx.out), axis),)
    shape = tuple(x.shape)
    n, last = shape[axis], len(shape)
    perm = tuple(i for i in range(last) if i != axis) + (axis,)
    xl, gl = lax.permute(x, perm), lax.permute(g, perm)
    rows = xl.shape[:-1] + (n, n)                        # (.., i, k)
    i_idx, k_idx = lax.matrix_iotas(rows)
    wide = lax.expand(lax.reshape(xl, xl.shape[:-1] + (1, n)), rows)
    others = lax.apply("cumprod", lax.where(lax.eq(i_idx, k_idx), 1, wide), axis=last)
    gk = lax.expand(lax.reshape(gl, gl.shape[:-1] + (1, n)), rows)
    terms = lax.where(lax.apply("ge", k_idx, i_idx), lax.mul(gk, others), 0)
    grad = lax.sum(terms, (last,))
    return (lax.permute(grad, tuple(np.argsort(perm).tolist())),)


primitive("cumprod", 1, lambda av, *, axis: (av[0][0], av[0][1]), _cumprod_numpy, saves=(0,),
          saves_out=True, grad_name="CumprodBackward0", family="other", vjp=_cumprod_vjp)


# ---- logcumsumexp: ATen's CPU scan, its backward a formula of the scan itself --------------
def _logcumsumexp_numpy(x, *, axis):
    """ATen's running log_add_exp from -inf, accumulated in :func:`_accumulator` (float32
    in double): ``log1p(exp(min - max)) + max``, the first argument where both are the
    same infinity; NaN propagates."""
    acc = _accumulator(x.dtype)
    rows = np.moveaxis(np.asarray(x), axis, 0).astype(acc)
    out = np.empty_like(rows)
    run = np.full(rows.shape[1:], -np.inf, acc)
    with np.errstate(all="ignore"):
        for i, xi in enumerate(rows):
            nan = np.isnan(run)
            lo = np.where(nan, run, np.minimum(xi, run))
            hi = np.where(nan, run, np.maximum(xi, run))
            lo = np.where(np.isnan(xi) & ~nan, xi, lo)         # std::min(nan, y) is nan
            hi = np.where(np.isnan(xi) & ~nan, xi, hi)
            general = (lo != hi) | np.isfinite(lo)
            run = np.where(general, np.log1p(np.exp(lo - hi)) + hi, xi)
            out[i] = run
    return np.moveaxis(out, 0, axis).astype(x.dtype, copy=False)


def _logcumsumexp_vjp(ctx, g):
    """d/dx_j = sum_{i >= j} g_i exp(x_j - out_i) (each exp at most 1: out_i >= x_j).
    With no graph of the backward being built, PyTorch's logcumsumexp_backward on the
    values (log-space reverse scans of g's positive and negative parts, O(n)); otherwise
    the sum as a formula linear in g (forward mode transposes it), O(n^2) per lane."""
    axis = ctx.kwargs["axis"]
    x, out = ctx.input(0), ctx.out
    if type(g) is np.ndarray:
        return (_logcumsumexp_grad_values(getattr(x, "_data", x), g,
                                          getattr(out, "_data", out), axis),)
    n, last = x.shape[axis], len(x.shape)
    perm = tuple(i for i in range(last) if i != axis) + (axis,)
    xl, ol, gl = (lax.permute(v, perm) for v in (x, out, g))
    rows = tuple(xl.shape[:-1]) + (n, n)                  # (.., i, j)
    i_idx, j_idx = lax.matrix_iotas(rows)
    below = lax.apply("le", j_idx, i_idx)
    diff = lax.sub(lax.expand(lax.reshape(xl, tuple(xl.shape[:-1]) + (1, n)), rows),
                   lax.expand(lax.reshape(ol, tuple(ol.shape) + (1,)), rows))
    weights = lax.where(below, lax.unary("exp", lax.where(below, diff, 0.0)), 0.0)
    terms = lax.mul(weights, lax.expand(lax.reshape(gl, tuple(gl.shape) + (1,)), rows))
    grad = lax.sum(terms, (last - 1,))
    return (lax.permute(grad, tuple(np.argsort(perm).tolist())),)


def _logcumsumexp_grad_values(x, g, out, axis):
    """PyTorch's logcumsumexp_backward on arrays."""
    x, g, out = (np.asarray(v) for v in (x, g, out))
    lowest = np.finfo(x.dtype).min

    def reverse_scan(v):
        return np.flip(_logcumsumexp_numpy(np.flip(v, axis), axis=axis), axis)
    with np.errstate(all="ignore"):
        log_abs = np.log(np.abs(g))
        parts = [np.exp(reverse_scan(np.where(test, log_abs, lowest).astype(x.dtype) - out) + x)
                 for test in (g > 0, g < 0)]
    return (parts[0] - parts[1]).astype(x.dtype)


def _logcumsumexp_jvp(args, out, tangents, *, axis):
    """PyTorch's logcumsumexp_jvp: ``cumsum(e * t) / cumsum(e)`` with ``e = exp(x -
    amax(x))`` along the axis (linear in the tangent, unlike the log-space VJP)."""
    (x,), (t,) = args, tangents
    if x.numel():
        x = lax.sub(x, lax.apply("amax", x, axes=(axis,), keepdim=True))
    e = lax.unary("exp", x)
    return lax.div(lax.apply("cumsum", lax.mul(e, t), axis=axis),
                   lax.apply("cumsum", e, axis=axis))


primitive("logcumsumexp", 1, lambda av, *, axis: (av[0][0], av[0][1]), _logcumsumexp_numpy,
          saves=(0,), saves_out=True, grad_name="LogcumsumexpBackward0", family="other",
          vjp=_logcumsumexp_vjp, jvp_rule=_logcumsumexp_jvp)
