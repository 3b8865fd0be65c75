"""glibc's malloc settings for eager arrays: what :func:`tune` sets once, at import.

An eager training step allocates and frees arrays of a few MB per op (a CNN's
activations and their gradients). glibc serves each one by a fresh ``mmap`` and
returns it by ``munmap`` (or trims the heap past 2x its largest such block), so every
op pays its pages' first-touch faults again: half the CPU time of a small CNN's step.
With the mmap threshold at its maximum (32 MB on 64-bit) and the heap trimmed only past
128 MB of free space at its top, freed arrays are reused without faults, at the cost of
keeping up to that much free memory in the process (the gain is as a caching
allocator's). ``SYMGRAD_MALLOC_TUNING=0`` leaves the settings alone; other C libraries
(no ``mallopt``, or not glibc) are left alone too."""
from __future__ import annotations

import ctypes
import sys

from .config import settings

__all__ = ["tune", "tuned", "MMAP_THRESHOLD", "TRIM_THRESHOLD"]

MMAP_THRESHOLD = 32 << 20       # glibc's largest (DEFAULT_MMAP_THRESHOLD_MAX, 64-bit)
TRIM_THRESHOLD = 128 << 20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3     # malloc.h

tuned = False       # whether tune() changed the settings


def tune() -> bool:
    """Set glibc's mmap and trim thresholds (see the module docstring), once; whether
    they are set."""
    global tuned
    if tuned or not settings.malloc_tuning or not sys.platform.startswith("linux"):
        return tuned
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version     # glibc only: musl's mallopt does nothing
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    tuned = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and \
        bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    return tuned
