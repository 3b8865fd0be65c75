"""``Adamax``: Adam with the infinity norm of past gradients in place of the second moment,
step by step PyTorch's single-tensor update (its operation order, its float32 step)."""
from __future__ import annotations

import numpy as np

from .adam import _check
from .optimizer import Optimizer, _array, _bump, _count, _new, _step_tensor

__all__ = ["Adamax"]


class Adamax(Optimizer):
    """``m = lerp(m, g, 1 - beta1)``, ``u = max(beta2 u, |g| + eps)``,
    ``p -= lr / (1 - beta1^t) * m / u``."""

    _FLAGS = ("maximize",)
    _NONZERO = ("weight_decay",)

    def __init__(self, params, lr: float = 2e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, foreach=None, *, maximize: bool = False,
                 differentiable: bool = False, capturable: bool = False):
        _check(lr, eps, betas, weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize, differentiable=differentiable,
                        capturable=capturable)
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
                    state["exp_inf"] = _new(x)
                step_t = _array(state["step"])
                step_t += 1
                if group["weight_decay"] != 0:
                    g = g + wd * x
                m, u = _array(state["exp_avg"]), _array(state["exp_inf"])
                m += (g - m) * (1 - beta1)                 # lerp (weight < 0.5)
                u *= beta2
                np.maximum(u, np.abs(g) + eps, out=u)
                clr = lr / (1 - beta1 ** _count(step_t))
                x += ((-clr) * m) / u                      # addcdiv: (value * m) / u
                _bump(p)
        return loss
