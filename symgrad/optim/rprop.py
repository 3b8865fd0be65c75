"""``Rprop``: resilient backpropagation -- a per-element step size grown by ``etaplus``
while the gradient keeps its sign, shrunk by ``etaminus`` when it flips (that step then
skipped), clamped to ``step_sizes`` -- step by step PyTorch's single-tensor update."""
from __future__ import annotations

import numpy as np

from .optimizer import Optimizer, _array, _bump, _new, _step_tensor
from .traced import select

__all__ = ["Rprop"]


class Rprop(Optimizer):
    """Sign-based updates with adaptive per-element step sizes."""

    _FLAGS = ("maximize",)

    def __init__(self, params, lr: float = 1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *,
                 capturable: bool = False, foreach=None, maximize: bool = False,
                 differentiable: bool = False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        defaults = dict(lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            (etaminus, etaplus), (lo, hi) = self._options(group, "etas", "step_sizes")
            for p, x, g in self._updates(group):
                state = self._state(p)
                if not state:
                    state["step"] = _step_tensor(0.0)
                    state["prev"] = _new(x)
                    state["step_size"] = _new(x, group["lr"])
                step_t = _array(state["step"])
                step_t += 1
                prev, size = _array(state["prev"]), _array(state["step_size"])
                sign = np.sign(g * prev)
                flipped = sign < 0
                factor = select(sign > 0, etaplus, select(flipped, etaminus,
                                                          select(sign == 0, 1.0, sign)))
                size *= factor
                size[...] = np.minimum(np.maximum(size, lo), hi)      # clamp_(lo, hi)
                g = select(flipped, 0.0, g)
                x -= np.sign(g) * size                                # addcmul, value -1
                prev[...] = g
                _bump(p)
        return loss
