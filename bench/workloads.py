"""The benchmark workloads: the single source of truth for each one.

A workload fixes its sizes, dtype, how its inputs are generated (deterministically
from a seed), which inputs are differentiated (``params``) and which are data, and
its loss written once as torch-like code over a namespace ``T``.  That one
function is the float64 reference (``T = torch``) and is also what the torch-like
systems run (torch eager, torch.compile, symgrad eager and compiled with
``T = symgrad``).  Other systems (numpy by hand, JAX, CasADi) implement the same
formula in their own idiom and are checked against :func:`reference`.

Example:
    >>> from bench.workloads import all_workloads, reference
    >>> w = all_workloads(quick=True)[0]
    >>> w.name
    'seed-f64'
    >>> value, grads = reference(w)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

Arrays = dict[str, np.ndarray]
LossFn = Callable[..., Any]


# --------------------------------------------------------------------------- losses
# Torch-like formulas. ``T`` is a module with the torch API (torch or symgrad).

def seed_loss(T: Any, x: Any) -> Any:
    """PyTorch's autograd tutorial: ``mean(3 * (x + 2) ** 2)``."""
    return (3 * (x + 2) ** 2).mean()


def rosenbrock_loss(T: Any, x: Any) -> Any:
    """Chained Rosenbrock: ``sum(100 (x[1:] - x[:-1]^2)^2 + (1 - x[:-1])^2)``."""
    head, tail = x[:-1], x[1:]
    return (100 * (tail - head**2) ** 2 + (1 - head) ** 2).sum()


def logreg_loss(T: Any, w: Any, b: Any, X: Any, y: Any) -> Any:
    """Logistic regression, mean binary cross-entropy on logits ``X @ w + b``."""
    logits = X @ w + b
    return T.nn.functional.binary_cross_entropy_with_logits(logits, y)


def mlp_loss(T: Any, W1: Any, b1: Any, W2: Any, b2: Any, X: Any, labels: Any) -> Any:
    """Two-layer MLP ``tanh(X W1 + b1) W2 + b2`` with mean softmax cross-entropy."""
    hidden = (X @ W1 + b1).tanh()
    logits = hidden @ W2 + b2
    return T.nn.functional.cross_entropy(logits, labels)


CHAIN_STEPS = 10


def chain_loss(T: Any, x: Any) -> Any:
    """Ten elementwise steps ``y = tanh(y)/2 + sin(y) y - exp(-y^2)``, then ``sum``."""
    y = x
    for _ in range(CHAIN_STEPS):
        y = y.tanh() * 0.5 + y.sin() * y - (-y * y).exp()
    return y.sum()


def matmul_tanh_loss(T: Any, A: Any, B: Any) -> Any:
    """One matrix product and an activation: ``sum(tanh(A @ B))``."""
    return (A @ B).tanh().sum()


ATTENTION_HEADS = 4


def attention_loss(T: Any, x: Any, Wq: Any, Wk: Any, Wv: Any, Wo: Any, future: Any) -> Any:
    """Causal multi-head softmax attention over ``x`` (T, D), ``ATTENTION_HEADS`` heads of
    D / heads, output projection ``Wo``; loss ``mean(y^2)``.  ``future`` (T, T, bool) is
    True above the diagonal (positions a query may not see)."""
    t, d = x.shape
    dh = d // ATTENTION_HEADS

    def heads(z: Any) -> Any:                      # (T, D) -> (heads, T, dh)
        return z.reshape(t, ATTENTION_HEADS, dh).transpose(0, 1)

    q, k, v = heads(x @ Wq), heads(x @ Wk), heads(x @ Wv)
    scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(dh))
    p = scores.masked_fill(future, float("-inf")).softmax(dim=-1)
    y = (p @ v).transpose(0, 1).reshape(t, d) @ Wo
    return (y * y).mean()


def rnn_loss(T: Any, Wx: Any, Wh: Any, b: Any, xs: Any) -> Any:
    """An Elman RNN ``h_t = tanh(x_t Wx + h_{t-1} Wh + b)`` over ``xs`` (T, B, I) from
    ``h_0 = 0`` (the first step has no ``h Wh`` term), loss ``mean(h_T^2)``."""
    h = (xs[0] @ Wx + b).tanh()
    for t in range(1, xs.shape[0]):
        h = (xs[t] @ Wx + h @ Wh + b).tanh()
    return (h * h).mean()


# ----------------------------------------------------------------------- inputs

def _seed_inputs(rng: np.random.Generator, dtype: np.dtype) -> Arrays:
    return {"x": rng.standard_normal((2, 2)).astype(dtype)}


def _rosenbrock_inputs(rng: np.random.Generator, dtype: np.dtype, N: int) -> Arrays:
    return {"x": rng.uniform(-1.5, 1.5, N).astype(dtype)}


