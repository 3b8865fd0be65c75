"""``symgrad.nn.functional``: activations, softmax / log_softmax, linear, and the losses
(BCE with logits — stable at any logit —, BCE, MSE, L1, cross-entropy, NLL) with
PyTorch's reductions, checks and grad_fn names."""
from __future__ import annotations

import warnings

from .. import dtypes
from ..dispatch import bind
from ..functions import elementwise as E
from ..functions import reduction as R
from ..functions.common import Tensor, to_tensor, wrap_dim
from ..functions.composite import named
from ..ops import lax
from ..ops.registry import PRIMITIVES as P

__all__ = ["relu", "sigmoid", "tanh", "softplus", "softmax", "log_softmax", "linear",
           "binary_cross_entropy_with_logits", "binary_cross_entropy", "mse_loss", "l1_loss",
           "cross_entropy", "nll_loss", "leaky_relu", "silu"]


def relu(input, inplace=False):
    if inplace:
        return input.relu_()
    return E.unary("relu", input)


def sigmoid(input):
    return E.unary("sigmoid", input)


def tanh(input):
    return E.unary("tanh", input)


def silu(input):
    return named("SiluBackward0", lambda v: lax.mul(v, lax.unary("sigmoid", v)), to_tensor(input))


def leaky_relu(input, negative_slope=0.01, inplace=False):
    x = to_tensor(input)
    return named("LeakyReluBackward0",
                 lambda v: lax.where(bind(P["gt"], v, 0.0), v, lax.mul(v, negative_slope)), x)


