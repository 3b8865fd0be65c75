"""Eager kernels of named composites: one numpy pass forward and a closed-form backward
on arrays, so that ``softmax`` / ``log_softmax`` on eager tensors cost a few ufunc
calls instead of a chain of recorded primitives.

A :class:`Kernel` is what :func:`symgrad.functions.composite.named` runs when every input
is an eager tensor, nothing is being traced, and no saved-tensor hooks or anomaly mode
are in force (those take the generic path, which records the primitives). The forward
uses the same numpy operations, in the same order, as the primitives the composite is
written with, so its values are the same bits; the backward is PyTorch's formula for the
node (``SoftmaxBackward0``: ``y * (g - sum(g * y))``). A backward that builds a graph
(``create_graph=True``) re-runs the composite's primitives instead, so that second
derivatives see the true dependencies.
"""
from __future__ import annotations

import math

import numpy as np

from ..graph.primitives import NUMPY_RULES

__all__ = ["Kernel", "softmax_kernel", "log_softmax_kernel", "nll_loss_kernel", "gelu_kernel",
           "gather_kernel", "layer_norm_kernel", "stack_kernel", "batch_norm_kernel",
           "addmm_kernel", "mse_loss_kernel"]


class Kernel:
    """`forward(*arrays) -> array` and `backward(g, inputs, out) -> tuple of arrays (or
    None per input)`, where `inputs` are the saved inputs' arrays (None where not saved)
    and `out` the saved output's (None when not saved). ``takes_needs``: backward takes
    a fourth argument, which inputs need a gradient (it may skip the others' work)."""

    __slots__ = ("forward", "backward", "takes_needs")

    def __init__(self, forward, backward, takes_needs: bool = False):
        self.forward, self.backward, self.takes_needs = forward, backward, takes_needs


def _row_max(x, axes):
    """The amax primitive's numpy rule (keepdim), its ufunc reduction called directly
    when x is not empty."""
    if x.size:
        return np.maximum.reduce(x, axis=axes, keepdims=True)
    return NUMPY_RULES["amax"](x, axes=axes, keepdim=True)


def _array(a):
    """`a` as an ndarray (a 0-d input's ufunc results are numpy scalars), to compute into."""
    return a if type(a) is np.ndarray else np.asarray(a)


def _softmax_forward(axes):
    def forward(x):
        e = _array(np.subtract(x, _row_max(x, axes)))
        np.exp(e, out=e)            # (in place: one fresh array, not three)
        return np.true_divide(e, np.add.reduce(e, axis=axes, keepdims=True), out=e)
    return forward


def _softmax_backward(axes):
    def backward(g, inputs, y):
        s = np.add.reduce(np.multiply(g, y), axis=axes, keepdims=True)
        gx = _array(np.subtract(g, s))
        return (np.multiply(y, gx, out=gx),)
    return backward


def _log_softmax_forward(axes):
    def forward(x):
        z = _array(np.subtract(x, _row_max(x, axes)))
        lse = _array(np.add.reduce(np.exp(z), axis=axes, keepdims=True))
        return np.subtract(z, np.log(lse, out=lse), out=z)
    return forward


def _log_softmax_backward(axes):
    def backward(g, inputs, y):
        s = np.add.reduce(g, axis=axes, keepdims=True)
        gx = _array(np.exp(y))
        np.multiply(gx, s, out=gx)
        return (np.subtract(g, gx, out=gx),)
    return backward


_CACHE: dict = {}


def _cached(key, make):
    k = _CACHE.get(key)
    if k is None:
        k = _CACHE[key] = make()
    return k


def softmax_kernel(axes: tuple) -> Kernel:
    """softmax over `axes` (the input's one class axis, or () for a 0-d input)."""
    return _cached(("softmax", axes),
                   lambda: Kernel(_softmax_forward(axes), _softmax_backward(axes)))


def log_softmax_kernel(axes: tuple) -> Kernel:
    """log_softmax over `axes`."""
    return _cached(("log_softmax", axes),
                   lambda: Kernel(_log_softmax_forward(axes), _log_softmax_backward(axes)))


