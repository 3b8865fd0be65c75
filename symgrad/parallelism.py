"""The process's thread settings, as PyTorch's: ``set_num_threads`` / ``get_num_threads``
(intra-op: how many threads one operation may use) and ``set_num_interop_threads`` /
``get_num_interop_threads``, with PyTorch 2.13's defaults and error texts.

What the intra-op count governs:

* native code (the LLVM backend): 1 runs every kernel on its calling thread (no helper
  thread is started); 2 or more lets big loops and products share work with the
  process's one helper thread -- two threads at most, the most the code generator has
  (see ``codegen.worker``);
* the BLAS libraries of numpy and scipy (OpenBLAS, MKL, ...), through threadpoolctl:
  ``threadpool_limits(n, user_api="blas")`` on every BLAS loaded when it is called, and
  on scipy's when the backend loads it later (at most the CPUs this process may use:
  OpenBLAS would start threads up to its build's maximum for a larger count).

Until ``set_num_threads`` is called the BLAS libraries keep their own settings (they
read ``OMP_NUM_THREADS`` / ``OPENBLAS_NUM_THREADS`` themselves); native code follows the
default count.  symgrad runs no inter-op thread pool: the inter-op count is kept and
reported, and, as in PyTorch, may be set once.

>>> import symgrad as torch
>>> torch.get_num_threads() >= 1       # torch.set_num_threads(1): one thread from now on
True
"""
from __future__ import annotations

import functools
import os
import threading

import numpy as np

from .config import settings
from .errors import type_name
from .compiler import backends

__all__ = ["set_num_threads", "get_num_threads", "set_num_interop_threads",
           "get_num_interop_threads", "usable_cpus"]

_INT32_MAX = 2 ** 31 - 1
_INT64_MIN, _INT64_MAX = -2 ** 63, 2 ** 63 - 1
_INTEROP_SET_TWICE = ("Error: cannot set number of interop threads after parallel work "
                      "has started or set_num_interop_threads called")


class _State:
    """What the user set (None: the default)."""
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.intra: int | None = None
        self.interop: int | None = None


_state = _State()


def _affinity() -> set[int]:
    """The logical CPUs this process may run on (all of them where the OS has no mask)."""
    try:
        return os.sched_getaffinity(0)
    except (AttributeError, OSError):
        return set(range(os.cpu_count() or 1))


def usable_cpus() -> int:
    """Logical CPUs this process may run on (its affinity mask where the OS has one)."""
    return len(_affinity())


def _cores(cpus: set[int]) -> int:
    """Physical cores among the logical CPUs ``cpus``: CPUs sharing a core (SMT siblings
    in Linux's sysfs topology) count once; a CPU whose topology cannot be read counts
    as a core of its own."""
    cores = set()
    for cpu in cpus:
        try:
            with open(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list") as f:
                cores.add(f.read().strip())
        except OSError:
            cores.add(f"cpu{cpu}")
    return max(len(cores), 1)


@functools.cache
def _default_threads() -> int:
    """PyTorch's default (its MKL's): ``MKL_NUM_THREADS``, else ``OMP_NUM_THREADS``, at
    most the physical cores among the usable CPUs; without them those cores."""
    cores = _cores(_affinity())
    wanted = settings.mkl_num_threads or settings.omp_num_threads
    return min(wanted, cores) if wanted else cores


@functools.cache
def _default_interop_threads() -> int:
    """PyTorch's default: the machine's physical cores, whatever the affinity."""
    return _cores(set(range(os.cpu_count() or 1)))


def _count(name: str, value: object) -> int:
    """``value`` checked as PyTorch's ``THPUtils_unpackInt`` and a positive count."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise RuntimeError(f"{name} expects an int, but got {type_name(value)}")
    n = int(value)
    if not _INT64_MIN <= n <= _INT64_MAX:
        raise ValueError("Overflow when unpacking long long")
    if not -_INT32_MAX - 1 <= n <= _INT32_MAX:
        raise ValueError("Overflow when unpacking long")
    if n <= 0:
        raise RuntimeError(f"{name} expects a positive integer")
    return n


def set_num_threads(n: int, /) -> None:
    """Sets the number of threads used for intraop parallelism on CPU: native kernels
    (one thread, or two at most) and the BLAS of numpy and scipy (see the module's
    docstring).

    >>> import symgrad
    >>> symgrad.set_num_threads(0)
    Traceback (most recent call last):
    RuntimeError: set_num_threads expects a positive integer
    """
    n = _count("set_num_threads", n)
    with _state.lock:
        _state.intra = n
        _limit_blas()
        native = backends.native()
        if native is not None:
            native.set_threads(n)


def get_num_threads() -> int:
    """Returns the number of threads used for parallelizing CPU operations: what
    :func:`set_num_threads` set, else PyTorch's default (``MKL_NUM_THREADS`` or
    ``OMP_NUM_THREADS`` if set, at most the physical cores this process may use; else
    those cores)."""
    return _state.intra if _state.intra is not None else _default_threads()


def set_num_interop_threads(n: int, /) -> None:
    """Sets the number of threads used for interop parallelism on CPU.  As in PyTorch it
    can be set once; symgrad runs no inter-op pool, so the value is only reported.

    >>> import symgrad
    >>> symgrad.set_num_interop_threads(-1)
    Traceback (most recent call last):
    RuntimeError: set_num_interop_threads expects a positive integer
    """
    n = _count("set_num_interop_threads", n)
    with _state.lock:
        if _state.interop is not None:
            raise RuntimeError(_INTEROP_SET_TWICE)
        _state.interop = n


def get_num_interop_threads() -> int:
    """Returns the number of threads used for inter-op parallelism on CPU: what
    :func:`set_num_interop_threads` set, else the machine's physical cores (as PyTorch,
    whatever the process's affinity)."""
    return _state.interop if _state.interop is not None else _default_interop_threads()


def _limit_blas() -> None:
    """Apply the user's count to every BLAS library loaded now (nothing if it was never
    set: the libraries keep their own defaults)."""
    if _state.intra is None:
        return
    from threadpoolctl import threadpool_limits     # late: only a set count needs it
    threadpool_limits(min(_state.intra, usable_cpus()), user_api="blas")


def _configure_native(native) -> None:
    """The LLVM backend has loaded: give it the thread count, and have the BLAS it loads
    limited as the others are."""
    with _state.lock:
        native.set_threads(get_num_threads())
    native.on_blas_load(_limit_blas_locked)


def _limit_blas_locked() -> None:
    with _state.lock:
        _limit_blas()


backends.on_native_load(_configure_native)
