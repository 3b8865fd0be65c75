"""``symgrad.nn.functional``: activations, softmax / log_softmax, linear, and the losses
(BCE with logits — stable at any logit —, BCE, MSE, L1, cross-entropy, NLL) with
PyTorch's reductions, checks and grad_fn names; convolution, pooling, padding and batch
norm are re-exported from :mod:`~symgrad.nn.convolution`, :mod:`~symgrad.nn.pooling`,
:mod:`~symgrad.nn.padding` and :mod:`~symgrad.nn.normalization`."""
from __future__ import annotations

import warnings

import numpy as np

from ..graph import dtypes
from .. import dispatch
from ..dispatch import bind
from ..functions import elementwise as E
from ..functions import reduction as R
from ..functions.common import Tensor, floating_kernel, to_tensor, wrap_dim
from ..functions.composite import named
from ..functions import kernels
from ..ops import lax
from ..graph.primitives import PRIMITIVES as P
from ..functions import linalg, shape
from ..functions.elementwise import promote
from ..autograd import grad_mode
from .feature_dropout import keep_mask

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
    return named("SiluBackward0", lambda v: lax.mul(v, lax.unary("sigmoid", v)), to_tensor(input),
                 saves=(0,))


def leaky_relu(input, negative_slope=0.01, inplace=False):
    x = to_tensor(input)
    return named("LeakyReluBackward0",
                 lambda v: lax.where(bind(P["gt"], v, 0.0), v, lax.mul(v, negative_slope)), x,
                 saves=(0,))


