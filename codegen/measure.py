"""Ad-hoc timing of the LLVM backend on the benchmark workloads (``python -m codegen.measure``).

Per-call time of value+gradient through ``native_entry`` (the fast path the front end
installs), best-of-repeats median, and compile latency cold and from the disk cache
(each in a fresh process, symgrad's bytecode compiled as an installed copy has it).  The workloads come from ``bench.workloads``; this script
only times symgrad, for the full comparison run ``python -m bench``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

CASES = {
    "seed": ("seed", {}, "float64"),
    "rosenbrock-1e3": ("rosenbrock", {"N": 1000}, "float64"),
    "rosenbrock-1e6": ("rosenbrock", {"N": 1_000_000}, "float64"),
    "logreg-1e6": ("logreg", {"N": 1_000_000, "D": 5}, "float64"),
    "mlp-64": ("mlp", {"B": 64, "D": 784, "H": 256, "C": 10}, "float64"),
    "chain-1e7-f32": ("chain", {"N": 10_000_000}, "float32"),
    "chain-1e7-f64": ("chain", {"N": 10_000_000}, "float64"),
}
TARGETS_US = {"seed": 0.5, "rosenbrock-1e3": 1.5, "rosenbrock-1e6": 400, "logreg-1e6": 3000,
              "mlp-64": 600, "chain-1e7-f32": 250_000, "chain-1e7-f64": 500_000}


def build(case: str):
    """(entry, args, value_and_grad function, reference check) for one case."""
    import symgrad
    from bench import workloads as W
    family, sizes, dtype = CASES[case]
    fam = W.FAMILIES[family]
    rng = np.random.default_rng(0)
    arrays = fam.make_inputs(rng, np.dtype(dtype), **sizes)
    names = list(arrays)
    argnums = tuple(names.index(p) for p in fam.params)
    fn = lambda *a: fam.loss(symgrad, *a)
    vg = symgrad.value_and_grad(fn, argnums=argnums if len(argnums) > 1 else argnums[0],
                                backend="llvm")
    args = [arrays[k] for k in names]
    exe = vg.lower(*args).compile()
    return exe.native_entry(), args, exe


def time_call(f, args, min_time: float = 0.2, repeats: int = 7) -> float:
    f(*args)
    n, t = 1, 0.0
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            f(*args)
        t = time.perf_counter() - t0
        if t >= min_time / repeats or n > 1e7:
            break
        n *= 4
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            f(*args)
        samples.append((time.perf_counter() - t0) / n)
    return statistics.median(samples)


_CHILD = r"""
import time, numpy as np
t0 = time.perf_counter()
import symgrad
t1 = time.perf_counter()
f = symgrad.value_and_grad(lambda x: (3 * (x + 2) ** 2).mean(), backend="llvm")
x = np.ones((2, 2))
t2 = time.perf_counter(); f(x); t3 = time.perf_counter()
import codegen.backend as B
print(f"{(t3 - t2) * 1e3:.2f} {B.stats['from_cache']}")
"""


def compile_bytecode() -> None:
    """Compile symgrad's and codegen's sources to ``__pycache__`` first, as installing a
    wheel does: where ``PYTHONDONTWRITEBYTECODE`` is set (this sandbox sets it) every
    new process would otherwise recompile them, ~80 ms of a cold first call that no
    installed copy pays."""
    import compileall
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for pkg in ("symgrad", "codegen"):
        compileall.compile_dir(os.path.join(root, pkg), quiet=1)


def compile_latency() -> tuple[float, float]:
    compile_bytecode()
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, SYMGRAD_CACHE_DIR=d, SYMGRAD_DISK_CACHE="1")
        run = lambda: subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True,
                                     text=True, check=True).stdout.split()
        cold = float(run()[0])
        warm, hits = run()
        assert hits == "1", "second process did not load from the disk cache"
        return cold, float(warm)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("cases", nargs="*", default=list(CASES))
    ap.add_argument("--no-compile", action="store_true")
    a = ap.parse_args()
    print(f"{'case':18} {'per call':>12} {'target':>10}")
    for case in a.cases:
        entry, args, exe = build(case)
        t = time_call(entry, args) * 1e6
        tgt = TARGETS_US[case]
        print(f"{case:18} {t:10.2f}us {tgt:8.1f}us  {'ok' if t <= tgt else 'MISSED'}", flush=True)
    if not a.no_compile:
        cold, warm = compile_latency()
        print(f"{'first call cold':18} {cold:10.1f}ms {150:8.1f}ms  {'ok' if cold <= 150 else 'MISSED'}")
        print(f"{'first call cached':18} {warm:10.1f}ms {10:8.1f}ms  {'ok' if warm <= 10 else 'MISSED'}")


if __name__ == "__main__":
    main()
