"""Programs as long as users write them compile: no recursion on graph depth, bounded
loop bodies, long segments split into parts -- answers checked against PyTorch."""
import sys

import numpy as np
import torch

import symgrad as sg
from codegen.plan import LoopStep, build_plan, cone_limit


def _chain(x, n):
    for _ in range(n):
        x = sg.sin(x) * 0.9 + 0.1
    return x.sum()


def _torch_chain(x, n):
    for _ in range(n):
        x = torch.sin(x) * 0.9 + 0.1
    return x.sum()


def test_a_chain_of_thousands_of_ops_at_the_default_recursion_limit():
    assert sys.getrecursionlimit() <= 1000
    n = 1500
    x = np.linspace(-1.0, 1.0, 37)
    value, grad = sg.value_and_grad(lambda x: _chain(x, n))(x)
    tx = torch.tensor(x, requires_grad=True)
    ref = _torch_chain(tx, n)
    ref.backward()
    np.testing.assert_allclose(value, ref.item(), rtol=1e-12)
    np.testing.assert_allclose(grad, tx.grad.numpy(), rtol=1e-9, atol=1e-14)


def test_loop_bodies_are_bounded_and_long_segments_split():
    f = sg.value_and_grad(lambda x: _chain(x, 800))
    lowered = f.lower(np.ones(8))
    plan = build_plan(lowered.optimized)
    loops = [s for s in plan.steps if isinstance(s, LoopStep)]
    assert len(loops) > 8
    assert all(s.cost <= cone_limit(s.shape) for s in loops if len(s.items) > 1)
    text = lowered.as_text("llvm")
    assert ".seg0.part1" in text
    # the chain's loops are the same code: far fewer functions than steps
    assert sum(line.startswith("define") for line in text.splitlines()) < len(plan.steps) // 4


def test_temporaries_live_at_once_never_share_memory():
    rng = np.random.default_rng(0)
    Ws = [rng.normal(size=(12, 12)) / 3 for _ in range(5)]

    def f(x, *Ws):
        h = x
        for W in Ws:
            h = sg.tanh(h @ W) + sg.sin(h)
        return (h * h).sum()

    plan = build_plan(sg.value_and_grad(f).lower(rng.normal(size=(6, 12)), *Ws).optimized)
    temps = {id(s): s for s in plan.storage.values() if s.kind == "temp"}
    assert len(temps) > 10
    # Live ranges from the steps that touch each buffer.
    touch: dict[int, list[int]] = {}
    for i, step in enumerate(plan.steps):
        for st in _storages(plan, step):
            if id(st) in temps:
                touch.setdefault(id(st), []).append(i)
    spans = [(min(v), max(v), temps[k]) for k, v in touch.items()]
    for a in range(len(spans)):
        for b in range(a + 1, len(spans)):
            f1, l1, s1 = spans[a]
            f2, l2, s2 = spans[b]
            if f1 <= l2 and f2 <= l1:           # live at the same time
                assert s1.slot + s1.nbytes <= s2.slot or s2.slot + s2.nbytes <= s1.slot


def _storages(plan, step):
    from codegen.lower import matmul
    from codegen.lower.fused_loop import FusedLoop
    if isinstance(step, LoopStep):
        loop = FusedLoop(plan, step)
        return list(loop.storages.values()) + [s for it in step.items for s in it.scratch.values()]
    if getattr(step, "node", None) is not None and step.node.op == "matmul":
        return matmul.storages(plan, step.node)
    return []
