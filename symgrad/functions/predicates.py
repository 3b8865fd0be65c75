"""Elementwise predicates with bool results: ``signbit`` (the ``signbit`` primitive for
floating tensors -- its sign bit, so ``-0.0`` and a negative NaN count -- and a comparison
for integers) and ``logical_xor`` (two comparisons with zero and their inequality).
No gradient flows through them (bool results), as in PyTorch; they trace into compiled
code like any other elementwise operation."""
from __future__ import annotations

from ..errors import type_name
from ..graph import dtypes
from . import elementwise as E
from .common import Tensor

__all__ = ["signbit", "logical_xor", "logical_xor_method"]


def signbit(input: Tensor) -> Tensor:
    """True where the sign bit of ``input`` is set (``-0.0``, ``-nan`` included).

    >>> import symgrad as torch
    >>> torch.signbit(torch.tensor([-1.0, 0.0, -0.0, 2.0]))
    tensor([ True, False,  True, False])
    """
    x = _tensor_arg("signbit", "input", 1, input)
    if x.dtype.is_floating_point:
        return E.unary("signbit", x)
    if x.dtype is dtypes.bool_:
        return E.binary("ne", x, x)           # (all False, the input's shape)
    return E.binary("lt", x, 0)


def logical_xor(input: Tensor, other: Tensor) -> Tensor:
    """True where exactly one of ``input`` and ``other`` is nonzero (NaN counts as
    nonzero), broadcast.

    >>> import symgrad as torch
    >>> torch.logical_xor(torch.tensor([1.0, 0.0, 2.0]), torch.tensor([0, 0, 3]))
    tensor([ True, False, False])
    """
    a = _tensor_arg("logical_xor", "input", 1, input)
    b = _tensor_arg("logical_xor", "other", 2, other)
    return E.binary("ne", E.binary("ne", a, 0), E.binary("ne", b, 0))


def logical_xor_method(self: Tensor, other: Tensor) -> Tensor:
    """``Tensor.logical_xor`` (PyTorch counts ``other`` as its first argument)."""
    return logical_xor(self, _tensor_arg("logical_xor", "other", 1, other))


def _tensor_arg(fn: str, name: str, pos: int, value) -> Tensor:
    if not isinstance(value, Tensor):
        raise TypeError(f"{fn}(): argument '{name}' (position {pos}) must be Tensor, not "
                        f"{type_name(value)}")
    return value
