"""Clipping gradients in place, as ``torch.nn.utils.clip_grad_norm_`` /
``clip_grad_value_``, and its two halves ``get_total_norm`` / ``clip_grads_with_norm_``.
Inside a ``symgrad.compile`` trace (a compiled training step) the norm and the scaling are
computed with tensor operations, as torch's implementation writes them; eagerly, with
numpy in float64 rounded as torch's."""
from __future__ import annotations

import math

import numpy as np

from ...autograd import grad_mode
from ...functions.solvers import vector_norm
from ...functions.finite import isfinite
from ...functions.shape import stack
from ...tensor import Tensor

__all__ = ["clip_grad_norm_", "clip_grad_value_", "get_total_norm", "clip_grads_with_norm_"]


def _params(parameters) -> list[Tensor]:
    if isinstance(parameters, Tensor):
        return [parameters]
    return list(parameters)


def get_total_norm(tensors, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                   foreach=None) -> Tensor:
    """The ``norm_type`` norm of the tensors' norms (as if concatenated into one vector;
    for p = 0, the count of tensors with a nonzero element), a 0-d tensor of the first
    tensor's dtype (PyTorch's ``nn.utils.get_total_norm``)."""
    tensors = _params(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return Tensor._from_array(np.array(0.0, dtype=np.float32))
    if any(t._data is None for t in tensors):      # (traced: torch's formula in tensor ops)
        total = vector_norm(stack([vector_norm(t.detach(), norm_type) for t in tensors]),
                            norm_type)
        if error_if_nonfinite and bool(~isfinite(total)):    # (in a compiled step: the
            raise RuntimeError(_NONFINITE.format(norm_type))  # call runs uncompiled)
        return total
    arrays = [np.asarray(t.detach().numpy()) for t in tensors]
    total = _vector_norm(np.array([_vector_norm(a, norm_type) for a in arrays]), norm_type)
    if error_if_nonfinite and not math.isfinite(total):
        raise RuntimeError(_NONFINITE.format(norm_type))
    return Tensor._from_array(np.array(total, dtype=tensors[0].dtype.np))


def clip_grads_with_norm_(parameters, max_norm: float, total_norm: Tensor,
                          foreach=None) -> None:
    """Scale the gradients by ``max_norm / (total_norm + 1e-6)`` when below 1 (PyTorch's
    ``nn.utils.clip_grads_with_norm_``)."""
    grads = [p.grad for p in _params(parameters) if p.grad is not None]
    if not grads:
        return
    if total_norm._data is None or any(g._data is None for g in grads):   # (traced)
        with grad_mode.no_grad():
            coef = ((total_norm + 1e-6).reciprocal() * max_norm).clamp(max=1.0)
            for g in grads:
                g.mul_(coef)
        return
    # torch's roundings, in the norm's dtype: max_norm / (total + 1e-6) is
    # reciprocal(total + 1e-6) * max_norm, clamped to 1
    one = np.dtype(total_norm.dtype.np).type
    total = one(total_norm.item())
    coef = min(one(1.0) / (total + one(1e-6)) * one(max_norm), one(1.0))
    with grad_mode.no_grad():
        for g in grads:
            g.mul_(float(coef))


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False, foreach=None) -> Tensor:
    """Scale the gradients so that their joint ``norm_type`` norm is at most
    ``max_norm``; returns the norm before clipping (a 0-d tensor)."""
    params = _params(parameters)
    grads = [p.grad for p in params if p.grad is not None]
    total = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(params, max_norm, total, foreach)
    return total


_NONFINITE = ("The total norm of order {} for gradients from `parameters` is non-finite, "
              "so it cannot be clipped. To disable this error and scale the gradients by the "
              "non-finite norm anyway, set `error_if_nonfinite=False`")


def _vector_norm(a: np.ndarray, p: float) -> float:
    """``linalg.vector_norm(a, p)`` in float64: max / min |a| for p = +-inf, the count of
    nonzeros for p = 0, else ``sum(|a| ** p) ** (1 / p)``."""
    a = np.abs(a.astype(np.float64))
    if p == math.inf:
        return float(np.max(a)) if a.size else 0.0
    if a.size == 0 and p < 0:
        raise RuntimeError(f"linalg.vector_norm cannot compute the {format(p, '.6g')} norm on "
                           "an empty tensor because the operation does not have an identity")
    if p == -math.inf:
        return float(np.min(a))
    if p == 0:
        return float(np.count_nonzero(a))
    with np.errstate(divide="ignore"):         # (0 ** -1 = inf, as torch's)
        return float(np.sum(a ** p) ** (1.0 / p))


def clip_grad_value_(parameters, clip_value: float, foreach=None) -> None:
    """Clamp every gradient element into [-clip_value, clip_value]."""
    clip_value = float(clip_value)
    with grad_mode.no_grad():
        for p in _params(parameters):
            if p.grad is not None:
                p.grad.clamp_(min=-clip_value, max=clip_value)