def softplus(input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta*x)) / beta, linear above `threshold` (as PyTorch)."""
    x = to_tensor(input)
    if beta == 1 and threshold == 20:
        return E.unary("softplus", x)

    def f(v):
        bx = lax.mul(v, float(beta))
        soft = lax.div(lax.unary("log1p", lax.unary("exp", lax.where(
            bind(P["gt"], bx, float(threshold)), 0.0, bx))), float(beta))
        return lax.where(bind(P["gt"], bx, float(threshold)), v, soft)
    return named("SoftplusBackward0", f, x)


def _softmax_dim(ndim, name):
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call "
                  "to include dim=X as an argument.", UserWarning, stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def _prep_softmax(input, dim, dtype, name):
    x = to_tensor(input)
    if dtype is not None:
        x = lax.cast(x, dtypes.as_dtype(dtype))
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"\"{name}_lastdim_kernel_impl\" not implemented for "
                           f"'{x.dtype.c_name}'")
    if dim is None:
        dim = _softmax_dim(x.dim(), name)
    return x, (wrap_dim(dim, x.dim()),) if x.dim() else ()


def _shifted(v, axes):
    m = bind(P["amax"], v, axes=axes, keepdim=True)
    return lax.sub(v, lax.expand(lax.finite_or_zero(m), v.shape))


def _log_softmax_prims(v, axes):
    z = _shifted(v, axes)
    lse = lax.unary("log", lax.sum(lax.unary("exp", z), axes, keepdim=True))
    return lax.sub(z, lax.expand(lse, v.shape))


def _softmax_prims(v, axes):
    e = lax.unary("exp", _shifted(v, axes))
    return lax.div(e, lax.expand(lax.sum(e, axes, keepdim=True), v.shape))


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    x, axes = _prep_softmax(input, dim, dtype, "softmax")
    return named("SoftmaxBackward0", lambda v: _softmax_prims(v, axes), x)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    x, axes = _prep_softmax(input, dim, dtype, "log_softmax")
    return named("LogSoftmaxBackward0", lambda v: _log_softmax_prims(v, axes), x)


def linear(input, weight, bias=None):
    """input @ weightᵀ + bias."""
    from ..functions import linalg, shape
    x, w = to_tensor(input), to_tensor(weight)
    if bias is not None and x.dim() == 2:
        return named("AddmmBackward0",
                     lambda a, ww, b: lax.add(bind(P["matmul"], a, lax.transpose_last(ww)), b),
                     x, w, to_tensor(bias))
    out = linalg.matmul(x, shape.t(w))
    return out if bias is None else E.binary("add", out, bias)


def _reduce(loss, reduction):
    if reduction == "mean":
        return lax_mean(loss)
    if reduction == "sum":
        return lax.sum(loss, tuple(range(loss.dim())))
    if reduction == "none":
        return loss
    raise ValueError(f"{reduction} is not a valid value for reduction")


def lax_mean(v):
    return bind(P["mean"], v, axes=tuple(range(v.dim())), keepdim=False)


def _check_reduction(reduction):
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{reduction} is not a valid value for reduction")


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None,
                                     reduce=None, reduction="mean", pos_weight=None):
    """Sigmoid + BCE in one stable formula: (1 - t) x + softplus(-x) (finite for any x)."""
    x, t = to_tensor(input), to_tensor(target)
    _check_reduction(reduction)
    if tuple(t.shape) != tuple(x.shape):
        raise ValueError(f"Target size ({t.shape}) must be the same as input size ({x.shape})")
    t = lax.cast(t, x.dtype)
    extras = [to_tensor(w) for w in (weight, pos_weight) if w is not None]

    def f(v, tt, *ws):
        it = iter(ws)
        w = next(it) if weight is not None else None
        pw = next(it) if pos_weight is not None else None
        sp = lax.unary("softplus", lax.neg(v))                 # -log(sigmoid(x))
        if pw is None:
            loss = lax.add(lax.mul(lax.sub(1.0, tt), v), sp)
        else:
            lw = lax.add(lax.mul(lax.sub(pw, 1.0), tt), 1.0)
            loss = lax.add(lax.mul(lax.sub(1.0, tt), v), lax.mul(lw, sp))
        if w is not None:
            loss = lax.mul(loss, w)
        return _reduce(loss, reduction)
    return named("BinaryCrossEntropyWithLogitsBackward0", f, x, t, *extras)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction="mean"):
    """-(t log x + (1 - t) log(1 - x)), logs clamped at -100 as in PyTorch."""
    x, t = to_tensor(input), to_tensor(target)
    _check_reduction(reduction)
    if tuple(t.shape) != tuple(x.shape):
        raise ValueError(f"Using a target size ({t.shape}) that is different to the input size "
                         f"({x.shape}) is deprecated. Please ensure they have the same size.")
    if x._data is not None and x.numel() and (x._data.min() < 0 or x._data.max() > 1):
        raise RuntimeError("all elements of input should be between 0 and 1")
    t = lax.cast(t, x.dtype)

    def f(v, tt, *ws):
        lv = bind(P["maximum"], lax.unary("log", v), lax.full((), -100.0, v.dtype))
        l1v = bind(P["maximum"], lax.unary("log", lax.sub(1.0, v)), lax.full((), -100.0, v.dtype))
        loss = lax.neg(lax.add(lax.mul(tt, lv), lax.mul(lax.sub(1.0, tt), l1v)))
        if ws:
            loss = lax.mul(loss, ws[0])
        return _reduce(loss, reduction)
    extras = [to_tensor(weight)] if weight is not None else []
    return named("BinaryCrossEntropyBackward0", f, x, t, *extras)


def _broadcast_warning(x, t, name):
    if tuple(x.shape) != tuple(t.shape):
        warnings.warn(f"Using a target size ({t.shape}) that is different to the input size "
                      f"({x.shape}). This will likely lead to incorrect results due to "
                      "broadcasting. Please ensure they have the same size.", UserWarning,
                      stacklevel=3)


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    x, t = to_tensor(input), to_tensor(target)
    _check_reduction(reduction)
    _broadcast_warning(x, t, "mse_loss")
    from ..functions.elementwise import promote
    dt = promote([x, t])
    x, t = lax.cast(x, dt), lax.cast(t, dt)

    def f(v, tt):
        d = lax.sub(v, tt)
        return _reduce(lax.mul(d, d), reduction)
    return named("MseLossBackward0", f, x, t)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    x, t = to_tensor(input), to_tensor(target)
    _check_reduction(reduction)
    _broadcast_warning(x, t, "l1_loss")
    d = E.unary("abs", E.binary("sub", x, t))
    if reduction == "mean":
        return R.mean(d)
    return R.sum(d) if reduction == "sum" else d


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    """Negative log-likelihood of class indices; input (N, C) or (C,), or (N, C, d...)."""
    x, t = to_tensor(input), to_tensor(target)
    _check_reduction(reduction)
    if t.dtype.category != "int":
        raise RuntimeError(f"expected scalar type Long but found {t.dtype.c_name}")
    if x.dim() < 1:
        raise ValueError("Expected 1 or more dimensions (got 0)")
    batched = x.dim() >= 2
    cdim = 1 if batched else 0
    n_classes = x.shape[cdim]
    expected = tuple(x.shape[:cdim]) + tuple(x.shape[cdim + 1:])
    if tuple(t.shape) != expected:
        raise ValueError(f"Expected input batch_size ({x.shape[0] if batched else 1}) to match "
                         f"target batch_size ({t.shape[0] if t.dim() else 1}).") \
            if t.dim() and batched and t.shape[0] != x.shape[0] else \
            RuntimeError(f"size mismatch (got input: {list(x.shape)}, target: {list(t.shape)})")
    if t._data is not None:
        valid = t._data[t._data != ignore_index]
        if valid.size and (valid.min() < 0 or valid.max() >= n_classes):
            bad = valid.max() if valid.max() >= n_classes else valid.min()
            raise IndexError(f"Target {bad} is out of bounds.")
    t = lax.cast(t, dtypes.int64)
    keep = bind(P["ne"], t, ignore_index)
    safe_t = lax.where(keep, t, 0)
    idx = lax.reshape(safe_t, tuple(safe_t.shape[:cdim]) + (1,) + tuple(safe_t.shape[cdim:]))
    wt = to_tensor(weight) if weight is not None else None

    def f(v, *ws):
        picked = lax.reshape(bind(P["gather"], v, idx, axis=cdim), tuple(safe_t.shape))
        w_el = lax.cast(keep, v.dtype)
        if ws:
            w_el = lax.mul(w_el, bind(P["take"], ws[0], safe_t, axis=0))
        loss = lax.neg(lax.mul(picked, w_el))
        if reduction == "none":
            return loss
        total = lax.sum(loss, tuple(range(loss.dim())))
        if reduction == "sum":
            return total
        return lax.div(total, lax.sum(w_el, tuple(range(w_el.dim()))))
    return named("NllLossBackward0", f, x, *([wt] if wt is not None else []))


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100,
                  reduce=None, reduction="mean", label_smoothing=0.0):
    """log_softmax over the class dim, then NLL (class indices) or the soft-target sum."""
    x, t = to_tensor(input), to_tensor(target)
    cdim = 1 if x.dim() >= 2 else 0
    logp = log_softmax(x, dim=cdim)
    if t.dtype.is_floating_point:
        if tuple(t.shape) != tuple(x.shape):
            raise RuntimeError(f"Expected target size {list(x.shape)}, got {list(t.shape)}")
        n = x.shape[cdim]
        if label_smoothing:
            t = E.binary("add", E.binary("mul", t, 1 - label_smoothing), label_smoothing / n)
        prod = E.binary("mul", logp, t)
        if weight is not None:
            shape = [1] * x.dim()
            shape[cdim] = n
            prod = E.binary("mul", prod, to_tensor(weight).reshape(shape))
        loss = E.unary("neg", R.sum(prod, dim=cdim))
        if reduction == "mean":
            return E.binary("div", R.sum(loss), x.numel() // n if x.dim() else 1)
        return R.sum(loss) if reduction == "sum" else loss
    nll = nll_loss(logp, t, weight=weight, ignore_index=ignore_index, reduction=reduction)
    if not label_smoothing:
        return nll
    n = x.shape[cdim]
    smooth = E.unary("neg", R.sum(logp, dim=cdim))
    keep = t != ignore_index
    smooth = E.where(keep, smooth, 0.0)
    if reduction == "mean":
        smooth = E.binary("div", R.sum(smooth), R.sum(keep.to(x.dtype)))
    elif reduction == "sum":
        smooth = R.sum(smooth)
    return E.binary("add", E.binary("mul", nll, 1 - label_smoothing),
                    E.binary("mul", smooth, label_smoothing / n))
