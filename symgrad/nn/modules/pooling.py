"""``MaxPool1d/2d/3d``, ``AvgPool1d/2d/3d`` and the adaptive ``AdaptiveAvgPool1d/2d/3d``,
``AdaptiveMaxPool1d/2d/3d`` as PyTorch's: arguments kept as given (``AvgPool1d`` as
1-tuples), stride defaulting to the kernel size, reprs."""
from __future__ import annotations

from .. import adaptive as A
from .. import pooling as P
from .. import unpooling as U
from ..windowing import ntuple
from .module import Module

__all__ = ["MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d",
           "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d",
           "AdaptiveMaxPool2d", "AdaptiveMaxPool3d"]


class _MaxPoolNd(Module):
    _pool = staticmethod(P.max_pool2d)

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1,
                 return_indices: bool = False, ceil_mode: bool = False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input):
        return self._pool(input, self.kernel_size, self.stride, self.padding, self.dilation,
                          ceil_mode=self.ceil_mode, return_indices=self.return_indices)

    def extra_repr(self) -> str:
        return ("kernel_size={kernel_size}, stride={stride}, padding={padding}, "
                "dilation={dilation}, ceil_mode={ceil_mode}".format(**self.__dict__))


class MaxPool1d(_MaxPoolNd):
    """Max pooling over (N, C, L) or (C, L) inputs."""

    _pool = staticmethod(P.max_pool1d)


class MaxPool2d(_MaxPoolNd):
    """Max pooling over (N, C, H, W) or (C, H, W) inputs.

    >>> import symgrad as torch
    >>> torch.nn.MaxPool2d(2)
    MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)
    """


class MaxPool3d(_MaxPoolNd):
    """Max pooling over (N, C, T, H, W) or (C, T, H, W) inputs.

    >>> import symgrad as torch
    >>> torch.nn.MaxPool3d(2)
    MaxPool3d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)
    """

    _pool = staticmethod(P.max_pool3d)


class MaxUnpool2d(Module):
    """The partial inverse of ``MaxPool2d`` (``F.max_unpool2d``).

    >>> import symgrad as torch
    >>> torch.nn.MaxUnpool2d(2)
    MaxUnpool2d(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0))
    """

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size = ntuple(kernel_size, 2)
        self.stride = ntuple(stride if stride is not None else kernel_size, 2)
        self.padding = ntuple(padding, 2)

    def forward(self, input, indices, output_size=None):
        return U.max_unpool2d(input, indices, self.kernel_size, self.stride, self.padding,
                              output_size)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class _AvgPoolNd(Module):
    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool1d(_AvgPoolNd):
    """Average pooling over (N, C, L) or (C, L) inputs."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True):
        super().__init__()
        self.kernel_size = ntuple(kernel_size, 1)
        self.stride = ntuple(stride if stride is not None else kernel_size, 1)
        self.padding = ntuple(padding, 1)
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad

    def forward(self, input):
        return P.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)


class _AvgPoolTuple(_AvgPoolNd):
    _pool = staticmethod(P.avg_pool2d)

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True, divisor_override=None):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def forward(self, input):
        return self._pool(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                          self.count_include_pad, self.divisor_override)


class AvgPool2d(_AvgPoolTuple):
    """Average pooling over (N, C, H, W) or (C, H, W) inputs.

    >>> import symgrad as torch
    >>> torch.nn.AvgPool2d(3, stride=2)
    AvgPool2d(kernel_size=3, stride=2, padding=0)
    """


class AvgPool3d(_AvgPoolTuple):
    """Average pooling over (N, C, T, H, W) or (C, T, H, W) inputs.

    >>> import symgrad as torch
    >>> torch.nn.AvgPool3d((2, 3, 1), stride=(1, 2, 1))
    AvgPool3d(kernel_size=(2, 3, 1), stride=(1, 2, 1), padding=0)
    """

    _pool = staticmethod(P.avg_pool3d)


class _AdaptiveAvgPoolNd(Module):
    _pool = staticmethod(A.adaptive_avg_pool2d)

    def __init__(self, output_size) -> None:
        super().__init__()
        self.output_size = output_size

    def forward(self, input):
        return self._pool(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptiveAvgPoolNd):
    """Adaptive average pooling over (N, C, L) or (C, L) inputs to ``output_size``."""

    _pool = staticmethod(A.adaptive_avg_pool1d)


class AdaptiveAvgPool2d(_AdaptiveAvgPoolNd):
    """Adaptive average pooling over (N, C, H, W) or (C, H, W) inputs to ``output_size``
    (an int, or (H, W) where None keeps the input's).

    >>> import symgrad as torch
    >>> torch.nn.AdaptiveAvgPool2d((5, None))
    AdaptiveAvgPool2d(output_size=(5, None))
    """


class AdaptiveAvgPool3d(_AdaptiveAvgPoolNd):
    """Adaptive average pooling over (N, C, T, H, W) or (C, T, H, W) inputs to
    ``output_size`` (an int, or (T, H, W) where None keeps the input's).

    >>> import symgrad as torch
    >>> torch.nn.AdaptiveAvgPool3d((None, 2, 3))
    AdaptiveAvgPool3d(output_size=(None, 2, 3))
    """

    _pool = staticmethod(A.adaptive_avg_pool3d)


class _AdaptiveMaxPoolNd(_AdaptiveAvgPoolNd):
    _pool = staticmethod(A.adaptive_max_pool2d)

    def __init__(self, output_size, return_indices: bool = False) -> None:
        super().__init__(output_size)
        self.return_indices = return_indices

    def forward(self, input):
        return self._pool(input, self.output_size, self.return_indices)


class AdaptiveMaxPool1d(_AdaptiveMaxPoolNd):
    """Adaptive max pooling over (N, C, L) or (C, L) inputs to ``output_size``."""

    _pool = staticmethod(A.adaptive_max_pool1d)


class AdaptiveMaxPool2d(_AdaptiveMaxPoolNd):
    """Adaptive max pooling over (N, C, H, W) or (C, H, W) inputs to ``output_size``.

    >>> import symgrad as torch
    >>> torch.nn.AdaptiveMaxPool2d(3, return_indices=True)
    AdaptiveMaxPool2d(output_size=3)
    """


class AdaptiveMaxPool3d(_AdaptiveMaxPoolNd):
    """Adaptive max pooling over (N, C, T, H, W) or (C, T, H, W) inputs to
    ``output_size``.

    >>> import symgrad as torch
    >>> torch.nn.AdaptiveMaxPool3d(2, return_indices=True)
    AdaptiveMaxPool3d(output_size=2)
    """

    _pool = staticmethod(A.adaptive_max_pool3d)
