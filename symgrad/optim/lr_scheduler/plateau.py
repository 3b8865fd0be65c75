"""``ReduceLROnPlateau``: multiply the rates by ``factor`` when a metric has not improved
for ``patience`` epochs (``step(metric)``), with cooldown, thresholds and floors."""
from __future__ import annotations

from ...tracing import python_effect

import math
import warnings

from ..optimizer import Optimizer
from .base import EPOCH_DEPRECATION_WARNING, LRScheduler, group_values

__all__ = ["ReduceLROnPlateau"]


class ReduceLROnPlateau(LRScheduler):
    """``step(metric)`` after each evaluation.

    >>> import symgrad as torch
    >>> opt = torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=1.0)
    >>> sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=1, factor=0.5)
    >>> for loss in [1.0, 1.0, 1.0]:
    ...     sched.step(loss)
    >>> sched.get_last_lr()
    [0.5]
    """

    def __init__(self, optimizer, mode: str = "min", factor: float = 0.1, patience: int = 10,
                 threshold: float = 1e-4, threshold_mode: str = "rel", cooldown: int = 0,
                 min_lr=0, eps: float = 1e-8):
        if factor >= 1.0:
            raise ValueError("Factor should be < 1.0.")
        self.factor = factor
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        n = len(optimizer.param_groups)
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != n:
                raise ValueError(f"expected {n} min_lrs, got {len(min_lr)}")
            self.default_min_lr, self.min_lrs = None, list(min_lr)
        else:
            self.default_min_lr, self.min_lrs = min_lr, [min_lr] * n
        self.patience, self.cooldown, self.eps = patience, cooldown, eps
        self.last_epoch = 0
        self._last_lr = group_values(optimizer, "lr")
        self._init_is_better(mode, threshold, threshold_mode)
        self._reset()

    def _reset(self) -> None:
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    def step(self, metrics, epoch: int | None = None) -> None:
        python_effect(f"{type(self).__name__}.step()")   # (in a compiled step: uncompiled)
        current = float(metrics)
        if epoch is None:
            epoch = self.last_epoch + 1
        else:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
        self.last_epoch = epoch
        if self._is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            self._reduce_lr()
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = group_values(self.optimizer, "lr")

    def _reduce_lr(self) -> None:
        groups = self.optimizer.param_groups
        if len(groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise RuntimeError(
                    f"The number of param groups in the `optimizer` ({len(groups)}) differs "
                    f"from when `ReduceLROnPlateau` was initialized ({len(self.min_lrs)}), "
                    "usually due to a new param group being added to the optimizer. Please "
                    "modify the `min_lrs` field to match the length of the `optimizer` param "
                    "groups.")
            self.min_lrs = [self.default_min_lr] * len(groups)
        for i, group in enumerate(groups):
            old = float(group["lr"])
            new = max(old * self.factor, self.min_lrs[i])
            if old - new > self.eps:
                group["lr"] = new

    @property
    def in_cooldown(self) -> bool:
        return self.cooldown_counter > 0

    def _is_better(self, a: float, best: float) -> bool:
        if self.mode == "min" and self.threshold_mode == "rel":
            return a < best * (1.0 - self.threshold)
        if self.mode == "min":
            return a < best - self.threshold
        if self.threshold_mode == "rel":
            return a > best * (self.threshold + 1.0)
        return a > best + self.threshold

    def _init_is_better(self, mode: str, threshold: float, threshold_mode: str) -> None:
        if mode not in ("min", "max"):
            raise ValueError("mode " + mode + " is unknown!")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError("threshold mode " + threshold_mode + " is unknown!")
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.mode, self.threshold, self.threshold_mode = mode, threshold, threshold_mode

    def load_state_dict(self, state_dict: dict) -> None:
        self.__dict__.update(state_dict)
        self._init_is_better(self.mode, self.threshold, self.threshold_mode)
