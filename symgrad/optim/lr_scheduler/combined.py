"""Schedules made of schedules: ``SequentialLR`` (one after another, switching at
milestones) and ``ChainedScheduler`` (all of them every step)."""
from __future__ import annotations

from ...tracing import python_effect

from bisect import bisect_right

from .base import LRScheduler, group_values
from .plateau import ReduceLROnPlateau

__all__ = ["SequentialLR", "ChainedScheduler"]


def _check(kind: str, optimizer, schedulers) -> None:
    for i, s in enumerate(schedulers):
        if not hasattr(s, "optimizer"):
            raise TypeError(f"{kind} at index {i} should have `optimizer` as its attribute.")
        if isinstance(s, ReduceLROnPlateau):
            raise ValueError(
                f"{kind} does not support `ReduceLROnPlateau` scheduler as it requires "
                "additional kwargs to be specified when calling `step`, but got one at index "
                f"{i} in the given schedulers sequence.")
        if optimizer != s.optimizer:
            raise ValueError(
                f"{kind} expects all schedulers to belong to the same optimizer, but got "
                f"scheduler {type(s).__name__} at index {i} has {s.optimizer}, which is "
                f"different from {type(optimizer).__name__}.")


class _Composite(LRScheduler):
    def state_dict(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        d["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return d

    def load_state_dict(self, state_dict: dict) -> None:
        state_dict = dict(state_dict)
        saved = state_dict.pop("_schedulers")
        self.__dict__.update(state_dict)
        for s, d in zip(self._schedulers, saved):
            s.load_state_dict(d)


class SequentialLR(_Composite):
    """``schedulers[i]`` runs from ``milestones[i-1]`` on, restarted at its milestone.

    >>> import symgrad as torch
    >>> opt = torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=1.0)
    >>> warm = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.5, total_iters=2)
    >>> decay = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.5)
    >>> sched = torch.optim.lr_scheduler.SequentialLR(opt, [warm, decay], milestones=[2])
    >>> lrs = []
    >>> for _ in range(4):
    ...     opt.step(); sched.step(); lrs.append(sched.get_last_lr()[0])
    >>> lrs
    [0.75, 1.0, 0.5, 0.25]
    """

    def __init__(self, optimizer, schedulers, milestones, last_epoch: int = -1):
        kind = type(self).__name__
        if len(schedulers) < 1:
            raise ValueError(f"{kind} expects at least one scheduler, but got no scheduler.")
        _check(kind, optimizer, schedulers)
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(
                "Sequential Schedulers expects number of schedulers provided to be one more "
                "than the number of milestone points, but got number of schedulers "
                f"{len(schedulers)} and the number of milestones to be equal to "
                f"{len(milestones)}")
        self._schedulers, self._milestones = schedulers, milestones
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        for group in optimizer.param_groups:      # undo the schedulers' initial steps
            group["lr"] = group["initial_lr"]
        self.recursive_undo()
        first = self._schedulers[bisect_right(milestones, 0)]
        first._initial_step()
        self._last_lr = first.get_last_lr()

    def recursive_undo(self, sched=None) -> None:
        """One epoch back on every (nested) scheduler."""
        sched = self if sched is None else sched
        if hasattr(sched, "_schedulers"):
            for s in sched._schedulers:
                self.recursive_undo(s)
        elif hasattr(sched, "last_epoch"):
            sched.last_epoch -= 1

    def step(self) -> None:
        python_effect(f"{type(self).__name__}.step()")   # (in a compiled step: uncompiled)
        self.last_epoch += 1
        i = bisect_right(self._milestones, self.last_epoch)
        sched = self._schedulers[i]
        if i > 0 and self._milestones[i - 1] == self.last_epoch:
            sched._update_lr(0)
        else:
            sched.step()
        self._last_lr = sched.get_last_lr()


class ChainedScheduler(_Composite):
    """Every scheduler's ``step()`` at each step, in order (their factors compose)."""

    def __init__(self, schedulers, optimizer=None):
        kind = type(self).__name__
        if len(schedulers) < 1:
            raise ValueError(f"{kind} expects at least one scheduler to be chained, but got "
                             "no scheduler.")
        optimizer = optimizer or schedulers[0].optimizer
        _check(kind, optimizer, schedulers)
        self._schedulers, self.optimizer = schedulers, optimizer
        self._last_lr = group_values(self._schedulers[-1].optimizer, "lr")

    def step(self) -> None:
        python_effect(f"{type(self).__name__}.step()")   # (in a compiled step: uncompiled)
        for s in self._schedulers:
            s.step()
        self._last_lr = group_values(self._schedulers[-1].optimizer, "lr")
