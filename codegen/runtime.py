"""External symbols generated code calls, published *by name* so that an object file
compiled in one process links in another (see :func:`register`).

* ``symgrad_blas_dgemm`` / ``symgrad_blas_sgemm``: the Fortran-ABI GEMM of scipy's
  BLAS, taken from the ``scipy.linalg.cython_blas.__pyx_capi__`` capsules;
* ``symgrad_rt_malloc`` / ``symgrad_rt_free``: the C library's allocator (the arena of
  temporaries when it is too large for the stack); ``symgrad_rt_aligned_alloc``: its
  C11 ``aligned_alloc`` (a two-thread step's control block: the chunks' accumulators and
  partial products in it are read and written with full-width vectors, which must not
  straddle cache lines);
* ``memset``/``memcpy``/``memmove``: what LLVM lowers its memory intrinsics to;
* ``symgrad_rt_pthread_create`` / ``_detach``, ``symgrad_rt_sched_yield``,
  ``symgrad_rt_syscall`` (futex), ``symgrad_rt_usleep``: the process-wide helper thread of big loops and
  products (:mod:`codegen.worker`); kernels hand it work with ``symgrad_rt_post``
  (:func:`register_threads`);
* ``symgrad_blas_set_num_threads_local``: OpenBLAS's per-calling-thread thread count
  (``openblas_set_num_threads_local``), found next to dgemm with ``dladdr``.

>>> register_blas(); sorted(blas_symbols())
['symgrad_blas_dgemm', 'symgrad_blas_sgemm']
"""
from __future__ import annotations

import ctypes
import functools
from typing import Callable

from . import jit, numpy_abi

__all__ = ["register", "register_blas", "register_for", "symbols", "blas_symbols", "BLAS_GEMM",
           "MALLOC", "ALIGNED_ALLOC", "FREE", "on_blas_load"]

BLAS_GEMM = {"float64": "symgrad_blas_dgemm", "float32": "symgrad_blas_sgemm"}
MALLOC, FREE = "symgrad_rt_malloc", "symgrad_rt_free"
ALIGNED_ALLOC = "symgrad_rt_aligned_alloc"
LIBC_INTRINSICS = ("memset", "memcpy", "memmove")
PTHREAD_CREATE, PTHREAD_DETACH = "symgrad_rt_pthread_create", "symgrad_rt_pthread_detach"
SCHED_YIELD = "symgrad_rt_sched_yield"
SYSCALL = "symgrad_rt_syscall"
USLEEP = "symgrad_rt_usleep"
THREAD_TRAMPOLINE = "symgrad_rt_thread"
THREAD_POST = "symgrad_rt_post"
_KEEP: list = []      # process-wide objects that must never be unloaded
_ON_BLAS_LOAD: list[Callable[[], None]] = []   # see on_blas_load
_BLAS_LOADED: list[bool] = []                  # [True] once blas_symbols has loaded it
BLAS_THREADS_LOCAL = "symgrad_blas_set_num_threads_local"


def _capsule_address(capsule: object) -> int:
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return get_pointer(capsule, get_name(capsule))


def _cython_blas():
    """scipy's ``cython_blas`` module without importing ``scipy.linalg`` (~0.4 s)."""
    import sys
    mod = sys.modules.get("scipy.linalg.cython_blas")
    if mod is not None:
        return mod
    import importlib.util
    import os
    import scipy
    folder = os.path.join(os.path.dirname(scipy.__file__), "linalg")
    for name in sorted(os.listdir(folder)):
        if name.startswith("cython_blas.") and name.endswith((".so", ".pyd")):
            spec = importlib.util.spec_from_file_location("scipy.linalg.cython_blas",
                                                          os.path.join(folder, name))
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            return mod
    from scipy.linalg import cython_blas
    return cython_blas


@functools.cache
def blas_symbols() -> dict[str, int]:
    """Name -> address of the BLAS routines (loads scipy's BLAS on first use, then runs
    the :func:`on_blas_load` callbacks)."""
    capi = _cython_blas().__pyx_capi__
    found = {BLAS_GEMM["float64"]: _capsule_address(capi["dgemm"]),
             BLAS_GEMM["float32"]: _capsule_address(capi["sgemm"])}
    _BLAS_LOADED.append(True)
    for callback in list(_ON_BLAS_LOAD):
        callback()
    return found


def on_blas_load(callback: Callable[[], None]) -> None:
    """Call ``callback()`` once scipy's BLAS library is loaded into the process, at once if
    it already is (the front end limits the new library's threads as it did the others')."""
    _ON_BLAS_LOAD.append(callback)
    if _BLAS_LOADED:
        callback()


