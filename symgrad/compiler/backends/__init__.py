"""Backends turn an optimised Program into a callable on numpy arrays. ``numpy`` is the
reference backend; ``llvm`` (native code) lives in the top-level ``codegen`` package.
Settings the native backend must follow (the thread count of :mod:`symgrad.parallelism`)
reach it through :func:`on_native_load` and :func:`native`."""
from __future__ import annotations

import threading
from typing import Any, Callable

__all__ = ["get_backend", "BACKENDS", "on_native_load", "native"]

BACKENDS = ("llvm", "numpy")
_LOCK = threading.Lock()
_NATIVE: list = []                                # the LLVM backend, once loaded
_ON_NATIVE_LOAD: list[Callable[[Any], None]] = []


def get_backend(name: str):
    if name == "numpy":
        from . import numpy_backend        # late: a backend loads when first named
        return numpy_backend
    if name == "llvm":
        return _native_backend()
    raise ValueError(f"unknown backend {name!r}; choose one of {BACKENDS}")


def _native_backend():
    if _NATIVE:
        return _NATIVE[0]
    with _LOCK:
        if not _NATIVE:
            try:
                import codegen.backend as llvm_backend   # late: llvmlite loads on first compile
            except ImportError as e:
                raise RuntimeError(f"the LLVM backend is not available: {e}") from e
            for callback in _ON_NATIVE_LOAD:
                callback(llvm_backend)
            _NATIVE.append(llvm_backend)
    return _NATIVE[0]


def native():
    """The LLVM backend if something has loaded it, else None (nothing is loaded)."""
    return _NATIVE[0] if _NATIVE else None


def on_native_load(callback: Callable[[Any], None]) -> None:
    """Call ``callback(llvm_backend)`` when the LLVM backend loads (at once if it has)."""
    with _LOCK:
        _ON_NATIVE_LOAD.append(callback)
        loaded = native()
    if loaded is not None:
        callback(loaded)
