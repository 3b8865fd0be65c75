"""Which GEMM a large float product runs on a target: the IR kernels or BLAS, measured.

Large float32/float64 products (:func:`codegen.lower.matmul.emit`) can run on symgrad's
own IR GEMMs (:mod:`.lower.gemm_kernel`, :mod:`.lower.gemm_packed`) or on the BLAS numpy
and scipy use (``sgemm_``/``dgemm_``, :mod:`.runtime`).  Which is faster depends on the
machine: OpenBLAS may use AVX2 kernels on an AVX-512 CPU it does not know (the IR kernels
then win by 2x), or hand-tuned kernels the IR ones do not reach.  So the choice is not a
constant: it comes from figures measured for the target code is built for.

* :func:`mode` -- ``settings.gemm`` (``SYMGRAD_GEMM``): ``"auto"`` (default: measured),
  ``"ir"`` or ``"blas"`` (forced; what tests of one path use), or :func:`forced`'s
  value inside its block;
* :func:`figures` -- for a target this process can run: one short calibration (the
  product ``a @ b`` of two square matrices at each of :data:`SIZES`, both dtypes, on the
  IR kernels and on BLAS, one thread, interleaved, best of :data:`REPEATS`, in the
  thread's CPU time: time other processes take from it does not count), measured on
  first need (~2 s) and kept in the support cache (``<cache dir>/support/gemm-<key>.json``,
  keyed as a support object is: the target's fingerprint and the code generator's
  source), so a machine measures once per version of the code (with the support cache
  off, ``SYMGRAD_SUPPORT_CACHE=0``, once per process).  A target this process
  cannot run has no figures: its code uses the IR kernels (nothing to measure);
* :func:`prefers_blas` -- the decision for one product: the figures of the size nearest
  to it (by work, ``m*n*k``), BLAS only when it was faster by more than :data:`MARGIN`
  (a noisy calibration does not flip a near tie);
* :func:`describe` -- the decisions as text, part of the cache key of every program with
  a product the choice :func:`concerns` (:func:`codegen.cache.cache_key`; the mode is
  part of every key's environment): code built under other decisions is never loaded.
  A program without such a product never calibrates.

>>> choose({"float64": {"256": [20.0, 30.0]}}, "float64", 256 ** 3)   # BLAS 1.5x faster
True
>>> choose({"float64": {"256": [20.0, 21.0]}}, "float64", 256 ** 3)   # within the margin
False
"""
from __future__ import annotations

import contextlib
import contextvars
import json
import math
import os
import tempfile
import threading
import time
from typing import Iterator

from symgrad.config import settings

from . import target as targets

__all__ = ["mode", "forced", "figures", "choose", "prefers_blas", "describe", "concerns",
           "SIZES", "REPEATS", "MARGIN", "MODES", "MIN_WORK", "MIN_DIM"]

MIN_WORK = 1 << 15       # smaller products (multiply-adds) run on loops, never on a GEMM
MIN_DIM = 8              # ... and skinny ones (matrix-vector): far slower in OpenBLAS's gemm

MODES = ("auto", "ir", "blas")
SIZES = (256, 768)       # square products measured: one in cache, one streamed from L3/memory
REPEATS = 3              # timings per path and size (interleaved), the best kept
MIN_SECONDS = 0.002      # each timing repeats the call for at least this long
MARGIN = 0.10            # BLAS must be this much faster than the IR kernels to be chosen
DTYPES = ("float32", "float64")

_FORCED: contextvars.ContextVar[str | None] = contextvars.ContextVar("symgrad_gemm", default=None)
_LOCK = threading.RLock()
_MEASURED: dict[str, dict] = {}       # target fingerprint -> figures (this process)


def mode() -> str:
    """``"auto"``, ``"ir"`` or ``"blas"``: :func:`forced`'s value inside its block, else
    ``settings.gemm``."""
    m = _FORCED.get() or settings.gemm
    if m not in MODES:
        raise ValueError(f"SYMGRAD_GEMM={m!r}: expected one of {', '.join(MODES)}")
    return m