def softplus(input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta*x)) / beta, linear above `threshold` (as PyTorch)."""
    x = to_tensor(input)
    if beta == 1 and threshold == 20:
        return E.unary("softplus", x)

    def f(v):
        # at beta*x == threshold itself the value and slope are log1p(exp(bx)) / beta and
        # sigmoid(bx), the second derivative 0 (PyTorch's double backward masks
        # beta*x < threshold, its backward beta*x > threshold): the curve there is the
        # line through the point with that slope, of the detached input
        def soft(u):
            bu = lax.mul(u, float(beta))
            return lax.div(lax.unary("log1p", lax.unary("exp", lax.where(
                bind(P["gt"], bu, float(threshold)), 0.0, bu))), float(beta))
        bx = lax.mul(v, float(beta))
        d = v.detach()
        bd = lax.mul(d, float(beta))
        ed = lax.unary("exp", lax.where(bind(P["gt"], bd, float(threshold)), 0.0, bd))
        line = lax.add(soft(d), lax.mul(lax.div(ed, lax.add(ed, 1.0)), lax.sub(v, d)))
        at = bind(P["eq"], bx, float(threshold))
        return lax.where(bind(P["gt"], bx, float(threshold)), v, lax.where(at, line, soft(v)))
    return named("SoftplusBackward0", f, x, saves=(0,))


def _softmax_dim(ndim, name):
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call "
                  "to include dim=X as an argument.", UserWarning, stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def _prep_softmax(input, dim, dtype, name):
    x = to_tensor(input)
    if dtype is not None:
        x = lax.cast(x, dtypes.as_dtype(dtype))
    if dim is None:
        dim = _softmax_dim(x.dim(), name)
    nd = x.dim()
    axes = (wrap_dim(dim, nd),) if nd else ()
    if x._dtype.category != "float":
        last = not axes or axes[0] == nd - 1         # (PyTorch's two CPU kernels)
        floating_kernel(x, f"{name}_lastdim_kernel_impl" if last else f"{name}_kernel_impl")
    return x, axes


def _shifted(v, axes):
    # a plain max shift: a row holding +inf, or only -inf, becomes NaN, as in PyTorch's
    # softmax / log_softmax (logsumexp, which PyTorch keeps finite there, shifts by
    # lax.finite_max instead). The shift is a constant for autograd (the result does
    # not depend on it), so the backward saves only what PyTorch's does.
    m = bind(P["amax"], v.detach(), axes=axes, keepdim=True)
    return lax.sub(v, lax.expand(m, v.shape))


def _log_softmax_prims(v, axes):
    z = _shifted(v, axes)
    lse = lax.unary("log", lax.sum(lax.unary("exp", z), axes, keepdim=True))
    return lax.sub(z, lax.expand(lse, v.shape))


def _softmax_prims(v, axes):
    e = lax.unary("exp", _shifted(v, axes))
    return lax.div(e, lax.expand(lax.sum(e, axes, keepdim=True), v.shape))


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    x, axes = _prep_softmax(input, dim, dtype, "softmax")
    return named("SoftmaxBackward0", lambda v: _softmax_prims(v, axes), x, saves_output=True,
                 kernel=kernels.softmax_kernel(axes))


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    x, axes = _prep_softmax(input, dim, dtype, "log_softmax")
    return named("LogSoftmaxBackward0", lambda v: _log_softmax_prims(v, axes), x,
                 saves_output=True, kernel=kernels.log_softmax_kernel(axes))


def linear(input, weight, bias=None):
    """input @ weightᵀ + bias, recorded as PyTorch records it: with a bias, the input is
    viewed as a matrix and ``AddmmBackward0(bias, x, weight.t())`` is viewed back
    (ViewBackward0 unless the input is a matrix); without one, ``input @ weight.t()``."""
    x, w = to_tensor(input), to_tensor(weight)
    if bias is None:
        return linalg.matmul(x, shape.t(w))
    b = to_tensor(bias)
    x2 = x if x.dim() == 2 else shape.reshape(x, (-1, x.shape[-1]))
    wt = shape.t(w)
    out_shape = (x2.shape[0], wt.shape[-1]) if wt.dim() == 2 else None
    fits = out_shape is not None and x2.dim() == 2 and x2.shape[-1] == wt.shape[0]
    if fits:
        shape.expanded_shape(b, out_shape)     # PyTorch's error for a bias of the wrong size
    saves = tuple(i for i, other in ((1, wt), (2, x2)) if other.requires_grad)   # as PyTorch
    out = named("AddmmBackward0",
                lambda bb, a, ww: lax.add(bind(P["matmul"], a, ww), bb), b, x2, wt, saves=saves,
                kernel=kernels.addmm_kernel(tuple(b.shape))
                if fits and b.dtype is x2.dtype is wt.dtype else None)   # (else: the errors)
    if x.dim() == 2:
        return out
    return bind(P["reshape"], out, shape=tuple(x.shape[:-1]) + tuple(out.shape[1:]),
                grad_name="ViewBackward0")


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
    _no_grad_arg("binary_cross_entropy_with_logits", "weight", weight)
    _no_grad_arg("binary_cross_entropy_with_logits", "pos_weight", pos_weight)
    extras = [to_tensor(w) for w in (weight, pos_weight) if w is not None]

    def f(v, tt, *ws):
        it = iter(ws)
        w = next(it) if weight is not None else None
        pw = next(it) if pos_weight is not None else None
        if pw is None:
            loss = bind(P["binary_cross_entropy_with_logits"], v, tt)
        else:
            sp = lax.unary("softplus", lax.neg(v))                 # -log(sigmoid(x))
            lw = lax.add(lax.mul(lax.sub(pw, 1.0), tt), 1.0)
            loss = lax.add(lax.mul(lax.sub(1.0, tt), v), lax.mul(lw, sp))
        if w is not None:
            loss = lax.mul(loss, w)
        return _reduce(loss, reduction)
    return named("BinaryCrossEntropyWithLogitsBackward0", f, x, t, *extras, saves=(0, 1))


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
    _no_grad_arg("binary_cross_entropy", "weight", weight)

    def f(v, tt, *ws):
        loss = bind(P["binary_cross_entropy"], v, tt)   # PyTorch's clamps and gradient
        if ws:
            loss = lax.mul(loss, ws[0])
        return _reduce(loss, reduction)
    extras = [to_tensor(weight)] if weight is not None else []
    return named("BinaryCrossEntropyBackward0", f, x, t, *extras,
                 saves=tuple(range(2 + len(extras))))


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
    dt = promote([x, t])
    x, t = lax.cast(x, dt), lax.cast(t, dt)

    def f(v, tt):
        d = lax.sub(v, tt)
        return _reduce(lax.mul(d, d), reduction)
    same = x.shape == t.shape
    return named("MseLossBackward0", f, x, t, saves=(0, 1),
                 kernel=kernels.mse_loss_kernel(reduction) if same else None)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    x, t = to_tensor(input), to_tensor(target)
    _check_reduction(reduction)
    _broadcast_warning(x, t, "l1_loss")
    d = E.unary("abs", E.binary("sub", x, t))
    if reduction == "mean":
        return R.mean(d)
    return R.sum(d) if reduction == "sum" else d


def _no_grad_arg(fn_name: str, arg: str, t) -> None:
    """PyTorch's refusal to differentiate a loss with respect to its weights."""
    if t is not None and grad_mode.is_grad_enabled() and to_tensor(t).requires_grad:
        raise RuntimeError(f"The function '{fn_name}' is not differentiable with respect to "
                           f"argument '{arg}'. This input cannot have requires_grad True.")


