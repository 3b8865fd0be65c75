"""Jacobians and hessians from one batched gradient graph (symgrad/compiler/batching.py):
every batching rule exercised through ``jacobian``/``hessian`` against PyTorch's
``torch.autograd.functional``, on both backends; a primitive without a rule falls back to
one graph per row with the same answers."""
import numpy as np
import pytest
import torch
from torch.autograd.functional import hessian as t_hessian
from torch.autograd.functional import jacobian as t_jacobian

import symgrad as sg
from symgrad.compiler.batching import batch_graph

RNG = np.random.default_rng(7)
A = RNG.normal(size=(6, 6)) / 3
B3 = RNG.normal(size=(2, 6, 6)) / 3

# (name, symgrad function, torch function, argument shapes): each reaches one rule family
CASES = [
    ("elementwise", lambda x: sg.tanh(x) * x + sg.exp(-x * x),
     lambda x: torch.tanh(x) * x + torch.exp(-x * x), [(6,)]),
    ("broadcast", lambda x, y: sg.sin(x[:, None] * y[None, :]) + y,
     lambda x, y: torch.sin(x[:, None] * y[None, :]) + y, [(3,), (4,)]),
    ("reductions", lambda x: sg.stack([x.sum(0), x.mean(0), x.amax(0)]).sum(1) * x.prod(),
     lambda x: torch.stack([x.sum(0), x.mean(0), x.amax(0)]).sum(1) * x.prod(), [(3, 4)]),
    ("reshape-permute", lambda x: (x.reshape(3, 4).T * sg.tensor(np.arange(12.0).reshape(4, 3))).reshape(-1),
     lambda x: (x.reshape(3, 4).T * torch.tensor(np.arange(12.0).reshape(4, 3))).reshape(-1), [(12,)]),
    ("slice-select-cat", lambda x: sg.cat([x[1:5:2, 0], x[2], x[:, 1]]) ** 2,
     lambda x: torch.cat([x[1:5:2, 0], x[2], x[:, 1]]) ** 2, [(5, 3)]),
    ("expand", lambda x: (x.reshape(1, 3).expand(4, 3) * sg.tensor(np.arange(12.0).reshape(4, 3))).sum(0),
     lambda x: (x.reshape(1, 3).expand(4, 3) * torch.tensor(np.arange(12.0).reshape(4, 3))).sum(0), [(3,)]),
    ("matrix-vector", lambda x: sg.tanh(sg.tensor(A) @ x),
     lambda x: torch.tanh(torch.tensor(A) @ x), [(6,)]),
    ("vector-matrix", lambda x: sg.tanh(x @ sg.tensor(A)),
     lambda x: torch.tanh(x @ torch.tensor(A)), [(6,)]),
    ("matrix-matrix", lambda X: sg.tanh(X @ sg.tensor(A)).sum(0) + (sg.tensor(A) @ X).sum(1),
     lambda X: torch.tanh(X @ torch.tensor(A)).sum(0) + (torch.tensor(A) @ X).sum(1), [(6, 6)]),
    ("batched-matmul", lambda X: sg.sin(sg.tensor(B3) @ X).reshape(-1),
     lambda X: torch.sin(torch.tensor(B3) @ X).reshape(-1), [(6, 2)]),
    ("vector-batched", lambda x: (x @ sg.tensor(B3)).reshape(-1),
     lambda x: (x @ torch.tensor(B3)).reshape(-1), [(6,)]),
    ("where", lambda x: sg.where(x > 0, x * x, -x), lambda x: torch.where(x > 0, x * x, -x), [(6,)]),
    ("no-rule fallback", lambda x: x[sg.tensor([2, 0, 2])] * x[:3],
     lambda x: x[torch.tensor([2, 0, 2])] * x[:3], [(4,)]),
]


def _args(shapes):
    return [RNG.normal(size=s) for s in shapes]


