"""CasADi: one symbolic graph per workload, wrapped in a ``casadi.Function``.

The formula is written once (``_loss``) with operations that exist for both
symbol types, so four systems share it:

* ``casadi-sx`` / ``casadi-sx-jit``: scalar expression graph (SX), the CasADi way
  for small problems; n/a above ``SX_MAX_INPUTS`` input scalars because the
  graph grows with every element; ``-jit`` is n/a above
  ``SX_JIT_MAX_INSTRUCTIONS`` (compiling straight-line C takes minutes beyond).
* ``casadi-mx`` / ``casadi-mx-jit``: matrix-valued graph (MX), for large data.

The ``-jit`` variants generate C and compile it with gcc (``jit`` option,
``shell`` compiler).  Gradients of all params come from one reverse sweep over
their concatenation.  CasADi computes in float64 only (float32 workloads are
n/a).  Inputs are converted to ``DM`` once at build time.  Single-threaded.
"""

from __future__ import annotations

import shutil
from typing import Any

import numpy as np

from bench.systems.base import Call, System, Unsupported, import_error
from bench.workloads import CHAIN_STEPS, Workload

SX_MAX_INPUTS = 2_000
SX_JIT_MAX_INSTRUCTIONS = 20_000   # gcc needs ~10 s for 16k straight-line statements
JIT_FLAGS = ["-O2", "-march=native"]


def _loss(cs: Any, family: str, s: dict[str, Any]) -> Any:
    """The workload's loss over symbols ``s`` (SX or MX)."""
    if family == "seed":
        x = s["x"]
        return cs.sum1(cs.sum2(3 * (x + 2) ** 2)) / x.numel()
    if family == "rosenbrock":
        x = s["x"]
        n = x.numel()
        head, tail = x[0:n - 1], x[1:n]
        return cs.sum1(100 * (tail - head**2) ** 2 + (1 - head) ** 2)
    if family == "logreg":
        z = cs.mtimes(s["X"], s["w"]) + s["b"]
        softplus = cs.fmax(z, 0) + cs.log1p(cs.exp(-cs.fabs(z)))
        return cs.sum1(softplus - s["y"] * z) / z.numel()
    if family == "mlp":
        return _mlp_loss(cs, s)
    if family == "chain":
        y = s["x"]
        for _ in range(CHAIN_STEPS):
            y = cs.tanh(y) * 0.5 + cs.sin(y) * y - cs.exp(-y * y)
        return cs.sum1(y)
    raise Unsupported(f"no CasADi formula for {family}")


def _mlp_loss(cs: Any, s: dict[str, Any]) -> Any:
    """Softmax cross-entropy with one-hot labels; log-sum-exp is not shifted
    (CasADi has no row-wise max), which is safe for these small logits."""
    X, onehot = s["X"], s["labels"]
    batch = X.shape[0]
    h = cs.tanh(cs.mtimes(X, s["W1"]) + cs.repmat(s["b1"], batch, 1))
    logits = cs.mtimes(h, s["W2"]) + cs.repmat(s["b2"], batch, 1)
    lse = cs.log(cs.sum2(cs.exp(logits)))
    return cs.sum1(lse - cs.sum2(onehot * logits)) / batch


def _shape(name: str, a: np.ndarray, family: str) -> tuple[int, int]:
    """CasADi shape of an input: vectors are columns, MLP biases are rows."""
    if family == "mlp" and name in ("b1", "b2"):
        return 1, a.size
    if family == "mlp" and name == "labels":
        return a.size, int(a.max()) + 1
    if a.ndim == 2:
        return a.shape
    return a.size, 1


def _value(name: str, a: np.ndarray, family: str, shape: tuple[int, int]) -> Any:
    import casadi as cs

    if family == "mlp" and name == "labels":
        onehot = np.zeros(shape)
        onehot[np.arange(a.size), a] = 1.0
        return cs.DM(onehot)
    return cs.DM(np.asarray(a, dtype=np.float64).reshape(shape))


class CasadiFunction(System):
    """A CasADi ``Function`` over SX or MX symbols, optionally JIT-compiled."""

    threads = "1"

    def __init__(self, kind: str, jit: bool) -> None:
        self.kind, self.jit = kind, jit
        self.name = f"casadi-{kind.lower()}" + ("-jit" if jit else "")
        self.note = f"{kind} Function" + (f", jit gcc {' '.join(JIT_FLAGS)}" if jit else "")

    def available(self) -> tuple[bool, str]:
        ok, why = import_error("casadi")
        if ok and self.jit and shutil.which("gcc") is None:
            return False, "jit needs gcc on PATH"
        return ok, why

    def build(self, workload: Workload) -> Call:
        import casadi as cs

        self._check_supported(workload)
        arrays = workload.arrays()
        names = workload.params + workload.data
        shapes = {k: _shape(k, arrays[k], workload.family) for k in names}
        sym = getattr(cs, self.kind)
        s = {k: sym.sym(k, *shapes[k]) for k in names}
        fn = self._function(cs, workload, s)
        args = [_value(k, arrays[k], workload.family, shapes[k]) for k in names]
        n_out = 1 + len(workload.params)

        def call() -> tuple[Any, list[Any]]:
            out = fn(*args)
            out = out if n_out > 1 else (out,)
            return out[0], list(out[1:])

        return call

    def _check_supported(self, workload: Workload) -> None:
        if workload.dtype != "float64":
            raise Unsupported("CasADi computes in float64 only")
        n_inputs = sum(a.size for a in workload.arrays().values())
        if self.kind == "SX" and n_inputs > SX_MAX_INPUTS:
            raise Unsupported(f"SX graph too large ({n_inputs:,} inputs > {SX_MAX_INPUTS:,})")

    def _function(self, cs: Any, workload: Workload, s: dict[str, Any]) -> Any:
        loss = _loss(cs, workload.family, s)
        params = [s[k] for k in workload.params]
        flat = cs.vertcat(*[cs.vec(p) for p in params])
        grads = cs.vertsplit(cs.gradient(loss, flat), _offsets(params))
        grads = [cs.reshape(g, p.shape) for g, p in zip(grads, params)]
        inputs = [s[k] for k in workload.params + workload.data]
        fn = cs.Function("f", inputs, [loss, *grads])
        if not self.jit:
            return fn
        n = fn.n_instructions() if self.kind == "SX" else 0
        if n > SX_JIT_MAX_INSTRUCTIONS:
            raise Unsupported(f"SX jit: {n:,} instructions > {SX_JIT_MAX_INSTRUCTIONS:,}")
        return cs.Function("f", inputs, [loss, *grads], self._options())

    def _options(self) -> dict[str, Any]:
        return {"jit": True, "compiler": "shell",
                "jit_options": {"flags": JIT_FLAGS, "verbose": False}}


def _offsets(params: list[Any]) -> list[int]:
    offsets = [0]
    for p in params:
        offsets.append(offsets[-1] + p.numel())
    return offsets


SYSTEMS = [CasadiFunction("SX", False), CasadiFunction("SX", True),
           CasadiFunction("MX", False), CasadiFunction("MX", True)]