def _dims(t) -> tuple:
    """t's shape as a plain tuple (an eager tensor's array's own)."""
    return t._data.shape if t._data is not None else tuple(t.shape)


def _check_nll(x, t, weight, ignore_index, kernel=False) -> bool:
    """nll_loss's argument checks, in PyTorch's order and words (`kernel`: also its
    kernels' refusal of a non-float input, before the targets' bounds). Returns whether
    every target is known to be a class index (eager targets, all in range)."""
    xs, ts = _dims(x), _dims(t)      # (plain tuples: read many times)
    xd, td = len(xs), len(ts)
    if xd < 1:
        raise ValueError(f"Expected 1 or more dimensions (got {xd})")
    if xd == 1 and td == 1 and ts[0] != 1:
        raise ValueError(f"For 1D input, 1D target must have size 1, but got target size: "
                         f"{ts[0]}")
    if xd != 1 and td and xs[0] != ts[0]:
        raise ValueError(f"Expected input batch_size ({xs[0]}) to match target batch_size "
                         f"({ts[0]}).")
    if xd <= 2 and td > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if t.dtype not in (dtypes.int64, dtypes.uint8):
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got "
                           f"{t.dtype.c_name}")
    if xd >= 3 and t.dtype is not dtypes.int64:     # the 2d kernel takes Long only
        raise RuntimeError(f"expected scalar type Long but found {t.dtype.c_name}")
    cdim = 1 if xd >= 2 else 0
    n_classes = xs[cdim]
    if xd > 2:
        expected = (xs[0],) + xs[2:]
        if ts != expected:
            raise RuntimeError(f"Expected target size {list(expected)}, got {list(ts)}")
    if weight is not None and to_tensor(weight).numel() != n_classes:
        raise RuntimeError(f"weight tensor should be defined either for all {n_classes} classes "
                           f"or no classes but got weight tensor of shape: "
                           f"{list(to_tensor(weight).shape)}")
    if kernel:
        floating_kernel(x, "nll_loss2d_forward_out_frame" if x.dim() >= 3 else
                        "nll_loss_out_frame")
    if t._data is not None:
        flat = t._data.reshape(-1).astype(np.int64, copy=False)
        # (one comparison when every target is in range: negatives wrap to huge unsigned)
        if flat.size and np.maximum.reduce(flat.view(np.uint64)) >= n_classes:
            bad = (flat != ignore_index) & ((flat < 0) | (flat >= n_classes))
            if bad.any():
                raise IndexError(f"Target {flat[np.argmax(bad)]} is out of bounds.")
            return False
        return True
    return False


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    """Negative log-likelihood of class indices; input (N, C) or (C,), or (N, C, d...)
    (``NllLoss2DBackward0`` then, as PyTorch names it)."""
    x, t = to_tensor(input), to_tensor(target)
    _check_reduction(reduction)
    in_range = _check_nll(x, t, weight, ignore_index, kernel=True)
    _no_grad_arg("nll_loss_forward", "weight", weight)
    return _nll_loss(x, t, weight, ignore_index, reduction, in_range)


