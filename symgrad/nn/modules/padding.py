"""The padding layers as PyTorch's: ``ZeroPad{1,2,3}d``, ``ConstantPad{1,2,3}d``,
``ReflectionPad{1,2,3}d``, ``ReplicationPad{1,2,3}d``, ``CircularPad{1,2,3}d`` -- one
int or a tuple of 2 / 4 / 6 pads (left, right, top, bottom, front, back), their reprs,
and :func:`symgrad.nn.functional.pad` as their forward."""
from __future__ import annotations

from ..padding import pad
from ..windowing import ntuple
from .module import Module

__all__ = ["ZeroPad1d", "ZeroPad2d", "ZeroPad3d", "ConstantPad1d", "ConstantPad2d",
           "ConstantPad3d", "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d",
           "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d", "CircularPad1d",
           "CircularPad2d", "CircularPad3d"]


class _PadNd(Module):
    """A padding layer of ``_rank`` dims in mode ``_mode``."""

    _mode, _rank = "", 0

    def __init__(self, padding) -> None:
        super().__init__()
        self.padding = ntuple(padding, 2 * self._rank)

    def forward(self, input):
        return pad(input, self.padding, self._mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    _mode = "constant"

    def __init__(self, padding, value: float) -> None:
        super().__init__(padding)
        self.value = value

    def forward(self, input):
        return pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """Pads the last dim with ``value``.

    >>> import symgrad as torch
    >>> torch.nn.ConstantPad1d((1, 2), 3.5)
    ConstantPad1d(padding=(1, 2), value=3.5)
    """

    _rank = 1

    def __init__(self, padding, value: float) -> None:     # named in a missing-value error
        super().__init__(padding, value)


class ConstantPad2d(_ConstantPadNd):
    """Pads the last 2 dims with ``value``."""

    _rank = 2

    def __init__(self, padding, value: float) -> None:
        super().__init__(padding, value)


class ConstantPad3d(_ConstantPadNd):
    """Pads the last 3 dims with ``value``."""

    _rank = 3

    def __init__(self, padding, value: float) -> None:
        super().__init__(padding, value)


class _ZeroPad:
    """Constant padding with 0.0, printed with the pads only."""

    def __init__(self, padding) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad1d(_ZeroPad, ConstantPad1d):
    """Pads the last dim with zeros."""


class ZeroPad2d(_ZeroPad, ConstantPad2d):
    """Pads the last 2 dims with zeros.

    >>> import symgrad as torch
    >>> torch.nn.ZeroPad2d((1, 1, 2, 0))
    ZeroPad2d((1, 1, 2, 0))
    """


class ZeroPad3d(_ZeroPad, ConstantPad3d):
    """Pads the last 3 dims with zeros."""


class ReflectionPad1d(_PadNd):
    """Pads the last dim with its reflection about the edge element."""

    _mode, _rank = "reflect", 1


class ReflectionPad2d(_PadNd):
    """Pads the last 2 dims with their reflection about the edge elements.

    >>> import symgrad as torch
    >>> torch.nn.ReflectionPad2d(1)(torch.arange(4.).reshape(1, 2, 2))
    tensor([[[3., 2., 3., 2.],
             [1., 0., 1., 0.],
             [3., 2., 3., 2.],
             [1., 0., 1., 0.]]])
    """

    _mode, _rank = "reflect", 2


class ReflectionPad3d(_PadNd):
    """Pads the last 3 dims with their reflection about the edge elements."""

    _mode, _rank = "reflect", 3


class ReplicationPad1d(_PadNd):
    """Pads the last dim by repeating its edge elements."""

    _mode, _rank = "replicate", 1


class ReplicationPad2d(_PadNd):
    """Pads the last 2 dims by repeating their edge elements."""

    _mode, _rank = "replicate", 2


class ReplicationPad3d(_PadNd):
    """Pads the last 3 dims by repeating their edge elements."""

    _mode, _rank = "replicate", 3


class _CircularPadNd(_PadNd):
    _mode = "circular"

    def forward(self, input):
        r = self._rank
        if input.dim() not in (r + 1, r + 2):
            raise ValueError(f"expected {r + 1}D or {r + 2}D input (got {input.dim()}D input)")
        return super().forward(input)


class CircularPad1d(_CircularPadNd):
    """Pads the last dim by wrapping it around."""

    _rank = 1


class CircularPad2d(_CircularPadNd):
    """Pads the last 2 dims by wrapping them around."""

    _rank = 2


class CircularPad3d(_CircularPadNd):
    """Pads the last 3 dims by wrapping them around."""

    _rank = 3
