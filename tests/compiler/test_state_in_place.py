"""A compiled training step writes parameters and optimizer state in place: native code
computes each new value straight into the state's own array (``Program.donated``), no
copy after the call. Checked against torch eager after every step (parameters, ``.grad``,
optimizer state; both dtypes; a two-layer model whose backward reads a weight after its
gradient is known, so a write scheduled too early would show), that the arrays kept
their identity (a numpy view taken before sees the update), and the cases where writing
in place would be wrong: an argument sharing memory with the state, a read-only state
array, a call failing part-way (an index out of range) -- the state stays as it was."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg
from tests.compiler.test_train_step import (DTYPES, TOL, _batches, _compiled_step, _model,
                                            _same_state)

OPTIMIZERS = [("SGD", dict(lr=0.1, momentum=0.9)),
              ("Adam", dict(lr=0.01)),
              ("AdamW", dict(lr=0.01, weight_decay=0.3, amsgrad=True))]


def _closure_step(model, opt, x, y):
    """The step over data it closes over (as the training bench does)."""
    body = _compiled_step(model, opt).__wrapped__
    return sg.compile(lambda: body(x, y))


def _donated(step) -> tuple:
    return tuple(d for e in step._cache.values()
                 for d in getattr(getattr(e.exe, "interface", None), "donated", ()))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,kw", OPTIMIZERS, ids=[n for n, _ in OPTIMIZERS])
def test_state_written_in_place_equals_torch_each_step(name, kw, dtype):
    model, tmodel = _model(sg, dtype), _model(torch, dtype)
    opt = getattr(sg.optim, name)(model.parameters(), **kw)
    topt = getattr(torch.optim, name)(tmodel.parameters(), **kw)
    x, y = _batches(dtype, 1)[0]
    step = _closure_step(model, opt, sg.tensor(x), sg.tensor(y))
    arrays = views = None
    for k in range(6):
        topt.zero_grad()
        tloss = torch.nn.functional.cross_entropy(tmodel(torch.tensor(x)), torch.tensor(y))
        tloss.backward()
        topt.step()
        loss = step()
        np.testing.assert_allclose(float(loss), tloss.item(), **TOL[dtype])
        _same_state(model, opt, tmodel, topt, dtype)
        state = [p for p in model.parameters()] + [
            v for s in opt.state.values() for v in s.values() if isinstance(v, sg.Tensor)]
        if arrays is not None:         # same arrays as before the call; views see the update
            assert all(t._data is a for t, a in zip(state, arrays))
            for t, v in zip(state, views):
                np.testing.assert_array_equal(v, t.detach().numpy())
        if k >= 1:
            arrays = [t._data for t in state]
            views = [t.detach().numpy() for t in state]
    assert _donated(step), "no state output was written in place"
    assert step.cache_info().misses == 2       # the first step made state; then one program


@pytest.mark.parametrize("dtype", DTYPES)
def test_an_argument_sharing_memory_with_the_state_reads_the_old_values(dtype):
    """``p`` is updated in place by the call while an argument views its memory: the
    argument's reads see the values before the update, as in torch's eager order."""
    rng = np.random.default_rng(0)
    init = rng.normal(size=(4, 5)).astype(dtype)
    p, tp = sg.tensor(init.copy()), torch.tensor(init.copy())

    def body(lib, p, x):
        s = (x * x).sum(1)
        p.mul_(0.5).add_(1.0)
        return p.sum(1) + s

    f = sg.compile(lambda x: body(sg, p, x))
    for k in range(3):
        want = body(torch, tp, tp.detach()[:]).numpy()   # torch: x aliases p
        got = f(sg.tensor(p.numpy()[:]) if k == 0 else p.detach()[:])
        np.testing.assert_allclose(got.numpy(), want, **TOL[dtype])
        np.testing.assert_allclose(p.numpy(), tp.numpy(), **TOL[dtype])
    other = sg.tensor(rng.normal(size=(4, 5)).astype(dtype))       # no alias: in place
    before = p._data
    want = body(torch, tp, torch.tensor(other.numpy())).numpy()
    np.testing.assert_allclose(f(other).numpy(), want, **TOL[dtype])
    np.testing.assert_allclose(p.numpy(), tp.numpy(), **TOL[dtype])
    assert p._data is before
    assert _donated(f)


def test_read_only_state_is_written_as_eager_in_place_writes_it():
    """A donated state array that became read-only is not written by native code (the
    call works on a copy) and takes the result as an eager in-place update would."""
    p = sg.tensor(np.arange(6.0))
    f = sg.compile(lambda: p.mul_(2.0).sum())
    f()
    f()
    assert _donated(f)
    p._data.flags.writeable = False
    f()
    np.testing.assert_array_equal(p.numpy(), (torch.arange(6.0) * 8).numpy())


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_failing_call_leaves_the_state_unchanged(dtype):
    """A target out of range fails inside native code: torch's IndexError, and neither
    the parameters nor the optimizer state changed (every in-place write comes after
    every step that can fail)."""
    model, tmodel = _model(sg, dtype), _model(torch, dtype)
    opt = sg.optim.Adam(model.parameters(), lr=0.01)
    x, y = _batches(dtype, 1)[0]
    yt = sg.tensor(y)
    step = _closure_step(model, opt, sg.tensor(x), yt)
    for _ in range(3):
        step()
    assert _donated(step)
    snapshot = [t.detach().numpy().copy() for t in model.parameters()] + [
        v.numpy().copy() for s in opt.state.values() for v in s.values()]
    yt._data[0] = 3                      # 3 classes: out of range
    bad = torch.tensor(yt.numpy())
    with pytest.raises(IndexError):
        torch.nn.functional.cross_entropy(tmodel(torch.tensor(x)), bad)
    with pytest.raises(IndexError):
        step()
    after = [t.detach().numpy() for t in model.parameters()] + [
        v.numpy() for s in opt.state.values() for v in s.values()]
    for a, b in zip(snapshot, after):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("late", ["sum", "matmul", "broadcast"])
def test_reads_of_the_old_value_come_before_the_write(late, dtype):
    """Values computed from the state before its in-place update (fused and recomputed
    where they are used, or read by a product) still see the old values when the
    program reads them after computing the update: such an update is not written in
    place before those reads."""
    rng = np.random.default_rng(1)
    init = rng.normal(size=(5, 5)).astype(dtype)
    p, tp = sg.tensor(init.copy()), torch.tensor(init.copy())

    def body(lib, p):
        q = p * 2 + 1
        p.mul_(0.5).add_(p * p)
        if late == "sum":
            return p.sum() + q.exp().sum()
        if late == "matmul":
            return (p @ q).sum() + (q @ p.T).sum()
        return (p + q.sum(0)).sum()

    f = sg.compile(lambda: body(sg, p))
    for _ in range(3):
        want = body(torch, tp).item()
        np.testing.assert_allclose(float(f()), want, **TOL[dtype])
        np.testing.assert_allclose(p.numpy(), tp.numpy(), **TOL[dtype])


def test_in_place_update_of_a_closed_over_tensor_with_history():
    """A buffer that took a value requiring grad (it has a grad_fn, as in torch) and is
    updated in place by the compiled function: each call reads its value then, never the
    value it had when traced (review finding: it stayed 2, 2, 2, 2)."""
    got = {}
    for lib in (torch, sg):
        w = lib.ones(1, requires_grad=True)
        total = lib.zeros(1)
        total.add_(w)

        def step(x):
            total.add_(x)
            return total * 1
        f = sg.compile(step) if lib is sg else step
        got[lib.__name__] = ([f(lib.ones(1)).item() for _ in range(4)], total.item())
    assert got["symgrad"] == got["torch"] == ([2.0, 3.0, 4.0, 5.0], 5.0)


@pytest.mark.parametrize("case", ["sub_", "index_fill_", "setitem", "view"])
def test_arguments_updated_in_place_as_torch(case):
    """In-place updates of an argument inside the compiled function reach the caller's
    tensor (and a numpy array's memory), call after call, as in torch eager and
    torch.compile (review2 finding 19: they were dropped)."""
    def f(L, x):
        if case == "sub_":
            x.sub_(x.mean())
        elif case == "index_fill_":
            x.index_fill_(0, L.tensor([1]), 9.0)
        elif case == "setitem":
            x[2] = x[0] * 3
        else:
            x[1:].mul_(2)
        return x.abs().sum()
    got = {}
    for lib in (torch, sg):
        g = sg.compile(lambda x: f(sg, x)) if lib is sg else (lambda x: f(torch, x))
        outs, args = [], []
        for k in range(3):
            x = lib.tensor([1.0, 2.0, 6.0]) * (k + 1)
            outs.append(float(g(x)))
            args.append(x.tolist())
        got[lib.__name__] = (outs, args)
    assert got["symgrad"] == got["torch"]
    a = np.array([1.0, 2.0, 6.0])
    want = torch.tensor(a.copy())
    f(torch, want)
    sg.compile(lambda x: f(sg, x))(a)
    np.testing.assert_array_equal(a, want.numpy())


def test_argument_updated_in_place_then_differentiated():
    got = {}
    for lib in (torch, sg):
        w = lib.tensor([1.0, -2.0, 3.0], requires_grad=True)

        def f(x):
            x.sub_(x.mean())
            return (w * x * x).sum()
        g = sg.compile(f) if lib is sg else f
        xs = []
        for k in range(3):
            x = lib.tensor([1.0, 2.0, 6.0]) * (k + 1)
            g(x).backward()
            xs.append(x.tolist())
        got[lib.__name__] = (w.grad.tolist(), xs)
    assert got["symgrad"] == got["torch"]


def test_a_compiled_step_updates_a_parameter_over_a_read_only_array():
    """As eager in-place does (review2 finding 15: numpy's ValueError)."""
    a = np.ones(3, dtype=np.float32)
    a.setflags(write=False)
    w = sg.nn.Parameter(sg.from_numpy(a))
    tw = torch.nn.Parameter(torch.ones(3))
    for p, lib in ((w, sg), (tw, torch)):
        opt = lib.optim.SGD([p], lr=0.1)

        def step(x, p=p, opt=opt):
            opt.zero_grad()
            loss = (p * x).sum()
            loss.backward()
            opt.step()
            return loss
        f = sg.compile(step) if lib is sg else step
        for _ in range(3):
            f(lib.ones(3))
    np.testing.assert_allclose(w.detach().numpy(), tw.detach().numpy(), rtol=1e-6)


def test_a_closed_over_view_reads_its_base_updated_in_the_same_call():
    """v = m[1] read after m.add_(x) sees the update, as PyTorch's view does; read before
    it, the value before (review2 finding 14)."""
    got = {}
    for lib in (torch, sg):
        m = lib.zeros(2, 3)
        v = m[1]

        def f(x):
            before = v.sum() * 1
            m.add_(x)
            return before, v.sum() * 1, v.t() if v.dim() > 1 else v * 1
        g = sg.compile(f) if lib is sg else f
        got[lib.__name__] = [[float(a), float(b), c.tolist()] for a, b, c in
                             (g(lib.ones(2, 3) * (k + 1)) for k in range(3))] + [v.tolist()]
    assert got["symgrad"] == got["torch"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", ["same", "view", "closed_over", "view_of_closed_over",
                                  "state_view_arg"])
def test_writes_are_seen_through_aliased_inputs(case, dtype):
    """An input written in place read through another input sharing its memory (the same
    tensor passed twice, a view of the other argument, an argument that is (a view of) a
    tensor the function closes over): the reads see the write, as in torch (review3
    finding 3: they read the value before it)."""
    got = {}
    for lib in (torch, sg):
        state = lib.zeros(4, dtype=getattr(lib, np.dtype(dtype).name))

        def two(a, b):
            b.add_(1)
            return a * 2, b.sum() * 1

        def one(x):
            x.add_(1)
            return state * 2

        def writes_state(v):
            state.add_(1)
            return v * 2
        f = {"same": two, "view": two, "closed_over": one, "view_of_closed_over": one,
             "state_view_arg": writes_state}[case]
        g = sg.compile(f) if lib is sg else f
        outs = []
        for k in range(3):
            a = lib.arange(4, dtype=state.dtype) * (k + 1)
            args = {"same": (a, a), "view": (a, a[:2]), "closed_over": (state,),
                    "view_of_closed_over": (state[1:3],), "state_view_arg": (state[:2],)}[case]
            out = g(*args)
            out = out if isinstance(out, tuple) else (out,)
            outs.append([o.tolist() for o in out] + [a.tolist(), state.tolist()])
        got[lib.__name__] = outs
    assert got["symgrad"] == got["torch"]


def test_returned_state_and_arguments_are_the_tensors_themselves():
    """A compiled function returning a tensor it closes over (``return loss,
    self.running_mean``), an alias of it (``m.detach()``) or an argument returns that
    tensor, as eager code and torch.compile do: a later update shows through it (review2
    finding 17: snapshots). A view made inside the call is still a new tensor."""
    got = {}
    for lib in (torch, sg):
        m = lib.zeros(3)

        def f(x):
            m.add_(x)
            return m, m.detach(), x, (m * 2).sum()
        g = sg.compile(f) if lib is sg else f
        x = lib.ones(3)
        first = g(x)
        g(lib.ones(3))
        got[lib.__name__] = ([t.tolist() for t in first[:3]], first[0] is m, first[2] is x,
                             float(first[3]))
    assert got["symgrad"] == got["torch"]