@contextlib.contextmanager
def forced(m: str) -> Iterator[None]:
    """Products compiled inside the block run on ``m`` (``"ir"``, ``"blas"``, ``"auto"``)."""
    if m not in MODES:
        raise ValueError(f"gemm mode {m!r}: expected one of {', '.join(MODES)}")
    token = _FORCED.set(m)
    try:
        yield
    finally:
        _FORCED.reset(token)


def concerns(node) -> bool:
    """Whether the choice can change the code of ``node`` (a ``matmul`` node): a
    float32/float64 product of at least ``MIN_WORK`` multiply-adds per matrix, every
    dimension at least ``MIN_DIM``."""
    a, b = node.args
    if node.dtype.name not in DTYPES or len(a.shape) < 2 or len(b.shape) < 2:
        return False
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    return min(m, k, n) >= MIN_DIM and m * k * n >= MIN_WORK


def choose(figs: dict, dtype: str, work: int) -> bool:
    """Whether BLAS runs a product of ``work`` multiply-adds by figures ``figs``
    (``{dtype: {size: [ir GFLOP/s, blas GFLOP/s]}}``): the measured size nearest to it."""
    per_size = figs.get(dtype)
    if not per_size:
        return False
    size = min(per_size, key=lambda s: abs(math.log(int(s) ** 3) - math.log(max(work, 1))))
    ir_rate, blas_rate = per_size[size]
    return blas_rate > ir_rate * (1 + MARGIN)


def prefers_blas(dtype: str, work: int, t: "targets.Target | None" = None) -> bool:
    """Whether a ``dtype`` product of ``work`` multiply-adds that the IR kernels could run
    goes to BLAS on ``t`` (default: the current target)."""
    m = mode()
    if m != "auto":
        return m == "blas"
    figs = figures(t or targets.current())
    return figs is not None and choose(figs, dtype, work)


def describe(t: "targets.Target | None" = None) -> str:
    """The decisions in force for ``t``, as text (part of a program's cache key)."""
    m = mode()
    if m != "auto":
        return f"gemm={m}"
    figs = figures(t or targets.current())
    if figs is None:
        return "gemm=auto:ir"
    parts = [f"{dt}/{s}:{'blas' if choose(figs, dt, int(s) ** 3) else 'ir'}"
             for dt in DTYPES for s in sorted(figs.get(dt, {}), key=int)]
    return "gemm=auto:" + ",".join(parts)


def figures(t: targets.Target) -> dict | None:
    """The calibration of ``t`` (see the module docstring), or None when this process
    cannot run its code.  Processes sharing a cache measure one at a time (a lock file
    next to the entry): a second one waits and reads the first one's figures, rather
    than measuring while the first one does."""
    if not t.runnable:
        return None
    key = t.fingerprint()
    with _LOCK:
        figs = _MEASURED.get(key)
        if figs is None:
            path = _path(t)
            with _file_lock(path):
                figs = _read(path)
                if figs is None:
                    figs = _measure(t)
                    _write(path, figs)
            _MEASURED[key] = figs
        return figs


@contextlib.contextmanager
def _file_lock(path: str | None) -> Iterator[None]:
    """An exclusive lock on ``path + ".lock"`` (none without a path or ``fcntl``)."""
    try:
        import fcntl
    except ImportError:           # not POSIX: processes may measure at the same time
        fcntl = None
    handle = None
    if path is not None and fcntl is not None:
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            handle = open(path + ".lock", "a")
            fcntl.flock(handle, fcntl.LOCK_EX)
        except OSError:
            handle = None
    try:
        yield
    finally:
        if handle is not None:
            handle.close()        # closing releases the lock


def _path(t: targets.Target) -> str | None:
    from . import support        # late: support imports jit (LLVM), not needed to decide
    if not support.enabled():
        return None
    return os.path.join(settings.cache_dir, "support", f"gemm-{support.key('gemm-choice', t)}.json")


