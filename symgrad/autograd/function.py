"""``symgrad.autograd.function``: the names of PyTorch's ``torch.autograd.function``
module (``Function``, ``FunctionCtx``, ``once_differentiable``, ...), implemented in
:mod:`symgrad.autograd.custom_function`."""
from .custom_function import (BackwardCFunction, Function, FunctionCtx, FunctionMeta,
                              InplaceFunction, once_differentiable)

__all__ = ["FunctionCtx", "BackwardCFunction", "FunctionMeta", "Function", "once_differentiable",
           "InplaceFunction"]
