"""``SGD`` with momentum, dampening, Nesterov momentum, weight decay and ``maximize``,
step by step PyTorch's update."""
from __future__ import annotations

from .optimizer import Optimizer, _array, _bump, _new

__all__ = ["SGD"]


class SGD(Optimizer):
    """``p -= lr * d`` with ``d`` the (weight-decayed, momentum-averaged) gradient.

    >>> import symgrad as torch
    >>> w = torch.nn.Parameter(torch.tensor([1.0]))
    >>> opt = torch.optim.SGD([w], lr=0.1)
    >>> (w * 3).sum().backward(); opt.step(); w
    Parameter containing:
    tensor([0.7000], requires_grad=True)
    """

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0, dampening: float = 0,
                 weight_decay: float = 0, nesterov: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, differentiable: bool = False,
                 fused: bool | None = None):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov, maximize=maximize,
                        foreach=foreach, differentiable=differentiable, fused=fused)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, defaults)

    _FLAGS = ("nesterov", "maximize")
    _NONZERO = ("momentum", "weight_decay")

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr, momentum, dampening, wd = self._options(group, "lr", "momentum", "dampening",
                                                        "weight_decay")
            for p, x, g in self._updates(group):
                if group["weight_decay"] != 0:
                    g = g + wd * x
                if group["momentum"] != 0:
                    state = self._state(p)
                    buf = state.get("momentum_buffer")
                    if buf is None:               # the first step: the gradient itself
                        state["momentum_buffer"] = buf = _new(x)
                        buf = _array(buf)
                        buf[...] = g
                    else:
                        buf = _array(buf)
                        buf *= momentum
                        buf += (1 - dampening) * g
                    g = g + momentum * buf if group["nesterov"] else buf
                x -= lr * g
                _bump(p)
        return loss