def _nll_loss(x, t, weight, ignore_index, reduction, in_range=False):
    """nll_loss on checked arguments (cross_entropy checked them on its input). As
    PyTorch's nll_loss_nd: a 3-D or >= 5-D input is viewed as (N, C, 1, -1) (its
    targets as (N, 1, -1)) for the 2-d kernel, a 'none' result viewed back.
    `in_range`: every target is a class index (so none is ignored when `ignore_index`
    is not one)."""
    nd = x.dim()
    if nd == 3 or nd > 4:
        n, c = x.shape[0], x.shape[1]
        x4 = shape.view(x, n, c, 1, -1) if x.numel() else shape.reshape(x, (n, c, 0, 0))
        t3 = shape.reshape(t, (n, 1, -1) if t.numel() else (n, 0, 0))
        out = _nll_loss(x4, t3, weight, ignore_index, reduction)
        return shape.view(out, (n,) + tuple(x.shape[2:])) if reduction == "none" else out
    batched = x.dim() >= 2
    cdim = 1 if batched else 0
    eager = t._data is not None and x._data is not None and not dispatch.tracing()
    if eager:               # the target's arrays directly (no history to record)
        tn = t._data.astype(np.int64, copy=False)
        if in_range and not 0 <= ignore_index < x.shape[cdim]:
            keep_n, every = None, True          # (no target is ignore_index)
        else:
            keep_n = np.not_equal(tn, ignore_index)
            every = bool(keep_n.all())
        safe_n = tn if every else np.where(keep_n, tn, 0)
        idx_n = safe_n.reshape(safe_n.shape[:cdim] + (1,) + safe_n.shape[cdim:])
        tshape = safe_n.shape

        def targets():      # (tensors only for the primitives' path: the kernel takes arrays)
            keep = np.not_equal(tn, ignore_index) if keep_n is None else keep_n
            return (Tensor._from_array(keep, dtypes.bool_),
                    Tensor._from_array(safe_n, dtypes.int64), Tensor._from_array(idx_n, dtypes.int64))
    else:
        t = lax.cast(t, dtypes.int64)
        keep = bind(P["ne"], t, ignore_index)
        # a target out of [0, C) raises at every call, as PyTorch's (not read wrapped)
        safe_t = lax.in_bounds(lax.where(keep, t, 0), int(x.shape[cdim]),
                               "Target {} is out of bounds.", "IndexError")
        tshape = tuple(safe_t.shape)
        made = (keep, safe_t, lax.reshape(safe_t, tshape[:cdim] + (1,) + tshape[cdim:]))

        def targets():
            return made
    wt = to_tensor(weight) if weight is not None else None
    # PyTorch's nll_loss_nd: 2d kernel for >= 3-D input; 'none' results of 3-D and >= 5-D
    # inputs come back through a view
    name = "NllLoss2DBackward0" if x.dim() >= 3 else "NllLossBackward0"

    def f(v, *ws):
        keep, safe_t, idx = targets()
        picked = lax.reshape(bind(P["gather"], v, idx, axis=cdim), tshape)
        w_el = lax.cast(keep, v.dtype)
        if ws:
            w_el = lax.mul(w_el, bind(P["take"], ws[0], safe_t, axis=0))
        # ignored targets by a select, not only the product with 0 (their input may be
        # inf / NaN); 0 - w, not -w, so that their loss and gradient are +0 as PyTorch's
        loss = lax.mul(lax.where(keep, picked, 0.0), lax.sub(0.0, w_el))
        if reduction == "none":
            return loss
        total = lax.sum(loss, tuple(range(loss.dim())))
        if reduction == "sum":
            return total
        denom = lax.sum(w_el, tuple(range(w_el.dim())))
        # all targets ignored: NaN, as PyTorch, but a zero gradient (no 0/0 in backward)
        none = lax.eq(denom, 0.0)
        return lax.where(none, lax.full((), float("nan"), v.dtype),
                         lax.div(total, lax.where(none, 1.0, denom)))
    kernel = None
    if eager and wt is None:
        kernel = kernels.nll_loss_kernel(idx_n, None if every else keep_n, cdim, reduction,
                                         tshape)
    return named(name, f, x, *([wt] if wt is not None else []), kernel=kernel)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100,
                  reduce=None, reduction="mean", label_smoothing=0.0):
    """log_softmax over the class dim, then NLL (class indices) or the soft-target sum (a
    float target of the input's shape), with PyTorch's label smoothing and weights."""
    x, t = to_tensor(input), to_tensor(target)
    _check_reduction(reduction)
    if label_smoothing > 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: "
                           f"{float(label_smoothing)}")
    xs = _dims(x)
    cdim = 1 if len(xs) >= 2 else 0
    n = xs[cdim] if xs else 1
    if t._dtype.category == "float" and _dims(t) == xs:
        return _cross_entropy_probs(x, t, weight, reduction, label_smoothing, cdim, n)
    in_range = _check_nll(x, t, weight, ignore_index)
    _no_grad_arg("nll_loss_forward", "weight", weight)
    logp = log_softmax(x, dim=cdim)
    nll = _nll_loss(logp, t, weight, ignore_index, reduction, in_range)
    if not label_smoothing:
        return nll
    # PyTorch: smooth = -(logp * w).sum(class dim), zero where ignored; the mean divides by
    # the summed weights of the kept targets
    wshape = [1] * x.dim()
    if x.dim():
        wshape[cdim] = n
    prod = logp if weight is None else E.binary("mul", logp, to_tensor(weight).reshape(wshape))
    smooth = E.unary("neg", R.sum(prod, dim=cdim))
    keep = E.binary("ne", t, ignore_index)
    smooth = E.where(keep, smooth, 0.0)
    if reduction == "mean":
        if weight is None:
            denom = R.sum(keep)
        else:
            w_t = bind(P["take"], to_tensor(weight), lax.cast(
                E.where(keep, t, 0), dtypes.int64), axis=0)
            denom = R.sum(E.where(keep, w_t, 0.0))
        smooth = E.binary("div", R.sum(smooth), denom)
    elif reduction == "sum":
        smooth = R.sum(smooth)
    return E.binary("add", E.binary("mul", nll, 1 - label_smoothing),
                    E.binary("mul", smooth, label_smoothing / n))


