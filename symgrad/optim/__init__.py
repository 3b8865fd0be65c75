"""``symgrad.optim``: optimizers and learning-rate schedules, as ``torch.optim``."""
from . import lr_scheduler
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .lbfgs import LBFGS
from .optimizer import Optimizer
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "LBFGS", "lr_scheduler"]
