"""The multi-layer recurrent layers ``RNN``, ``LSTM``, ``GRU`` as PyTorch's: constructor
checks, parameter names and order (``weight_ih_l0``, ..., ``_reverse``, ``weight_hr``),
uniform ±1/sqrt(hidden_size) initialisation, padded / unbatched / packed inputs,
dropout between layers, bidirectional layers and LSTM projections.  The arithmetic is
in :mod:`symgrad.nn.recurrence`."""
from __future__ import annotations

import math
import numbers
import warnings

from ...device import check_device
from ...functions.creation import empty, zeros
from ...graph import dtypes
from .. import functional as F
from .. import init
from .. import recurrence as RC
from ..parameter import Parameter
from ..utils.rnn import PackedSequence, batch_size_list
from ...functions.selection import index_select
from ...functions.shape import cat
from .module import Module

__all__ = ["RNNBase", "RNN", "LSTM", "GRU"]


def _check_sizes(input_size, hidden_size, num_layers, bias, batch_first, dropout,
                 proj_size) -> None:
    if (not isinstance(dropout, numbers.Number) or isinstance(dropout, bool)
            or not 0 <= dropout <= 1):
        raise ValueError("dropout should be a number in range [0, 1] representing the "
                         "probability of an element being zeroed")
    if dropout > 0 and num_layers == 1:
        warnings.warn("dropout option adds dropout after all but last recurrent layer, so "
                      "non-zero dropout expects num_layers greater than 1, but got "
                      f"dropout={dropout} and num_layers={num_layers}", stacklevel=4)
    for name, v in (("bias", bias), ("batch_first", batch_first)):
        if not isinstance(v, bool):
            raise TypeError(f"{name} should be of type bool, got: {type(v).__name__}")
    for name, v in (("input_size", input_size), ("hidden_size", hidden_size)):
        if not isinstance(v, int):
            raise TypeError(f"{name} should be of type int, got: {type(v).__name__}")
        if v <= 0:
            raise ValueError(f"{name} must be greater than zero")
    if num_layers <= 0:
        raise ValueError("num_layers must be greater than zero")
    if proj_size < 0:
        raise ValueError("proj_size should be a positive integer or zero to disable "
                         "projections")
    if proj_size >= hidden_size:
        raise ValueError("proj_size has to be smaller than hidden_size")