def _cross_entropy_probs(x, t, weight, reduction, label_smoothing, cdim, n):
    """-(log_softmax(x) * target * weight).sum(...), as PyTorch's prob-target kernel."""
    if weight is not None and to_tensor(weight).numel() != n:
        raise RuntimeError(f"cross_entropy: weight tensor should be defined either for all {n} "
                           f"classes or no classes but got weight tensor of shape: "
                           f"{list(to_tensor(weight).shape)}")
    logp = log_softmax(x, dim=cdim)
    if label_smoothing:
        t = E.binary("add", E.binary("mul", t, 1 - label_smoothing), label_smoothing / n)
    prod = E.binary("mul", logp, t)
    if weight is not None:
        wshape = [1] * x.dim()
        wshape[cdim] = n
        prod = E.binary("mul", prod, to_tensor(weight).reshape(wshape))
    if reduction == "none":
        return E.unary("neg", R.sum(prod, dim=cdim))
    total = E.unary("neg", R.sum(prod))
    if reduction == "sum":
        return total
    if x.numel() == 0:                         # PyTorch: -(...).sum().fill_(nan)
        return E.unary("neg", E.binary("mul", R.sum(prod), float("nan")))
    return E.binary("div", total, x.numel() // n, grad_name="DivBackward1")


# ---- more activations -------------------------------------------------------------------
def elu(input, alpha=1.0, inplace=False):
    """x where x > 0, else alpha (exp(x) - 1). (expm1 reads 0 where x > 0: the unused
    branch's gradient is 0 * exp(0), not 0 * inf = NaN once exp(x) overflows.)"""
    x = to_tensor(input)

    def f(v):
        pos = bind(P["gt"], v, 0.0)
        neg = lax.mul(lax.unary("expm1", lax.where(pos, 0.0, v)), float(alpha))
        return lax.where(pos, v, neg)
    return named("EluBackward0", f, x, saves=(0,))


def gelu(input, approximate="none"):
    """x Phi(x) (``approximate="none"``, with erf) or PyTorch's tanh approximation."""
    x = to_tensor(input)
    if approximate not in ("none", "tanh"):
        raise RuntimeError("approximate argument must be either none or tanh.")
    floating_kernel(x, "GeluKernelImpl")
    if approximate == "tanh":
        k = float(np.sqrt(2.0 / np.pi))

        def f(v):
            inner = lax.mul(lax.add(v, lax.mul(lax.mul(lax.mul(v, v), v), 0.044715)), k)
            return lax.mul(lax.mul(v, 0.5), lax.add(lax.unary("tanh", inner), 1.0))
    else:
        def f(v):
            return lax.mul(lax.mul(v, 0.5),
                           lax.add(lax.unary("erf", lax.mul(v, float(1 / np.sqrt(2.0)))), 1.0))
    return named("GeluBackward0", f, x, saves=(0,),
                 kernel=kernels.gelu_kernel() if approximate == "none" else None)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """x clamped to [min_val, max_val]; the gradient passes only strictly inside (and at
    NaN), as PyTorch's hardtanh_backward -- clamp's passes at the bounds too. (At NaN
    PyTorch is not consistent: its scalar loop passes the gradient, its vectorised loop
    gives 0, so it depends on the element's position; symgrad passes it everywhere.) (The
    inside branch is min(max(x, lo), hi), whose gradient has the input's history, so a
    second derivative is 0, not an error, and which passes it at NaN.)"""
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    lo, hi = float(min_val), float(max_val)

    def f(v):
        out = lax.apply("logical_or", lax.apply("le", v, lo), lax.apply("ge", v, hi))
        inside = lax.apply("minimum", lax.apply("maximum", v, lo), hi)
        return lax.where(out, bind(P["clamp"], v.detach(), lo, hi), inside)
    return named("HardtanhBackward0", f, to_tensor(input), saves=(0,))


def relu6(input, inplace=False):
    return hardtanh(input, 0.0, 6.0)


# ---- regression losses ------------------------------------------------------------------
def _pair(input, target, name):
    x, t = to_tensor(input), to_tensor(target)
    _broadcast_warning(x, t, name)
    dt = promote([x, t])
    return lax.cast(x, dt), lax.cast(t, dt)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean",
                   beta=1.0):
    """0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (beta = 0: the L1 loss)."""
    _check_reduction(reduction)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    if beta == 0:
        return l1_loss(input, target, reduction=reduction)
    x, t = _pair(input, target, "smooth_l1_loss")

    def f(v, tt):
        d = lax.unary("abs", lax.sub(v, tt))
        quad = lax.div(lax.mul(lax.mul(d, d), 0.5), float(beta))
        return _reduce(lax.where(bind(P["lt"], d, float(beta)), quad,
                                 lax.sub(d, 0.5 * float(beta))), reduction)
    return named("SmoothL1LossBackward0", f, x, t)


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta)."""
    _check_reduction(reduction)
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    x, t = _pair(input, target, "huber_loss")

    def f(v, tt):
        d = lax.unary("abs", lax.sub(v, tt))
        return _reduce(lax.where(bind(P["lt"], d, float(delta)), lax.mul(lax.mul(d, d), 0.5),
                                 lax.mul(lax.sub(d, 0.5 * float(delta)), float(delta))),
                       reduction)
    return named("HuberLossBackward0", f, x, t)


# ---- dropout, embedding, normalisation ----------------------------------------------------
def dropout(input, p=0.5, training=True, inplace=False):
    """Zero each element with probability ``p`` and scale the rest by 1 / (1 - p) (the
    identity when not training)."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    x = to_tensor(input)
    if not training or p == 0.0:
        return x
    # torch's bernoulli_(1 - p): kept where a draw u < 1 - p (symgrad.compile: a mask drawn
    # at each call, of the call's shape, an input of the program)
    mask = keep_mask(tuple(x.shape), 1.0 - p, x.dtype, scaled=True) if p < 1.0 else \
        x.new_zeros(tuple(x.shape))
    out = named("NativeDropoutBackward0", lambda v: lax.mul(v, mask), x)
    if inplace:
        return x.copy_(out)
    return out


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """Rows of ``weight`` picked by the integer tensor ``input``; the row ``padding_idx``
    gets no gradient."""
    idx, w = to_tensor(input), to_tensor(weight)
    if idx.dtype.category not in ("int",):
        raise RuntimeError("Expected tensor for argument #1 'indices' to have one of the "
                           "following scalar types: Long, Int; but got "
                           f"{idx.dtype.tensor_type.split('.')[-1]} instead (while checking "
                           "arguments for embedding)")
    if scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding: scale_grad_by_freq and sparse are not "
                                  "supported")
    n = w.shape[0]
    if padding_idx is not None:
        if not -n <= padding_idx < n:
            raise AssertionError("Padding_idx must be within num_embeddings")
        padding_idx %= n
    if max_norm is not None:
        embedding_renorm_(w, idx, max_norm, norm_type)
    flat = shape.reshape(idx, (-1,))
    out_shape = tuple(idx.shape) + tuple(w.shape[1:])

    # PyTorch's bounds: a negative index raises (numpy's take would wrap it)
    flat = lax.in_bounds(lax.cast(flat, dtypes.int64), int(w.shape[0]),
                         "index out of range in self", "IndexError")

    def f(wv):
        rows = lax.take(wv, flat, 0)
        if padding_idx is not None:
            pad = bind(P["eq"], flat, padding_idx)
            pad = lax.reshape(pad, (pad.shape[0],) + (1,) * (len(w.shape) - 1))
            rows = lax.where(pad, lax.take(wv.detach(), flat, 0), rows)
        return lax.reshape(rows, out_shape)
    return named("EmbeddingBackward0", f, w)