def _library_of(address: int) -> str | None:
    """Path of the shared library containing ``address`` (dladdr)."""
    class _DlInfo(ctypes.Structure):
        _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                    ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]
    info = _DlInfo()
    try:
        dladdr = ctypes.CDLL(None).dladdr
    except AttributeError:
        return None
    dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    if not dladdr(ctypes.c_void_p(address), ctypes.byref(info)) or not info.dli_fname:
        return None
    return info.dli_fname.decode()


@functools.cache
def blas_thread_control() -> int | None:
    """Address of OpenBLAS's ``openblas_set_num_threads_local`` in the library that
    provides scipy's dgemm, or None (then BLAS threading is left alone)."""
    path = _library_of(blas_symbols()[BLAS_GEMM["float64"]])
    if path is None:
        return None
    try:
        fn = ctypes.CDLL(path).openblas_set_num_threads_local
    except (OSError, AttributeError):
        return None
    return ctypes.cast(fn, ctypes.c_void_p).value


@functools.cache
def symbols() -> dict[str, int]:
    """Name -> address of every runtime symbol except BLAS (see :func:`register_blas`)."""
    libc = ctypes.CDLL(None)
    return {
        MALLOC: ctypes.cast(libc.malloc, ctypes.c_void_p).value,
        ALIGNED_ALLOC: ctypes.cast(libc.aligned_alloc, ctypes.c_void_p).value,
        PTHREAD_CREATE: ctypes.cast(libc.pthread_create, ctypes.c_void_p).value,
        PTHREAD_DETACH: ctypes.cast(libc.pthread_detach, ctypes.c_void_p).value,
        SCHED_YIELD: ctypes.cast(libc.sched_yield, ctypes.c_void_p).value,
        SYSCALL: ctypes.cast(libc.syscall, ctypes.c_void_p).value,
        USLEEP: ctypes.cast(libc.usleep, ctypes.c_void_p).value,
        FREE: ctypes.cast(libc.free, ctypes.c_void_p).value,
        # LLVM lowers large llvm.memset/llvm.memcpy intrinsics to these C functions
        **{name: ctypes.cast(getattr(libc, name), ctypes.c_void_p).value
           for name in LIBC_INTRINSICS},
    }


@functools.cache
def register() -> None:
    """Publish :func:`symbols` to LLVM's symbol table (idempotent)."""
    numpy_abi.register_runtime_symbols()
    for name, address in symbols().items():
        jit.add_symbol(name, address)


@functools.cache
def register_blas() -> None:
    """Publish the BLAS symbols (only programs calling BLAS pay for loading it)."""
    for name, address in blas_symbols().items():
        jit.add_symbol(name, address)
    control = blas_thread_control()
    if control is not None:
        jit.add_symbol(BLAS_THREADS_LOCAL, control)


@functools.cache
def register_threads() -> None:
    """Compile (or load from the support-object cache, :mod:`codegen.support`: its key is
    the environment, which includes the code generator's source digest) and publish the helper thread's module, once per
    process, kept loaded forever -- also through interpreter shutdown, the helper may
    still be spinning in it; see :mod:`codegen.worker`.  A new process running a
    two-thread kernel from the disk caches so needs no LLVM at all."""
    register()
    # late: worker and lower.parallel build on this module's symbol names, and only a
    # kernel that uses threads needs them
    from . import support, target, worker

    def make_ir() -> str:
        from .lower.parallel import trampoline   # late: see above
        return worker.worker_ir(trampoline)
    with target.use(target.host()) as host:    # the helper runs here: built for this CPU
        # (the key's environment has codegen's source digest)
        compiled = support.load_or_compile("worker", make_ir, host)
    _KEEP.append(compiled)
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(compiled))     # never freed
    worker.register_fork_hook(compiled.address(worker.MAILBOX))    # its flag before any post
    jit.add_symbol(THREAD_POST, compiled.address(THREAD_POST))


def register_for(object_code: bytes, t=None) -> None:
    """Publish everything ``object_code`` (built for target ``t``, default: the current
    one) needs before it is loaded."""
    register()
    _, undefined = jit.elf_symbols(object_code)
    if any(name in BLAS_GEMM.values() or name == BLAS_THREADS_LOCAL for name in undefined):
        register_blas()
    if THREAD_POST in undefined:
        register_threads()
    from . import library, target      # late: library builds on this module's jit use
    library.ensure(t or target.current(), library.needed(undefined))
