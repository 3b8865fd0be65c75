"""PyTorch's other spellings of existing ops and the small helpers tutorials reach for:
``absolute``, ``negative``, ``subtract``, ``multiply``, ``divide``, ``greater`` / ``less`` /
..., ``clip``, ``clamp_min`` / ``clamp_max``, ``moveaxis``, ``swapaxes`` / ``swapdims``,
``concat`` / ``concatenate``, ``ravel``, ``broadcast_to``, ``broadcast_tensors``,
``meshgrid``; the methods ``new_zeros`` / ``new_ones`` / ``new_full`` / ``new_empty`` /
``new_tensor``, ``type_as`` and ``Tensor.where`` -- each the op it names (same result,
backward name and errors)."""
from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..graph.shapes import broadcast_shapes
from . import elementwise as E
from . import rounding, shape
from .common import Tensor, to_tensor
from .creation import full, tensor

if TYPE_CHECKING:
    from ..types import DTypeLike, TensorOrScalar

__all__ = ["absolute", "negative", "subtract", "multiply", "divide", "greater",
           "greater_equal", "less", "less_equal", "not_equal", "clip", "clamp_min",
           "clamp_max", "moveaxis", "swapaxes", "swapdims", "concat", "concatenate", "ravel",
           "broadcast_to", "broadcast_tensors", "meshgrid", "new_zeros", "new_ones",
           "new_full", "new_empty", "new_tensor", "type_as", "where_method"]


def absolute(input: Tensor) -> Tensor:
    """``abs`` (``AbsBackward0``)."""
    return E.unary("abs", input)


def negative(input: Tensor) -> Tensor:
    """``neg`` (``NegBackward0``)."""
    return E.unary("neg", input)


def subtract(input: TensorOrScalar, other: TensorOrScalar, *,
             alpha: TensorOrScalar = 1) -> Tensor:
    """``sub``: ``input - alpha * other``."""
    return E.binary("sub", input, other if alpha == 1 else other * alpha)


def multiply(input: TensorOrScalar, other: TensorOrScalar) -> Tensor:
    """``mul``."""
    return E.binary("mul", input, other)


def divide(input: TensorOrScalar, other: TensorOrScalar, *,
           rounding_mode: str | None = None) -> Tensor:
    """``div`` (``rounding_mode`` ``'trunc'`` / ``'floor'`` as there)."""
    return rounding.div(input, other, rounding_mode=rounding_mode)


def _comparison(prim: str, name: str):
    def fn(input: TensorOrScalar, other: TensorOrScalar) -> Tensor:
        return E.binary(prim, input, other)
    fn.__name__ = name
    fn.__doc__ = f"``{prim}``: elementwise comparison, a bool tensor."
    return fn


greater = _comparison("gt", "greater")
greater_equal = _comparison("ge", "greater_equal")
less = _comparison("lt", "less")
less_equal = _comparison("le", "less_equal")
not_equal = _comparison("ne", "not_equal")


def clip(input: Tensor, min: TensorOrScalar | None = None,
         max: TensorOrScalar | None = None) -> Tensor:
    """``clamp``."""
    return E.clamp(input, min, max)


def clamp_min(input: Tensor, min: TensorOrScalar) -> Tensor:
    """``clamp(input, min=min)`` (``ClampMinBackward0``; a tensor bound: ``...1``)."""
    return E.clamp(input, min, None, grad_name=f"ClampMinBackward{int(isinstance(min, Tensor))}")


def clamp_max(input: Tensor, max: TensorOrScalar) -> Tensor:
    """``clamp(input, max=max)`` (``ClampMaxBackward0``; a tensor bound: ``...1``)."""
    return E.clamp(input, None, max, grad_name=f"ClampMaxBackward{int(isinstance(max, Tensor))}")


def moveaxis(input: Tensor, source: int | Sequence[int],
             destination: int | Sequence[int]) -> Tensor:
    """``movedim``."""
    return shape.movedim(input, source, destination)


def swapaxes(input: Tensor, axis0: int, axis1: int) -> Tensor:
    """``transpose``."""
    return shape.transpose(input, axis0, axis1)


def swapdims(input: Tensor, dim0: int, dim1: int) -> Tensor:
    """``transpose``."""
    return shape.transpose(input, dim0, dim1)


def concat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """``cat``."""
    return shape.cat(tensors, dim)


concatenate = concat


def ravel(input: Tensor) -> Tensor:
    """``contiguous().view(-1)`` (``ViewBackward0``): a view where the layout allows."""
    return shape.view(shape.contiguous(to_tensor(input)), -1)