def nll_loss_kernel(idx: np.ndarray, keep: np.ndarray | None, cdim: int, reduction: str,
                    shape: tuple) -> Kernel:
    """nll_loss without class weights of an input with the class axis `cdim`: `idx` the
    targets (ignored ones set to 0) with a length-1 class axis, `keep` where a target
    is not ignored (None: none is), `shape` the targets' shape. An ignored target's
    loss and gradient are 0 by a select (not a product with 0: its input or cotangent
    may be inf / NaN). Backward: ``-g / (number kept)`` (mean; 0 when none is kept) at
    kept targets scattered to their classes, as PyTorch's nll_loss_backward."""
    return _NllLoss(idx, keep, cdim, reduction, shape)


_ROWS: dict = {}


def _rows(n: int) -> np.ndarray:
    """``arange(n)`` (read-only, shared: a fancy index's row numbers)."""
    r = _ROWS.get(n)
    if r is None:
        r = np.arange(n)
        r.flags.writeable = False
        if len(_ROWS) < 64:
            _ROWS[n] = r
    return r


class _NllLoss:
    """The nll_loss kernel (see :func:`nll_loss_kernel`): an object, not closures, as
    one is made per call."""

    __slots__ = ("idx", "keep", "cdim", "reduction", "shape", "at", "kept", "x_shape")
    takes_needs = False

    def __init__(self, idx, keep, cdim, reduction, shape):
        self.idx, self.keep, self.cdim, self.reduction, self.shape = \
            idx, keep, cdim, reduction, shape
        # (N, C) input: the picked elements by a plain fancy index (take_along_axis builds
        # the same index arrays in Python)
        self.at = (_rows(shape[0]), idx.reshape(shape)) if len(shape) == 1 and cdim == 1 \
            else None
        self.kept = math.prod(shape) if keep is None else int(np.count_nonzero(keep))
        self.x_shape = None

    def forward(self, x):
        self.x_shape = x.shape
        at, keep, reduction = self.at, self.keep, self.reduction
        picked = x[at] if at is not None else \
            np.take_along_axis(x, self.idx, axis=self.cdim).reshape(self.shape)
        loss = np.negative(picked) if keep is None else \
            np.where(keep, np.negative(picked), x.dtype.type(0))
        if reduction == "none":
            return loss
        total = np.add.reduce(loss, axis=tuple(range(len(self.shape))))
        if reduction == "sum":
            return total
        if self.kept == 0:
            return np.asarray(np.nan, dtype=x.dtype)
        return np.true_divide(total, x.dtype.type(self.kept))

    def backward(self, g, inputs, out):
        dt = g.dtype
        keep, kept, shape = self.keep, self.kept, self.shape
        if self.reduction == "mean":
            g = np.zeros((), dt) if kept == 0 else np.true_divide(g, dt.type(kept))
        gx = np.zeros(self.x_shape, dt)
        vals = np.negative(g) if keep is None else np.where(keep, np.negative(g), dt.type(0))
        if self.at is not None:
            gx[self.at] = vals          # (a 0-d value is broadcast by the assignment)
        else:
            if vals.shape != shape:
                vals = np.broadcast_to(vals, shape)
            np.put_along_axis(gx, self.idx, vals.reshape(self.idx.shape), axis=self.cdim)
        return (gx,)


_SQRT1_2 = float(1 / np.sqrt(2.0))
_BETA = float(2 / np.sqrt(np.pi) * (1 / np.sqrt(2.0)) * 0.5)    # PyTorch's kBeta
# float32 arrays from this size take the vectorised erf below (scipy's is ~12 ns per
# element: 100x PyTorch's gelu on 256 x 256); smaller ones keep scipy's, as PyTorch's
# scalar loop takes its tail (a 4 x 4 gelu is all tail)
GELU_VECTOR_MIN_SIZE = 1024
_F32 = np.float32
_AS = tuple(_F32(c) for c in (0.3275911, 1.061405429, -1.453152027, 1.421413741,
                              -0.284496736, 0.254829592))


def _one_plus_erf_f32(z: np.ndarray) -> np.ndarray:
    """``1 + erf(z)`` of a float32 array in float32 numpy passes (scipy's erf costs ~12 ns
    per element): Abramowitz & Stegun 7.1.26, ``erfc(|z|) = q = t p(t) exp(-z^2)`` with
    ``t = 1 / (1 + P |z|)`` (absolute error below 1.5e-7), then ``q`` for negative z and
    ``2 - q`` otherwise -- q itself where erf is near -1, never ``1 + (q - 1)``, whose
    cancellation put 5e-7 of float32 rounding into gelu's small negative values. NaN at
    NaN; 2 (and 0) past |z| ~ 10. gelu's, not the erf primitive (0.5 + 1e-9 at 0)."""
    p, *coeffs = _AS
    t = np.abs(z)
    np.multiply(t, p, out=t)
    np.add(t, _F32(1), out=t)
    np.reciprocal(t, out=t)
    q = np.multiply(t, coeffs[0])
    for c in coeffs[1:]:
        np.add(q, c, out=q)
        np.multiply(q, t, out=q)
    e = np.multiply(z, z, out=t)
    np.negative(e, out=e)
    np.exp(e, out=e)
    np.multiply(q, e, out=q)                    # erfc(|z|)
    np.multiply(q, _F32(-2), out=e)
    np.add(e, _F32(2), out=e)                   # 2 - 2q: added where z >= 0
    np.multiply(e, np.greater_equal(z, 0), out=e)
    return np.add(q, e, out=q)


