"""``python -m bench compile``: the first call of a compiled gradient, symgrad against
jax.jit and torch.compile, on programs whose traced length grows.

Every cell runs in a fresh process with empty caches (symgrad's disk cache off, JAX's
persistent cache off, inductor's caches off) and times the first call after imports
and inputs: trace, differentiate, optimise, compile, run.  It also records the growth
of peak memory (``ru_maxrss``) during that call and a fingerprint of the answer
(value and gradient sums), checked against the other systems.  Per program and system
the log-log slope of time against size is fitted; a PNG plots time against size.
symgrad's modules are byte-compiled before the first cell, as an installed package's
are (with ``PYTHONDONTWRITEBYTECODE`` set, every cell would otherwise compile the
modules its first call imports from source: ~0.2 s that no user pays).

Programs (all float64; Python loops are unrolled by tracing):

* ``chain``: ``x = sin(x) * 0.9 + 0.1`` n times on a vector of 100, gradient of the sum;
* ``mlp``: n dense tanh layers of width 64, batch 16, gradient wrt the input;
* ``rnn``: n steps of ``h = tanh(h W + x_t U)``, width 32, batch 4, gradient wrt W;
* ``scan``: the same RNN written with ``scan`` (``symgrad.scan``, ``jax.lax.scan``; torch
  has no scan: its cell is the unrolled loop, as ``rnn``);
* ``hessian``: the n x n hessian of ``sum(sin(x) x^2) + (sum x)^2``;
* ``jacobian``: the n x n jacobian of ``tanh(A x)``;
* ``dynamic``: one MLP gradient called with many batch sizes in one process (total
  compile time over all sizes, steady call; :mod:`bench.compile_dynamic`).

Example::

    python -m bench compile --quick
    python -m bench compile --programs mlp,rnn --systems symgrad,jax --timeout 300
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

from .compile_dynamic import BATCHES, QUICK_BATCHES

__all__ = ["PROGRAMS", "SIZES", "QUICK_SIZES", "SYSTEMS", "main", "slope"]

PROGRAMS = ("chain", "mlp", "rnn", "scan", "hessian", "jacobian", "dynamic")
SIZES = {"chain": (100, 300, 1000, 3000), "mlp": (8, 16, 32, 64), "rnn": (25, 50, 100, 200),
         "scan": (25, 200, 1600, 12800),
         "hessian": (30, 100, 300), "jacobian": (100, 200, 400), "dynamic": BATCHES}
QUICK_SIZES = {"chain": (30, 100), "mlp": (4, 8), "rnn": (10, 20), "scan": (10, 200),
               "hessian": (10, 30),
               "jacobian": (20, 40), "dynamic": QUICK_BATCHES}
SYSTEMS = ("symgrad", "jax", "torch")
RESULTS = Path(__file__).resolve().parent / "results"


# ---- the programs, written once over a namespace of ops ------------------------------------
def _inputs(program: str, n: int):
    import numpy as np
    rng = np.random.default_rng(0)
    if program == "chain":
        return (np.linspace(-1.0, 1.0, 100),)
    if program == "mlp":
        return (rng.normal(size=(16, 64)), rng.normal(size=(n, 64, 64)) / 8)
    if program in ("rnn", "scan"):
        return (rng.normal(size=(32, 32)) / 6, rng.normal(size=(32, 32)) / 6,
                rng.normal(size=(n, 4, 32)))
    if program == "hessian":
        return (np.linspace(-1.0, 1.0, n),)
    if program == "jacobian":
        return (np.linspace(-1.0, 1.0, n), rng.normal(size=(n, n)) / math.sqrt(n))
    raise ValueError(program)


def _loss(program: str, ops, n: int):
    """The program's function at size ``n``; ``ops`` has sin, tanh, zeros (and scan, or
    None where the system has none)."""
    if program == "chain":
        def f(x):
            for _ in range(n):
                x = ops.sin(x) * 0.9 + 0.1
            return x.sum()
    elif program == "mlp":
        def f(x, Ws):
            for i in range(Ws.shape[0]):
                x = ops.tanh(x @ Ws[i])
            return x.sum()
    elif program == "rnn":
        def f(W, U, xs):
            h = ops.zeros((4, 32))
            for t in range(xs.shape[0]):
                h = ops.tanh(h @ W + xs[t] @ U)
            return h.sum()
    elif program == "scan" and ops.scan is not None:
        def f(W, U, xs):
            h, _ = ops.scan(lambda h, x: (ops.tanh(h @ W + x @ U), None), ops.zeros((4, 32)), xs)
            return h.sum()
    elif program == "scan":
        return _loss("rnn", ops, n)
    elif program == "hessian":
        def f(x):
            return (ops.sin(x) * x * x).sum() + x.sum() ** 2
    elif program == "jacobian":
        def f(x, A):
            return ops.tanh(A @ x)
    else:
        raise ValueError(program)
    return f


def _fingerprint(value, grad) -> list[float]:
    import numpy as np
    return [float(np.sum(np.asarray(value, dtype=np.float64))),
            float(np.sum(np.abs(np.asarray(grad, dtype=np.float64))))]


def _first_call(system: str, program: str, n: int) -> tuple[float, list[float]]:
    """Build the system's compiled function, time its first call, return the answer."""
    import numpy as np
    args = _inputs(program, n)
    if system == "symgrad":
        import symgrad as sg

        class ops:
            sin, tanh, scan = staticmethod(sg.sin), staticmethod(sg.tanh), staticmethod(sg.scan)
            zeros = staticmethod(lambda shape: sg.zeros(shape, dtype=sg.float64))
        f = _loss(program, ops, n)
        if program == "hessian":
            g = sg.hessian(f)
        elif program == "jacobian":
            g = sg.jacobian(f)
        else:
            g = sg.value_and_grad(f)
        t0 = time.perf_counter()
        out = g(*args)
        seconds = time.perf_counter() - t0
    elif system == "jax":
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        import jax
        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp

        class ops:
            sin, tanh = staticmethod(jnp.sin), staticmethod(jnp.tanh)
            scan = staticmethod(jax.lax.scan)
            zeros = staticmethod(lambda shape: jnp.zeros(shape))
        f = _loss(program, ops, n)
        if program == "hessian":
            g = jax.jit(jax.hessian(f))
        elif program == "jacobian":
            g = jax.jit(jax.jacrev(f))
        else:
            g = jax.jit(jax.value_and_grad(f))
        jargs = [jnp.asarray(a) for a in args]
        t0 = time.perf_counter()
        out = jax.block_until_ready(g(*jargs))
        seconds = time.perf_counter() - t0
    elif system == "torch":
        import torch
        torch.set_num_threads(max(1, os.cpu_count() or 1))

        class ops:
            sin, tanh = staticmethod(torch.sin), staticmethod(torch.tanh)
            scan = None
            zeros = staticmethod(lambda shape: torch.zeros(shape, dtype=torch.float64))
        f = _loss(program, ops, n)
        targs = [torch.tensor(a) for a in args]
        from torch.func import grad_and_value, hessian, jacrev
        if program == "hessian":
            g = torch.compile(hessian(f))
        elif program == "jacobian":
            g = torch.compile(jacrev(f))
        else:
            g = torch.compile(grad_and_value(f))
        t0 = time.perf_counter()
        out = g(*targs)
        seconds = time.perf_counter() - t0
        if program not in ("hessian", "jacobian"):
            out = (out[1], out[0])
        out = _numpy(out)
    else:
        raise ValueError(system)
    out = _numpy(out)
    if program in ("hessian", "jacobian"):
        return seconds, _fingerprint(np.trace(np.atleast_2d(out)), out)
    return seconds, _fingerprint(out[0], out[1])


