"""The margin, embedding and likelihood losses of ``nn.functional`` -- ``margin_ranking_loss``,
``hinge_embedding_loss``, ``cosine_embedding_loss``, ``triplet_margin_loss`` (and
``triplet_margin_with_distance_loss``), ``soft_margin_loss``, ``multilabel_soft_margin_loss``,
``multilabel_margin_loss``, ``multi_margin_loss``, ``poisson_nll_loss`` and
``gaussian_nll_loss`` -- as ATen composes them (its formulas, its clamps, the value and
gradient at a hinge's kink: ``clamp_min`` passes nothing at 0), with PyTorch's checks and
error texts. (``ctc_loss`` lives in :mod:`~symgrad.nn.ctc`.)"""
from __future__ import annotations

import math

import numpy as np

from ..functions import elementwise as E
from ..functions.common import Tensor, to_tensor
from ..functions.creation import ones_like
from ..graph import dtypes
from .activations import logsigmoid
from .similarity import _legacy_reduction, pairwise_distance

__all__ = ["margin_ranking_loss", "hinge_embedding_loss", "cosine_embedding_loss",
           "triplet_margin_loss", "triplet_margin_with_distance_loss", "soft_margin_loss",
           "multilabel_soft_margin_loss", "multilabel_margin_loss", "multi_margin_loss",
           "poisson_nll_loss", "gaussian_nll_loss"]


def _reduction(size_average, reduce, reduction: str) -> str:
    """The reduction named by the arguments (the legacy pair wins, with its warning)."""
    if size_average is not None or reduce is not None:
        return _legacy_reduction(size_average, reduce)
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return reduction


def _apply(loss: Tensor, reduction: str) -> Tensor:
    """ATen's apply_loss_reduction."""
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def margin_ranking_loss(input1, input2, target, margin: float = 0, size_average=None,
                        reduce=None, reduction: str = "mean") -> Tensor:
    """``max(0, -target * (input1 - input2) + margin)``."""
    x1, x2, t = to_tensor(input1), to_tensor(input2), to_tensor(target)
    reduction = _reduction(size_average, reduce, reduction)
    if x1.dim() != x2.dim() or x1.dim() != t.dim():
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same dimension "
                           f"but got sizes: input1: {x1.size()}, input2: {x2.size()}, target: "
                           f"{t.size()} ")
    return _apply(((-t) * (x1 - x2) + margin).clamp_min(0), reduction)


def hinge_embedding_loss(input, target, margin: float = 1.0, size_average=None, reduce=None,
                         reduction: str = "mean") -> Tensor:
    """``x`` where target is 1, ``max(0, margin - x)`` where it is -1 (both where neither)."""
    x, t = to_tensor(input), to_tensor(target)
    reduction = _reduction(size_average, reduce, reduction)
    margin_clamp = (margin - x).clamp_min(0)
    out = E.where(t != 1, margin_clamp, 0.0) + E.where(t != -1, x, 0.0)
    return _apply(out, reduction)


_COS_EPS = 1e-12        # ATen's EPSILON of cosine_embedding_loss


def cosine_embedding_loss(input1, input2, target, margin: float = 0, size_average=None,
                          reduce=None, reduction: str = "mean") -> Tensor:
    """``1 - cos(x1, x2)`` where target is 1, ``max(0, cos(x1, x2) - margin)`` where -1."""
    x1, x2, t = to_tensor(input1), to_tensor(input2), to_tensor(target)
    reduction = _reduction(size_average, reduce, reduction)
    td = t.dim()
    if td not in (0, 1):
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if td == 1 and not (x1.dim() == 2 and x2.dim() == 2):
        raise RuntimeError(f"1D target tensor expects 2D input tensors, but found inputs with "
                           f"sizes {list(x1.shape)} and {list(x2.shape)}.")
    if td == 0 and not (x1.dim() == 1 and x2.dim() == 1):
        raise RuntimeError(f"0D target tensor expects 1D input tensors, but found inputs with "
                           f"sizes {list(x1.shape)} and {list(x2.shape)}.")
    prod_sum = (x1 * x2).sum(td)
    mag1 = (x1 * x1).sum(td) + _COS_EPS
    mag2 = (x2 * x2).sum(td) + _COS_EPS
    cos = prod_sum / (mag1 * mag2).sqrt()
    pos = 1 - cos
    neg = (cos - margin).clamp_min(0)
    out = E.where(t == 1, pos, 0.0) + E.where(t == -1, neg, 0.0)
    return _apply(out, reduction)


def _same_dims(a, p, n) -> None:
    if not (a.dim() == p.dim() == n.dim()):
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the "
                           f"same number of dimensions, but got: anchor {a.dim()}D, positive "
                           f"{p.dim()}D, and negative {n.dim()}D inputs")


