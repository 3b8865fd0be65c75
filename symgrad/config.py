"""Settings read once from the environment (the one place symgrad reads env vars):

* ``SYMGRAD_LOG`` — comma list of log channels: ``recompiles`` logs why a compiled
  function missed its cache (logger ``symgrad.recompiles``).
* ``SYMGRAD_CACHE_DIR`` — the on-disk cache of compiled code (default: the user cache dir).
* ``SYMGRAD_DISK_CACHE`` — ``0`` disables the on-disk cache.
* ``SYMGRAD_SUPPORT_CACHE`` — ``0`` disables the on-disk cache of the few support objects
  every process needs (trig library, helper thread, loop driver; see
  :mod:`codegen.support`), which stays on when ``SYMGRAD_DISK_CACHE=0``.
* ``SYMGRAD_SANITIZE`` — ``1`` compiles kernels with a bounds check on every load and
  store of a planned buffer: an out-of-range access is not made (it reads element 0)
  and the call raises ``RuntimeError`` (a test mode; the differential tester uses it).
* ``SYMGRAD_SPLIT_COMPILE`` — ``0`` compiles every module whole, on one thread (default:
  a big module in two parts, optimised and compiled on two threads: see ``codegen.split``).
* ``SYMGRAD_DYNAMIC_SHAPES`` — ``0`` turns off automatic dynamic shapes (a size that
  changes between calls then compiles per size; see :mod:`symgrad.compiler.dynamic`).
* ``SYMGRAD_MALLOC_TUNING`` — ``0`` leaves glibc's malloc settings alone (default: large
  arrays are reused from the heap, see :mod:`symgrad.memory`).
* ``SYMGRAD_GEMM`` — which GEMM large float products run: ``auto`` (default: the faster on
  this machine by a short calibration, see ``codegen.gemm_choice``), ``ir`` (symgrad's own
  kernels) or ``blas`` (scipy's BLAS).
* ``SYMGRAD_BACKEND`` — default backend of ``symgrad.compile`` (``llvm`` or ``numpy``).
* ``SYMGRAD_TARGET_TRIPLE``, ``SYMGRAD_TARGET_CPU``, ``SYMGRAD_TARGET_FEATURES``,
  ``SYMGRAD_TARGET_VECTOR_BITS`` — the machine compiled code is built for (default: this
  host; see :mod:`codegen.target`).
* ``MKL_NUM_THREADS``, else ``OMP_NUM_THREADS`` — the default of
  ``symgrad.get_num_threads()`` (at most the CPUs this process may use), read as PyTorch
  reads them: the first number of a comma list; unset, non-numeric or below 1 is ignored.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

__all__ = ["settings", "Settings"]


def _default_cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "symgrad")


def _int(env, name: str) -> int:
    text = env.get(name, "").strip()
    try:
        return int(text) if text else 0
    except ValueError:
        raise ValueError(f"{name}={text!r}: expected an integer") from None


def _thread_count(env, name: str) -> int:
    """An OpenMP-style thread count (``"4"``, ``"4,2"``: 4), 0 when unset or not a
    positive number."""
    first = env.get(name, "").split(",")[0].strip()
    return int(first) if first.isdigit() and first.isascii() else 0


@dataclass
class Settings:
    log: set = field(default_factory=set)
    cache_dir: str = ""
    disk_cache: bool = True
    support_cache: bool = True
    backend: str = "llvm"
    gemm: str = "auto"
    cache_size: int = 64
    sanitize: bool = False
    dynamic_shapes: bool = True
    split_compile: bool = True      # SYMGRAD_SPLIT_COMPILE=0: big modules in one LLVM thread
    malloc_tuning: bool = True
    target_triple: str = ""
    target_cpu: str = ""
    target_features: str = ""
    target_vector_bits: int = 0
    mkl_num_threads: int = 0
    omp_num_threads: int = 0

    @classmethod
    def from_env(cls) -> "Settings":
        env = os.environ
        return cls(
            log={s.strip() for s in env.get("SYMGRAD_LOG", "").split(",") if s.strip()},
            cache_dir=env.get("SYMGRAD_CACHE_DIR") or _default_cache_dir(),
            disk_cache=env.get("SYMGRAD_DISK_CACHE", "1") not in ("0", "false", "no"),
            support_cache=env.get("SYMGRAD_SUPPORT_CACHE", "1") not in ("0", "false", "no"),
            malloc_tuning=env.get("SYMGRAD_MALLOC_TUNING", "1") not in ("0", "false", "no"),
            backend=env.get("SYMGRAD_BACKEND", "llvm"),
            gemm=env.get("SYMGRAD_GEMM", "auto").strip().lower() or "auto",
            sanitize=env.get("SYMGRAD_SANITIZE", "0") not in ("0", "", "false", "no"),
            dynamic_shapes=env.get("SYMGRAD_DYNAMIC_SHAPES", "1") not in ("0", "false", "no"),
            split_compile=env.get("SYMGRAD_SPLIT_COMPILE", "1") not in ("0", "false", "no"),
            target_triple=env.get("SYMGRAD_TARGET_TRIPLE", ""),
            target_cpu=env.get("SYMGRAD_TARGET_CPU", ""),
            target_features=env.get("SYMGRAD_TARGET_FEATURES", ""),
            target_vector_bits=_int(env, "SYMGRAD_TARGET_VECTOR_BITS"),
            mkl_num_threads=_thread_count(env, "MKL_NUM_THREADS"),
            omp_num_threads=_thread_count(env, "OMP_NUM_THREADS"),
        )


settings = Settings.from_env()