def _numpy(out):
    import numpy as np
    if isinstance(out, (tuple, list)):
        return type(out)(_numpy(o) for o in out)
    if hasattr(out, "detach"):
        out = out.detach()
    return np.asarray(out)


def _cold_caches() -> None:
    """Every system starts cold: no disk cache of symgrad, JAX or inductor."""
    os.environ["SYMGRAD_DISK_CACHE"] = "0"
    os.environ["JAX_ENABLE_COMPILATION_CACHE"] = "false"
    os.environ["TORCHINDUCTOR_FORCE_DISABLE_CACHES"] = "1"


def _worker(system: str, program: str, n: int) -> None:
    import resource
    _cold_caches()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    seconds, check = _first_call(system, program, n)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"seconds": seconds, "peak_mb": (peak - before) / 1024, "check": check}))


# ---- the parent: fresh processes, table, slopes, plot ---------------------------------------
def _child_env() -> dict:
    """The environment of a child process: this checkout first on ``PYTHONPATH``."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(Path(__file__).resolve().parent.parent)] + os.environ.get("PYTHONPATH", "").split(os.pathsep)))


def _cell(system: str, program: str, n, timeout: float) -> dict:
    """One fresh process; ``n``: the size (for ``dynamic``: the sequence of batch sizes)."""
    size = ",".join(map(str, n)) if isinstance(n, (tuple, list)) else str(n)
    cmd = [sys.executable, "-m", "bench.compile", "--worker", system, program, size]
    t0 = time.perf_counter()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=_child_env())
    except subprocess.TimeoutExpired:
        return {"error": f"timeout > {timeout:.0f} s"}
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1]
        return {"error": last[:120]}
    cell = json.loads(r.stdout.strip().splitlines()[-1])
    cell["process"] = time.perf_counter() - t0
    return cell


def slope(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of log(time) against log(size).

    >>> round(slope([(10, 1.0), (100, 10.0), (1000, 100.0)]), 6)
    1.0
    """
    pts = [(math.log(n), math.log(t)) for n, t in points if t and t > 0]
    if len(pts) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    den = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / den if den else None