def _one_plus_erf(z: np.ndarray) -> np.ndarray:
    """``1 + erf(z)`` (gelu's): vectorised for large float32 arrays, else the erf
    primitive's (scipy's) plus one."""
    if type(z) is np.ndarray and z.dtype == _F32 and z.size >= GELU_VECTOR_MIN_SIZE:
        return _one_plus_erf_f32(z)
    e = NUMPY_RULES["erf"](z)
    if type(e) is not np.ndarray or e.dtype != z.dtype:
        e = np.asarray(e, dtype=z.dtype)      # (as the primitive's result)
    return np.add(e, 1.0)


def gelu_kernel() -> Kernel:
    """gelu(approximate="none"): ``x / 2 (1 + erf(x / sqrt 2))``; PyTorch's GeluBackward0
    formula ``g (cdf + x pdf)``, with the forward's ``1 + erf`` kept for it (erf is the
    costly part on larger tensors). Large float32 inputs use a vectorised erf
    (:func:`_one_plus_erf_f32`)."""
    kept = [None]

    def forward(x):
        a = _one_plus_erf(np.multiply(x, _SQRT1_2))
        kept[0] = a
        return np.multiply(np.multiply(x, 0.5), a)

    def backward(g, inputs, out):
        x = inputs[0]
        cdf = np.multiply(kept[0], 0.5)
        pdf = np.multiply(np.exp(np.multiply(np.multiply(x, x), -0.5)), _BETA)
        return (np.multiply(g, np.add(cdf, np.multiply(x, pdf))),)
    return Kernel(forward, backward)


def gather_kernel(idx: np.ndarray, axis: int, shape: tuple) -> Kernel:
    """The elements of the input at `idx` along `axis` (an index array with the input's
    rank), reshaped to `shape`: ``max(dim)`` / ``min(dim)``'s values. Backward: the
    cotangent scattered back to those positions, zeros elsewhere."""
    in_shape = [None]
    at = None
    if idx.ndim == 2:       # (matrices: the fancy index take_along_axis builds, made here)
        n, m = idx.shape
        at = (np.arange(n)[:, None], idx) if axis == 1 else (idx, np.arange(m)[None, :])

    def forward(x):
        in_shape[0] = x.shape
        picked = x[at] if at is not None else np.take_along_axis(x, idx, axis=axis)
        return picked.reshape(shape)

    def backward(g, inputs, out):
        gx = np.zeros(in_shape[0], g.dtype)
        if at is not None:
            gx[at] = g.reshape(idx.shape)
        else:
            np.put_along_axis(gx, idx, g.reshape(idx.shape), axis=axis)
        return (gx,)
    return Kernel(forward, backward)