def triplet_margin_loss(anchor, positive, negative, margin: float = 1.0, p: float = 2,
                        eps: float = 1e-6, swap: bool = False, size_average=None, reduce=None,
                        reduction: str = "mean") -> Tensor:
    """``max(0, margin + d(a, p) - d(a, n))`` with ``d`` the pairwise p-distance (``swap``:
    ``d(a, n)`` replaced by ``d(p, n)`` where smaller)."""
    a, po, ne = to_tensor(anchor), to_tensor(positive), to_tensor(negative)
    reduction = _reduction(size_average, reduce, reduction)
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    _same_dims(a, po, ne)
    d_pos = pairwise_distance(a, po, p, eps)
    d_neg = pairwise_distance(a, ne, p, eps)
    if swap:
        d_neg = E.binary("minimum", d_neg, pairwise_distance(po, ne, p, eps))
    return _apply((margin + d_pos - d_neg).clamp_min(0), reduction)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None,
                                      margin: float = 1.0, swap: bool = False,
                                      reduction: str = "mean") -> Tensor:
    """:func:`triplet_margin_loss` with any ``distance_function(x, y)`` (default
    ``pairwise_distance``)."""
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    a, po, ne = to_tensor(anchor), to_tensor(positive), to_tensor(negative)
    _same_dims(a, po, ne)
    dist = distance_function if distance_function is not None else pairwise_distance
    d_pos, d_neg = dist(a, po), dist(a, ne)
    if swap:
        d_neg = E.binary("minimum", d_neg, dist(po, ne))
    return _apply((margin + d_pos - d_neg).clamp_min(0), reduction)


def soft_margin_loss(input, target, size_average=None, reduce=None,
                     reduction: str = "mean") -> Tensor:
    """``log(1 + exp(-target * input))`` (ATen's formula: log1p of exp)."""
    x, t = to_tensor(input), to_tensor(target)
    reduction = _reduction(size_average, reduce, reduction)
    return _apply(((-x) * t).exp().log1p(), reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,
                                reduction: str = "mean") -> Tensor:
    """The mean over classes of ``-(t log sigmoid(x) + (1 - t) log sigmoid(-x))`` (times
    ``weight``), one value per sample."""
    x, t = to_tensor(input), to_tensor(target)
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    loss = -(t * logsigmoid(x) + (1 - t) * logsigmoid(-x))
    if weight is not None:
        loss = loss * to_tensor(weight)
    class_dim = x.dim() - 1
    loss = loss.sum(dim=class_dim) / x.shape[class_dim]
    if reduction == "none":
        return loss
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    raise ValueError(reduction + " is not valid")


def _class_checks(x, t, name: str) -> tuple:
    """ATen's multi_margin / multilabel_margin shape checks: (batch, classes)."""
    nd = x.dim()
    if not ((nd == 2 and x.shape[1] != 0) or (nd == 1 and x.shape[0] != 0) or nd == 0):
        raise RuntimeError(f"Expected non-empty vector or matrix with optional 0-dim batch size, "
                           f"but got: {list(x.shape)}")
    n = x.shape[0] if nd == 2 else 1
    c = x.shape[-1] if nd else 1
    return n, c


def multilabel_margin_loss(input, target, size_average=None, reduce=None,
                           reduction: str = "mean") -> Tensor:
    """For each sample, ``sum_{j in targets, i not in targets} max(0, 1 - (x[j] - x[i])) / C``;
    the targets of a row are its class indices up to the first -1 (a repeated index counts
    each time, as ATen's loop)."""
    x, t = to_tensor(input), to_tensor(target)
    reduction = _reduction(size_average, reduce, reduction)
    n, c = _class_checks(x, t, "multilabel_margin_loss")
    nd = x.dim()
    if nd <= 1:
        if not (t.dim() <= 1 and t.numel() == c):
            raise RuntimeError(f"inconsistent target size: {list(t.shape)} for input of size: "
                               f"{list(x.shape)}")
    elif not (t.dim() == 2 and tuple(t.shape) == (n, c)):
        raise RuntimeError(f"inconsistent target size: {list(t.shape)} for input of size: "
                           f"{list(x.shape)}")
    if t._data is not None and t.numel() and (t._data.max() >= c or t._data.min() < -1):
        raise RuntimeError("argument #2 'target' is out of range")
    x2 = x.reshape(n, c)
    t2 = t.reshape(n, c).long()
    live = (t2 >= 0).long().cumprod(1)                      # up to the first -1
    classes = _arange_like(c, x2)
    hit = (t2.clamp_min(0).unsqueeze(2) == classes.reshape(1, 1, c)).long() * live.unsqueeze(2)
    count = hit.sum(1).to(x.dtype)                          # (n, c): how often j is a target
    is_target = count > 0
    # z[n, j, i] = 1 - x[j] + x[i]
    z = 1 - x2.unsqueeze(2) + x2.unsqueeze(1)
    keep = E.where(is_target.unsqueeze(1), 0.0, z.clamp_min(0))
    loss = (keep.sum(2) * count).sum(1) / c
    if nd <= 1:
        loss = loss.reshape(())
    return _apply(loss, reduction)


