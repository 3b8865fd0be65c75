"""``Conv1d``, ``Conv2d``, ``Conv3d``, ``ConvTranspose1d``, ``ConvTranspose2d`` and
``ConvTranspose3d`` as PyTorch's:
constructor checks and texts, weight (out, in / groups, *kernel) -- transposed: (in,
out / groups, *kernel) -- and bias with PyTorch's default initialisation
(``kaiming_uniform_(a=sqrt(5))``, bias uniform in ±1/sqrt(fan_in), fan_in = weight.shape[1]
x prod(kernel)), their reprs, the padding modes zeros, reflect, replicate and circular of
the convolutions, and the ``output_size`` argument of the transposed ones."""
from __future__ import annotations

import math

from ...functions.creation import empty
from ...tensor import Size
from ..conv_transpose import conv_transpose_nd, output_size
from ..convolution import conv_nd
from ..windowing import ntuple
from .. import init
from ..parameter import Parameter
from .linear import _factory
from .module import Module

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"]


class _ConvNd(Module):
    """What the convolutions share (PyTorch's ``_ConvNd``); ``_name`` is the functional
    form's name, ``_rank`` the number of spatial dims, ``_transposed`` whether the weight
    is (in, out / groups, *kernel)."""

    _name, _rank, _transposed = "", 0, False

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1,
                 padding=0, dilation=1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", device=None, dtype=None, output_padding=0):
        super().__init__()
        dt = _factory(device, dtype)
        r = self._rank
        kernel_size, stride, dilation = (ntuple(v, r) for v in (kernel_size, stride, dilation))
        if not isinstance(padding, str):
            padding = ntuple(padding, r)
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        valid_padding_strings = {"same", "valid"}
        if isinstance(padding, str):
            if padding not in valid_padding_strings:
                raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                                 f"{valid_padding_strings}")
            if padding == "same" and any(s != 1 for s in stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
        valid_padding_modes = {"zeros", "reflect", "replicate", "circular"}
        if padding_mode not in valid_padding_modes:
            raise ValueError(f"padding_mode must be one of {valid_padding_modes}, but got "
                             f"padding_mode='{padding_mode}'")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.dilation, self.groups, self.padding_mode = dilation, groups, padding_mode
        self.transposed, self.output_padding = self._transposed, ntuple(output_padding, r)
        channels = ((in_channels, out_channels // groups) if self._transposed else
                    (out_channels, in_channels // groups))
        self.weight = Parameter(empty(channels + kernel_size, dtype=dt))
        if bias:
            self.bias = Parameter(empty(out_channels, dtype=dt))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.weight.shape[1] * math.prod(self.kernel_size)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        return conv_nd(self._name, self._rank, input, self.weight, self.bias, self.stride,
                       self.padding, self.dilation, self.groups, self.padding_mode)

    def extra_repr(self) -> str:
        s = "{in_channels}, {out_channels}, kernel_size={kernel_size}, stride={stride}"
        if self.padding != (0,) * len(self.padding):
            s += ", padding={padding}"
        if self.dilation != (1,) * len(self.dilation):
            s += ", dilation={dilation}"
        if self.output_padding != (0,) * len(self.output_padding):
            s += ", output_padding={output_padding}"
        if self.groups != 1:
            s += ", groups={groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += ", padding_mode={padding_mode}"
        return s.format(**self.__dict__)


class Conv1d(_ConvNd):
    """1-D convolution over (N, C, L) or (C, L) inputs.

    >>> import symgrad as torch
    >>> torch.nn.Conv1d(4, 8, 3, stride=2)
    Conv1d(4, 8, kernel_size=(3,), stride=(2,))
    """

    _name, _rank = "conv1d", 1


class Conv2d(_ConvNd):
    """2-D convolution over (N, C, H, W) or (C, H, W) inputs.

    >>> import symgrad as torch
    >>> torch.nn.Conv2d(3, 16, 3, padding=1)
    Conv2d(3, 16, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))
    """

    _name, _rank = "conv2d", 2


class Conv3d(_ConvNd):
    """3-D convolution over (N, C, D, H, W) or (C, D, H, W) inputs.

    >>> import symgrad as torch
    >>> torch.nn.Conv3d(3, 4, 3, padding=1)
    Conv3d(3, 4, kernel_size=(3, 3, 3), stride=(1, 1, 1), padding=(1, 1, 1))
    """

    _name, _rank = "conv3d", 3


class _ConvTransposeNd(_ConvNd):
    """What ConvTranspose1d and ConvTranspose2d share (PyTorch's ``_ConvTransposeNd``)."""

    _transposed = True

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1,
                 padding=0, output_padding=0, groups: int = 1, bias: bool = True,
                 dilation=1, padding_mode: str = "zeros", device=None, dtype=None):
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for '
                             f'{type(self).__name__}')
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, device, dtype, output_padding)

    def _output_padding(self, input, output_size_, stride, padding, kernel_size, r, dilation):
        """The output padding giving ``output_size_`` (PyTorch's checks and texts)."""
        if output_size_ is None:
            return ntuple(self.output_padding, r)
        lead = 2 if input.dim() == r + 2 else 1
        if len(output_size_) == lead + r:
            output_size_ = output_size_[lead:]
        if len(output_size_) != r:
            raise ValueError(f"ConvTranspose{r}D: for {input.dim()}D input, output_size must "
                             f"have {r} or {lead + r} elements (got {len(output_size_)})")
        least = output_size(tuple(input.shape[lead:]), kernel_size, stride, padding,
                            (0,) * r, dilation)
        most = [m + s - 1 for m, s in zip(least, stride)]
        for size, lo, hi in zip(output_size_, least, most):
            if size < lo or size > hi:
                raise ValueError(f"requested an output size of {output_size_}, but valid sizes "
                                 f"range from {least} to {most} (for an input of "
                                 f"{Size(input.shape[2:])})")
        return tuple(size - lo for size, lo in zip(output_size_, least))

    def forward(self, input, output_size=None):
        r = self._rank
        op = self._output_padding(input, output_size, self.stride, self.padding,
                                  self.kernel_size, r, self.dilation)
        return conv_transpose_nd(self._name, r, input, self.weight, self.bias, self.stride,
                                 self.padding, op, self.groups, self.dilation)


class ConvTranspose1d(_ConvTransposeNd):
    """1-D transposed convolution over (N, C, L) or (C, L) inputs.

    >>> import symgrad as torch
    >>> torch.nn.ConvTranspose1d(4, 8, 3, stride=2, output_padding=1)
    ConvTranspose1d(4, 8, kernel_size=(3,), stride=(2,), output_padding=(1,))
    """

    _name, _rank = "conv_transpose1d", 1


class ConvTranspose2d(_ConvTransposeNd):
    """2-D transposed convolution over (N, C, H, W) or (C, H, W) inputs.

    >>> import symgrad as torch
    >>> torch.nn.ConvTranspose2d(16, 3, 2, stride=2)
    ConvTranspose2d(16, 3, kernel_size=(2, 2), stride=(2, 2))
    """

    _name, _rank = "conv_transpose2d", 2


class ConvTranspose3d(_ConvTransposeNd):
    """3-D transposed convolution over (N, C, D, H, W) or (C, D, H, W) inputs."""

    _name, _rank = "conv_transpose3d", 3
