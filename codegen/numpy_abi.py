"""numpy's and CPython's C side, as compiled entries see it: every address the IR needs
is published by name, and numpy's struct layouts are checked against live objects.

* :func:`register_runtime_symbols`: every address the IR needs (CPython API, the
  ``numpy.ndarray`` type, numpy's builtin dtype objects, ``PyArray_NewFromDescr``) is
  referenced by *name* and resolved with ``llvm.add_symbol``, so an object file emitted
  once can be reloaded in another process after calling this function again.  The
  code model must reach far data symbols (the JIT default, large on x86-64, does).

Field offsets of ``PyArrayObject`` and ``PyArray_Descr`` are the ones in numpy's
headers (unchanged from numpy 1.20 to 2.x for the fields read here) and are verified
at runtime against live arrays by :func:`numpy_layout` before any IR is emitted.
"""
from __future__ import annotations

import ctypes
import functools
import sys
from dataclasses import dataclass
from typing import Any

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir

__all__ = ["NumpyLayout", "numpy_layout", "runtime_symbols", "register_runtime_symbols",
           "SUPPORTED_DTYPES"]

SUPPORTED_DTYPES = ("float64", "float32", "int64", "int32", "bool")   # what entries take

NPY_ARRAY_C_CONTIGUOUS = 0x0001
NPY_ARRAY_ALIGNED = 0x0100
_API_ARRAY_TYPE = 2  # slots of numpy's PyArray_API table (ABI-stable)
_API_NEW_FROM_DESCR = 94

_PTR = ir.PointerType()
_I8, _I32, _I64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
_VOID = ir.VoidType()
_NULL = ir.Constant(_PTR, None)


# ---------------------------------------------------------------- numpy's C layout


@dataclass(frozen=True)
class NumpyLayout:
    """Byte offsets of the fields the entry reads (``PyArrayObject_fields``, ``PyArray_Descr``)."""

    ob_type: int = 8
    data: int = 16
    nd: int = 24
    dimensions: int = 32
    descr: int = 56
    flags: int = 64
    descr_byteorder: int = 26
    descr_type_num: int = 28


def _read(kind: type, address: int) -> Any:
    return kind.from_address(address).value


def _verify_array(lay: NumpyLayout, arr: np.ndarray) -> None:
    base = id(arr)
    found = {
        "ob_type": _read(ctypes.c_void_p, base + lay.ob_type) == id(type(arr)),
        "data": _read(ctypes.c_void_p, base + lay.data) == arr.__array_interface__["data"][0],
        "nd": _read(ctypes.c_int, base + lay.nd) == arr.ndim,
        "descr": _read(ctypes.c_void_p, base + lay.descr) == id(arr.dtype),
        "flags": _read(ctypes.c_int, base + lay.flags) == arr.flags.num,
    }
    dims = _read(ctypes.c_void_p, base + lay.dimensions)
    found["dimensions"] = arr.ndim == 0 or tuple((ctypes.c_int64 * arr.ndim).from_address(dims)) == arr.shape
    bad = [name for name, ok in found.items() if not ok]
    if bad:
        raise RuntimeError(f"numpy {np.__version__}: PyArrayObject fields {bad} are not where "
                           f"codegen.callconv.NumpyLayout expects them")


def _verify_descr(lay: NumpyLayout, dtype: np.dtype) -> None:
    base = id(dtype)
    type_num = _read(ctypes.c_int, base + lay.descr_type_num)
    byteorder = ctypes.c_char.from_address(base + lay.descr_byteorder).value.decode()
    if (type_num, byteorder) != (dtype.num, dtype.byteorder):
        raise RuntimeError(f"numpy {np.__version__}: PyArray_Descr type_num/byteorder of {dtype!r} "
                           f"read as {(type_num, byteorder)}, expected {(dtype.num, dtype.byteorder)}")


@functools.cache
def numpy_layout() -> NumpyLayout:
    """Offsets of numpy's C structs, verified against live arrays (raises if numpy moved them)."""
    lay = NumpyLayout()
    cube = np.arange(60.0).reshape(3, 4, 5)
    for arr in (cube, cube[:, ::2].T, np.zeros((), np.int32), cube.astype(">f4"), np.ones(7, bool)):
        _verify_array(lay, arr)
    for code in ("f8", ">f8", "f4", "i8", "i4", "?", ">i4"):
        _verify_descr(lay, np.dtype(code))
    return lay