class RNNBase(Module):
    """What ``RNN``, ``LSTM`` and ``GRU`` share (``mode`` is ``'RNN_TANH'``,
    ``'RNN_RELU'``, ``'LSTM'`` or ``'GRU'``)."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device=None,
                 dtype=None) -> None:
        super().__init__()
        check_device(device)
        if mode not in ("RNN_TANH", "RNN_RELU", "LSTM", "GRU"):
            raise ValueError("Unrecognized RNN mode: " + mode)
        self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
        self.num_layers, self.bias, self.batch_first = num_layers, bias, batch_first
        self.dropout, self.bidirectional, self.proj_size = float(dropout), bidirectional, \
            proj_size
        _check_sizes(input_size, hidden_size, num_layers, bias, batch_first, dropout,
                     proj_size)
        dt = dtypes.as_dtype(dtype) if dtype is not None else None
        gates = RC.gate_count(mode) * hidden_size
        out_size = proj_size if proj_size > 0 else hidden_size
        dirs = 2 if bidirectional else 1
        self._flat_weights_names, self._all_weights = [], []
        for layer in range(num_layers):
            for direction in range(dirs):
                in_size = input_size if layer == 0 else out_size * dirs
                shapes = [("weight_ih", (gates, in_size)), ("weight_hh", (gates, out_size))]
                if bias:
                    shapes += [("bias_ih", (gates,)), ("bias_hh", (gates,))]
                if proj_size > 0:
                    shapes.append(("weight_hr", (proj_size, hidden_size)))
                suffix = "_reverse" if direction == 1 else ""
                names = [f"{n}_l{layer}{suffix}" for n, _ in shapes]
                for name, (_, shape) in zip(names, shapes):
                    setattr(self, name, Parameter(empty(shape, dtype=dt)))
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    @property
    def _flat_weights(self) -> list:
        return [getattr(self, n, None) for n in self._flat_weights_names]

    @property
    def all_weights(self) -> list:
        return [[getattr(self, n) for n in names] for names in self._all_weights]

    def flatten_parameters(self) -> None:
        """Nothing to do on the CPU (PyTorch packs the weights for cuDNN)."""

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s

    # ---- checks ---------------------------------------------------------------------------
    def _check_input(self, input, packed: bool) -> None:
        w = self._flat_weights[0]
        if input.dtype != w.dtype:
            raise ValueError(
                f"RNN input dtype ({input.dtype}) does not match weight dtype ({w.dtype}). "
                f"Convert input: input.to({w.dtype}), or convert model: "
                f"model.to({input.dtype})")
        want = 2 if packed else 3
        if input.dim() != want:
            raise RuntimeError(f"input must have {want} dimensions, got {input.dim()}")
        if self.input_size != input.shape[-1]:
            raise RuntimeError("input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {input.shape[-1]}")

    def _state_shape(self, batch: int, size: int) -> tuple:
        return (self.num_layers * (2 if self.bidirectional else 1), batch, size)

    @staticmethod
    def _check_hidden(hx, shape, msg="Expected hidden size {}, got {}") -> None:
        if tuple(hx.shape) != shape:
            raise RuntimeError(msg.format(shape, list(hx.shape)))

    def _out_size(self) -> int:
        return self.proj_size if self.proj_size > 0 else self.hidden_size

    def _zeros(self, batch: int, size: int, like):
        return zeros(self._state_shape(batch, size), dtype=like.dtype)

    # ---- running ----------------------------------------------------------------------------
    def _layer_weights(self, index: int) -> tuple:
        names = self._all_weights[index]
        got = dict(zip((n.split("_l")[0] for n in names), (getattr(self, n) for n in names)))
        return tuple(got.get(k) for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh",
                                           "weight_hr"))

    def _run(self, x, state, batch_sizes):
        """Every layer and direction over the time-major ``x`` (or packed data when
        ``batch_sizes`` is a list); ``state`` is ``h0`` or ``(h0, c0)`` stacked by layer
        and direction.  Returns the last layer's outputs and the final states."""
        lstm, dirs = self.mode == "LSTM", 2 if self.bidirectional else 1
        finals = []
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                k = layer * dirs + d
                s0 = (state[0][k], state[1][k]) if lstm else state[k]
                w = self._layer_weights(k)
                if batch_sizes is None:
                    out, fin = RC.run_layer(self.mode, x, s0, w, reverse=d == 1)
                else:
                    out, fin = RC.run_packed_layer(self.mode, x, batch_sizes, s0, w,
                                                   reverse=d == 1)
                outs.append(out)
                finals.append(fin)
            x = outs[0] if dirs == 1 else cat(outs, -1)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        return x, RC.stack_states(finals, lstm)

    def _forward(self, input, hx, name: str, dims_text: str):
        lstm = self.mode == "LSTM"
        packed = isinstance(input, PackedSequence)
        unbatched = False
        if packed:
            data, bs_tensor, sorted_indices, unsorted_indices = input
            sizes = batch_size_list(bs_tensor)
            batch = sizes[0]
            x = data
        else:
            sizes, sorted_indices, unsorted_indices = None, None, None
            if input.dim() not in (2, 3):
                raise ValueError(f"{name}: Expected input to be 2D or 3D, got {input.dim()}D "
                                 f"{dims_text}instead")
            unbatched = input.dim() == 2
            x = input.unsqueeze(0 if self.batch_first else 1) if unbatched else input
            hx = self._batch_hidden(hx, unbatched, lstm)
            batch = x.shape[0] if self.batch_first else x.shape[1]
        if hx is None:
            hx = ((self._zeros(batch, self._out_size(), x), self._zeros(batch,
                                                                         self.hidden_size, x))
                  if lstm else self._zeros(batch, self.hidden_size, x))
        elif packed and sorted_indices is not None:
            hx = _permute(hx, sorted_indices)
        self._check_input(x, packed)
        if lstm:
            self._check_hidden(hx[0], self._state_shape(batch, self._out_size()),
                               "Expected hidden[0] size {}, got {}")
            self._check_hidden(hx[1], self._state_shape(batch, self.hidden_size),
                               "Expected hidden[1] size {}, got {}")
        else:
            self._check_hidden(hx, self._state_shape(batch, self.hidden_size))
        if packed:
            out, h = self._run(x, hx, sizes)
            return (PackedSequence(out, bs_tensor, sorted_indices, unsorted_indices),
                    _permute(h, unsorted_indices))
        if self.batch_first:
            x = x.transpose(0, 1)
        out, h = self._run(x, hx, None)
        if self.batch_first:
            out = out.transpose(0, 1)
        if unbatched:
            out = out.squeeze(0 if self.batch_first else 1)
            h = tuple(t.squeeze(1) for t in h) if lstm else h.squeeze(1)
        return out, h

    @staticmethod
    def _batch_hidden(hx, unbatched: bool, lstm: bool):
        """``hx`` of an unpacked input checked for its number of dimensions (and given a
        batch dimension for an unbatched input)."""
        if hx is None:
            return None
        want = 2 if unbatched else 3
        what = "unbatched 2-D" if unbatched else "batched 3-D"
        if lstm:
            if hx[0].dim() != want or hx[1].dim() != want:
                raise RuntimeError(f"For {what} input, hx and cx should also be {want}-D but "
                                   f"got ({hx[0].dim()}-D, {hx[1].dim()}-D) tensors")
            return (hx[0].unsqueeze(1), hx[1].unsqueeze(1)) if unbatched else hx
        if hx.dim() != want:
            raise RuntimeError(f"For {what} input, hx should also be {want}-D but got "
                               f"{hx.dim()}-D tensor")
        return hx.unsqueeze(1) if unbatched else hx


