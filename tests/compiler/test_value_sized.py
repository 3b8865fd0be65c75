"""Value-sized results and boolean-mask writes inside compiled functions (review10 #2,
#10): ``x[x > 0]``, ``nonzero``, ``masked_select``, ``unique``, ``argwhere``,
``bincount`` on traced values take the graph break (the call runs as written, logged;
``fullgraph=True`` raises), as torch.compile does; under the gradient transforms they
raise a TypeError naming the op. Values and gradients against torch.compile(backend=
"eager") and eager torch."""
from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

import symgrad as sg

TOL = {"float32": dict(rtol=1e-6, atol=1e-6), "float64": dict(rtol=1e-12, atol=1e-12)}

VALUE_SIZED = {
    "mask_index": lambda L, x: x[x > 0].sum() * 2 + x,
    "nonzero": lambda L, x: x.nonzero().shape[0] + x,
    "masked_select": lambda L, x: L.masked_select(x, x < 1).sum() + x,
    "unique": lambda L, x: L.unique(x.detach().round()).sum() * x,
    "argwhere": lambda L, x: L.argwhere(x > 0).sum() + x,
    "bincount": lambda L, x: L.bincount((x.abs() * 2).long()).sum() * x,
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(VALUE_SIZED))
def test_value_sized_results_break_the_graph(name, dtype, caplog):
    f = VALUE_SIZED[name]
    tc = torch.compile(lambda x: f(torch, x), backend="eager")
    sc = sg.compile(lambda x: f(sg, x))
    for data in ([1.0, -2.0, 3.0], [0.5, 2.5, -1.0], [-3.0, -1.0, 4.0]):
        tx = torch.tensor(data, dtype=getattr(torch, dtype), requires_grad=True)
        sx = sg.tensor(data, dtype=getattr(sg, dtype), requires_grad=True)
        with caplog.at_level(logging.WARNING, logger="symgrad.compile"):
            want, got = tc(tx), sc(sx)
        want.sum().backward()
        got.sum().backward()
        assert got.dtype == getattr(sg, dtype)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), **TOL[dtype])
        np.testing.assert_allclose(sx.grad.numpy(), tx.grad.numpy(), **TOL[dtype])
    assert "value-sized result" in sc.last_miss_reason, sc.last_miss_reason


def test_value_sized_with_fullgraph_raises_and_grad_names_the_op():
    strict = sg.compile(lambda x: x[x > 0].sum(), fullgraph=True)
    with pytest.raises(sg.tracing.GraphBreak, match="fullgraph=True.*value-sized"):
        strict(sg.tensor([1.0, -2.0]))
    with pytest.raises(TypeError, match="nonzero"):
        sg.func.grad(lambda x: (x * x.nonzero().shape[0]).sum())(sg.tensor([1.0, 0.0]))
    with pytest.raises(TypeError, match="masked_select"):
        sg.grad(lambda x: sg.masked_select(x, x > 0).sum())(sg.tensor([1.0, -1.0]))


def _mask_writes(case):
    def f(L, x, b):
        a = x * 1
        if case == "scalar":
            a[a > 0.5] = 0
        elif case == "add_scalar":
            a[a < 0] += 10
        elif case == "row_mask_broadcast":
            a[a.sum(1) > 0] = b * 2
        elif case == "column_mask":
            a[:, a[0] > 0] = b[:1] * 3
        elif case == "count_sized":        # one value per True: the graph break
            m = a > 0
            a[m] = L.arange(int(m.sum()), dtype=a.dtype) * b.sum()
        return (a * a).sum() + a.sum(), a
    return f


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", ["scalar", "add_scalar", "row_mask_broadcast",
                                  "column_mask", "count_sized"])
def test_mask_assignment_in_compile(case, dtype):
    f = _mask_writes(case)
    tc = torch.compile(lambda x, b: f(torch, x, b), backend="eager")
    sc = sg.compile(lambda x, b: f(sg, x, b))
    rng = np.random.default_rng(0)
    for _ in range(2):
        x0, b0 = rng.normal(size=(3, 4)).astype(dtype), rng.normal(size=(4,)).astype(dtype)
        tx, tb = torch.tensor(x0, requires_grad=True), torch.tensor(b0, requires_grad=True)
        sx, sb = sg.tensor(x0, requires_grad=True), sg.tensor(b0, requires_grad=True)
        (want, wa), (got, ga) = tc(tx, tb), sc(sx, sb)
        want.backward()
        got.backward()
        np.testing.assert_allclose(ga.detach().numpy(), wa.detach().numpy(), **TOL[dtype])
        np.testing.assert_allclose(got.item(), want.item(), **TOL[dtype])
        np.testing.assert_allclose(sx.grad.numpy(), tx.grad.numpy(), **TOL[dtype])
        if tb.grad is None:
            assert sb.grad is None
        else:
            np.testing.assert_allclose(sb.grad.numpy(), tb.grad.numpy(), **TOL[dtype])
    if case in ("scalar", "row_mask_broadcast", "column_mask"):
        assert sc.misses == 1 and "uncompiled" not in (sc.last_miss_reason or "")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", ["scalar", "row_mask_broadcast", "column_mask"])
def test_mask_assignment_under_func_grad(case, dtype):
    f = _mask_writes(case)
    rng = np.random.default_rng(1)
    x0, b0 = rng.normal(size=(3, 4)).astype(dtype), rng.normal(size=(4,)).astype(dtype)
    want = torch.func.grad(lambda x, b: f(torch, x, b)[0], argnums=(0, 1))(
        torch.tensor(x0), torch.tensor(b0))
    got = sg.func.grad(lambda x, b: f(sg, x, b)[0], argnums=(0, 1))(
        sg.tensor(x0), sg.tensor(b0))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), **TOL[dtype])


def test_count_sized_mask_value_under_grad_is_refused_naming_it():
    def f(x):
        a = x * 1
        a[a > 0] = sg.tensor([5.0, 6.0])
        return a.sum()
    with pytest.raises(TypeError, match="one value per True"):
        sg.func.grad(f)(sg.tensor([1.0, -1.0, 2.0]))