def _read(path: str | None) -> dict | None:
    if path is None:
        return None
    try:
        with open(path) as f:
            figs = json.load(f)
    except (OSError, ValueError):
        return None
    ok = isinstance(figs, dict) and all(
        isinstance(figs.get(dt), dict) and all(
            isinstance(v, list) and len(v) == 2 and all(isinstance(x, (int, float)) for x in v)
            for v in figs[dt].values()) for dt in DTYPES)
    return figs if ok else None


def _write(path: str | None, figs: dict) -> None:
    if path is None:
        return
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".gemm-")
        with os.fdopen(fd, "w") as f:
            json.dump(figs, f)
        os.replace(tmp, path)
    except OSError:
        pass                      # a read-only cache: measured again by the next process


def _measure(t: targets.Target) -> dict:
    """``{dtype: {size: [ir, blas]}}`` in GFLOP/s, one thread (see the module docstring):
    the IR kernels as a compiled program runs them, BLAS as generated code calls it
    (``C^T = B^T A^T``, OpenBLAS limited to the calling thread)."""
    import numpy as np
    # late: the backend imports the lowering, which asks this module for its decisions
    from .backend import compile_program
    from . import runtime, worker
    from symgrad.graph.dtypes import float32, float64
    from symgrad.graph.node import make_node
    from symgrad.graph.program import Program

    figs: dict = {}
    allowed = worker.helper_allowed()
    worker.set_helper_allowed(False)
    try:
        for dt in (float32, float64):
            figs[dt.name] = {}
            gemm = _blas_gemm(runtime.blas_symbols()[runtime.BLAS_GEMM[dt.name]], dt.np)
            for n in SIZES:
                a = make_node("input", (), (("name", "a"),), (n, n), dt)
                b = make_node("input", (), (("name", "b"),), (n, n), dt)
                c = make_node("matmul", (a, b), (), (n, n), dt)
                with forced("ir"):
                    exe = compile_program(Program([a, b], ["a", "b"], [c], ["c"]), target=t)
                rng = np.random.default_rng(n)
                x, y = (rng.standard_normal((n, n)).astype(dt.np) for _ in range(2))
                out = np.empty((n, n), dt.np)
                calls = [lambda: exe([x, y]), lambda: gemm(x, y, out)]
                best = [math.inf, math.inf]
                for _ in range(REPEATS):
                    for i, call in enumerate(calls):
                        best[i] = min(best[i], _seconds(call))
                figs[dt.name][str(n)] = [round(2.0 * n ** 3 / s / 1e9, 2) for s in best]
    finally:
        worker.set_helper_allowed(allowed)
    return figs


def _blas_gemm(address: int, np_dtype):
    """``gemm(a, b, out)``: ``out = a @ b`` (square, C order) by the Fortran GEMM at
    ``address`` on the calling thread only, as generated code calls it."""
    import ctypes
    import numpy as np
    # late: runtime loads LLVM (jit); a decision from cached figures needs neither
    from . import runtime
    fn = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 13)(address)
    control = runtime.blas_thread_control()
    threads = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)(control) if control else None
    ct = ctypes.c_double if np_dtype == np.float64 else ctypes.c_float
    no = ctypes.c_char(b"N")
    one, zero = ct(1.0), ct(0.0)

    def gemm(a, b, out) -> None:
        n = ctypes.c_int(a.shape[0])
        ref = ctypes.byref
        previous = threads(1) if threads else None
        fn(ref(no), ref(no), ref(n), ref(n), ref(n), ref(one), b.ctypes.data, ref(n),
           a.ctypes.data, ref(n), ref(zero), out.ctypes.data, ref(n))
        if threads:
            threads(previous)
    return gemm


def _seconds(call) -> float:
    """CPU seconds of this thread per ``call()`` (repeated for at least ``MIN_SECONDS``):
    time the thread spends preempted by other processes does not count, so a busy
    machine does not skew one path's figures against the other's."""
    call()
    calls, start = 0, time.thread_time()
    while True:
        call()
        calls += 1
        elapsed = time.thread_time() - start
        if elapsed >= MIN_SECONDS:
            return elapsed / calls
