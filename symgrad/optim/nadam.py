"""``NAdam``: Adam with Nesterov momentum and the momentum-decay schedule
``mu_t = beta1 (1 - 0.5 * 0.96^(t psi))``, step by step PyTorch's single-tensor update
(its running product of the ``mu_t`` kept as a float32 0-d tensor, as PyTorch keeps it)."""
from __future__ import annotations

import numpy as np

from .adam import _check
from .optimizer import Optimizer, _array, _bump, _count, _new, _step_tensor
from .traced import TracedArray

__all__ = ["NAdam"]


def as_float32(v):
    """A number (or traced one) rounded to float32, as PyTorch rounds a Python scalar
    that multiplies a float32 tensor."""
    return TracedArray(v.t.float()) if isinstance(v, TracedArray) else np.float32(v)


class NAdam(Optimizer):
    """Adam whose update looks one momentum step ahead."""

    _FLAGS = ("maximize", "decoupled_weight_decay")
    _NONZERO = ("weight_decay",)

    def __init__(self, params, lr: float = 2e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, momentum_decay: float = 4e-3,
                 decoupled_weight_decay: bool = False, *, foreach=None, maximize: bool = False,
                 capturable: bool = False, differentiable: bool = False):
        _check(lr, eps, betas, weight_decay)
        if not 0.0 <= momentum_decay:
            raise ValueError(f"Invalid momentum_decay value: {momentum_decay}")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        momentum_decay=momentum_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize,
                        foreach=foreach, capturable=capturable, differentiable=differentiable)
        super().__init__(params, defaults)

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, (beta1, beta2), eps, wd, psi = self._options(
                group, "lr", "betas", "eps", "weight_decay", "momentum_decay")
            for p, x, g in self._updates(group):
                state = self._state(p)
                if not state:
                    state["step"] = _step_tensor(0.0)
                    state["mu_product"] = _step_tensor(1.0)
                    state["exp_avg"] = _new(x)
                    state["exp_avg_sq"] = _new(x)
                step_t = _array(state["step"])
                step_t += 1
                step = _count(step_t)
                bc2 = 1 - beta2 ** step
                if group["weight_decay"] != 0:
                    if group["decoupled_weight_decay"]:
                        x *= 1 - lr * wd
                    else:
                        g = g + wd * x
                mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * psi)))
                mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * psi)))
                mu_product = _array(state["mu_product"])
                mu_product *= as_float32(mu)
                m, v = _array(state["exp_avg"]), _array(state["exp_avg_sq"])
                m += (g - m) * (1 - beta1)                  # lerp (weight < 0.5)
                v *= beta2
                v += ((1 - beta2) * g) * g                  # addcmul
                denom = np.sqrt(v / bc2) + eps
                mp = _count(mu_product)
                mp_next = mp * mu_next
                x += ((-lr * (1.0 - mu) / (1.0 - mp)) * g) / denom
                x += (((-lr * mu_next) / (1.0 - mp_next)) * m) / denom
                _bump(p)
        return loss
