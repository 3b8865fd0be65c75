"""``optim.swa_utils``: stochastic weight averaging as PyTorch's -- ``AveragedModel`` (a
copy of a model whose parameters, and optionally buffers, are a running mean or an EMA
of the model's), ``SWALR`` (anneals each group's rate to its ``swa_lr``), ``update_bn``
(recomputes batch-norm statistics over a loader) and the averaging functions."""
from __future__ import annotations

import itertools
import math
import warnings
from copy import deepcopy

import numpy as np

from ..autograd import grad_mode
from ..functions.creation import tensor
from ..graph import dtypes
from ..tensor import Tensor
from ..nn.modules.batchnorm import _BatchNorm
from ..nn.modules.module import Module
from .lr_scheduler.base import LRScheduler, per_group

__all__ = ["AveragedModel", "update_bn", "SWALR", "get_ema_multi_avg_fn",
           "get_swa_multi_avg_fn", "get_ema_avg_fn", "get_swa_avg_fn"]


def _check_decay(decay: float) -> None:
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in "
                         f"[0,1] range.")


def _lerp_(dst, src, weight: float) -> None:
    """``dst.lerp_(src, weight)`` (torch's lerp: ``dst + w (src - dst)`` for w < 0.5, else
    ``src - (src - dst)(1 - w)``)."""
    if weight < 0.5:
        dst.copy_(dst + weight * (src - dst))
    else:
        dst.copy_(src - (src - dst) * (1 - weight))


def get_ema_multi_avg_fn(decay: float = 0.999):
    """In-place EMA of lists of tensors: ``ema.lerp_(current, 1 - decay)``."""
    _check_decay(decay)

    def ema_update(ema_param_list, current_param_list, _):
        with grad_mode.no_grad():
            for p_ema, p_model in zip(ema_param_list, current_param_list, strict=True):
                if p_ema.is_floating_point():
                    _lerp_(p_ema, p_model, 1 - decay)
                else:
                    p_ema.copy_(p_ema * decay + p_model * (1 - decay))
    return ema_update


def get_swa_multi_avg_fn():
    """In-place running mean of lists of tensors (``n`` averaged so far)."""
    def swa_update(averaged_param_list, current_param_list, num_averaged):
        with grad_mode.no_grad():
            weight = 1 / (float(num_averaged) + 1)
            if isinstance(num_averaged, Tensor):      # (torch: 1 / (n + 1) a float32 tensor)
                weight = float(np.float32(weight))
            for p_avg, p_model in zip(averaged_param_list, current_param_list, strict=True):
                if p_avg.is_floating_point():
                    _lerp_(p_avg, p_model, weight)
                else:
                    p_avg.copy_(p_avg + (p_model - p_avg) / (num_averaged + 1))
    return swa_update


def get_ema_avg_fn(decay: float = 0.999):
    """``decay * ema + (1 - decay) * current``."""
    _check_decay(decay)

    def ema_update(ema_param, current_param, num_averaged):
        with grad_mode.no_grad():
            return decay * ema_param + (1 - decay) * current_param
    return ema_update


def get_swa_avg_fn():
    """``avg + (current - avg) / (n + 1)``."""
    def swa_update(averaged_param, current_param, num_averaged):
        with grad_mode.no_grad():
            return averaged_param + (current_param - averaged_param) / (num_averaged + 1)
    return swa_update


