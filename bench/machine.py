"""Machine limits and environment, printed as the report header.

* memory bandwidth: a large numpy copy (read + write) and add (2 reads + 1 write),
  single-threaded, best of a few repetitions;
* GEMM FLOP/s: numpy's BLAS ``matmul`` on square float64/float32 matrices, on one
  thread and on all cores (threadpoolctl; without it both use BLAS's default);
* CPU model, cores, and versions of every library involved.

Example:
    >>> from bench.machine import measure_limits
    >>> limits = measure_limits(quick=True)
    >>> sorted(limits)[:2]
    ['add_GBps', 'copy_GBps']
"""

from __future__ import annotations

import importlib.metadata
import platform
import time
from typing import Callable

import numpy as np

from bench.systems.base import cores, limit_blas_threads

PACKAGES = ("numpy", "torch", "jax", "jaxlib", "casadi", "matplotlib",
            "threadpoolctl", "llvmlite", "symgrad")


def _best(fn: Callable[[], object], reps: int) -> float:
    fn()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def measure_limits(quick: bool = False) -> dict[str, float]:
    """Memory bandwidth (GB/s) and GEMM throughput (GFLOP/s) of this machine."""
    n = 2**22 if quick else 2**25          # 32 MiB or 256 MiB of float64
    m = 256 if quick else 2048
    reps = 3 if quick else 5
    a, b, c = np.ones(n), np.ones(n), np.empty(n)
    copy_s = _best(lambda: np.copyto(c, a), reps)
    add_s = _best(lambda: np.add(a, b, out=c), reps)
    limits = {"copy_GBps": 2 * a.nbytes / copy_s / 1e9,
              "add_GBps": 3 * a.nbytes / add_s / 1e9}
    for threads in (1, cores()):
        limit_blas_threads(threads)
        for dt in ("float64", "float32"):
            x = np.ones((m, m), dtype=dt)
            t = _best(lambda: x @ x, reps)
            limits[f"gemm_f{dt[-2:]}_{threads}t_GFLOPs"] = 2 * m**3 / t / 1e9
    return limits


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def versions() -> dict[str, str]:
    """Installed versions of the relevant packages ('-' if absent)."""
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "-"
    return out


def environment() -> dict[str, object]:
    return {"cpu": cpu_model(), "cores": cores(), "platform": platform.platform(),
            "versions": versions()}


def header_lines(env: dict[str, object], limits: dict[str, float]) -> list[str]:
    v = env["versions"]
    assert isinstance(v, dict)
    n = env["cores"]
    gemm = ", ".join(f"f{b} {limits[f'gemm_f{b}_1t_GFLOPs']:.0f} (1 thread) / "
                     f"{limits[f'gemm_f{b}_{n}t_GFLOPs']:.0f} ({n} threads)" for b in ("64", "32"))
    return [
        f"machine: {env['cpu']}, {env['cores']} cores, {env['platform']}",
        "versions: " + ", ".join(f"{k} {val}" for k, val in v.items()),
        f"limits: memory copy {limits['copy_GBps']:.1f} GB/s, add {limits['add_GBps']:.1f} GB/s "
        f"(numpy, 1 thread); GEMM GFLOP/s (numpy BLAS) {gemm}",
    ]
