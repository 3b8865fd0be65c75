"""``nn.Parameter`` and ``nn.Buffer``: tensors a :class:`~symgrad.nn.Module` registers
when they are assigned as its attributes."""
from __future__ import annotations

import numpy as np

from ..graph import dtypes
from ..tensor import Tensor

__all__ = ["Parameter", "Buffer"]


class Parameter(Tensor):
    """A tensor that is a module parameter: a leaf, ``requires_grad=True`` by default,
    sharing storage with the tensor it wraps.

    >>> import symgrad as torch
    >>> torch.nn.Parameter(torch.ones(2))
    Parameter containing:
    tensor([1., 1.], requires_grad=True)
    """

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True):
        if data is None:
            data = Tensor._from_array(np.empty((0,), dtypes.get_default_dtype().np))
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter(): argument 'data' must be Tensor, not "
                            f"{type(data).__name__}")
        if data._node is not None:
            raise RuntimeError("nn.Parameter of a traced tensor: create parameters outside "
                               "symgrad.compile")
        p = Tensor._from_array.__func__(cls, data._data, data._dtype)
        p._vc = data._vc                    # the same storage: in-place updates are shared
        p._requires_grad = bool(requires_grad)
        return p

    def __init__(self, data=None, requires_grad: bool = True):
        pass

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    __str__ = __repr__

    def __reduce_ex__(self, protocol):
        return (_rebuild_parameter, (self._data.copy(), self._requires_grad))

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        p = Parameter(Tensor._from_array(self._data.copy(), self._dtype), self._requires_grad)
        if self._grad is not None:
            p._grad = self._grad.__deepcopy__(memo)
        memo[id(self)] = p
        return p


def _rebuild_parameter(data: np.ndarray, requires_grad: bool) -> Parameter:
    return Parameter(Tensor._from_array(data), requires_grad)


class Buffer(Tensor):
    """Marks a tensor to be registered as a module buffer when assigned as an attribute
    (``self.running_mean = nn.Buffer(torch.zeros(3))``); ``persistent=False`` keeps it out
    of the state dict."""

    def __new__(cls, data: Tensor | None = None, *, persistent: bool = True):
        if data is None:
            data = Tensor._from_array(np.empty((0,), dtypes.get_default_dtype().np))
        b = Tensor._from_array.__func__(cls, data._data, data._dtype)
        b._vc = data._vc
        b.persistent = persistent
        return b

    def __init__(self, data=None, *, persistent: bool = True):
        pass