def _available(system: str) -> str | None:
    mod = {"symgrad": "symgrad", "jax": "jax", "torch": "torch"}[system]
    r = subprocess.run([sys.executable, "-c", f"import {mod}"], capture_output=True, text=True)
    return None if r.returncode == 0 else (r.stderr.strip().splitlines() or ["?"])[-1]


def _fmt(cell: dict | None) -> str:
    if cell is None:
        return "-"
    if "error" in cell:
        return cell["error"][:28]
    return f"{cell['seconds']:.2f} s"


def _agree(a: list[float], b: list[float]) -> bool:
    return all(abs(x - y) <= 1e-6 * max(1.0, abs(x), abs(y)) for x, y in zip(a, b))


def _byte_compile() -> None:
    """The project's packages byte-compiled (``__pycache__``), as pip installs them."""
    import compileall
    root = Path(__file__).resolve().parent.parent
    for package in ("symgrad", "codegen", "bench"):
        compileall.compile_dir(str(root / package), quiet=1)


def run(programs, systems, sizes, timeout: float, json_path: Path | None,
        plot_path: Path | None) -> dict:
    _byte_compile()
    live = []
    for s in systems:
        why = _available(s)
        if why:
            print(f"skip {s}: not importable ({why})")
        else:
            live.append(s)
    if "symgrad" in live:     # the machine's one-time calibration, before any cell
        subprocess.run([sys.executable, "-c", "from bench.startup import calibrate_machine; "
                        "calibrate_machine()"], check=False, env=_child_env())
    results: dict = {"systems": live, "programs": {}}
    for program in programs:
        if program == "dynamic":
            results["programs"][program] = _run_dynamic(live, sizes[program], timeout)
            continue
        rows = []
        print(f"\n== {program}: first call in a fresh process (seconds); ratio = symgrad / jax")
        head = f"{'n':>6}  " + "  ".join(f"{s:>28}" for s in live) + "   ratio  peak MB (symgrad/jax)  answers"
        print(head)
        for n in sizes[program]:
            cells = {s: _cell(s, program, n, timeout) for s in live}
            ok = [c for c in cells.values() if "check" in c]
            agree = all(_agree(ok[0]["check"], c["check"]) for c in ok[1:]) if ok else None
            sg, jx = cells.get("symgrad"), cells.get("jax")
            ratio = (sg["seconds"] / jx["seconds"]) if sg and jx and "seconds" in sg \
                and "seconds" in jx else None
            mem = "/".join(f"{c['peak_mb']:.0f}" if c and "peak_mb" in c else "-" for c in (sg, jx))
            rtext = f"{ratio:5.2f}x" if ratio is not None else "     -"
            verdict = "ok" if agree else ("DIFFER" if agree is False else "-")
            print(f"{n:>6}  " + "  ".join(f"{_fmt(cells[s]):>28}" for s in live)
                  + f"   {rtext}  {mem:>21}  {verdict}")
            rows.append({"n": n, "cells": cells, "ratio": ratio, "agree": agree})
        slopes = {s: slope([(r["n"], r["cells"][s].get("seconds")) for r in rows
                            if "seconds" in r["cells"][s]]) for s in live}
        print("   log-log slope: " + ", ".join(
            f"{s} {v:.2f}" if v is not None else f"{s} -" for s, v in slopes.items()))
        results["programs"][program] = {"rows": rows, "slopes": slopes}
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(results, indent=1))
        print(f"\nwrote {json_path}")
    if plot_path is not None:
        why = _plot(results, plot_path)
        print(f"plot: {why}" if why else f"wrote {plot_path}")
    return results


