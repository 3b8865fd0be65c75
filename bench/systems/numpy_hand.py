"""numpy with hand-derived gradients: the "what a careful human writes" baseline.

``numpy-hand`` is single-threaded: numpy's BLAS is limited to one thread (threadpoolctl)
before every sample.  ``numpy-hand-all`` lets the BLAS use every core, on the workloads
whose time goes to matrix products (``Family.products``; n/a on the others, where it
would time the same single-threaded numpy again).  Each function returns ``(value, [grads])`` in the
workload's dtype.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from bench.systems.base import Call, System, Unsupported, cores, single_thread_label
from bench.workloads import ATTENTION_HEADS, CHAIN_STEPS, Workload

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


def matmul_tanh(A: np.ndarray, B: np.ndarray) -> Grad:
    y = np.tanh(A @ B)
    dz = 1 - y * y
    return np.sum(y), [dz @ B.T, A.T @ dz]


def attention(x: np.ndarray, Wq: np.ndarray, Wk: np.ndarray, Wv: np.ndarray, Wo: np.ndarray,
              future: np.ndarray) -> Grad:
    t, d = x.shape
    dh = d // ATTENTION_HEADS
    c = x.dtype.type(1.0 / np.sqrt(dh))

    def split(z: np.ndarray) -> np.ndarray:        # (T, D) -> (heads, T, dh)
        return z.reshape(t, ATTENTION_HEADS, dh).transpose(1, 0, 2)

    def merge(z: np.ndarray) -> np.ndarray:        # (heads, T, dh) -> (T, D)
        return z.transpose(1, 0, 2).reshape(t, d)

    q, k, v = split(x @ Wq), split(x @ Wk), split(x @ Wv)
    s = np.where(future, -np.inf, (q @ k.transpose(0, 2, 1)) * c)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)
    o = merge(p @ v)
    y = o @ Wo
    dy = (2 / y.size) * y
    do = split(dy @ Wo.T)
    dp = do @ v.transpose(0, 2, 1)
    ds = p * (dp - np.sum(dp * p, axis=-1, keepdims=True)) * c
    dq, dk, dv = merge(ds @ k), merge(ds.transpose(0, 2, 1) @ q), merge(p.transpose(0, 2, 1) @ do)
    dx = dq @ Wq.T + dk @ Wk.T + dv @ Wv.T
    return np.mean(y * y), [dx, x.T @ dq, x.T @ dk, x.T @ dv, o.T @ dy]


def rnn(Wx: np.ndarray, Wh: np.ndarray, b: np.ndarray, xs: np.ndarray) -> Grad:
    hs = [np.tanh(xs[0] @ Wx + b)]
    for t in range(1, len(xs)):
        hs.append(np.tanh(xs[t] @ Wx + hs[-1] @ Wh + b))
    h = hs[-1]
    g = (2 / h.size) * h
    dWx, dWh, db = np.zeros_like(Wx), np.zeros_like(Wh), np.zeros_like(b)
    for t in range(len(xs) - 1, -1, -1):
        dz = g * (1 - hs[t] * hs[t])
        dWx += xs[t].T @ dz
        db += dz.sum(axis=0)
        if t:
            dWh += hs[t - 1].T @ dz
            g = dz @ Wh.T
    return np.mean(h * h), [dWx, dWh, db]


FUNCTIONS: dict[str, Callable[..., Grad]] = {
    "seed": seed, "rosenbrock": rosenbrock, "logreg": logreg, "mlp": mlp, "chain": chain,
    "matmul-tanh": matmul_tanh, "attention": attention, "rnn": rnn,
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


class NumpyHandAll(NumpyHand):
    """The same functions with numpy's BLAS on all cores."""

    name = "numpy-hand-all"
    note = "hand-written gradients, BLAS on all cores"

    def __init__(self) -> None:
        self.blas_threads = cores()
        self.threads = str(self.blas_threads)

    def build(self, workload: Workload) -> Call:
        if not workload.spec.products:
            raise Unsupported("no matrix products: same as numpy-hand")
        return super().build(workload)


SYSTEMS = [NumpyHand(), NumpyHandAll()]