def _permute(hx, permutation):
    if permutation is None:
        return hx
    if isinstance(hx, tuple):
        return tuple(index_select(h, 1, permutation) for h in hx)
    return index_select(hx, 1, permutation)


def _no_proj(kwargs) -> None:
    if "proj_size" in kwargs:
        raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")


class RNN(RNNBase):
    """Elman RNN: ``h_t = tanh(x_t W_ihᵀ + b_ih + h_{t-1} W_hhᵀ + b_hh)`` (or relu).

    >>> import symgrad as torch
    >>> out, h = torch.nn.RNN(3, 4, 2)(torch.randn(5, 2, 3))
    >>> out.shape, h.shape
    (torch.Size([5, 2, 4]), torch.Size([2, 2, 4]))
    """

    def __init__(self, *args, **kwargs):
        _no_proj(kwargs)
        if len(args) > 3:
            nonlinearity, args = args[3], args[:3] + args[4:]
        else:
            nonlinearity = kwargs.pop("nonlinearity", "tanh")
        modes = {"tanh": "RNN_TANH", "relu": "RNN_RELU"}
        if nonlinearity not in modes:
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' "
                             "or 'relu'.")
        super().__init__(modes[nonlinearity], *args, **kwargs)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        return self._forward(input, hx, "RNN", "tensor ")


class LSTM(RNNBase):
    """Long short-term memory layers; ``proj_size > 0`` projects each ``h`` to that size.

    >>> import symgrad as torch
    >>> out, (h, c) = torch.nn.LSTM(3, 4, batch_first=True)(torch.randn(2, 5, 3))
    >>> out.shape, h.shape, c.shape
    (torch.Size([2, 5, 4]), torch.Size([1, 2, 4]), torch.Size([1, 2, 4]))
    """

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)

    def forward(self, input, hx=None):
        return self._forward(input, hx, "LSTM", "")


class GRU(RNNBase):
    """Gated recurrent unit layers.

    >>> import symgrad as torch
    >>> out, h = torch.nn.GRU(3, 4, bidirectional=True)(torch.randn(5, 2, 3))
    >>> out.shape, h.shape
    (torch.Size([5, 2, 8]), torch.Size([2, 2, 4]))
    """

    def __init__(self, *args, **kwargs):
        _no_proj(kwargs)
        super().__init__("GRU", *args, **kwargs)

    def forward(self, input, hx=None):
        return self._forward(input, hx, "GRU", "")
