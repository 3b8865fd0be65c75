"""What starting costs: ``import symgrad`` and a compiled function's first call, each in
fresh processes (median of several), against ``import numpy`` in the same run.

* ``import_numpy_ms`` / ``import_symgrad_ms`` -- the import alone (symgrad's includes
  numpy's);
* ``first_call_cold_ms`` -- the first call of ``value_and_grad(seed loss)`` with an empty
  disk cache: tracing, differentiation, optimisation, LLVM, loading;
* ``first_call_cached_ms`` -- the same first call in a new process when the disk cache
  holds its code (no tracing stages after the trace, no LLVM optimisation or codegen).

Sources are compiled to bytecode first, as an installed package has them.

>>> sorted(measure(runs=1))    # doctest: +SKIP
['first_call_cached_ms', 'first_call_cold_ms', 'import_numpy_ms', 'import_symgrad_ms', 'target']
"""
from __future__ import annotations

import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_IMPORT = """
import json, time
t0 = time.perf_counter()
import {module}
print(json.dumps({{"ms": (time.perf_counter() - t0) * 1e3}}))
"""

_FIRST_CALL = """
import json, time
import numpy as np
import symgrad
f = symgrad.value_and_grad(lambda x: (3 * (x + 2) ** 2).mean())
x = np.ones((2, 2))
t0 = time.perf_counter()
f(x)
ms = (time.perf_counter() - t0) * 1e3
import codegen.backend as B
print(json.dumps({"ms": ms, "from_cache": B.stats["from_cache"], "target": f.target.name}))
"""


def compile_bytecode() -> None:
    """Compile symgrad's and codegen's sources to ``__pycache__``, as installing a wheel
    does: where ``PYTHONDONTWRITEBYTECODE`` is set every new process would otherwise
    recompile them, a cost no installed copy pays."""
    for pkg in ("symgrad", "codegen"):
        compileall.compile_dir(os.path.join(ROOT, pkg), quiet=1)


def calibrate_machine() -> None:
    """symgrad's one-time measurement of this machine (which GEMM its products run on,
    :mod:`codegen.gemm_choice`), done now into the support cache as a user's first large
    product does once per machine: it belongs to the machine, not to the first call of
    the program that happens to need it first."""
    try:
        from codegen import gemm_choice, target
    except ImportError:           # a symgrad without it: nothing to measure
        return
    gemm_choice.figures(target.default())


def _child(code: str, env: dict[str, str]) -> dict:
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(runs: int = 5) -> dict[str, object]:
    """Median milliseconds of each startup cost over ``runs`` fresh processes."""
    compile_bytecode()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    result: dict[str, object] = {}
    for module in ("numpy", "symgrad"):
        result[f"import_{module}_ms"] = statistics.median(
            _child(_IMPORT.format(module=module), env)["ms"] for _ in range(runs))
    cold, cached = [], []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as d:
            run_env = dict(env, SYMGRAD_CACHE_DIR=d, SYMGRAD_DISK_CACHE="1")
            first = _child(_FIRST_CALL, run_env)
            again = _child(_FIRST_CALL, run_env)
            if again["from_cache"] != 1:
                raise RuntimeError("the second process did not load from the disk cache")
            cold.append(first["ms"])
            cached.append(again["ms"])
            result["target"] = first["target"]
    result["first_call_cold_ms"] = statistics.median(cold)
    result["first_call_cached_ms"] = statistics.median(cached)
    return result


def line(s: dict[str, object]) -> str:
    """The report's line for these figures."""
    return (f"startup: import numpy {s['import_numpy_ms']:.0f} ms, import symgrad "
            f"{s['import_symgrad_ms']:.0f} ms; first call of a compiled value_and_grad: "
            f"{s['first_call_cold_ms']:.0f} ms cold, {s['first_call_cached_ms']:.1f} ms from the "
            f"disk cache (fresh processes, medians; target {s['target']})")


if __name__ == "__main__":
    print(line(measure()))