def _arange_like(c: int, like: Tensor) -> Tensor:
    return Tensor._from_array(np.arange(c, dtype=np.int64), dtypes.int64)


def multi_margin_loss(input, target, p: int = 1, margin: float = 1.0, weight=None,
                      size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """For each sample, ``sum_{i != y} max(0, margin - x[y] + x[i])^p * weight[y] / C``."""
    x, t = to_tensor(input), to_tensor(target)
    reduction = _reduction(size_average, reduce, reduction)
    if p != 1 and p != 2:
        raise ValueError("only p == 1 and p == 2 supported")
    w = to_tensor(weight) if weight is not None else None
    if w is not None and w.dim() != 1:
        raise ValueError("weight must be one-dimensional")
    n, c = _class_checks(x, t, "multi_margin_loss")
    if not (t.dim() <= 1 and t.numel() == n):
        raise RuntimeError(f"multi_margin_loss: target tensor should be 1-D with size equal to "
                           f"the number of input samples (batch size). Expected target size "
                           f"[{n}], but got {list(t.shape)}. Input has shape {list(x.shape)}.")
    if w is not None and not (w.dim() <= 1 and w.numel() == c):
        raise RuntimeError(f"inconsistent weight size, expected {c} but got {list(w.shape)}")
    if t._data is not None and t.numel() and (t._data.min() < 0 or t._data.max() >= c):
        raise RuntimeError("target out of range")
    x2 = x.reshape(n, c)
    y = t.reshape(n, 1).long()
    picked = x2.gather(1, y)                                 # (n, 1)
    z = (margin - picked + x2).clamp_min(0)
    if p == 2:
        z = z * z
    if w is not None:
        z = z * w.gather(0, y.reshape(n)).reshape(n, 1)
    not_y = y != _arange_like(c, x2).reshape(1, c)
    loss = E.where(not_y, z, 0.0).sum(1) / c
    if x.dim() <= 1:
        loss = loss.reshape(())
    return _apply(loss, reduction)


def poisson_nll_loss(input, target, log_input: bool = True, full: bool = False,
                     size_average=None, eps: float = 1e-8, reduce=None,
                     reduction: str = "mean") -> Tensor:
    """``exp(x) - t x`` (``log_input``) or ``x - t log(x + eps)``, with Stirling's term
    ``t log t - t + log(2 pi t) / 2`` where t > 1 when ``full``."""
    x, t = to_tensor(input), to_tensor(target)
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(reduction + " is not a valid value for reduction")
    if log_input:
        loss = x.exp() - t * x
    else:
        loss = x - t * (x + eps).log()
    if full:
        stirling = t * t.log() - t + 0.5 * (2 * math.pi * t).log()
        loss = loss + stirling.masked_fill(t <= 1, 0)
    return _apply(loss, reduction)


def gaussian_nll_loss(input, target, var, full: bool = False, eps: float = 1e-6,
                      reduction: str = "mean") -> Tensor:
    """``(log(max(var, eps)) + (x - t)^2 / max(var, eps)) / 2`` (+ ``log(2 pi) / 2`` when
    ``full``); the clamp does not change var's gradient (PyTorch clamps in place under
    no_grad). ``var`` may lack the last dim or be 1 along one dim (homoscedastic)."""
    x, t = to_tensor(input), to_tensor(target)
    if isinstance(var, float):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        v = ones_like(x) * var
    else:
        v = to_tensor(var)
        if v._data is not None and bool((v._data < 0).any()):
            raise ValueError("var has negative entry/entries")
    if tuple(v.shape) != tuple(x.shape):
        if tuple(x.shape[:-1]) == tuple(v.shape):
            v = v.unsqueeze(-1)
        elif x.dim() == v.dim() and sum(b for a, b in zip(x.shape, v.shape) if a != b) == 1:
            pass
        else:
            raise ValueError("var is of incorrect size")
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(reduction + " is not valid")
    v = v + (v.clamp(min=eps) - v).detach()
    loss = 0.5 * (v.log() + (x - t) ** 2 / v)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _apply(loss, reduction)
