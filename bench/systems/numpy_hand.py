"""numpy with hand-derived gradients: the "what a careful human writes" baseline.

Single-threaded: numpy's BLAS is limited to one thread (threadpoolctl) before
every sample.  Each function returns ``(value, [grads])`` in the
workload's dtype.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from bench.systems.base import Call, System, single_thread_label
from bench.workloads import CHAIN_STEPS, Workload

Grad = tuple[Any, list[np.ndarray]]


def seed(x: np.ndarray) -> Grad:
    u = x + 2
    return np.mean(3 * u * u), [(6.0 / x.size) * u]


def rosenbrock(x: np.ndarray) -> Grad:
    head, tail = x[:-1], x[1:]
    r = tail - head * head
    s = 1 - head
    g = np.zeros_like(x)
    g[:-1] = -400 * head * r - 2 * s
    g[1:] += 200 * r
    return np.sum(100 * r * r + s * s), [g]


def logreg(w: np.ndarray, b: np.ndarray, X: np.ndarray, y: np.ndarray) -> Grad:
    z = X @ w + b
    loss = np.mean(np.logaddexp(0, z) - y * z)
    dz = (1 / (1 + np.exp(-z)) - y) / len(z)
    return loss, [X.T @ dz, np.sum(dz)]


def mlp(W1: np.ndarray, b1: np.ndarray, W2: np.ndarray, b2: np.ndarray,
        X: np.ndarray, labels: np.ndarray) -> Grad:
    h = np.tanh(X @ W1 + b1)
    logits = h @ W2 + b2
    shifted = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(shifted)
    denom = e.sum(axis=1, keepdims=True)
    rows = np.arange(len(labels))
    loss = np.mean(np.log(denom[:, 0]) - shifted[rows, labels])
    dlogits = e / denom
    dlogits[rows, labels] -= 1
    dlogits /= len(labels)
    dh = (dlogits @ W2.T) * (1 - h * h)
    return loss, [X.T @ dh, dh.sum(axis=0), h.T @ dlogits, dlogits.sum(axis=0)]


def chain(x: np.ndarray) -> Grad:
    """Forward keeps only each step's input; backward recomputes the local derivative."""
    ys = [x]
    for _ in range(CHAIN_STEPS):
        y = ys[-1]
        ys.append(np.tanh(y) * 0.5 + np.sin(y) * y - np.exp(-y * y))
    g = np.ones_like(x)
    for y in reversed(ys[:-1]):
        t = np.tanh(y)
        local = 0.5 * (1 - t * t) + np.cos(y) * y + np.sin(y) + 2 * y * np.exp(-y * y)
        g *= local
    return np.sum(ys[-1]), [g]


FUNCTIONS: dict[str, Callable[..., Grad]] = {
    "seed": seed, "rosenbrock": rosenbrock, "logreg": logreg, "mlp": mlp, "chain": chain,
}


class NumpyHand(System):
    name = "numpy-hand"
    note = "hand-written gradients"

    blas_threads = 1

    def __init__(self) -> None:
        self.threads = single_thread_label()

    def available(self) -> tuple[bool, str]:
        return True, ""

    def build(self, workload: Workload) -> Call:
        fn = FUNCTIONS[workload.family]
        args = workload.ordered()
        return lambda: fn(*args)


SYSTEMS = [NumpyHand()]
