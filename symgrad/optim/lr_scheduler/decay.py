"""Decaying schedules: by a function of the epoch (``LambdaLR``, ``MultiplicativeLR``), in
steps (``StepLR``, ``MultiStepLR``, ``ConstantLR``), linearly, exponentially, polynomially
and by a cosine -- each by PyTorch's recurrence from the groups' current rates, with its
closed form for ``step(epoch)``."""
from __future__ import annotations

import math
import types
from bisect import bisect_right
from collections import Counter
from typing import Callable

from .base import LRScheduler, group_values

__all__ = ["LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR", "ConstantLR", "LinearLR",
           "ExponentialLR", "PolynomialLR", "CosineAnnealingLR"]


class _LambdaScheduler(LRScheduler):
    """A schedule given by one function of the epoch per group (its state dict keeps a
    callable object's attributes, not the function)."""

    def __init__(self, optimizer, lr_lambda, last_epoch: int = -1):
        self.optimizer = optimizer
        n = len(optimizer.param_groups)
        if not isinstance(lr_lambda, (list, tuple)):
            self.lr_lambdas: list[Callable] = [lr_lambda] * n
        else:
            if len(lr_lambda) != n:
                raise ValueError(f"Expected {n} lr_lambdas, but got {len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        super().__init__(optimizer, last_epoch)

    def state_dict(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
        d["lr_lambdas"] = [None if isinstance(f, types.FunctionType) else f.__dict__.copy()
                           for f in self.lr_lambdas]
        return d

    def load_state_dict(self, state_dict: dict) -> None:
        state_dict = dict(state_dict)
        saved = state_dict.pop("lr_lambdas")
        self.__dict__.update(state_dict)
        for f, attrs in zip(self.lr_lambdas, saved):
            if attrs is not None:
                f.__dict__.update(attrs)


class LambdaLR(_LambdaScheduler):
    """``lr = initial_lr * lr_lambda(epoch)``.

    >>> import symgrad as torch
    >>> opt = torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=0.1)
    >>> sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda e: 0.5 ** e)
    >>> opt.step(); sched.step(); sched.get_last_lr()
    [0.05]
    """

    def get_lr(self):
        self._warn_if_called_by_hand()
        return [base * f(self.last_epoch) for f, base in zip(self.lr_lambdas, self.base_lrs)]


class MultiplicativeLR(_LambdaScheduler):
    """``lr *= lr_lambda(epoch)`` at each step after the first."""

    def __init__(self, optimizer, lr_lambda, last_epoch: int = -1):
        fns = lr_lambda if isinstance(lr_lambda, (list, tuple)) else [lr_lambda]
        for f in fns:
            if not callable(f):
                raise TypeError(f"lr_lambda should be a function, but got {type(f).__name__}")
        super().__init__(optimizer, lr_lambda, last_epoch)

    def get_lr(self):
        self._warn_if_called_by_hand()
        if self._is_initial:
            return group_values(self.optimizer, "lr")
        return [g["lr"] * f(self.last_epoch)
                for f, g in zip(self.lr_lambdas, self.optimizer.param_groups)]


class StepLR(LRScheduler):
    """``lr *= gamma`` every ``step_size`` epochs."""

    def __init__(self, optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1):
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_if_called_by_hand()
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return group_values(self.optimizer, "lr")
        return [g["lr"] * self.gamma for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base * self.gamma ** (self.last_epoch // self.step_size)
                for base in self.base_lrs]


class MultiStepLR(LRScheduler):
    """``lr *= gamma`` at each milestone (twice at a milestone given twice)."""

    def __init__(self, optimizer, milestones, gamma: float = 0.1, last_epoch: int = -1):
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_if_called_by_hand()
        if self.last_epoch not in self.milestones:
            return group_values(self.optimizer, "lr")
        return [g["lr"] * self.gamma ** self.milestones[self.last_epoch]
                for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        ms = sorted(self.milestones.elements())
        return [base * self.gamma ** bisect_right(ms, self.last_epoch) for base in self.base_lrs]


class ConstantLR(LRScheduler):
    """``lr * factor`` for the first ``total_iters`` epochs, then ``lr``."""

    def __init__(self, optimizer, factor: float = 1.0 / 3, total_iters: int = 5,
                 last_epoch: int = -1):
        if factor > 1.0 or factor < 0:
            raise ValueError("Constant multiplicative factor expected to be between 0 and 1.")
        self.factor, self.total_iters = factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_if_called_by_hand()
        groups = self.optimizer.param_groups
        if self.last_epoch == 0:
            return [g["lr"] * self.factor for g in groups]
        if self.last_epoch != self.total_iters:
            return group_values(self.optimizer, "lr")
        return [g["lr"] * (1.0 / self.factor) for g in groups]

    def _get_closed_form_lr(self):
        return [base * (self.factor + (self.last_epoch >= self.total_iters) * (1 - self.factor))
                for base in self.base_lrs]


class LinearLR(LRScheduler):
    """The factor on ``lr`` moves linearly from ``start_factor`` to ``end_factor`` over
    ``total_iters`` epochs (a warm-up, typically)."""

    def __init__(self, optimizer, start_factor: float = 1.0 / 3, end_factor: float = 1.0,
                 total_iters: int = 5, last_epoch: int = -1):
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError("Starting multiplicative factor expected to be greater than 0 and "
                             "less or equal to 1.")
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError("Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor, self.end_factor = start_factor, end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_if_called_by_hand()
        groups, e = self.optimizer.param_groups, self.last_epoch
        if e == 0:
            return [g["lr"] * self.start_factor for g in groups]
        if self._is_initial or e > self.total_iters:
            return group_values(self.optimizer, "lr")
        span = self.end_factor - self.start_factor
        ratio = 1.0 + span / (self.total_iters * self.start_factor + (e - 1) * span)
        return [g["lr"] * ratio for g in groups]

    def _get_closed_form_lr(self):
        span = self.end_factor - self.start_factor
        return [base * (self.start_factor
                        + span * min(self.total_iters, self.last_epoch) / self.total_iters)
                for base in self.base_lrs]


class ExponentialLR(LRScheduler):
    """``lr *= gamma`` every epoch."""

    def __init__(self, optimizer, gamma: float, last_epoch: int = -1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_if_called_by_hand()
        if self._is_initial:
            return group_values(self.optimizer, "lr")
        return [g["lr"] * self.gamma for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base * self.gamma ** self.last_epoch for base in self.base_lrs]


class PolynomialLR(LRScheduler):
    """``lr = initial_lr * (1 - epoch / total_iters) ** power`` until ``total_iters``."""

    def __init__(self, optimizer, total_iters: int = 5, power: float = 1.0,
                 last_epoch: int = -1):
        self.total_iters, self.power = total_iters, power
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_if_called_by_hand()
        e, n = self.last_epoch, self.total_iters
        if self._is_initial or e > n:
            return group_values(self.optimizer, "lr")
        factor = ((1.0 - e / n) / (1.0 - (e - 1) / n)) ** self.power
        return [g["lr"] * factor for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base * (1.0 - min(self.total_iters, self.last_epoch) / self.total_iters)
                ** self.power for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """Half a cosine from ``initial_lr`` down to ``eta_min`` over ``T_max`` epochs (then
    back up: the recurrence continues periodically)."""

    def __init__(self, optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1):
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._warn_if_called_by_hand()
        groups, e, T, low = self.optimizer.param_groups, self.last_epoch, self.T_max, \
            self.eta_min
        if self._is_initial:
            return group_values(self.optimizer, "lr")
        if self._step_count == 1 and e > 0:
            return [low + (base - low) * (1 + math.cos(e * math.pi / T)) / 2
                    for base in self.base_lrs]
        if (e - 1 - T) % (2 * T) == 0:
            return [g["lr"] + (base - low) * (1 - math.cos(math.pi / T)) / 2
                    for base, g in zip(self.base_lrs, groups)]
        return [(1 + math.cos(math.pi * e / T)) / (1 + math.cos(math.pi * (e - 1) / T))
                * (g["lr"] - low) + low for g in groups]

    def _get_closed_form_lr(self):
        return [self.eta_min + (base - self.eta_min)
                * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for base in self.base_lrs]