def _run_dynamic(systems, batches, timeout: float) -> dict:
    """The ``dynamic`` program: one process per system calls the gradient at every batch
    size in turn (see :mod:`bench.compile_dynamic`)."""
    print(f"\n== dynamic: MLP 32-64-10 value_and_grad at {len(batches)} batch sizes "
          f"({batches[0]}..{batches[-1]}) in one process; ratio = symgrad / other")
    print(f"{'system':>8}  {'total compile':>13}  {'first size':>10}  {'later (mean)':>12}  "
          f"{'compiles':>8}  {'steady call':>11}  answers")
    cells = {s: _cell(s, "dynamic", tuple(batches), timeout) for s in systems}
    ok = [c for c in cells.values() if "per_size" in c]
    agree = all(_agree(a, b) for c in ok[1:] for a, b in zip(ok[0]["per_size"], c["per_size"])) \
        if ok else None
    for s, c in cells.items():
        if "error" in c:
            print(f"{s:>8}  {c['error']}")
            continue
        later = f"{c['later_mean']:.3f} s" if c.get("later_mean") is not None else "-"
        print(f"{s:>8}  {c['seconds']:>11.2f} s  {c['first']:>8.2f} s  {later:>12}  "
              f"{c['compiles']:>8}  {c['steady_us']:>8.1f} us  "
              + ("ok" if agree else "DIFFER" if agree is False else "-"))
    sg = cells.get("symgrad", {})
    ratios = {s: sg["seconds"] / c["seconds"] for s, c in cells.items()
              if s != "symgrad" and "seconds" in c and "seconds" in sg}
    if ratios:
        print("   total compile ratio: " + ", ".join(f"symgrad / {s} {r:.2f}x"
                                                     for s, r in ratios.items()))
    return {"batches": list(batches), "cells": cells, "agree": agree, "ratios": ratios}


def _plot(results: dict, path: Path) -> str | None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as exc:
        return f"matplotlib not importable ({type(exc).__name__}: {exc})"
    progs = [p for p in results["programs"] if p != "dynamic"]      # (a table, no curve)
    if not progs:
        return "nothing to plot"
    fig, axes = plt.subplots(1, len(progs), figsize=(3.6 * len(progs), 3.4), squeeze=False)
    for ax, program in zip(axes[0], progs):
        rows = results["programs"][program]["rows"]
        for s in results["systems"]:
            pts = [(r["n"], r["cells"][s]["seconds"]) for r in rows if "seconds" in r["cells"][s]]
            if pts:
                ax.loglog(*zip(*pts), marker="o", label=s)
        ax.set_title(program)
        ax.set_xlabel("size")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("first call (s)")
    axes[0][-1].legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench compile", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="two small sizes per program")
    p.add_argument("--programs", default=",".join(PROGRAMS), help="comma list of " + ", ".join(PROGRAMS))
    p.add_argument("--systems", default=",".join(SYSTEMS), help="comma list of " + ", ".join(SYSTEMS))
    p.add_argument("--sizes", default=None, help="comma list of sizes for every program")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per cell")
    p.add_argument("--json", type=Path, default=RESULTS / "compile.json")
    p.add_argument("--plot", type=Path, default=RESULTS / "compile.png")
    p.add_argument("--no-plot", action="store_true")
    p.add_argument("--worker", nargs=3, metavar=("SYSTEM", "PROGRAM", "N"), help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.worker:
        if a.worker[1] == "dynamic":
            from .compile_dynamic import main_worker
            _cold_caches()
            main_worker(a.worker[0], [int(v) for v in a.worker[2].split(",")])
        else:
            _worker(a.worker[0], a.worker[1], int(a.worker[2]))
        return 0
    programs = [x for x in a.programs.split(",") if x]
    systems = [x for x in a.systems.split(",") if x]
    bad = [x for x in programs if x not in PROGRAMS] + [x for x in systems if x not in SYSTEMS]
    if bad:
        p.error(f"unknown {bad}; programs: {PROGRAMS}, systems: {SYSTEMS}")
    sizes = dict(QUICK_SIZES if a.quick else SIZES)
    if a.sizes:
        sizes = {k: tuple(int(v) for v in a.sizes.split(",")) for k in sizes}
        if "dynamic" in programs and len(sizes["dynamic"]) < 2:
            p.error("the dynamic program needs at least two batch sizes")
    run(programs, systems, sizes, a.timeout, a.json, None if a.no_plot else a.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
