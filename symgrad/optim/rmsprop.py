"""``RMSprop`` (centered, momentum, weight decay, maximize), step by step PyTorch's
update."""
from __future__ import annotations

import numpy as np

from .optimizer import Optimizer, _array, _bump, _new, _step_tensor

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    """Divide the gradient by a running root mean square of its recent magnitudes."""

    def __init__(self, params, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0, momentum: float = 0, centered: bool = False,
                 capturable: bool = False, foreach=None, maximize: bool = False,
                 differentiable: bool = False):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if eps < 0.0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if alpha < 0.0:
            raise ValueError(f"Invalid alpha value: {alpha}")
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, capturable=capturable, foreach=foreach,
                        maximize=maximize, differentiable=differentiable)
        super().__init__(params, defaults)

    _FLAGS = ("centered", "maximize")
    _NONZERO = ("momentum", "weight_decay")

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, alpha, eps, wd, momentum = self._options(group, "lr", "alpha", "eps",
                                                         "weight_decay", "momentum")
            centered = group["centered"]
            for p, x, g in self._updates(group):
                state = self._state(p)
                if not state:
                    state["step"] = _step_tensor(0.0)
                    state["square_avg"] = _new(x)
                    if group["momentum"] > 0:
                        state["momentum_buffer"] = _new(x)
                    if centered:
                        state["grad_avg"] = _new(x)
                step_t = _array(state["step"])
                step_t += 1
                if group["weight_decay"] != 0:
                    g = g + wd * x
                sq = _array(state["square_avg"])
                sq *= alpha
                sq += (1 - alpha) * (g * g)
                if centered:
                    ga = _array(state["grad_avg"])
                    ga += (1 - alpha) * (g - ga)
                    avg = np.sqrt(sq - ga * ga) + eps
                else:
                    avg = np.sqrt(sq) + eps
                if group["momentum"] > 0:
                    buf = _array(state["momentum_buffer"])
                    buf *= momentum
                    buf += g / avg
                    x -= lr * buf
                else:
                    x += (-lr) * g / avg
                _bump(p)
        return loss
