"""``symgrad.save`` / ``symgrad.load``: tensors, state dicts and optimizer states to a file
and back. Loading is safe by default (``weights_only=True``, PyTorch's default since 2.6):
the unpickler accepts only tensors, parameters, dtypes, devices and plain containers and
numbers, so a file cannot run code; ``weights_only=False`` loads any pickle (trusted files
only). ``add_safe_globals`` / ``safe_globals`` allow more classes, as in PyTorch.

A file is ``MAGIC`` followed by a pickle in which every tensor is its raw bytes, dtype
name, shape and ``requires_grad`` (no numpy internals to trust).

>>> import io, symgrad as torch
>>> buf = io.BytesIO()
>>> torch.save({"w": torch.ones(2), "step": 3}, buf); _ = buf.seek(0)
>>> torch.load(buf)
{'w': tensor([1., 1.]), 'step': 3}
"""
from __future__ import annotations

import collections
import contextlib
import io
import os
import pickle
from typing import Any, Iterable

import numpy as np

from .device import check_device, device
from .graph import dtypes
from .tensor import Tensor

__all__ = ["save", "load", "add_safe_globals", "get_safe_globals", "clear_safe_globals",
           "safe_globals"]

MAGIC = b"SYMGRAD\x01"


def _rebuild_tensor(data: bytes, dtype: str, shape: tuple, requires_grad: bool) -> Tensor:
    dt = dtypes.as_dtype(dtype)
    arr = np.frombuffer(data, dtype=dt.np).reshape(shape).copy()
    t = Tensor._from_array(arr, dt)
    t._requires_grad = bool(requires_grad)
    return t


def _rebuild_parameter(data: bytes, dtype: str, shape: tuple, requires_grad: bool):
    from .nn.parameter import Parameter        # (nn builds on this module's package)
    return Parameter(_rebuild_tensor(data, dtype, shape, False), requires_grad)


def _rebuild_dtype(name: str) -> dtypes.DType:
    return dtypes.as_dtype(name)


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj):
        if isinstance(obj, Tensor):
            if obj._node is not None:
                raise RuntimeError("symgrad.save: cannot save a traced tensor (inside "
                                   "symgrad.compile)")
            arr = np.asarray(obj._data)
            rebuild = _rebuild_tensor
            if type(obj).__name__ == "Parameter":
                rebuild = _rebuild_parameter
            return rebuild, (arr.tobytes(order="C"), obj.dtype.name, tuple(arr.shape),
                             obj.requires_grad and obj.is_leaf)
        if isinstance(obj, dtypes.DType):
            return _rebuild_dtype, (obj.name,)
        return NotImplemented


def save(obj: Any, f, pickle_module=None, pickle_protocol: int = 2,
         _use_new_zipfile_serialization: bool = True) -> None:
    """Write ``obj`` (tensors, state dicts, optimizer states, nested containers) to ``f``,
    a path or a binary file object."""
    buf = io.BytesIO()
    buf.write(MAGIC)
    _Pickler(buf, protocol=max(pickle_protocol, 4)).dump(obj)   # (bytes as bytes)
    data = buf.getvalue()
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as fh:
            fh.write(data)
    else:
        f.write(data)


_DEFAULT_SAFE = {
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("collections", "defaultdict"): collections.defaultdict,
    ("collections", "Counter"): collections.Counter,      # MultiStepLR's milestones
    ("builtins", "set"): set, ("builtins", "frozenset"): frozenset,
    ("builtins", "complex"): complex, ("builtins", "slice"): slice,
    ("builtins", "range"): range, ("builtins", "bytearray"): bytearray,
    (__name__, "_rebuild_tensor"): _rebuild_tensor,
    (__name__, "_rebuild_parameter"): _rebuild_parameter,
    (__name__, "_rebuild_dtype"): _rebuild_dtype,
    ("symgrad.device", "device"): device,
}
_user_safe: dict[tuple[str, str], Any] = {}


def add_safe_globals(safe_globals: Iterable) -> None:
    """Allow these classes / functions in ``weights_only`` loads."""
    for g in safe_globals:
        obj, name = (g if isinstance(g, tuple) else (g, None))
        _user_safe[(obj.__module__, name or obj.__qualname__)] = obj


def get_safe_globals() -> list:
    return list(_user_safe.values())


def clear_safe_globals() -> None:
    _user_safe.clear()


@contextlib.contextmanager
def safe_globals(safe_globals: Iterable):
    """Allow these globals for the loads inside the ``with`` block."""
    before = dict(_user_safe)
    add_safe_globals(safe_globals)
    try:
        yield
    finally:
        _user_safe.clear()
        _user_safe.update(before)


class _WeightsUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        key = (module, name)
        if key in _DEFAULT_SAFE:
            return _DEFAULT_SAFE[key]
        if key in _user_safe:
            return _user_safe[key]
        raise pickle.UnpicklingError(
            "Weights only load failed. This file can still be loaded, to do so you have two "
            "options, do those steps only if you trust the source of the checkpoint. \n\t(1) "
            "Re-running `symgrad.load` with `weights_only` set to `False` will likely succeed, "
            "but it can result in arbitrary code execution. Do it only if you got the file "
            "from a trusted source.\n\t(2) Alternatively, to load with `weights_only=True` "
            "please check the recommended steps in the following error message.\n\t"
            f"WeightsUnpickler error: Unsupported global: GLOBAL {module}.{name} was not an "
            "allowed global by default. Please use `symgrad.serialization.add_safe_globals"
            f"([{name}])` or the `symgrad.serialization.safe_globals([{name}])` context "
            "manager to allowlist this global if you trust this class/function.")


def load(f, map_location=None, pickle_module=None, *, weights_only: bool | None = None,
         mmap: bool | None = None, **pickle_load_args) -> Any:
    """Read what :func:`save` wrote. ``weights_only`` (default True) refuses any global
    that is not a tensor, dtype, device or plain container (a file cannot run code)."""
    if map_location is not None and not callable(map_location) and \
            not isinstance(map_location, dict):
        check_device(map_location)
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as fh:
            data = fh.read()
    else:
        data = f.read()
    if not data.startswith(MAGIC):
        raise RuntimeError("symgrad.load: not a file written by symgrad.save (files written by "
                           "torch.save are zip archives symgrad does not read)")
    stream = io.BytesIO(data[len(MAGIC):])
    if weights_only is False:
        return pickle.Unpickler(stream, **pickle_load_args).load()
    return _WeightsUnpickler(stream, **pickle_load_args).load()
