"""Ad-hoc timing of the LLVM backend on the benchmark workloads (``python -m bench.measure``).

Per-call time of value+gradient through ``native_entry`` (the fast path the front end
installs), best-of-repeats median, and the startup costs of :mod:`bench.startup`.  The
workloads come from ``bench.workloads``; this script only times symgrad, for the full
comparison run ``python -m bench``.
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from bench import startup

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
        print(startup.line(startup.measure()))


if __name__ == "__main__":
    main()
