"""``ASGD``: averaged stochastic gradient descent -- SGD with a decaying step ``eta`` and a
running average ``ax`` of the iterates from step ``t0`` on -- step by step PyTorch's
single-tensor update (``eta`` and ``mu`` kept as float32 0-d tensors, as PyTorch keeps
them), or with ``foreach=True`` its multi-tensor one (``p -= eta (g + lambd p)``, the
average always blended, the next ``eta`` computed in float32 from the float32 step)."""
from __future__ import annotations

import numpy as np

from .nadam import as_float32
from .optimizer import Optimizer, _array, _bump, _count, _new, _step_tensor
from .traced import TracedArray, select

__all__ = ["ASGD"]


class ASGD(Optimizer):
    """``p = p (1 - lambd eta) - eta g``; ``ax`` averages ``p`` once ``t > t0``."""

    _FLAGS = ("maximize", "foreach")
    _NONZERO = ("weight_decay",)

    def __init__(self, params, lr: float = 1e-2, lambd: float = 1e-4, alpha: float = 0.75,
                 t0: float = 1e6, weight_decay: float = 0, foreach=None,
                 maximize: bool = False, differentiable: bool = False,
                 capturable: bool = False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize, differentiable=differentiable,
                        capturable=capturable)
        super().__init__(params, defaults)

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, lambd, alpha, t0, wd = self._options(group, "lr", "lambd", "alpha", "t0",
                                                     "weight_decay")
            for p, x, g in self._updates(group):
                state = self._state(p)
                if not state:
                    state["step"] = _step_tensor(0.0)
                    state["eta"] = _step_tensor(group["lr"])
                    state["mu"] = _step_tensor(1.0)
                    state["ax"] = _new(x)
                step_t = _array(state["step"])
                step_t += 1
                if group["weight_decay"] != 0:
                    g = g + wd * x
                eta, mu = _array(state["eta"]), _array(state["mu"])
                ax = _array(state["ax"])
                step = _count(step_t)
                if group["foreach"]:
                    x += (-1.0 * (g + lambd * x)) * eta          # _foreach_addcmul_
                    ax += (x - ax) * mu
                    # torch.as_tensor(lr / ((1 + lambd * lr * step) ** alpha)) of the
                    # float32 step tensor: float32 arithmetic, lr / t as t.reciprocal() * lr
                    # (Python 1.0: a weak scalar, the arithmetic stays float32)
                    t = (as_float32(lambd * lr) * step_t + 1.0) ** as_float32(alpha)
                    eta[...] = (1.0 / t) * as_float32(lr)
                else:
                    eta_value = _count(eta)
                    x *= 1 - lambd * eta_value
                    x += (-eta_value) * g
                    if isinstance(mu, TracedArray):
                        ax[...] = select(mu != 1, ax + (x - ax) * mu, x)
                    elif float(mu) != 1:
                        ax += (x - ax) * mu
                    else:
                        ax[...] = x
                    eta[...] = lr / ((1 + lambd * lr * step) ** alpha)
                mu[...] = 1 / np.maximum(step - t0, 1.0) if isinstance(step, TracedArray) \
                    else 1 / max(1, step - t0)
                _bump(p)
        return loss
