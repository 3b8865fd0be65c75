"""Structurally identical steps share one LLVM function (codegen/reuse.py), and sharing
never changes an answer: values and gradients against PyTorch."""
import re

import numpy as np
import pytest
import torch

import symgrad as sg

from machines import ir_gemm  # noqa: F401  (fixture)


def _defined(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("define")]


def _mlp(x, *Ws):
    for W in Ws:
        x = sg.tanh(x @ W)
    return x.sum()


def _weights(depth, rng, n=24):
    return [rng.normal(size=(n, n)) / 5 for _ in range(depth)]


def test_a_deeper_network_adds_no_functions():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(90, 24))      # temporaries on the heap at either depth (its arena
                                       # brings one function of its own: arena.release)
    counts = []
    for depth in (3, 12):
        f = sg.value_and_grad(_mlp, argnums=tuple(range(depth + 1)))
        counts.append(len(_defined(f.lower(x, *_weights(depth, rng)).as_text("llvm"))))
    assert counts[0] == counts[1]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_shared_layers_give_torch_values_and_gradients(dtype):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(7, 24)).astype(dtype)
    Ws = [w.astype(dtype) for w in _weights(6, rng)]
    value, grads = sg.value_and_grad(_mlp, argnums=tuple(range(7)))(x, *Ws)
    tx = [torch.tensor(a, requires_grad=True) for a in (x, *Ws)]
    h = tx[0]
    for W in tx[1:]:
        h = torch.tanh(h @ W)
    h.sum().backward()
    tol = dict(rtol=2e-4, atol=2e-5) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(value, h.sum().item(), **tol)
    for g, t in zip(grads, tx):
        np.testing.assert_allclose(g, t.grad.numpy(), **tol)


def test_steps_differing_in_a_constant_are_not_merged():
    # Same structure, different constants (scalars and arrays): each step keeps its own
    # numbers.
    rng = np.random.default_rng(2)
    consts = [rng.normal(size=(5, 33)) for _ in range(4)]

    def f(x):
        for i, c in enumerate(consts):
            x = sg.sin(x * (i + 1.5) + sg.tensor(c))
        return x.sum()

    x = rng.normal(size=(5, 33))
    value, grad = sg.value_and_grad(f)(x)
    tx = torch.tensor(x, requires_grad=True)
    h = tx
    for i, c in enumerate(consts):
        h = torch.sin(h * (i + 1.5) + torch.tensor(c))
    h.sum().backward()
    np.testing.assert_allclose(value, h.sum().item(), rtol=1e-12)
    np.testing.assert_allclose(grad, tx.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_steps_reading_different_slices_of_one_input():
    # An unrolled recurrence reads xs[t] at a different offset each step.
    rng = np.random.default_rng(3)
    W, U = rng.normal(size=(2, 16, 16)) / 4
    xs = rng.normal(size=(6, 3, 16))

    def f(W, U, xs):
        h = sg.zeros((3, 16), dtype=sg.float64)
        for t in range(xs.shape[0]):
            h = sg.tanh(h @ W + xs[t] @ U + xs[t])
        return h.sum()

    value, grads = sg.value_and_grad(f, argnums=(0, 1, 2))(W, U, xs)
    tW, tU, txs = (torch.tensor(a, requires_grad=True) for a in (W, U, xs))
    h = torch.zeros(3, 16, dtype=torch.float64)
    for t in range(6):
        h = torch.tanh(h @ tW + txs[t] @ tU + txs[t])
    h.sum().backward()
    np.testing.assert_allclose(value, h.sum().item(), rtol=1e-12)
    for g, t in zip(grads, (tW, tU, txs)):
        np.testing.assert_allclose(g, t.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_canonical_text_ignores_names_only():
    import llvmlite.ir as ir

    from codegen.reuse import Reuse

    module = ir.Module()
    reuse = Reuse(module)
    made = []
    for name, arg, k in (("a", "x", 1.0), ("b", "y", 1.0), ("c", "z", 2.0)):
        mark = reuse.mark()
        fn = ir.Function(module, ir.FunctionType(ir.DoubleType(), [ir.DoubleType()]), f"m.{name}")
        fn.args[0].name = arg
        b = ir.IRBuilder(fn.append_basic_block(f"entry_{name}"))
        b.ret(b.fadd(fn.args[0], ir.Constant(ir.DoubleType(), k), name=f"{arg}.plus"))
        made.append(reuse.dedup(fn, mark))
    assert made[1] is made[0]               # renamed copy: shared
    assert made[2] is not made[0]           # another constant: its own function
    assert {f.name for f in made} == {"m.a", "m.c"}
    assert not re.search(r"@\"?m\.b", str(module))


def _stacked_mlp(x, Ws):
    for i in range(Ws.shape[0]):
        x = sg.tanh(x @ Ws[i])
    return x.sum()


def test_layers_sliced_from_one_stacked_array_share_code():
    # Ws[i] is a view at a different offset per layer: its steps are passed a pointer to
    # the slice, so a deeper stack adds no functions.
    rng = np.random.default_rng(4)
    x = rng.normal(size=(5, 16))
    counts = []
    for depth in (3, 9):
        Ws = rng.normal(size=(depth, 16, 16)) / 4
        counts.append(len(_defined(sg.value_and_grad(_stacked_mlp, argnums=(0, 1))
                                   .lower(x, Ws).as_text("llvm"))))
        value, (gx, gW) = sg.value_and_grad(_stacked_mlp, argnums=(0, 1))(x, Ws)
        tx, tW = torch.tensor(x, requires_grad=True), torch.tensor(Ws, requires_grad=True)
        h = tx
        for i in range(depth):
            h = torch.tanh(h @ tW[i])
        h.sum().backward()
        np.testing.assert_allclose(value, h.sum().item(), rtol=1e-12)
        np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=1e-10, atol=1e-13)
        np.testing.assert_allclose(gW, tW.grad.numpy(), rtol=1e-10, atol=1e-13)
    assert counts[0] == counts[1]


def _mixed_mlp(x, *Ws):
    for i, W in enumerate(Ws):
        x = (sg.tanh if i % 2 else sg.sin)(x @ W) * (1.0 + i / 10)
    return x.sum()


@pytest.mark.usefixtures("ir_gemm")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_products_of_different_steps_share_their_micro_kernels(dtype):
    # Each layer's step differs (its own activation and scale), so no step function is
    # shared; the GEMM micro-kernels of equal tile shapes and strides still are: a deeper
    # network defines no more of them.
    rng = np.random.default_rng(5)
    x = rng.normal(size=(16, 64)).astype(dtype)
    kernels = []
    for depth in (2, 6):
        Ws = [w.astype(dtype) / 3 for w in _weights(depth, rng, 64)]
        f = sg.value_and_grad(_mixed_mlp, argnums=tuple(range(depth + 1)))
        text = f.lower(x, *Ws).as_text("llvm")
        kernels.append(sorted(d for d in _defined(text) if ".gemm." in d))
        value, grads = f(x, *Ws)
        tx = [torch.tensor(a, requires_grad=True) for a in (x, *Ws)]
        h = tx[0]
        for i, W in enumerate(tx[1:]):
            h = (torch.tanh if i % 2 else torch.sin)(h @ W) * (1.0 + i / 10)
        h.sum().backward()
        tol = dict(rtol=2e-4, atol=2e-5) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(value, h.sum().item(), **tol)
        for g, t in zip(grads, tx):
            np.testing.assert_allclose(g, t.grad.numpy(), **tol)
    assert kernels[0] and kernels[0] == kernels[1]
