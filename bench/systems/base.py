"""The adapter interface every benchmarked system implements, and shared helpers.

A system says whether it can run here (``available``), and turns a workload into
a zero-argument callable (``build``) that computes the loss value and the
gradients w.r.t. the workload's params.  Inputs are converted to the system's
native containers inside ``build``, so the timed call does only the work a user
repeats.  ``build`` plus the first call is the first-call (compile) latency.

Example:
    >>> class Mine(System):
    ...     name = "mine"
    ...     def available(self): return True, ""
    ...     def build(self, workload): return lambda: (0.0, [])
"""

from __future__ import annotations

import os
from typing import Any, Callable

import numpy as np

from bench.workloads import Workload

Outputs = tuple[Any, list[Any]]
Call = Callable[[], Outputs]


class Unsupported(Exception):
    """Raised by ``build`` when a system cannot run a workload (shown as n/a)."""


class System:
    """Base adapter. Subclasses set ``name``, ``threads`` and override the methods."""

    name: str = "?"
    threads: str = "1"
    is_symgrad: bool = False
    note: str = ""
    blas_threads: int | None = None   # if set, numpy/scipy BLAS is limited to this

    def available(self) -> tuple[bool, str]:
        """(True, "") if the system can run here, else (False, one-line reason)."""
        raise NotImplementedError

    def build(self, workload: Workload) -> Call:
        """Prepare ``workload``; return a callable giving ``(value, [grads])``."""
        raise NotImplementedError

    def before_sample(self) -> None:
        """Hook run (untimed) before build and each timed sample: set thread counts."""
        if self.blas_threads is not None:
            limit_blas_threads(self.blas_threads)

    def to_numpy(self, outputs: Outputs) -> tuple[np.ndarray, list[np.ndarray]]:
        """Convert the callable's outputs to float64 numpy arrays (untimed)."""
        value, grads = outputs
        return as_numpy(value), [as_numpy(g) for g in grads]


def as_numpy(x: Any) -> np.ndarray:
    """Best-effort conversion of a tensor/array/DM/scalar to a float64 ndarray."""
    if hasattr(x, "detach"):
        x = x.detach()
    if not isinstance(x, np.ndarray) and hasattr(x, "numpy"):
        x = x.numpy()
    return np.asarray(x, dtype=np.float64)


def cores() -> int:
    """Number of cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        return os.cpu_count() or 1


def limit_blas_threads(n: int) -> bool:
    """Limit every loaded BLAS (numpy's, scipy's OpenBLAS) to ``n`` threads.

    Uses threadpoolctl; returns False (and changes nothing) without it.
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return False
    threadpool_limits(limits=n, user_api="blas")
    return True


def single_thread_label() -> str:
    """Thread label of a numpy-based system: "1" if BLAS can be limited."""
    try:
        import threadpoolctl  # noqa: F401
    except ImportError:
        return f"1 (BLAS {cores()})"
    return "1"


def import_error(module: str) -> tuple[bool, str]:
    """``available()`` result for an importable-or-not module."""
    try:
        __import__(module)
    except Exception as exc:  # ImportError, or a broken install
        return False, f"{module} not importable ({type(exc).__name__}: {exc})"
    return True, ""
