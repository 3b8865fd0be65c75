"""``LRScheduler``: the stepping protocol every schedule shares -- ``initial_lr`` set on
the groups, the initial step (``_is_initial``), ``last_epoch`` / ``get_last_lr``, the
closed form when an epoch is given, state dicts -- and PyTorch's warnings (a schedule
stepped before its optimizer, ``get_lr()`` called by hand, the deprecated epoch
argument)."""
from __future__ import annotations

from ...tracing import python_effect

import warnings
from typing import Any

from ..optimizer import Optimizer

__all__ = ["LRScheduler", "per_group", "group_values"]

EPOCH_DEPRECATION_WARNING = (
    "The epoch parameter in `scheduler.step()` was not necessary and is being deprecated "
    "where possible. Please use `scheduler.step()` to step the scheduler. During the "
    "deprecation, if epoch is different from None, the closed form is used instead of the "
    "new chainable form, where available. Please open an issue if you are unable to "
    "replicate your use case: https://github.com/pytorch/pytorch/issues/new/choose.")

_STEP_ORDER_WARNING = (
    "Detected call of `lr_scheduler.step()` before `optimizer.step()`. In PyTorch 1.1.0 and "
    "later, you should call them in the opposite order: `optimizer.step()` before "
    "`lr_scheduler.step()`.  Failure to do this will result in PyTorch skipping the first "
    "value of the learning rate schedule. See more details at "
    "https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate")


def group_values(optimizer: Optimizer, key: str) -> list:
    """``group[key]`` of every parameter group (KeyError when a group lacks it)."""
    return [group[key] for group in optimizer.param_groups]


def per_group(name: str, optimizer: Optimizer, value) -> list:
    """One value per parameter group: a list or tuple of the groups' length, or a value
    repeated."""
    n = len(optimizer.param_groups)
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f"{name} must have the same length as optimizer.param_groups. "
                             f"{name} has {len(value)} values, param_groups has {n}.")
        return list(value)
    return [value] * n


class LRScheduler:
    """Base class: subclasses give ``get_lr()`` (the groups' rates at ``last_epoch``,
    from their current rates) and may give ``_get_closed_form_lr()``."""

    _is_initial: bool = False
    _get_lr_called_within_step: bool = False

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        f"param 'initial_lr' is not specified in param_groups[{i}] when "
                        "resuming scheduler with last_epoch >= 0.\nThis typically happens "
                        "when:\n1. You're trying to resume training from a checkpoint but "
                        "haven't properly loaded the optimizer state\n2. You're using "
                        "last_epoch >= 0 for a fresh training run (not recommended)")
        self.base_lrs: list = group_values(optimizer, "initial_lr")
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self) -> None:
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def get_lr(self) -> list[float]:
        raise NotImplementedError

    def get_last_lr(self) -> list[float]:
        """The rates the last ``step()`` set."""
        return self._last_lr

    def _warn_if_called_by_hand(self) -> None:
        if not self._get_lr_called_within_step:
            warnings.warn("To get the last learning rate computed by the scheduler, please "
                          "use `get_last_lr()`.", UserWarning, stacklevel=3)

    def step(self, epoch: int | None = None) -> None:
        python_effect(f"{type(self).__name__}.step()")   # (in a compiled step: uncompiled)
        if self._step_count == 1 and not getattr(self.optimizer, "_opt_called", False):
            warnings.warn(_STEP_ORDER_WARNING, UserWarning, stacklevel=2)
        self._step_count += 1
        if epoch is not None:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
        self._update_lr(epoch)

    def _update_lr(self, epoch: int | None = None) -> None:
        self._get_lr_called_within_step = True
        try:
            if epoch is None:
                self.last_epoch += 1
                values = self.get_lr()
            else:
                self.last_epoch = epoch
                closed = getattr(self, "_get_closed_form_lr", None)
                values = closed() if closed is not None else self.get_lr()
        finally:
            self._get_lr_called_within_step = False
        for group, lr in zip(self.optimizer.param_groups, values, strict=True):
            group["lr"] = lr
        self._last_lr = group_values(self.optimizer, "lr")

    def state_dict(self) -> dict[str, Any]:
        """Every attribute but the optimizer."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.__dict__.update(state_dict)
