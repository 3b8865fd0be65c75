"""symgrad compile-and-cache: ``value_and_grad`` of the torch-like loss, compiled.

The same loss code as every torch-like system (``T = symgrad``), traced once,
differentiated symbolically and compiled for a backend:

* ``symgrad-llvm``: native code through LLVM (``backend="llvm"``).  Its big products
  and loops are split between the calling thread and one helper thread when the
  process may use two CPUs, so its thread count is 2 here (BLAS itself is run
  single-threaded per call by the generated code; the BLAS limit below only pins
  numpy's and scipy's own pools).
* ``symgrad-numpy``: the numpy backend (``backend="numpy"``), one thread.

numpy arrays in, numpy arrays out.  The backend is requested with
``symgrad.compile(fn, backend=...)`` around ``symgrad.value_and_grad``; if the
package instead takes ``backend=`` on ``value_and_grad`` itself, that is used.
"""

from __future__ import annotations

from typing import Any, Callable

from bench.systems.base import Call, System, cores
from bench.systems.symgrad_eager import import_symgrad
from bench.workloads import Workload


def compiled_value_and_grad(sg: Any, fn: Callable[..., Any], argnums: tuple[int, ...],
                            backend: str) -> Callable[..., Any]:
    """``sg.compile(sg.value_and_grad(fn, argnums), backend=...)``."""
    try:
        return sg.value_and_grad(fn, argnums=argnums, backend=backend)
    except TypeError as exc:
        if "backend" not in str(exc):
            raise
    return sg.compile(sg.value_and_grad(fn, argnums=argnums), backend=backend)


def _fresh_disk_cache(sg: Any) -> None:
    """Point symgrad's on-disk cache of compiled code at a new empty directory (removed at
    exit), so that every first call is a cold compile, as torch.compile's is with its
    caches off; a first call served by the disk cache is timed by :mod:`bench.startup`
    instead."""
    settings = getattr(getattr(sg, "config", None), "settings", None)
    if settings is None or getattr(settings, "_bench_fresh", False):
        return
    import atexit
    import shutil
    import tempfile
    settings.cache_dir = tempfile.mkdtemp(prefix="symgrad-bench-cache-")
    settings._bench_fresh = True
    atexit.register(shutil.rmtree, settings.cache_dir, True)


def _bytecode() -> None:
    """symgrad's sources compiled to bytecode, as an installed package has them
    (:func:`bench.startup.compile_bytecode`: where ``PYTHONDONTWRITEBYTECODE`` is set,
    every process would otherwise recompile them inside the first call)."""
    from bench.startup import compile_bytecode
    compile_bytecode()


class SymgradCompiled(System):
    is_symgrad = True
    threads = "1"
    blas_threads = 1

    def __init__(self, backend: str) -> None:
        self.backend = backend
        if backend == "llvm" and cores() >= 2:
            self.threads = "2"
        self.name = f"symgrad-{backend}"
        self.note = f"value_and_grad, backend={backend!r}"

    def available(self) -> tuple[bool, str]:
        sg, why = import_symgrad("value_and_grad", "compile")
        if sg is not None:
            _fresh_disk_cache(sg)
            _bytecode()
            if self.backend == "llvm":
                from bench.startup import calibrate_machine
                calibrate_machine()
        return (sg is not None), why

    def build(self, workload: Workload) -> Call:
        import symgrad as sg

        def loss(*args: Any) -> Any:
            return workload.loss(sg, *args)

        argnums = tuple(range(len(workload.params)))
        step = compiled_value_and_grad(sg, loss, argnums, self.backend)
        args = workload.ordered()

        def call() -> tuple[Any, list[Any]]:
            value, grads = step(*args)
            return value, list(grads)

        return call


SYSTEMS = [SymgradCompiled("llvm"), SymgradCompiled("numpy")]
