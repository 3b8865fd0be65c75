"""``Adagrad`` (lr decay, weight decay, initial accumulator, maximize), step by step
PyTorch's update."""
from __future__ import annotations

import numpy as np

from .optimizer import Optimizer, _array, _bump, _count, _new, _step_tensor

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    """Scale each coordinate by the root of its accumulated squared gradients."""

    def __init__(self, params, lr: float = 1e-2, lr_decay: float = 0, weight_decay: float = 0,
                 initial_accumulator_value: float = 0, eps: float = 1e-10, foreach=None, *,
                 maximize: bool = False, differentiable: bool = False, fused=None):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if lr_decay < 0.0:
            raise ValueError(f"Invalid lr_decay value: {lr_decay}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if initial_accumulator_value < 0.0:
            raise ValueError(f"Invalid initial_accumulator_value value: "
                             f"{initial_accumulator_value}")
        if eps < 0.0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)
        for group in self.param_groups:            # PyTorch makes the state up front
            for p in group["params"]:
                state = self._state(p)
                state["step"] = _step_tensor(0.0)
                state["sum"] = _new(_array(p), group["initial_accumulator_value"])

    _FLAGS = ("maximize",)
    _NONZERO = ("weight_decay",)

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, lr_decay, eps, wd = self._options(group, "lr", "lr_decay", "eps",
                                                  "weight_decay")
            for p, x, g in self._updates(group):
                state = self._state(p)
                step_t = _array(state["step"])
                step_t += 1
                step = _count(step_t)
                if group["weight_decay"] != 0:
                    g = g + wd * x
                clr = lr / (1 + (step - 1) * lr_decay)
                acc = _array(state["sum"])
                acc += g * g
                x += (-clr) * g / (np.sqrt(acc) + eps)
                _bump(p)
        return loss
