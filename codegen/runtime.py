"""External symbols generated code calls, published *by name* so that an object file
compiled in one process links in another (see :func:`register`).

* ``symgrad_blas_dgemm`` / ``symgrad_blas_sgemm``: the Fortran-ABI GEMM of scipy's
  BLAS, taken from the ``scipy.linalg.cython_blas.__pyx_capi__`` capsules;
* ``symgrad_rt_malloc`` / ``symgrad_rt_free``: the C library's allocator (the arena of
  temporaries when it is too large for the stack).

>>> register(); sorted(symbols())[:2]
['symgrad_blas_dgemm', 'symgrad_blas_sgemm']
"""
from __future__ import annotations

import ctypes
import functools

__all__ = ["register", "symbols", "BLAS_GEMM", "MALLOC", "FREE"]

BLAS_GEMM = {"float64": "symgrad_blas_dgemm", "float32": "symgrad_blas_sgemm"}
MALLOC, FREE = "symgrad_rt_malloc", "symgrad_rt_free"


def _capsule_address(capsule: object) -> int:
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return get_pointer(capsule, get_name(capsule))


@functools.cache
def symbols() -> dict[str, int]:
    """Name -> address of every runtime symbol."""
    from scipy.linalg import cython_blas
    capi = cython_blas.__pyx_capi__
    libc = ctypes.CDLL(None)
    return {
        BLAS_GEMM["float64"]: _capsule_address(capi["dgemm"]),
        BLAS_GEMM["float32"]: _capsule_address(capi["sgemm"]),
        MALLOC: ctypes.cast(libc.malloc, ctypes.c_void_p).value,
        FREE: ctypes.cast(libc.free, ctypes.c_void_p).value,
    }


@functools.cache
def register() -> None:
    """Publish :func:`symbols` to LLVM's symbol table (idempotent)."""
    from . import callconv, target
    callconv.register_runtime_symbols()
    for name, address in symbols().items():
        target.add_symbol(name, address)
