"""``Adam`` and ``AdamW`` (amsgrad, maximize; weight decay added to the gradient or
decoupled), step by step PyTorch's update."""
from __future__ import annotations

import numpy as np

from .optimizer import Optimizer, _array, _bump, _count, _new, _sqrt, _step_tensor

__all__ = ["Adam", "AdamW"]


def _check(lr, eps, betas, weight_decay):
    if lr < 0.0:
        raise ValueError(f"Invalid learning rate: {lr}")
    if eps < 0.0:
        raise ValueError(f"Invalid epsilon value: {eps}")
    if not 0.0 <= betas[0] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
    if not 0.0 <= betas[1] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
    if weight_decay < 0.0:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")


class Adam(Optimizer):
    """Adam: bias-corrected first and second moment estimates of the gradient."""

    _FLAGS = ("amsgrad", "maximize", "decoupled_weight_decay")
    _NONZERO = ("weight_decay",)

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, amsgrad: bool = False, *, foreach=None,
                 maximize: bool = False, capturable: bool = False, differentiable: bool = False,
                 fused=None, decoupled_weight_decay: bool = False):
        _check(lr, eps, betas, weight_decay)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable, fused=fused,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, (beta1, beta2), eps, wd = self._options(group, "lr", "betas", "eps",
                                                        "weight_decay")
            amsgrad = group["amsgrad"]
            decoupled = group.get("decoupled_weight_decay", False)
            for p, x, g in self._updates(group):
                state = self._state(p)
                if not state:
                    state["step"] = _step_tensor(0.0)
                    state["exp_avg"] = _new(x)
                    state["exp_avg_sq"] = _new(x)
                    if amsgrad:
                        state["max_exp_avg_sq"] = _new(x)
                step_t = _array(state["step"])
                step_t += 1
                step = _count(step_t)
                if group["weight_decay"] != 0:
                    if decoupled:
                        x *= 1 - lr * wd
                    else:
                        g = g + wd * x
                m, v = _array(state["exp_avg"]), _array(state["exp_avg_sq"])
                t, d = self._scratch(p, x)
                np.subtract(g, m, out=t)                   # lerp, as PyTorch's weight < 0.5
                t *= 1 - beta1
                m += t
                np.multiply(g, g, out=t)
                t *= 1 - beta2
                v *= beta2
                v += t
                bc1 = 1 - beta1 ** step
                bc2_sqrt = _sqrt(1 - beta2 ** step)
                if amsgrad:
                    vmax = _array(state["max_exp_avg_sq"])
                    np.maximum(vmax, v, out=vmax)
                    np.sqrt(vmax, out=d)
                else:
                    np.sqrt(v, out=d)
                d /= bc2_sqrt
                d += eps
                np.multiply(m, -(lr / bc1), out=t)         # addcdiv: (value * m) / denom
                t /= d
                x += t
                _bump(p)
        return loss


class AdamW(Adam):
    """Adam with decoupled weight decay (``p *= 1 - lr * weight_decay`` before the
    update)."""

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, *, maximize: bool = False,
                 foreach=None, capturable: bool = False, differentiable: bool = False,
                 fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         maximize=maximize, capturable=capturable,
                         differentiable=differentiable, fused=fused, decoupled_weight_decay=True)