def _logreg_inputs(rng: np.random.Generator, dtype: np.dtype, N: int, D: int) -> Arrays:
    X = rng.standard_normal((N, D)).astype(dtype)
    w = (0.5 * rng.standard_normal(D)).astype(dtype)
    y = (rng.random(N) < 0.5).astype(dtype)
    return {"w": w, "b": np.array(0.1, dtype=dtype), "X": X, "y": y}


def _mlp_inputs(
    rng: np.random.Generator, dtype: np.dtype, B: int, D: int, H: int, C: int
) -> Arrays:
    def layer(fan_in: int, fan_out: int) -> tuple[np.ndarray, np.ndarray]:
        scale = 1.0 / math.sqrt(fan_in)
        W = rng.uniform(-scale, scale, (fan_in, fan_out)).astype(dtype)
        return W, rng.uniform(-scale, scale, fan_out).astype(dtype)

    W1, b1 = layer(D, H)
    W2, b2 = layer(H, C)
    X = rng.standard_normal((B, D)).astype(dtype)
    labels = rng.integers(0, C, B).astype(np.int64)
    return {"W1": W1, "b1": b1, "W2": W2, "b2": b2, "X": X, "labels": labels}


def _chain_inputs(rng: np.random.Generator, dtype: np.dtype, N: int) -> Arrays:
    return {"x": rng.uniform(-2.0, 2.0, N).astype(dtype)}


def _matmul_tanh_inputs(rng: np.random.Generator, dtype: np.dtype, N: int) -> Arrays:
    # entries of A @ B ~ N(0, 1): tanh neither linear nor saturated
    return {"A": rng.standard_normal((N, N)).astype(dtype),
            "B": (rng.standard_normal((N, N)) / math.sqrt(N)).astype(dtype)}


def _uniform(rng: np.random.Generator, dtype: np.dtype, fan_in: int, shape: tuple) -> np.ndarray:
    scale = 1.0 / math.sqrt(fan_in)
    return rng.uniform(-scale, scale, shape).astype(dtype)


def _attention_inputs(rng: np.random.Generator, dtype: np.dtype, T: int, d: int) -> Arrays:
    D = ATTENTION_HEADS * d
    out = {"x": rng.standard_normal((T, D)).astype(dtype)}
    for name in ("Wq", "Wk", "Wv", "Wo"):
        out[name] = _uniform(rng, dtype, D, (D, D))
    out["future"] = np.triu(np.ones((T, T), dtype=bool), 1)
    return out


def _rnn_inputs(rng: np.random.Generator, dtype: np.dtype, T: int, B: int, W: int) -> Arrays:
    return {"Wx": _uniform(rng, dtype, W, (W, W)), "Wh": _uniform(rng, dtype, W, (W, W)),
            "b": _uniform(rng, dtype, W, (W,)),
            "xs": rng.standard_normal((T, B, W)).astype(dtype)}


@dataclass(frozen=True)
class Family:
    """What all workloads of one kind share: formula, inputs and roles."""

    loss: LossFn
    make_inputs: Callable[..., Arrays]
    params: tuple[str, ...]
    data: tuple[str, ...]
    about: str
    products: bool = False    # time goes to matrix products (numpy-hand-all runs it)


FAMILIES: dict[str, Family] = {
    "seed": Family(seed_loss, _seed_inputs, ("x",), (), "mean(3*(x+2)**2), x 2x2"),
    "rosenbrock": Family(rosenbrock_loss, _rosenbrock_inputs, ("x",), (),
                         "chained Rosenbrock, grad wrt x (N,)"),
    "logreg": Family(logreg_loss, _logreg_inputs, ("w", "b"), ("X", "y"),
                     "logistic regression, BCE-with-logits mean, X NxD, grad wrt w (D,), b ()"),
    "mlp": Family(mlp_loss, _mlp_inputs, ("W1", "b1", "W2", "b2"), ("X", "labels"),
                  "MLP D-H-C tanh + softmax cross-entropy, batch B, grads wrt W1 b1 W2 b2",
                  products=True),
    "chain": Family(chain_loss, _chain_inputs, ("x",), (),
                    f"{CHAIN_STEPS}-step elementwise chain tanh/sin/exp, loss sum(y), grad wrt x (N,)"),
    "matmul-tanh": Family(matmul_tanh_loss, _matmul_tanh_inputs, ("A", "B"), (),
                          "sum(tanh(A @ B)), A and B NxN, grads wrt A and B", products=True),
    "attention": Family(attention_loss, _attention_inputs, ("x", "Wq", "Wk", "Wv", "Wo"),
                        ("future",),
                        f"causal softmax attention, {ATTENTION_HEADS} heads of d, sequence T, "
                        "loss mean(y^2), grads wrt x and the four projections", products=True),
    "rnn": Family(rnn_loss, _rnn_inputs, ("Wx", "Wh", "b"), ("xs",),
                  "tanh RNN of width W over T steps, batch B, loss mean(h_T^2), grads wrt Wx Wh b",
                  products=True),
}


# -------------------------------------------------------------------- workloads