def _swapped_byteorder() -> bytes:
    return b">" if sys.byteorder == "little" else b"<"


# ------------------------------------------------------------------ runtime symbols

_PYTHON_FUNCTIONS: dict[str, tuple[ir.Type, tuple[ir.Type, ...]]] = {
    "PyObject_Vectorcall": (_PTR, (_PTR, _PTR, _I64, _PTR)),
    "Py_IncRef": (_VOID, (_PTR,)),
    "Py_DecRef": (_VOID, (_PTR,)),
    "PyTuple_New": (_PTR, (_I64,)),
    "PyTuple_SetItem": (_I32, (_PTR, _I64, _PTR)),
    "PyEval_SaveThread": (_PTR, ()),
    "PyEval_RestoreThread": (_VOID, (_PTR,)),
}
_NEW_FROM_DESCR = "symgrad_rt_PyArray_NewFromDescr"
_NEW_FROM_DESCR_TYPE = ir.FunctionType(_PTR, (_PTR, _PTR, _I32, _PTR, _PTR, _PTR, _I32, _PTR))
_NDARRAY_TYPE = "symgrad_rt_numpy_ndarray_type"
_DESCR_PREFIX = "symgrad_rt_numpy_descr_"
_PIN: list[Any] = []  # objects whose addresses were published as symbols


def _array_api_table() -> int:
    try:
        from numpy._core import _multiarray_umath as umath
    except ImportError:  # numpy 1.x
        from numpy.core import _multiarray_umath as umath  # type: ignore[no-redef]
    get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
        ("PyCapsule_GetPointer", ctypes.pythonapi))
    table = get_pointer(umath._ARRAY_API, None)
    if _read(ctypes.c_void_p, table + 8 * _API_ARRAY_TYPE) != id(np.ndarray):
        raise RuntimeError("numpy's _ARRAY_API table does not hold PyArray_Type in slot 2")
    return table


def _pyapi_address(name: str) -> int:
    return ctypes.cast(getattr(ctypes.pythonapi, name), ctypes.c_void_p).value


@functools.cache
def runtime_symbols() -> dict[str, int]:
    """Name -> address of every external symbol an entry references (for ORC ``import_symbol``)."""
    symbols = {name: _pyapi_address(name) for name in _PYTHON_FUNCTIONS}
    table = _array_api_table()
    symbols[_NEW_FROM_DESCR] = _read(ctypes.c_void_p, table + 8 * _API_NEW_FROM_DESCR)
    symbols[_NDARRAY_TYPE] = id(np.ndarray)
    for dtype in SUPPORTED_DTYPES:
        descr = np.dtype(dtype)  # numpy's builtin, never freed; pinned anyway
        _PIN.append(descr)
        symbols[_DESCR_PREFIX + dtype] = id(descr)
    return symbols


@functools.cache
def register_runtime_symbols() -> None:
    """Publish :func:`runtime_symbols` with ``llvm.add_symbol`` (idempotent; before JIT linking)."""
    for name, address in runtime_symbols().items():
        llvm.add_symbol(name, address)


def _declare_function(module: ir.Module, name: str, fnty: ir.FunctionType) -> ir.Function:
    existing = module.globals.get(name)
    return existing if existing is not None else ir.Function(module, fnty, name)


def _declare_python(module: ir.Module, name: str) -> ir.Function:
    ret, params = _PYTHON_FUNCTIONS[name]
    return _declare_function(module, name, ir.FunctionType(ret, params))


def _declare_symbol(module: ir.Module, name: str) -> ir.GlobalVariable:
    existing = module.globals.get(name)
    return existing if existing is not None else ir.GlobalVariable(module, _I8, name)


def _constant_global(module: ir.Module, name: str, value: ir.Constant) -> ir.GlobalVariable:
    var = ir.GlobalVariable(module, value.type, name)
    var.initializer, var.global_constant = value, True
    return var


