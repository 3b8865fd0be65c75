"""Clipping gradients in place, as ``torch.nn.utils.clip_grad_norm_`` /
``clip_grad_value_``."""
from __future__ import annotations

import math

import numpy as np

from ...autograd import grad_mode
from ...tensor import Tensor

__all__ = ["clip_grad_norm_", "clip_grad_value_"]


def _params(parameters) -> list[Tensor]:
    if isinstance(parameters, Tensor):
        return [parameters]
    return list(parameters)


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False, foreach=None) -> Tensor:
    """Scale the gradients so that their joint ``norm_type`` norm is at most
    ``max_norm``; returns the norm before clipping (a 0-d tensor)."""
    grads = [p.grad for p in _params(parameters) if p.grad is not None]
    norm_type = float(norm_type)
    if not grads:
        return Tensor._from_array(np.array(0.0, dtype=np.float32))
    arrays = [np.asarray(g.detach().numpy()) for g in grads]
    if norm_type == math.inf:
        total = max(float(np.max(np.abs(a))) if a.size else 0.0 for a in arrays)
    else:
        total = float(sum(float(np.sum(np.abs(a.astype(np.float64)) ** norm_type))
                          for a in arrays) ** (1.0 / norm_type))
    dt = grads[0].dtype.np
    if error_if_nonfinite and not math.isfinite(total):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from "
                           "`parameters` is non-finite, so it cannot be clipped. To disable "
                           "this error and scale the gradients by the non-finite norm anyway, "
                           "set `error_if_nonfinite=False`")
    coef = min(max_norm / (total + 1e-6), 1.0)
    with grad_mode.no_grad():
        for g in grads:
            g.mul_(float(np.asarray(coef, dtype=dt)))
    return Tensor._from_array(np.array(total, dtype=dt))


def clip_grad_value_(parameters, clip_value: float, foreach=None) -> None:
    """Clamp every gradient element into [-clip_value, clip_value]."""
    clip_value = float(clip_value)
    with grad_mode.no_grad():
        for p in _params(parameters):
            if p.grad is not None:
                p.grad.clamp_(min=-clip_value, max=clip_value)
