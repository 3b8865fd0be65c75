"""Learning-rate schedules, as ``torch.optim.lr_scheduler``: each ``step()`` sets every
parameter group's ``lr`` by PyTorch's recurrence, so the floats equal PyTorch's.

``base`` (the stepping protocol, warnings, state dicts), ``decay`` (closed-form decays),
``cycles`` (one-cycle, warm restarts), ``cyclic`` (CyclicLR), ``combined`` (sequential and chained schedules),
``plateau`` (reduce on a stalled metric)."""
from .base import LRScheduler
from .combined import ChainedScheduler, SequentialLR
from .cycles import CosineAnnealingWarmRestarts, OneCycleLR
from .cyclic import CyclicLR
from .decay import (ConstantLR, CosineAnnealingLR, ExponentialLR, LambdaLR, LinearLR,
                    MultiplicativeLR, MultiStepLR, PolynomialLR, StepLR)
from .plateau import ReduceLROnPlateau

__all__ = ["LRScheduler", "LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR",
           "ConstantLR", "LinearLR", "ExponentialLR", "PolynomialLR", "CosineAnnealingLR",
           "CosineAnnealingWarmRestarts", "OneCycleLR", "CyclicLR", "SequentialLR", "ChainedScheduler",
           "ReduceLROnPlateau"]
