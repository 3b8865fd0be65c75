"""The single-step recurrent cells ``RNNCell``, ``LSTMCell``, ``GRUCell`` as PyTorch's:
parameters ``weight_ih``, ``weight_hh``, ``bias_ih``, ``bias_hh`` drawn uniform in
±1/sqrt(hidden_size), batched or unbatched input, a zero state when none is given.  The
step itself is :func:`symgrad.nn.recurrence.cell_step`."""
from __future__ import annotations

import math

from ...device import check_device
from ...functions.creation import empty, zeros
from ...graph import dtypes
from .. import functional as F
from .. import init
from ..parameter import Parameter
from ..recurrence import cell_step
from .module import Module

__all__ = ["RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]


class RNNCellBase(Module):
    """What the three cells share: ``num_chunks`` gate blocks of ``hidden_size`` rows."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int,
                 device=None, dtype=None) -> None:
        super().__init__()
        check_device(device)
        dt = dtypes.as_dtype(dtype) if dtype is not None else None
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        self.weight_ih = Parameter(empty((num_chunks * hidden_size, input_size), dtype=dt))
        self.weight_hh = Parameter(empty((num_chunks * hidden_size, hidden_size), dtype=dt))
        if bias:
            self.bias_ih = Parameter(empty(num_chunks * hidden_size, dtype=dt))
            self.bias_hh = Parameter(empty(num_chunks * hidden_size, dtype=dt))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def _step(self, mode: str, input, state):
        xg = F.linear(input, self.weight_ih, self.bias_ih)
        return cell_step(mode, xg, state, self.weight_hh, self.bias_hh)

    def _batched(self, name: str, input):
        if input.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.dim()}D "
                             "instead")
        return input.dim() == 2

    def _zeros(self, input):
        return zeros((input.shape[0], self.hidden_size), dtype=input.dtype)

    def _one_state(self, name: str, mode: str, input, hx):
        """The forward of a cell whose state is one tensor (``RNNCell``, ``GRUCell``)."""
        batched = self._batched(name, input)
        if hx is not None and hx.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected hidden to be 1D or 2D, got {hx.dim()}D "
                             "instead")
        if not batched:
            input = input.unsqueeze(0)
        hx = self._zeros(input) if hx is None else (hx if batched else hx.unsqueeze(0))
        if mode is None:
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        out = self._step(mode, input, hx)
        return out if batched else out.squeeze(0)


class RNNCell(RNNCellBase):
    """``h' = tanh(x W_ihᵀ + b_ih + h W_hhᵀ + b_hh)`` (or relu).

    >>> import symgrad as torch
    >>> torch.nn.RNNCell(3, 4)(torch.randn(2, 3)).shape
    torch.Size([2, 4])
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        mode = {"tanh": "RNN_TANH", "relu": "RNN_RELU"}.get(self.nonlinearity)
        return self._one_state("RNNCell", mode, input, hx)


class LSTMCell(RNNCellBase):
    """One LSTM step: ``(h', c')`` from ``x`` and ``(h, c)``.

    >>> import symgrad as torch
    >>> h, c = torch.nn.LSTMCell(3, 4)(torch.randn(2, 3))
    >>> h.shape, c.shape
    (torch.Size([2, 4]), torch.Size([2, 4]))
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input, hx=None):
        batched = self._batched("LSTMCell", input)
        if hx is not None:
            for i, v in enumerate(hx):
                if v.dim() not in (1, 2):
                    raise ValueError(f"LSTMCell: Expected hx[{i}] to be 1D or 2D, got "
                                     f"{v.dim()}D instead")
        if not batched:
            input = input.unsqueeze(0)
        if hx is None:
            z = self._zeros(input)
            hx = (z, z)
        elif not batched:
            hx = (hx[0].unsqueeze(0), hx[1].unsqueeze(0))
        h, c = self._step("LSTM", input, tuple(hx))
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    """One GRU step: ``h' = n + z * (h - n)``.

    >>> import symgrad as torch
    >>> torch.nn.GRUCell(3, 4)(torch.randn(3)).shape
    torch.Size([4])
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input, hx=None):
        return self._one_state("GRUCell", "GRU", input, hx)