@dataclass(frozen=True)
class Workload:
    """One benchmark case: a family at fixed sizes and dtype.

    ``arrays()`` generates (once, then caches) the numpy inputs in the workload's
    dtype; ``release()`` drops that cache to free memory.
    """

    family: str
    dtype: str
    sizes: tuple[tuple[str, int], ...]
    seed: int = 0
    _cache: dict = field(default_factory=dict, compare=False, hash=False, repr=False)

    @property
    def name(self) -> str:
        dt = {"float32": "f32", "float64": "f64"}[self.dtype]
        label = "-".join(f"{k}{_short(v)}" for k, v in self.sizes if k in ("N", "B", "T"))
        return f"{self.family}-{label}-{dt}" if label else f"{self.family}-{dt}"

    @property
    def spec(self) -> Family:
        return FAMILIES[self.family]

    @property
    def params(self) -> tuple[str, ...]:
        return self.spec.params

    @property
    def data(self) -> tuple[str, ...]:
        return self.spec.data

    @property
    def size(self) -> dict[str, int]:
        return dict(self.sizes)

    def describe(self) -> str:
        dims = "".join(f"{k}={v:,}, " for k, v in self.sizes)
        return f"{self.spec.about}; {dims}{self.dtype}"

    def arrays(self) -> Arrays:
        if "arrays" not in self._cache:
            rng = np.random.default_rng(self.seed)
            self._cache["arrays"] = self.spec.make_inputs(rng, np.dtype(self.dtype), **self.size)
        return self._cache["arrays"]

    def ordered(self) -> list[np.ndarray]:
        """Inputs in call order: params, then data."""
        a = self.arrays()
        return [a[k] for k in self.params + self.data]

    def loss(self, T: Any, *args: Any) -> Any:
        """The torch-like formula; ``args`` are params then data, in order."""
        return self.spec.loss(T, *args)

    def release(self) -> None:
        self._cache.clear()


def _short(n: int) -> str:
    exp = int(math.log10(n)) if n > 0 else 0
    return f"1e{exp}" if n == 10**exp and n >= 1000 else str(n)


def _w(family: str, dtype: str, **sizes: int) -> Workload:
    return Workload(family, dtype, tuple(sizes.items()))


def all_workloads(quick: bool = False) -> list[Workload]:
    """Every workload, at full sizes or (``quick``) tiny ones."""
    if quick:
        return [
            _w("seed", "float64"),
            _w("rosenbrock", "float64", N=10),
            _w("rosenbrock", "float32", N=1000),
            _w("logreg", "float64", N=100, D=5),
            _w("mlp", "float32", B=8, D=64, H=32, C=10),
            _w("chain", "float64", N=1000),
            _w("matmul-tanh", "float64", N=64),
            _w("matmul-tanh", "float32", N=256),
            _w("attention", "float32", T=32, d=16),
            _w("rnn", "float64", T=10, B=4, W=16),
        ]
    return [
        _w("seed", "float64"),
        _w("rosenbrock", "float64", N=10),
        _w("rosenbrock", "float64", N=1000),
        _w("rosenbrock", "float64", N=10**6),
        _w("rosenbrock", "float32", N=10**6),
        _w("logreg", "float64", N=100, D=5),
        _w("logreg", "float64", N=10**6, D=5),
        _w("mlp", "float64", B=64, D=784, H=256, C=10),
        _w("mlp", "float32", B=64, D=784, H=256, C=10),
        _w("mlp", "float32", B=1024, D=784, H=256, C=10),
        _w("chain", "float32", N=10**7),
        _w("chain", "float64", N=10**7),
        *(_w("matmul-tanh", dt, N=n) for n in (64, 256, 1024, 2048)
          for dt in ("float64", "float32")),
        _w("attention", "float64", T=128, d=64),
        _w("attention", "float32", T=128, d=64),
        _w("rnn", "float64", T=50, B=16, W=64),
        _w("rnn", "float32", T=50, B=16, W=64),
    ]


def select(workloads: list[Workload], only: list[str]) -> list[Workload]:
    """Workloads whose family or full name is in ``only`` (all if empty)."""
    if not only:
        return workloads
    return [w for w in workloads if w.family in only or w.name in only]


# -------------------------------------------------------------------- reference

def reference(workload: Workload) -> tuple[float, list[np.ndarray]]:
    """Value and gradients computed by torch in float64 from the same inputs.

    Cached on the workload (until ``release()``).
    """
    if "reference" not in workload._cache:
        workload._cache["reference"] = _torch_reference(workload)
    return workload._cache["reference"]


def _torch_reference(workload: Workload) -> tuple[float, list[np.ndarray]]:
    import torch

    a = workload.arrays()
    params = [torch.tensor(a[k], dtype=torch.float64, requires_grad=True)
              for k in workload.params]
    data = [torch.from_numpy(_as_f64(a[k])) for k in workload.data]
    loss = workload.loss(torch, *params, *data)
    loss.backward()
    return float(loss.detach()), [p.grad.numpy() for p in params]


def _as_f64(x: np.ndarray) -> np.ndarray:
    return x if x.dtype.kind in "iub" else x.astype(np.float64)
