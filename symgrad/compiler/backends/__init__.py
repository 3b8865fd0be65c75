"""Backends turn an optimised Program into a callable on numpy arrays. ``numpy`` is the
reference backend; ``llvm`` (native code) lives in the top-level ``codegen`` package."""
from __future__ import annotations

__all__ = ["get_backend", "BACKENDS"]

BACKENDS = ("llvm", "numpy")


def get_backend(name: str):
    if name == "numpy":
        from . import numpy_backend        # late: a backend loads when first named
        return numpy_backend
    if name == "llvm":
        try:
            import codegen.backend as llvm_backend   # late: llvmlite loads on first compile
        except ImportError as e:
            raise RuntimeError(f"the LLVM backend is not available: {e}") from e
        return llvm_backend
    raise ValueError(f"unknown backend {name!r}; choose one of {BACKENDS}")
