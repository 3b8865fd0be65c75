"""``Adadelta`` (rho, eps, weight decay, maximize), step by step PyTorch's update
(``_single_tensor_adadelta``, PyTorch's CPU path)."""
from __future__ import annotations

import numpy as np

from .optimizer import Optimizer, _array, _bump, _new, _step_tensor

__all__ = ["Adadelta"]


class Adadelta(Optimizer):
    """Steps scaled by the ratio of running root mean squares of past updates and of
    gradients (Zeiler 2012), times ``lr``.

    >>> import symgrad as torch
    >>> w = torch.nn.Parameter(torch.tensor([1.0]))
    >>> opt = torch.optim.Adadelta([w])
    >>> (w * w).sum().backward(); opt.step(); w
    Parameter containing:
    tensor([0.9968], requires_grad=True)
    """

    def __init__(self, params, lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6,
                 weight_decay: float = 0, foreach=None, *, capturable: bool = False,
                 maximize: bool = False, differentiable: bool = False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay,
                        maximize=maximize, capturable=capturable, foreach=foreach,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    _FLAGS = ("maximize",)
    _NONZERO = ("weight_decay",)

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, rho, eps, wd = self._options(group, "lr", "rho", "eps", "weight_decay")
            for p, x, g in self._updates(group):
                state = self._state(p)
                if not state:
                    state["step"] = _step_tensor(0.0)
                    state["square_avg"] = _new(x)
                    state["acc_delta"] = _new(x)
                step_t = _array(state["step"])
                step_t += 1
                if group["weight_decay"] != 0:
                    g = g + wd * x
                sq, acc = _array(state["square_avg"]), _array(state["acc_delta"])
                sq *= rho
                sq += (1 - rho) * g * g
                delta = np.sqrt(acc + eps) / np.sqrt(sq + eps) * g
                acc *= rho
                acc += (1 - rho) * delta * delta
                x += (-lr) * delta
                _bump(p)
        return loss