def _layer_norm_dtypes(x, params) -> None:
    """PyTorch's CPU checks of float32 / float64 mixes: the first parameter unlike the
    input is a "mixed dtype" error (which one: whether any parameter is float64), a
    second parameter unlike the first a scalar type error."""
    if all(p._dtype is x._dtype for p in params):      # (the common case first)
        return
    floats = {dtypes.float32, dtypes.float64}
    if {x.dtype, *(p.dtype for p in params)} - floats:
        return
    if params[0].dtype is not x.dtype:
        if any(p.dtype is dtypes.float64 for p in params):
            raise RuntimeError("mixed dtype (CPU): expect parameter to have scalar type of Float")
        raise RuntimeError("mixed dtype (CPU): all inputs must share same datatype.")
    raise RuntimeError(f"expected scalar type {x.dtype.c_name} but found "
                       f"{params[1].dtype.c_name}")


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """(x - mean) / sqrt(var + eps) over the last ``len(normalized_shape)`` dims (biased
    variance), then ``* weight + bias``."""
    x = to_tensor(input)
    shp = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    k = len(shp)
    if tuple(x.shape[x.dim() - k:]) != shp or k > x.dim():
        raise RuntimeError(f"Given normalized_shape={list(shp)}, expected input with shape "
                           f"[*, {', '.join(str(s) for s in shp)}], but got input of size"
                           f"{list(x.shape)}")
    for what, a in (("weight", weight), ("bias", bias)):
        if a is not None and tuple(to_tensor(a).shape) != shp:
            raise RuntimeError(f"Expected {what} to be of same shape as normalized_shape, but "
                               f"got {what} of shape {list(to_tensor(a).shape)} and "
                               f"normalized_shape = {list(shp)}")
    axes = tuple(range(x.dim() - k, x.dim()))
    args = [x] + [to_tensor(a) for a in (weight, bias) if a is not None]
    _layer_norm_dtypes(x, args[1:])

    def f(v, *wb):
        mean = bind(P["mean"], v, axes=axes, keepdim=True)
        c = lax.sub(v, mean)
        var = bind(P["mean"], lax.mul(c, c), axes=axes, keepdim=True)
        y = lax.mul(c, lax.unary("rsqrt", lax.add(var, float(eps))))
        it = iter(wb)
        if weight is not None:
            y = lax.mul(y, next(it))
        if bias is not None:
            y = lax.add(y, next(it))
        return y
    kernel = None
    if all(a.dtype is x.dtype for a in args) and x.dtype.is_floating_point:
        kernel = kernels.layer_norm_kernel(axes, float(eps), (weight is not None, bias is not None))
    # (PyTorch's node saves input, weight and bias: each is version-checked at backward)
    return named("NativeLayerNormBackward0", f, *args, kernel=kernel,
                 saves=tuple(range(len(args))))