def broadcast_to(input: Tensor, size: Sequence[int]) -> Tensor:
    """``expand(size)`` (``ExpandBackward0``)."""
    return shape.expand(to_tensor(input), tuple(size))


def broadcast_tensors(*tensors: Tensor) -> tuple[Tensor, ...]:
    """The tensors expanded to their common broadcast shape."""
    ts = [to_tensor(t) for t in tensors]
    target = broadcast_shapes(*(tuple(t.shape) for t in ts))
    return tuple(shape.expand(t, target) for t in ts)


_meshgrid_warned = [False]


def meshgrid(*tensors: Tensor | Sequence[Tensor], indexing: str | None = None
             ) -> tuple[Tensor, ...]:
    """Coordinate grids of 1-D (or 0-d) tensors: ``indexing='ij'`` (the default, with
    PyTorch's warning when not given) puts the first tensor's values along dim 0, ``'xy'``
    the second's (the first two tensors swap places)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    ts = [to_tensor(t) for t in tensors]
    if indexing is None:
        if not _meshgrid_warned[0]:
            _meshgrid_warned[0] = True
            warnings.warn("torch.meshgrid: in an upcoming release, it will be required to pass "
                          "the indexing argument.", UserWarning, stacklevel=2)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f"torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but "
                           f"received: {indexing}")
    if not ts:
        raise RuntimeError("meshgrid expects a non-empty TensorList")
    for t in ts:
        if t.dim() > 1:
            raise RuntimeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list but "
                               f"got: {t}")
    swap = indexing == "xy" and len(ts) >= 2
    if swap:
        ts[0], ts[1] = ts[1], ts[0]
    sizes = tuple(t.numel() for t in ts)
    out = []
    for i, t in enumerate(ts):
        view = [1] * len(ts)
        view[i] = sizes[i]
        out.append(shape.expand(shape.reshape(t, tuple(view)), sizes))
    if swap:
        out[0], out[1] = out[1], out[0]
    return tuple(out)


# ---- methods --------------------------------------------------------------------------------
def _new(self: Tensor, size, dtype, fill, requires_grad):
    if len(size) == 1 and isinstance(size[0], (list, tuple)):
        size = tuple(size[0])
    return full(tuple(size), fill, dtype=self.dtype if dtype is None else dtype,
                requires_grad=requires_grad)


def new_zeros(self: Tensor, *size: int | Sequence[int], dtype: DTypeLike | None = None,
              device: object = None, requires_grad: bool = False) -> Tensor:
    """Zeros of ``size`` with this tensor's dtype (or ``dtype``)."""
    return _new(self, size, dtype, 0, requires_grad)


def new_ones(self: Tensor, *size: int | Sequence[int], dtype: DTypeLike | None = None,
             device: object = None, requires_grad: bool = False) -> Tensor:
    """Ones of ``size`` with this tensor's dtype (or ``dtype``)."""
    return _new(self, size, dtype, 1, requires_grad)


def new_empty(self: Tensor, *size: int | Sequence[int], dtype: DTypeLike | None = None,
              device: object = None, requires_grad: bool = False) -> Tensor:
    """A tensor of ``size`` with this tensor's dtype (its values zeros)."""
    return _new(self, size, dtype, 0, requires_grad)


def new_full(self: Tensor, size: Sequence[int], fill_value: TensorOrScalar, *,
             dtype: DTypeLike | None = None, device: object = None,
             requires_grad: bool = False) -> Tensor:
    """``fill_value`` everywhere in ``size``, this tensor's dtype (or ``dtype``)."""
    return _new(self, (tuple(size),), dtype, fill_value, requires_grad)


def new_tensor(self: Tensor, data: object, *, dtype: DTypeLike | None = None,
               device: object = None, requires_grad: bool = False) -> Tensor:
    """``torch.tensor(data)`` with this tensor's dtype (or ``dtype``); a copy, detached."""
    if isinstance(data, Tensor):
        warnings.warn("To copy construct from a tensor, it is recommended to use "
                      "sourceTensor.detach().clone() or sourceTensor.detach().clone()."
                      "requires_grad_(True), rather than tensor.new_tensor(sourceTensor).",
                      UserWarning, stacklevel=2)
        data = data.detach().numpy()
    return tensor(data, dtype=self.dtype if dtype is None else dtype,
                  requires_grad=requires_grad)


def type_as(self: Tensor, other: Tensor) -> Tensor:
    """This tensor converted to ``other``'s dtype (itself when it already has it)."""
    return self.to(other.dtype)


def where_method(self: Tensor, condition: Tensor, y: TensorOrScalar) -> Tensor:
    """``Tensor.where(condition, y)``: ``torch.where(condition, self, y)``."""
    return E.where(condition, self, y)

