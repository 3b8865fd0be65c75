"""The type aliases of the public API's annotations (as ``torch.types``): what a tensor,
scalar, dtype, device, dim or size argument accepts.

Annotation-only: the modules of symgrad import these names under ``TYPE_CHECKING`` (with
``from __future__ import annotations`` nothing is evaluated at run time), so this module
is never loaded by ``import symgrad``; importing it yourself is fine and cheap.

``_bool`` / ``_int`` / ``_float`` are the builtins, for modules where ``bool``, ``int`` and
``float`` name dtypes (``symgrad.bool`` is a dtype, as ``torch.bool`` is).
"""
from __future__ import annotations

import builtins
from collections.abc import Sequence
from types import EllipsisType
from typing import Any, NamedTuple, Union

import numpy as np

from .device import device
from .graph.dtypes import DType
from .tensor import Tensor

__all__ = ["Number", "Scalar", "TensorOrScalar", "TensorLike", "DTypeLike", "DeviceLike",
           "Dims", "SizeLike", "Index", "PyTree", "TargetSpec", "ValuesIndices", "Tensor", "DType", "device"]

_bool = builtins.bool
_int = builtins.int
_float = builtins.float

#: a Python number (``torch.types.Number``)
Number = Union[int, float, bool]
#: a Python or numpy scalar (what an arithmetic operand may be besides a tensor)
Scalar = Union[int, float, bool, np.number, np.bool_]
#: an operand of elementwise arithmetic: a tensor or a scalar
TensorOrScalar = Union[Tensor, int, float, bool, np.number, np.bool_]
#: what ``symgrad.tensor`` / ``as_tensor`` turn into a tensor: tensors, numpy arrays,
#: scalars and (nested) sequences of them
TensorLike = Union[Tensor, np.ndarray, int, float, bool, np.number, np.bool_, Sequence[Any]]
#: a dtype argument: a symgrad dtype, its name (``"float32"``), a numpy dtype or scalar
#: type, or the Python types ``float`` / ``int`` / ``bool`` (see ``graph.dtypes.as_dtype``)
DTypeLike = Union[DType, str, type, np.dtype]
#: a device argument: a device, its name (``"cpu"``, ``"cuda:0"``) or a CUDA index
DeviceLike = Union[device, str, int]
#: a dim argument of a reduction: one dim or several
Dims = Union[int, Sequence[int]]
#: a size argument: ``(2, 3)``, ``[2, 3]`` or a :class:`symgrad.Size`
SizeLike = Sequence[int]
#: an index of ``x[key]``: ints, slices, None, ``...``, index or mask tensors and arrays,
#: lists of ints, and tuples of these
Index = Union[int, slice, None, EllipsisType, Tensor, np.ndarray, Sequence[Any]]
#: a pytree: tensors (or numbers, arrays) nested in tuples, lists and dicts
PyTree = Any
#: a compile target: a ``codegen.target.Target`` or a string such as ``"x86-64-v3"``
#: (the front end does not import ``codegen``; the backend validates it)
TargetSpec = Union[str, object]


class ValuesIndices(NamedTuple):
    """The static type of what ``max`` / ``min`` along a dim return: at run time a
    ``symgrad.return_types.max`` / ``.min``, a named tuple with these two fields."""
    values: Tensor
    indices: Tensor
