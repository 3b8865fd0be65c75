"""PyTorch's legacy constructors: ``torch.Tensor(...)`` and the typed classes
``FloatTensor``, ``DoubleTensor``, ``LongTensor``, ... (``torch.Tensor([1, 2])`` copies
data in the default dtype, ``torch.Tensor(2, 3)`` or ``torch.Tensor(torch.Size([2]))``
is an uninitialised tensor of that size, ``torch.Tensor()`` an empty one;
``isinstance(x, torch.FloatTensor)`` asks for a float32 tensor), with PyTorch's errors.
"""
from __future__ import annotations

import numpy as np

from ..device import check_device
from ..graph import dtypes
from ..tensor import Size, Tensor
from .creation import empty, tensor

__all__ = ["legacy_new", "FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor",
           "IntTensor", "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor"]

_SIGNATURES = (" * (*, torch.device device = None)\n"
               " * (torch.Storage storage)\n"
               " * (Tensor other)\n"
               " * (tuple of ints size, *, torch.device device = None)\n"
               " * (object data, *, torch.device device = None)\n")


def _type_name(v) -> str:
    return {list: "list", tuple: "tuple", int: "int", float: "float"}.get(type(v),
                                                                         type(v).__name__)


def legacy_new(dtype, /, *args, **kwargs) -> Tensor:
    """``torch.Tensor(*args)`` (``dtype`` None: the default dtype) or a typed class's
    call."""
    dt = dtypes.as_dtype(dtype) if dtype is not None else dtypes.get_default_dtype()
    device = kwargs.pop("device", None)
    size = kwargs.pop("size", None)
    if kwargs:
        got = ", ".join([_type_name(a) for a in args]
                        + [f"{k}={type(v).__module__.split('.')[0]}.{type(v).__name__}"
                           if not isinstance(v, (int, float, bool)) else f"{k}={_type_name(v)}"
                           for k, v in kwargs.items()])
        raise TypeError(f"new() received an invalid combination of arguments - got ({got}), "
                        f"but expected one of:\n{_SIGNATURES}")
    check_device(device)
    if size is not None:
        args = (Size(size),)
    if not args:
        return empty(0, dtype=dt)
    if all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in args) or \
            (len(args) == 1 and isinstance(args[0], Size)):
        shape = list(args[0]) if isinstance(args[0], Size) else [int(a) for a in args]
        bad = next((d for d in shape if d < 0), None)
        if bad is not None:
            raise RuntimeError(f"Trying to create tensor with negative dimension {bad}: "
                               f"{shape}")
        return empty(tuple(shape), dtype=dt)
    if isinstance(args[0], (int, np.integer)) and len(args) > 1:
        k, bad = next((k, a) for k, a in enumerate(args)
                      if not isinstance(a, (int, np.integer)) or isinstance(a, bool))
        raise TypeError(f"new(): argument 'size' failed to unpack the object at pos {k + 1} "
                        f"with error \"type must be tuple of ints,but got "
                        f"{_type_name(bad)}\"")
    if len(args) == 1:
        data = args[0]
        if isinstance(data, Tensor):
            if dtype is not None and data.dtype != dt:
                raise TypeError(f"expected {dt.tensor_type.split('.')[-1][:-6]} (got "
                                f"{data.dtype.tensor_type.split('.')[-1][:-6]})")
            return data.detach()
        if isinstance(data, str):
            raise TypeError(f"new(): invalid data type '{type(data).__name__}'")
        if isinstance(data, (int, float, bool, np.number)):
            raise TypeError(f"new(): data must be a sequence (got {_type_name(data)})")
        return tensor(data, dtype=dt)
    got = ", ".join(_type_name(a) for a in args)
    raise TypeError(f"new() received an invalid combination of arguments - got ({got}), "
                    f"but expected one of:\n{_SIGNATURES}")


def _tensor_new(cls, *args, **kwargs):
    """``Tensor(...)``: the legacy constructor (subclasses make themselves)."""
    if cls is Tensor:
        return legacy_new(None, *args, **kwargs)
    return object.__new__(cls)


Tensor.__new__ = staticmethod(_tensor_new)     # type: ignore[method-assign]


class _Legacy(type):
    """The typed classes: calling one constructs, ``isinstance`` checks the dtype."""

    def __call__(cls, *args, **kwargs):
        return legacy_new(cls.dtype, *args, **kwargs)

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Tensor) and obj.dtype == cls.dtype

    def __repr__(cls) -> str:
        return f"<class 'torch.{cls.__name__}'>"


def _typed(name: str, dtype) -> type:
    return _Legacy(name, (), {"dtype": dtype, "__doc__": f"``torch.{name}``: {dtype.name}."})


FloatTensor = _typed("FloatTensor", dtypes.float32)
DoubleTensor = _typed("DoubleTensor", dtypes.float64)
HalfTensor = _typed("HalfTensor", dtypes.float16)
LongTensor = _typed("LongTensor", dtypes.int64)
IntTensor = _typed("IntTensor", dtypes.int32)
ShortTensor = _typed("ShortTensor", dtypes.int16)
CharTensor = _typed("CharTensor", dtypes.int8)
ByteTensor = _typed("ByteTensor", dtypes.uint8)
BoolTensor = _typed("BoolTensor", dtypes.bool_)