@pytest.mark.parametrize("backend", ["llvm", "numpy"])
@pytest.mark.parametrize("name, f, tf, shapes", CASES, ids=[c[0] for c in CASES])
def test_jacobian_against_torch(name, f, tf, shapes, backend):
    args = _args(shapes)
    argnums = tuple(range(len(args)))
    got = sg.jacobian(f, argnums=argnums, backend=backend)(*args)
    want = t_jacobian(tf, tuple(torch.tensor(a) for a in args))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("backend", ["llvm", "numpy"])
def test_hessian_against_torch(backend):
    x = RNG.normal(size=7)

    def f(x):
        return (sg.sin(x) * x * x).sum() + x.sum() ** 2 + (sg.tensor(A[:, :1].T) @ x[:6].reshape(6, 1)).sum()

    def tf(x):
        return (torch.sin(x) * x * x).sum() + x.sum() ** 2 + (torch.tensor(A[:, :1].T) @ x[:6].reshape(6, 1)).sum()

    got = sg.hessian(f, backend=backend)(x)
    np.testing.assert_allclose(got, t_hessian(tf, torch.tensor(x)).numpy(), rtol=1e-12, atol=1e-12)


def test_jacobian_is_one_graph_not_one_per_row():
    n = 64
    small = sg.jacobian(lambda x: sg.tanh(sg.tensor(np.eye(8)) @ x)).lower(np.ones(8))
    large = sg.jacobian(lambda x: sg.tanh(sg.tensor(np.eye(n)) @ x)).lower(np.ones(n))
    assert large.stats["transformed"] == small.stats["transformed"]


def test_float32_jacobian():
    x = RNG.normal(size=5).astype(np.float32)
    got = sg.jacobian(lambda x: sg.tanh(x) * x.sum())(x)
    want = t_jacobian(lambda x: torch.tanh(x) * x.sum(), torch.tensor(x))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-6, atol=1e-7)


def test_outputs_independent_of_the_batched_inputs_are_broadcast():
    from symgrad.graph import dtypes
    from symgrad.graph.node import const
    from symgrad.compiler.rewrite import mk
    x = const(np.arange(3.0), dtypes.float64)
    c = const(np.full(2, 5.0), dtypes.float64)
    y = mk("mul", x, x)
    out = batch_graph([y, c], {id(x): const(np.ones((4, 3)), dtypes.float64)}, 4)
    assert [o.shape for o in out] == [(4, 3), (4, 2)]


# Primitives the eager API does not reach yet (flip, cumsum, pad_slice, argmax): each
# rule against numpy applied to every member of the stack.
PRIMITIVE_CASES = [
    ("flip", dict(axes=(0, 2)), lambda x: np.flip(x, (0, 2))),
    ("cumsum", dict(axis=1), lambda x: np.cumsum(x, 1)),
    ("argmax", dict(axis=-1, keepdim=False), lambda x: np.argmax(x, -1)),
    ("pad_slice", dict(shape=(5, 7, 2), starts=(1, 0, 0), stops=(4, 7, 2), steps=(1, 2, 1)),
     lambda x: _pad(x)),
    ("sum", dict(axes=(0, 2), keepdim=True), lambda x: x.sum((0, 2), keepdims=True)),
]


def _pad(x):
    out = np.zeros((5, 7, 2))
    out[1:4, 0:7:2, 0:2] = x
    return out


@pytest.mark.parametrize("op, attrs, ref", PRIMITIVE_CASES, ids=[c[0] for c in PRIMITIVE_CASES])
def test_rule_against_numpy_per_member(op, attrs, ref):
    from symgrad.graph import dtypes
    from symgrad.compiler.rewrite import mk
    from symgrad.graph.interpret import evaluate
    from symgrad.graph.node import const
    x = const(np.zeros((3, 4, 2)), dtypes.float64)
    y = mk(op, x, **attrs)
    stack = RNG.normal(size=(5, 3, 4, 2))
    (out,) = batch_graph([y], {id(x): const(stack, dtypes.float64)}, 5)
    (got,) = evaluate([out], {})
    np.testing.assert_array_equal(got, np.stack([ref(m) for m in stack]))
