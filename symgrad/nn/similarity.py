"""``one_hot``, ``normalize``, ``cosine_similarity``, ``pairwise_distance`` and
``kl_div`` of ``nn.functional``, as PyTorch computes them (their compositions, hence
their backward names: ``DivBackward0``, ``SumBackward1``, ``NormBackward1``, ...), with
its checks, warnings and error texts."""
from __future__ import annotations

import warnings

import numpy as np

from ..functions import elementwise as E
from ..functions import reduction as R
from ..functions.arithmetic import xlogy
from ..functions.common import Tensor, to_tensor
from ..functions.composite import named
from ..graph import dtypes

__all__ = ["one_hot", "normalize", "cosine_similarity", "pairwise_distance", "kl_div"]


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """int64 one-hot rows for the class indices of ``tensor`` (a new last dim of
    ``num_classes``, by default the largest index + 1)."""
    x = to_tensor(tensor)
    if x.dtype is not dtypes.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if x._data is None and num_classes < 0:
        raise TypeError("one_hot inside symgrad.compile needs num_classes (the number of "
                        "classes cannot be read from a traced tensor)")
    if x._data is not None:
        a = x._data
        if num_classes < 0 and a.size == 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        if a.size and a.min() < 0:
            raise RuntimeError("Class values must be non-negative.")
        if num_classes < 0:
            num_classes = int(a.max()) + 1
        elif a.size and a.max() >= num_classes:
            raise RuntimeError("Class values must be smaller than num_classes.")
    classes = Tensor._from_array(np.arange(num_classes, dtype=np.int64), dtypes.int64)
    hit = E.binary("eq", x.unsqueeze(-1), classes)
    return hit.to(dtypes.int64)


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12,
              out: Tensor | None = None) -> Tensor:
    """``input / max(||input||_p, eps)`` along ``dim``."""
    x = to_tensor(input)
    denom = R.norm(x, p, dim, keepdim=True).clamp_min(eps).expand_as(x)
    return E.binary("div", x, denom)


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """``sum(x1 / ||x1|| * x2 / ||x2||, dim)``, each norm clamped to ``eps`` without
    changing its gradient (PyTorch clamps it in place under no_grad) (``SumBackward1``)."""
    a, b = to_tensor(x1), to_tensor(x2)
    a, b = (t if t.dtype.is_floating_point else t.to(dtypes.get_default_dtype()) for t in (a, b))
    shape = tuple(np.broadcast_shapes(tuple(a.shape), tuple(b.shape)))
    a, b = a.expand(shape), b.expand(shape)

    def clamped(t):
        n = R.norm(t, 2, dim, keepdim=True)
        return n + (n.clamp_min(eps) - n).detach()
    return R.sum(E.binary("mul", E.binary("div", a, clamped(a)), E.binary("div", b, clamped(b))),
                 dim)


def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6,
                      keepdim: bool = False) -> Tensor:
    """``||x1 - x2 + eps||_p`` over the last dim (``NormBackward1``)."""
    d = E.binary("add", E.binary("sub", to_tensor(x1), to_tensor(x2)), eps)
    return named("NormBackward1", lambda v: R.norm(v, p, -1, keepdim=keepdim), d)


def kl_div(input: Tensor, target: Tensor, size_average: bool | None = None,
           reduce: bool | None = None, reduction: str = "mean",
           log_target: bool = False) -> Tensor:
    """The pointwise KL divergence ``target (log target - input)`` (``log_target``:
    ``exp(target) (target - input)``), reduced: ``'mean'`` over every element (with
    PyTorch's warning), ``'batchmean'`` over the batch, ``'sum'`` or ``'none'``."""
    x, t = to_tensor(input), to_tensor(target)
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    if reduction not in ("mean", "batchmean", "sum", "none"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the "
                      "support size.'batchmean' divides only by the batch size, and aligns with "
                      "the KL div math definition.'mean' will be changed to behave the same as "
                      "'batchmean' in the next major release.", UserWarning, stacklevel=2)
    if log_target:
        pointwise = E.binary("mul", E.unary("exp", t), E.binary("sub", t, x))
    else:
        pointwise = E.binary("sub", xlogy(t, t), E.binary("mul", t, x))
    if reduction == "none":
        return pointwise
    if reduction == "sum":
        return R.sum(pointwise)
    if reduction == "mean":
        return R.mean(pointwise)
    total = R.sum(pointwise)
    return E.binary("div", total, x.shape[0]) if x.dim() else total


def _legacy_reduction(size_average, reduce) -> str:
    """PyTorch's reading of the deprecated ``size_average`` / ``reduce``, with its warning."""
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    ret = ("mean" if size_average else "sum") if reduce else "none"
    warnings.warn(f"size_average and reduce args will be deprecated, please use "
                  f"reduction='{ret}' instead.", UserWarning, stacklevel=3)
    return ret