def layer_norm_kernel(axes: tuple, eps: float, affine: tuple[bool, bool]) -> Kernel:
    """layer_norm over `axes` (the last ones), ``(x - mean) * rsqrt(var + eps)`` then
    ``* weight`` / ``+ bias`` where `affine` says they are given -- the primitives' numpy
    rules in their order (the same bits). Backward: PyTorch's native_layer_norm_backward,
    ``rstd (gy - mean(gy) - xhat mean(gy xhat))`` with ``gy = g * weight``; weight gets
    ``sum(g xhat)``, bias ``sum(g)`` over the leading axes; xhat and rstd kept from the
    forward."""
    mean, rsqrt = NUMPY_RULES["mean"], NUMPY_RULES["rsqrt"]
    kept = [None, None, None]

    # (the caller gives weight and bias of x's dtype and trailing shape, and rstd keeps
    # x's rank: every product below has x's shape and dtype, so it may be computed into
    # a dead temporary -- the same ufuncs in the same order, the same bits)
    def forward(x, *wb):
        c = _array(np.subtract(x, mean(x, axes=axes, keepdim=True)))
        sq = _array(np.multiply(c, c))
        rstd = rsqrt(np.add(mean(sq, axes=axes, keepdim=True), eps))
        if type(rstd) is not np.ndarray or rstd.dtype != x.dtype:
            rstd = np.asarray(rstd, dtype=x.dtype)
        y = xhat = np.multiply(c, rstd, out=c)
        kept[:] = xhat, rstd, (wb[0] if affine[0] else None)
        it = iter(wb)
        if affine[0]:
            y = np.multiply(y, next(it), out=sq)
        if affine[1]:
            y = np.add(y, next(it), out=sq)
        return y

    def backward(g, inputs, out):
        xhat, rstd, w = kept
        lead = tuple(range(xhat.ndim - len(axes)))
        gy = g if w is None else np.multiply(g, w)
        m1 = _np_mean(gy, axes)
        t = _array(np.multiply(gy, xhat))
        m2 = _np_mean(t, axes)
        gx = _array(np.subtract(gy, m1))
        np.subtract(gx, np.multiply(xhat, m2, out=t), out=gx)
        np.multiply(rstd, gx, out=gx)
        grads = [gx]
        if affine[0]:
            grads.append(np.add.reduce(np.multiply(g, xhat), axis=lead))
        if affine[1]:
            grads.append(np.add.reduce(g, axis=lead))
        return tuple(grads)
    return Kernel(forward, backward)


def _np_mean(a: np.ndarray, axes: tuple) -> np.ndarray:
    """``np.mean(a, axis=axes, keepdims=True)``, the same ufunc calls without its
    Python-level steps: the sum in a's dtype, divided (in the result type of a's dtype
    and an intp count, stored back in a's dtype) by the number of elements."""
    n = 1
    for ax in axes:
        n *= a.shape[ax]
    s = np.add.reduce(a, axis=axes, keepdims=True)
    return np.true_divide(s, np.intp(n), out=s, casting="unsafe")


def stack_kernel(axis: int, n: int) -> Kernel:
    """`n` arrays of one shape stacked along a new `axis` (a copy, the same bits as the
    reshapes and ``cat``: what ``np.stack`` does -- ``np.concatenate`` of the arrays
    with a new axis --, without its Python-level checks); backward: the cotangent's
    slices along `axis` (copies: each is a fresh gradient)."""
    lead = (slice(None),) * axis
    new = lead + (None,)

    def forward(*arrays):
        return np.concatenate([a[new] for a in arrays], axis=axis)

    def backward(g, inputs, out):
        return tuple(np.array(g[lead + (i,)]) for i in range(n))
    return _cached(("stack", axis, n), lambda: Kernel(forward, backward))


def batch_norm_kernel(axes: tuple, eps: float, affine: tuple[bool, bool], running=None):
    """batch_norm over every axis in `axes` (all but the channels): the batch's mean and
    biased variance (training, `running` None) or the running statistics (`running`:
    the two Tensors, read when the kernel runs), ``(x - mean) * rsqrt(var + eps)`` then
    ``* weight`` / ``+ bias`` per channel where `affine` says they are given -- the
    primitives' numpy rules in their order (the same bits). Backward: PyTorch's
    batch_norm_backward, in training ``w rstd (g - mean(g) - xhat mean(g xhat))``, in
    evaluation ``w rstd g``; weight gets ``sum(g xhat)``, bias ``sum(g)``.

    Returns (the kernel, a list holding the batch's (mean, biased variance) once the
    training forward ran: what the running statistics are updated with)."""
    mean, rsqrt, total = NUMPY_RULES["mean"], NUMPY_RULES["rsqrt"], NUMPY_RULES["sum"]
    kept = [None, None, None]
    stats: list = []

    def per_channel(a, ndim):
        return a.reshape(tuple(1 if i in axes else -1 for i in range(ndim)))

    def forward(x, *wb):
        if running is None:
            m = mean(x, axes=axes, keepdim=True)
            c = np.subtract(x, m)
            v = mean(np.multiply(c, c), axes=axes, keepdim=True)
            stats[:] = m, v
        else:
            m, v = (per_channel(t._data, x.ndim) for t in running)
            c = np.subtract(x, m)
        rstd = rsqrt(np.add(v, eps))
        if type(rstd) is not np.ndarray or rstd.dtype != x.dtype:
            rstd = np.asarray(rstd, dtype=x.dtype)
        y = xhat = np.multiply(c, rstd)
        it = iter(wb)
        w = per_channel(next(it), x.ndim) if affine[0] else None
        kept[:] = xhat, rstd, w
        if w is not None:
            y = np.multiply(y, w)
        if affine[1]:
            y = np.add(y, per_channel(next(it), x.ndim))
        return y

    def backward(g, inputs, out):
        xhat, rstd, w = kept
        if running is not None:       # evaluation: the running statistics as they are now
            # (PyTorch's backward reads the buffers a later training forward updated)
            m, v = (per_channel(t._data, xhat.ndim) for t in running)
            rstd = rsqrt(np.add(v, eps))
            if type(rstd) is not np.ndarray or rstd.dtype != xhat.dtype:
                rstd = np.asarray(rstd, dtype=xhat.dtype)
            xhat = np.multiply(np.subtract(inputs[0], m), rstd)
        scale = rstd if w is None else np.multiply(w, rstd)
        gxhat = total(np.multiply(g, xhat), axes=axes, keepdim=True)
        if running is None:
            n = xhat.size // xhat.shape[1]
            m1 = np.true_divide(total(g, axes=axes, keepdim=True), n)
            inner = np.subtract(np.subtract(g, m1), np.multiply(xhat, np.true_divide(gxhat, n)))
            gx = np.multiply(inner, scale)
        else:
            gx = np.multiply(g, scale)
        grads = [gx]
        if affine[0]:
            grads.append(gxhat.reshape(-1))
        if affine[1]:
            grads.append(total(g, axes=axes, keepdim=False))
        return tuple(grads)
    return Kernel(forward, backward), stats


