"""``Identity``, ``Linear``, ``Bilinear`` with PyTorch's default initialisation."""
from __future__ import annotations

import math

from ...device import check_device
from ...functions.creation import empty
from ...graph import dtypes
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["Identity", "Linear", "Bilinear"]


def _factory(device, dtype):
    check_device(device)
    return dtypes.as_dtype(dtype) if dtype is not None else None


class Identity(Module):
    """Returns its input (any constructor arguments are ignored, as in PyTorch)."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """``y = x Wᵀ + b``; W and b uniform in ±1/sqrt(in_features) (PyTorch's
    ``kaiming_uniform_(a=sqrt(5))``).

    >>> import symgrad as torch
    >>> torch.nn.Linear(3, 2).weight.shape
    torch.Size([2, 3])
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None,
                 dtype=None):
        super().__init__()
        dt = _factory(device, dtype)
        self.in_features, self.out_features = in_features, out_features
        self.weight = Parameter(empty((out_features, in_features), dtype=dt))
        if bias:
            self.bias = Parameter(empty(out_features, dtype=dt))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.weight.shape[1]
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class Bilinear(Module):
    """``y_k = x1ᵀ A_k x2 + b_k``; A and b uniform in ±1/sqrt(in1_features)."""

    def __init__(self, in1_features: int, in2_features: int, out_features: int,
                 bias: bool = True, device=None, dtype=None):
        super().__init__()
        dt = _factory(device, dtype)
        self.in1_features, self.in2_features = in1_features, in2_features
        self.out_features = out_features
        self.weight = Parameter(empty((out_features, in1_features, in2_features), dtype=dt))
        if bias:
            self.bias = Parameter(empty(out_features, dtype=dt))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1 / math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")

