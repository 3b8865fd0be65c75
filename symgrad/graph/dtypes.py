"""Data types: the dtype objects users see (`symgrad.float32`, ...), their numpy
equivalents, and PyTorch's type-promotion rules. The one source of truth for what a
dtype is called, what numpy type backs it and how dtypes combine.
"""
from __future__ import annotations

import numpy as np

__all__ = ["DType", "float16", "float32", "float64", "int8", "int16", "int32", "int64",
           "uint8", "bool_", "from_numpy_dtype", "result_type", "get_default_dtype",
           "set_default_dtype", "as_dtype", "can_cast"]

_CATEGORY = {"bool": 0, "int": 1, "float": 2}


class DType:
    """A tensor element type, printed as PyTorch prints it (``torch.float32``).

    >>> float32.is_floating_point, float32.itemsize
    (True, 4)
    """

    __slots__ = ("name", "np", "category", "itemsize", "tensor_type", "c_name")

    def __init__(self, name: str, np_dtype, category: str, tensor_type: str, c_name: str):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.category = category
        self.itemsize = self.np.itemsize
        self.tensor_type = tensor_type      # e.g. "torch.FloatTensor", used in error texts
        self.c_name = c_name                # e.g. "Float", "double", used in error texts

    @property
    def cpp_name(self) -> str:
        """The C++ type name PyTorch's kernels print in error texts ("long int")."""
        return _CPP_NAMES[self.name]

    @property
    def is_floating_point(self) -> bool:
        return self.category == "float"

    @property
    def is_signed(self) -> bool:
        return self.name != "uint8" and self.name != "bool"

    def __repr__(self) -> str:
        return f"torch.{self.name}"

    def __reduce__(self):
        return (as_dtype, (self.name,))


_CPP_NAMES = {"float16": "c10::Half", "float32": "float", "float64": "double",
              "int8": "signed char", "int16": "short int", "int32": "int", "int64": "long int",
              "uint8": "unsigned char", "bool": "bool"}

float16 = DType("float16", np.float16, "float", "torch.HalfTensor", "Half")
float32 = DType("float32", np.float32, "float", "torch.FloatTensor", "Float")
float64 = DType("float64", np.float64, "float", "torch.DoubleTensor", "Double")
int8 = DType("int8", np.int8, "int", "torch.CharTensor", "Char")
int16 = DType("int16", np.int16, "int", "torch.ShortTensor", "Short")
int32 = DType("int32", np.int32, "int", "torch.IntTensor", "Int")
int64 = DType("int64", np.int64, "int", "torch.LongTensor", "Long")
uint8 = DType("uint8", np.uint8, "int", "torch.ByteTensor", "Byte")
bool_ = DType("bool", np.bool_, "bool", "torch.BoolTensor", "Bool")

ALL = (float16, float32, float64, int8, int16, int32, int64, uint8, bool_)
_BY_NUMPY = {d.np: d for d in ALL}
_BY_NAME = {d.name: d for d in ALL}
_BY_NAME.update({"float": float32, "double": float64, "half": float16, "long": int64,
                 "int": int32, "short": int16})

_default_float = [float32]
_default_changed: list = []     # called after the default changed (compiled functions
                                # drop their native fast paths: their programs baked it)


def get_default_dtype() -> DType:
    """The dtype of Python floats turned into tensors (float32 unless changed)."""
    return _default_float[0]


def set_default_dtype(d: DType) -> None:
    """Change the default floating dtype (float32 or float64), as torch does."""
    d = as_dtype(d)
    if d not in (float32, float64, float16):
        raise TypeError("only floating-point types are supported as the default type")
    if d is not _default_float[0]:
        _default_float[0] = d
        for hook in list(_default_changed):
            hook()


def from_numpy_dtype(np_dtype) -> DType:
    """The DType backing a numpy dtype; TypeError for types symgrad does not have."""
    try:
        return _BY_NUMPY[np.dtype(np_dtype)]
    except (KeyError, TypeError):
        raise TypeError(f"can't convert np.ndarray of type {np.dtype(np_dtype)}. The only "
                        "supported types are: float64, float32, float16, int64, int32, "
                        "int16, int8, uint8, and bool.") from None


def as_dtype(d) -> DType:
    """Accept a DType, a dtype name, a numpy dtype or a Python type."""
    if isinstance(d, DType):
        return d
    if d is float:
        return float64          # torch maps the Python type float to float64
    if d is int:
        return int64
    if d is bool:
        return bool_
    if isinstance(d, str) and d in _BY_NAME:
        return _BY_NAME[d]
    return from_numpy_dtype(d)


def can_cast(src: DType, dst: DType) -> bool:
    """PyTorch's ``canCast`` (an in-place result into its tensor): no float into an
    integer, nothing but bool into bool; any integer into any other (``uint8 += int64``)."""
    return _CATEGORY[src.category] <= _CATEGORY[dst.category]


def _promote_two(a: DType, b: DType) -> DType:
    if a is b:
        return a
    ca, cb = _CATEGORY[a.category], _CATEGORY[b.category]
    if ca != cb:
        return a if ca > cb else b
    if a.category == "float":
        return a if a.itemsize > b.itemsize else b
    if a.category == "bool":
        return a
    # integers: numpy's rule matches torch's for the types we have (uint8+int8 -> int16)
    return from_numpy_dtype(np.promote_types(a.np, b.np))


def scalar_dtype(value) -> DType:
    """The dtype a Python scalar would get as a tensor of its own."""
    if isinstance(value, (bool, np.bool_)):
        return bool_
    if isinstance(value, (int, np.integer)):
        return int64
    return get_default_dtype()


def result_type(dims: list[DType], zero_dims: list[DType], scalars: list) -> DType:
    """PyTorch's promotion: tensors with dimensions decide, 0-d tensors only raise the
    category, Python scalars only raise the category (to the default dtype of it).

    >>> result_type([int64], [], [1.5])
    torch.float32
    """
    out = None
    for d in dims:
        out = d if out is None else _promote_two(out, d)
    zd = None
    for d in zero_dims:
        zd = d if zd is None else _promote_two(zd, d)
    if zd is not None:
        if out is None:
            out = zd
        elif _CATEGORY[zd.category] > _CATEGORY[out.category]:
            out = zd
    sc = None
    for s in scalars:
        d = scalar_dtype(s)
        if sc is None or _CATEGORY[d.category] > _CATEGORY[sc.category]:
            sc = d
    if sc is not None:
        if out is None:
            out = sc
        elif _CATEGORY[sc.category] > _CATEGORY[out.category]:
            out = sc if sc.category != "float" else get_default_dtype()
    return out
