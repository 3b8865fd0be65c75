"""``symgrad.nn``: modules and layers (``Module``, ``Linear``, ``Sequential``, losses, ...),
``Parameter``, ``init``, ``utils`` and the functional API (``symgrad.nn.functional``), as
PyTorch's ``torch.nn``."""
from . import functional, init, utils
from .modules import *  # noqa: F401,F403  (the layers, listed in modules.__all__)
from .modules import __all__ as _modules_all
from .parameter import Buffer, Parameter

__all__ = ["functional", "init", "utils", "Parameter", "Buffer", *_modules_all]
