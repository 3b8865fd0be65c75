"""``LazyLinear`` and its ``UninitializedParameter``: a linear layer whose ``in_features``
is read from its first input, as PyTorch's -- until then the parameters are
uninitialised (repr ``<UninitializedParameter>``, ``in_features=0``); the first call
materialises them at ``(out_features, in_features)``, initialises them as ``Linear`` does
(the same draws) and the module becomes a :class:`Linear`."""
from __future__ import annotations

import numpy as np

from ...autograd import grad_mode
from ...graph import dtypes
from ..parameter import Parameter
from .linear import Linear, _factory
from .module import Module

__all__ = ["LazyLinear", "UninitializedParameter"]


class UninitializedParameter(Parameter):
    """A parameter without a shape yet; :meth:`materialize` gives it one (and makes it a
    plain :class:`Parameter`)."""

    def __new__(cls, requires_grad: bool = True, device=None, dtype=None):
        p = Parameter.__new__(cls, None, requires_grad)
        p._lazy_dtype = _factory(device, dtype) or dtypes.get_default_dtype()
        return p

    def __init__(self, requires_grad: bool = True, device=None, dtype=None):
        pass

    def __repr__(self) -> str:
        return "<UninitializedParameter>"

    __str__ = __repr__

    def materialize(self, shape, device=None, dtype=None) -> None:
        """Give the parameter storage of ``shape`` (uninitialised values)."""
        dt = _factory(device, dtype) or self._lazy_dtype
        self._data = np.empty(tuple(shape), dt.np)
        self._dtype = dt
        self.__class__ = Parameter


class LazyLinear(Linear):
    """``Linear(in_features, out_features)`` with ``in_features`` taken from the first
    input's last dim."""

    cls_to_become = Linear

    def __init__(self, out_features: int, bias: bool = True, device=None, dtype=None):
        Module.__init__(self)
        self.in_features, self.out_features = 0, out_features
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)
        else:
            self.register_parameter("bias", None)

    def has_uninitialized_params(self) -> bool:
        return any(isinstance(p, UninitializedParameter)
                   for p in (self.weight, self.bias) if p is not None)

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input) -> None:
        if self.has_uninitialized_params():
            with grad_mode.no_grad():
                self.in_features = input.shape[-1]
                self.weight.materialize((self.out_features, self.in_features))
                if self.bias is not None:
                    self.bias.materialize((self.out_features,))
                self.reset_parameters()

    def forward(self, input):
        self.initialize_parameters(input)
        self.__class__ = self.cls_to_become
        return Linear.forward(self, input)