class AveragedModel(Module):
    """A deep copy of ``model`` holding the average of the parameters it was updated with
    (:meth:`update_parameters`), by default their running mean; ``n_averaged`` counts
    them."""

    def __init__(self, model: Module, device=None, avg_fn=None, multi_avg_fn=None,
                 use_buffers: bool = False) -> None:
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", tensor(0, dtype=dtypes.int64))
        self.avg_fn, self.multi_avg_fn, self.use_buffers = avg_fn, multi_avg_fn, use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def update_parameters(self, model: Module) -> None:
        """Average ``model``'s parameters (and buffers with ``use_buffers``) into this one's;
        the first call copies them."""
        mine = (itertools.chain(self.module.parameters(), self.module.buffers())
                if self.use_buffers else self.parameters())
        theirs = (itertools.chain(model.parameters(), model.buffers())
                  if self.use_buffers else model.parameters())
        mine_d, theirs_d = [], []
        first = int(self.n_averaged) == 0
        with grad_mode.no_grad():
            for p_avg, p_model in zip(mine, theirs):
                mine_d.append(p_avg.detach())
                theirs_d.append(p_model.detach())
                if first:
                    p_avg.detach().copy_(p_model.detach())
            if int(self.n_averaged) > 0:
                if self.multi_avg_fn is not None:
                    self.multi_avg_fn(mine_d, theirs_d, self.n_averaged)
                elif self.avg_fn is None:
                    avg = get_swa_avg_fn()
                    for p_avg, p_model in zip(mine_d, theirs_d, strict=True):
                        p_avg.copy_(avg(p_avg, p_model, self.n_averaged))
                else:
                    for p_avg, p_model in zip(mine_d, theirs_d, strict=True):
                        p_avg.copy_(self.avg_fn(p_avg, p_model, self.n_averaged))
            if not self.use_buffers:
                for b_swa, b_model in zip(self.module.buffers(), model.buffers(), strict=True):
                    b_swa.detach().copy_(b_model.detach())
            self.n_averaged += 1


def update_bn(loader, model: Module, device=None) -> None:
    """Recompute the running statistics of every batch norm of ``model`` as a cumulative
    average over one pass of ``loader`` (the first item of a tuple / list batch is the
    input)."""
    with grad_mode.no_grad():
        momenta = {}
        for module in model.modules():
            if isinstance(module, _BatchNorm):
                module.reset_running_stats()
                momenta[module] = module.momentum
        if not momenta:
            return
        was_training = model.training
        model.train()
        for module in momenta:
            module.momentum = None
        for input in loader:
            if isinstance(input, (list, tuple)):
                input = input[0]
            if device is not None:
                input = input.to(device)
            model(input)
        for module, momentum in momenta.items():
            module.momentum = momentum
        model.train(was_training)


class SWALR(LRScheduler):
    """Anneals each group's rate from its value to ``swa_lr`` over ``anneal_epochs``
    (cosine or linear), then keeps it."""

    def __init__(self, optimizer, swa_lr, anneal_epochs: int = 10,
                 anneal_strategy: str = "cos", last_epoch: int = -1) -> None:
        for value, group in zip(per_group("swa_lr", optimizer, swa_lr), optimizer.param_groups,
                                strict=True):
            group["swa_lr"] = value
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy}")
        self._set_anneal_func(anneal_strategy)
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got "
                             f"{anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t):
        return t

    @staticmethod
    def _cosine_anneal(t):
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr, swa_lr, alpha):
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def get_lr(self):
        if not self._get_lr_called_within_step:
            warnings.warn("To get the last learning rate computed by the scheduler, please use "
                          "`get_last_lr()`.", UserWarning, stacklevel=2)
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_t = max(0, min(1, (step - 1) / max(1, self.anneal_epochs)))
        prev_alpha = self.anneal_func(prev_t)
        prev_lrs = [self._get_initial_lr(group["lr"], group["swa_lr"], prev_alpha)
                    for group in self.optimizer.param_groups]
        t = max(0, min(1, step / max(1, self.anneal_epochs)))
        alpha = self.anneal_func(t)
        return [group["swa_lr"] * alpha + lr * (1 - alpha)
                for group, lr in zip(self.optimizer.param_groups, prev_lrs, strict=True)]

    def _set_anneal_func(self, anneal_strategy: str) -> None:
        self._anneal_strategy = anneal_strategy
        self.anneal_func = self._cosine_anneal if anneal_strategy == "cos" else \
            self._linear_anneal

    def state_dict(self):
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "anneal_func")}

    def load_state_dict(self, state_dict) -> None:
        self.__dict__.update(state_dict)
        self._set_anneal_func(self._anneal_strategy)