def bilinear(input1, input2, weight, bias=None):
    """``y[..., k] = sum_ij input1[..., i] weight[k, i, j] input2[..., j] + bias[k]``."""
    x1, x2, w = to_tensor(input1), to_tensor(input2), to_tensor(weight)
    if x1.shape[:-1] != x2.shape[:-1]:
        raise RuntimeError("bilinear(): input batch dimensions do not match: got "
                           f"{list(x1.shape[:-1])} and {list(x2.shape[:-1])}")
    if w.dim() != 3 or w.shape[1] != x1.shape[-1] or w.shape[2] != x2.shape[-1]:
        raise RuntimeError(f"bilinear(): weight of shape {list(w.shape)} does not fit inputs "
                           f"with {x1.shape[-1]} and {x2.shape[-1]} features")
    lead = tuple(x1.shape[:-1])
    a = x1.reshape(1, -1, x1.shape[-1])                 # (1, N, i)
    t = linalg.matmul(a, w)                             # (k, N, j)
    y = (t * x2.reshape(1, -1, x2.shape[-1])).sum(-1)   # (k, N)
    y = y.t().reshape(lead + (w.shape[0],))
    return y if bias is None else y + to_tensor(bias)


__all__ += ["bilinear", "elu", "gelu", "hardtanh", "relu6", "smooth_l1_loss", "huber_loss", "dropout",
            "embedding", "layer_norm"]