def _sum_to(g: np.ndarray, shape: tuple) -> np.ndarray:
    """`g` summed down to `shape` (the adjoint of broadcasting), as lax.sum_to."""
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(shape)
                                      if s == 1 and g.shape[lead + i] != 1)
    return NUMPY_RULES["sum"](g, axes=axes, keepdim=False).reshape(shape)


def addmm_kernel(bias_shape: tuple) -> Kernel:
    """``bias + a @ w`` (linear's AddmmBackward0; `w` the weight's transpose): the matmul
    and add primitives' numpy rules. Backward: ``g`` summed to the bias's shape,
    ``g @ wᵀ``, and ``aᵀ @ g`` -- computed as ``(gᵀ a)ᵀ`` when `w` is a transposed
    C-ordered matrix (the weight's gradient then comes out C-ordered), as the matmul
    primitive's VJP does."""
    matmul, add = NUMPY_RULES["matmul"], NUMPY_RULES["add"]

    def forward(b, a, w):
        return add(matmul(a, w), b)

    def backward(g, inputs, out):
        _, a, w = inputs or (None, None, None)   # (each saved when the other needs a gradient)
        ga = None if w is None else matmul(g, w.T)
        if a is None:
            gw = None
        elif w is not None and w.flags.f_contiguous and not w.flags.c_contiguous:
            gw = matmul(g.T, a).T
        else:
            gw = matmul(a.T, g)
        return (_sum_to(g, bias_shape), ga, gw)
    return _cached(("addmm", bias_shape), lambda: Kernel(forward, backward))


def mse_loss_kernel(reduction: str) -> Kernel:
    """mse_loss of two arrays of one shape: ``(x - t)²`` reduced as the primitives reduce
    it (mean / sum over every axis, or none). Backward: PyTorch's mse_loss_backward,
    ``g (2 / n) (x - t)`` (mean; ``2`` for sum and none) for x and its negation for t."""
    mean, total = NUMPY_RULES["mean"], NUMPY_RULES["sum"]

    def forward(x, t):
        d = _array(np.subtract(x, t))
        sq = np.multiply(d, d, out=d)
        axes = tuple(range(sq.ndim))
        if reduction == "mean":
            return mean(sq, axes=axes, keepdim=False)
        return total(sq, axes=axes, keepdim=False) if reduction == "sum" else sq

    def backward(g, inputs, out):
        x, t = inputs
        norm = 2.0 / x.size if reduction == "mean" else 2.0
        gx = _array(np.subtract(x, t))      # (in place after: g is 0-d or of x's shape)
        np.multiply(gx, x.dtype.type(norm), out=gx)
        np.multiply(gx, g, out=gx)
        return (gx, np.negative(gx))
    return _cached(("mse_loss", reduction), lambda: Kernel(forward, backward))
