"""The corpus of programs the compile tests check against torch: each entry is a
function written once against the torch API (run with symgrad and with torch), its
argument arrays, and which arguments are differentiated."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np


@dataclass
class Case:
    name: str
    fn: Callable          # fn(lib, *args) with lib = symgrad or torch
    args: Callable        # rng -> tuple of numpy arrays
    argnums: tuple


def _nnf(lib):
    return lib.nn.functional


def seed(lib, x):
    return (3 * (x + 2) ** 2).mean()


def rosenbrock(lib, x):
    return (100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2).sum()


def logistic(lib, w, b, X, y):
    return _nnf(lib).binary_cross_entropy_with_logits(X @ w + b, y)


def mlp(lib, W1, b1, W2, b2, X, t):
    h = (X @ W1 + b1).tanh()
    return _nnf(lib).cross_entropy(h @ W2 + b2, t)


def chain(lib, y):
    for _ in range(10):
        y = y.tanh() * 0.5 + y.sin() * y - (-y * y).exp()
    return y.sum()


def broadcasting(lib, a, b, c):
    return ((a + b) * c - a / (1 + b * b)).sum()


def reduce_axes(lib, x):
    return (x.sum(0).sin().sum() + x.mean(1).exp().sum() + x.amax(2).tanh().sum()
            + x.sum((0, 2)).pow(2).sum() + lib.logsumexp(x, 1).sum() + x.prod(2).sum())


def indexing(lib, x):
    return (x[1:, ::2] * 2).sum() + x[0, 1] * x[-1].sum() + x[:, None, 1].exp().sum()


def where_case(lib, x):
    return lib.where(x > 0, x.abs().sqrt(), x * 0.5).sum()


def softmax_case(lib, x):
    return (_nnf(lib).softmax(x, dim=-1) * lib.arange(x.shape[-1])).sum() + \
        _nnf(lib).log_softmax(x, dim=0).mean()


def mse_l1(lib, x, y):
    return _nnf(lib).mse_loss(x, y) + _nnf(lib).l1_loss(x, y) + _nnf(lib).softplus(x).mean()


def matmul_shapes(lib, a, b, v):
    return (a @ b).tanh().sum() + (a @ v).sum() + (v @ v) + (b.transpose(0, 1) @ v[:3]).sum()


def _r(*shape):
    return lambda rng: rng.standard_normal(shape)


CASES = [
    Case("seed", seed, lambda r: (r.standard_normal((2, 2)),), (0,)),
    Case("rosenbrock", rosenbrock, lambda r: (r.standard_normal(50),), (0,)),
    Case("logistic", logistic, lambda r: (r.standard_normal(5), np.array(0.1),
                                          r.standard_normal((64, 5)),
                                          (r.random(64) > 0.5).astype(np.float64)), (0, 1)),
    Case("mlp", mlp, lambda r: (r.standard_normal((12, 16)) * 0.3, np.zeros(16),
                                r.standard_normal((16, 10)) * 0.3, np.zeros(10),
                                r.standard_normal((8, 12)), r.integers(0, 10, 8)), (0, 1, 2, 3)),
    Case("chain", chain, lambda r: (r.standard_normal(100),), (0,)),
    Case("broadcasting", broadcasting, lambda r: (r.standard_normal((4, 1, 3)),
                                                  r.standard_normal((5, 1)),
                                                  r.standard_normal(3)), (0, 1, 2)),
    Case("reduce_axes", reduce_axes, lambda r: (r.standard_normal((3, 4, 5)) * 0.5,), (0,)),
    Case("indexing", indexing, lambda r: (r.standard_normal((4, 6)),), (0,)),
    Case("where", where_case, lambda r: (r.standard_normal(20),), (0,)),
    Case("softmax", softmax_case, lambda r: (r.standard_normal((3, 7)),), (0,)),
    Case("mse_l1", mse_l1, lambda r: (r.standard_normal((4, 5)), r.standard_normal((4, 5))), (0,)),
    Case("matmul", matmul_shapes, lambda r: (r.standard_normal((4, 3)), r.standard_normal((3, 4)),
                                             r.standard_normal(3)), (0, 1, 2)),
]