# convolution, pooling, padding and batch norm live in their own modules (they import nothing of
# this one); re-exported here as PyTorch's functional namespace has them
from .adaptive import (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d,  # noqa: E402
                       adaptive_max_pool1d, adaptive_max_pool2d, adaptive_max_pool3d)
from .conv_transpose import conv_transpose1d, conv_transpose2d, conv_transpose3d  # noqa: E402
from .convolution import conv1d, conv2d, conv3d  # noqa: E402
from .normalization import batch_norm  # noqa: E402
from .padding import pad  # noqa: E402
from .pooling import (avg_pool1d, avg_pool2d, avg_pool3d, max_pool1d, max_pool2d,  # noqa: E402
                      max_pool3d)
from .rrelu import rrelu, rrelu_  # noqa: E402
from .unpooling import max_unpool2d  # noqa: E402
from .activations import (celu, glu, hardshrink, hardsigmoid, hardswish, logsigmoid,  # noqa: E402
                          mish, selu, softmin, softshrink, softsign, tanhshrink, threshold)
from .grouping import group_norm, pixel_shuffle, pixel_unshuffle  # noqa: E402
from .similarity import (cosine_similarity, kl_div, normalize, one_hot,  # noqa: E402
                         pairwise_distance)
from .upsampling import interpolate, upsample, upsample_bilinear, upsample_nearest  # noqa: E402

__all__ += ["conv1d", "conv2d", "max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d",
            "max_pool3d", "avg_pool3d", "adaptive_avg_pool3d", "adaptive_max_pool3d",
            "batch_norm", "pad", "conv_transpose1d", "conv_transpose2d", "adaptive_avg_pool1d",
            "adaptive_avg_pool2d", "adaptive_max_pool1d", "adaptive_max_pool2d", "conv3d",
            "conv_transpose3d", "rrelu", "rrelu_", "max_unpool2d", "interpolate", "upsample",
            "upsample_nearest", "upsample_bilinear", "logsigmoid", "selu", "celu", "mish",
            "hardswish", "hardsigmoid", "softsign", "tanhshrink", "softshrink", "hardshrink",
            "threshold", "glu", "softmin", "one_hot", "normalize", "cosine_similarity",
            "pairwise_distance", "kl_div", "group_norm", "pixel_shuffle", "pixel_unshuffle"]
from .margin_losses import (cosine_embedding_loss, gaussian_nll_loss,  # noqa: E402
                            hinge_embedding_loss, margin_ranking_loss, multi_margin_loss,
                            multilabel_margin_loss, multilabel_soft_margin_loss,
                            poisson_nll_loss, soft_margin_loss, triplet_margin_loss,
                            triplet_margin_with_distance_loss)
from .ctc import ctc_loss  # noqa: E402

__all__ += ["cosine_embedding_loss", "gaussian_nll_loss", "hinge_embedding_loss",
            "margin_ranking_loss", "multi_margin_loss", "multilabel_margin_loss",
            "multilabel_soft_margin_loss", "poisson_nll_loss", "soft_margin_loss",
            "triplet_margin_loss", "triplet_margin_with_distance_loss", "ctc_loss"]
from .feature_dropout import (alpha_dropout, dropout1d, dropout2d, dropout3d,  # noqa: E402
                              feature_alpha_dropout)
from .norms_more import instance_norm, local_response_norm, rms_norm  # noqa: E402
from .folding import fold, unfold  # noqa: E402
from .channel_ops import channel_shuffle, gumbel_softmax, prelu  # noqa: E402

log_sigmoid = logsigmoid        # (PyTorch's functional has both names)
__all__ += ["alpha_dropout", "dropout1d", "dropout2d", "dropout3d", "feature_alpha_dropout",
            "instance_norm", "local_response_norm", "rms_norm", "fold", "unfold",
            "channel_shuffle", "gumbel_softmax", "prelu", "log_sigmoid"]
from .attention import multi_head_attention_forward, scaled_dot_product_attention  # noqa: E402

__all__ += ["scaled_dot_product_attention", "multi_head_attention_forward"]
from .embeddings import embedding_bag, embedding_renorm_  # noqa: E402

__all__ += ["embedding_bag"]
