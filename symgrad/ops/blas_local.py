"""Eager matrix products on one BLAS thread: OpenBLAS's per-calling-thread thread count
(``openblas_set_num_threads_local``) of every OpenBLAS loaded, set to 1 around a product
and restored after.

Products below ``THREADED_WORK`` multiply-adds run so (:func:`matmul`): on a shared,
busy machine OpenBLAS's spinning pool makes small products slower than one thread does
(its threads wait for each other when one gets no CPU), as it does for
compiled code (``codegen.lower.matmul``, which never uses that pool).  Larger products
keep the library's threads (what ``symgrad.set_num_threads`` set).  Without OpenBLAS
(MKL, Accelerate) nothing changes.

>>> import numpy as np
>>> matmul(np.ones((2, 3)), np.ones((3, 2)))
array([[3., 3.],
       [3., 3.]])
"""
from __future__ import annotations

import ctypes
import functools

import numpy as np

__all__ = ["matmul", "THREADED_WORK"]

THREADED_WORK = 1 << 28        # ~0.3 G multiply-adds: several ms on one core
ONE_THREAD_MIN = 1 << 16       # below: OpenBLAS runs on the calling thread anyway


@functools.cache
def _controls() -> tuple:
    """``openblas_set_num_threads_local`` of each OpenBLAS loaded (found once)."""
    from threadpoolctl import threadpool_info      # late: only a large product needs it
    out = []
    for lib in threadpool_info():
        if lib.get("internal_api") != "openblas":
            continue
        try:
            fn = ctypes.CDLL(lib["filepath"]).openblas_set_num_threads_local
        except (OSError, AttributeError, KeyError):
            continue
        fn.argtypes, fn.restype = [ctypes.c_int], ctypes.c_int
        out.append(fn)
    return tuple(out)


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``np.matmul(a, b)``, on one BLAS thread unless the product is large."""
    work = a.size * (b.shape[-1] if b.ndim >= 2 else 1)
    if not ONE_THREAD_MIN <= work < THREADED_WORK:
        return np.matmul(a, b)
    controls = _controls()
    previous = [fn(1) for fn in controls]
    try:
        return np.matmul(a, b)
    finally:
        for fn, p in zip(controls, previous):
            fn(p)
