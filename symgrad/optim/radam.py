"""``RAdam``: Adam with the variance of its adaptive learning rate rectified (plain
momentum SGD while the approximated SMA length ``rho_t`` is at most 5), step by step
PyTorch's single-tensor update; inside ``symgrad.compile`` the branch on ``rho_t`` is a
per-call selection."""
from __future__ import annotations

import numpy as np

from .adam import _check
from .optimizer import Optimizer, _array, _bump, _count, _new, _step_tensor
from .traced import TracedArray, select

__all__ = ["RAdam"]


class RAdam(Optimizer):
    """Rectified Adam."""

    _FLAGS = ("maximize", "decoupled_weight_decay")
    _NONZERO = ("weight_decay",)

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, decoupled_weight_decay: bool = False, *,
                 foreach=None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False):
        _check(lr, eps, betas, weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        maximize=maximize, foreach=foreach, capturable=capturable,
                        decoupled_weight_decay=decoupled_weight_decay,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, (beta1, beta2), eps, wd = self._options(group, "lr", "betas", "eps",
                                                        "weight_decay")
            for p, x, g in self._updates(group):
                state = self._state(p)
                if not state:
                    state["step"] = _step_tensor(0.0)
                    state["exp_avg"] = _new(x)
                    state["exp_avg_sq"] = _new(x)
                step_t = _array(state["step"])
                step_t += 1
                step = _count(step_t)
                if group["weight_decay"] != 0:
                    if group["decoupled_weight_decay"]:
                        x *= 1 - lr * wd
                    else:
                        g = g + wd * x
                m, v = _array(state["exp_avg"]), _array(state["exp_avg_sq"])
                m += (g - m) * (1 - beta1)                  # lerp (weight < 0.5)
                v *= beta2
                v += ((1 - beta2) * g) * g                  # addcmul
                bc1 = 1 - beta1 ** step
                bc2 = 1 - beta2 ** step
                corrected = m / bc1
                rho_inf = 2 / (1 - beta2) - 1
                rho_t = rho_inf - 2 * step * (beta2 ** step) / bc2
                plain = corrected * lr
                if isinstance(rho_t, TracedArray) or rho_t > 5.0:
                    ratio = (rho_t - 4) * (rho_t - 2) * rho_inf / (
                        (rho_inf - 4) * (rho_inf - 2) * rho_t)
                    if isinstance(ratio, TracedArray):       # (rho_t <= 5: not selected)
                        ratio = np.maximum(ratio, 0.0)
                    rect = ratio ** 0.5
                    adaptive = (bc2 ** 0.5) / (np.sqrt(v) + eps)
                    rectified = plain * adaptive * rect
                    update = select(rho_t > 5.0, rectified, plain) \
                        if isinstance(rho_t, TracedArray) else rectified
                else:
                    update = plain
                x -= update
                _bump(p)
        return loss
