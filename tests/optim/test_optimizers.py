"""symgrad.optim against torch.optim: the same parameters and the same gradient sequence
through many steps of every optimizer and option, both dtypes; reprs, state dicts,
parameter groups, errors (schedules: test_lr_scheduler.py)."""
from __future__ import annotations

from copy import deepcopy

import numpy as np
import pytest
import torch

import symgrad as sg

DTYPES = (np.float32, np.float64)
TOL = {np.float32: dict(rtol=2e-5, atol=2e-6), np.float64: dict(rtol=1e-12, atol=1e-14)}

CASES = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9)),
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.8, nesterov=True, maximize=True)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.01, weight_decay=0.1, amsgrad=True)),
    ("Adam", dict(lr=0.02, betas=(0.8, 0.9), eps=1e-6, maximize=True)),
    ("AdamW", dict(lr=0.01)),
    ("AdamW", dict(lr=0.01, weight_decay=0.3, amsgrad=True)),
    ("RMSprop", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, momentum=0.9, centered=True, weight_decay=0.05)),
    ("RMSprop", dict(lr=0.003, alpha=0.9, maximize=True)),
    ("Adagrad", dict(lr=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01, weight_decay=0.1, initial_accumulator_value=0.5)),
    ("Adadelta", dict()),
    ("Adadelta", dict(lr=0.5, rho=0.8, eps=1e-5, weight_decay=0.1, maximize=True)),
]


def _run(lib, name, kw, dtype, steps=25):
    rng = np.random.default_rng(0)
    shapes = [(3, 4), (4,), ()]
    params = [lib.nn.Parameter(lib.tensor(rng.normal(size=s).astype(dtype))) for s in shapes]
    opt = getattr(lib.optim, name)(params, **kw)
    grads = np.random.default_rng(1)
    for k in range(steps):
        opt.zero_grad()
        for p in params:
            if k % 7 == 3 and p.dim() == 0:
                continue                               # a parameter without a gradient
            p.grad = lib.tensor(grads.normal(size=tuple(p.shape)).astype(dtype))
        opt.step()
    return [p.detach().numpy().copy() for p in params], opt


def assert_same_run(name, kw, dtype):
    """Parameters, repr and state dict after :func:`_run` of symgrad and torch agree."""
    ours, sopt = _run(sg, name, kw, dtype)
    theirs, topt = _run(torch, name, kw, dtype)
    for a, b in zip(ours, theirs):
        assert a.dtype == b.dtype
        np.testing.assert_allclose(a, b, **TOL[dtype])
    assert repr(sopt) == repr(topt)
    ss, ts = sopt.state_dict(), topt.state_dict()
    assert ss["param_groups"] == ts["param_groups"]
    assert set(ss["state"]) == set(ts["state"])
    for k in ts["state"]:
        assert list(ss["state"][k]) == list(ts["state"][k])
        for field, tv in ts["state"][k].items():
            assert ss["state"][k][field].numpy().dtype == tv.numpy().dtype, field
            np.testing.assert_allclose(ss["state"][k][field].numpy(), tv.numpy(), **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,kw", CASES)
def test_updates_equal_torch(name, kw, dtype):
    assert_same_run(name, kw, dtype)


def test_state_dict_round_trip_resumes_identically():
    """A state dict loaded into another optimizer: its options, and (as PyTorch) the
    state tensors themselves -- both optimizers then update the same buffers; a deep
    copy loaded resumes identically. Compared with torch doing the same."""
    def run(lib, copy_state):
        a, opt_a = _run(lib, "Adam", dict(lr=0.01, amsgrad=True), np.float64, steps=10)
        params = [lib.nn.Parameter(lib.tensor(x)) for x in a]
        opt_b = lib.optim.Adam(params, lr=0.5)
        sd = opt_a.state_dict()
        opt_b.load_state_dict(deepcopy(sd) if copy_state else sd)
        assert opt_b.param_groups[0]["lr"] == 0.01
        for p_a, p_b in zip(opt_a.param_groups[0]["params"], params):
            g = np.full(tuple(p_a.shape), 0.3)
            p_a.grad, p_b.grad = lib.tensor(g), lib.tensor(g)
        opt_a.step()
        opt_b.step()
        return [(p_a.detach().numpy(), p_b.detach().numpy())
                for p_a, p_b in zip(opt_a.param_groups[0]["params"], params)]
    for copy_state in (True, False):
        ours, theirs = run(sg, copy_state), run(torch, copy_state)
        for (a, b), (ta, tb) in zip(ours, theirs):
            np.testing.assert_allclose(a, ta, rtol=1e-12)
            np.testing.assert_allclose(b, tb, rtol=1e-12)
            if copy_state:
                np.testing.assert_array_equal(a, b)


def test_param_groups_with_their_own_options():
    def run(lib):
        w = lib.nn.Parameter(lib.ones(3))
        b = lib.nn.Parameter(lib.zeros(2))
        opt = lib.optim.SGD([{"params": [w]}, {"params": [b], "lr": 0.5}], lr=0.1, momentum=0.9)
        extra = lib.nn.Parameter(lib.ones(1))
        opt.add_param_group({"params": extra, "momentum": 0.0})
        for _ in range(3):
            for p in (w, b, extra):
                p.grad = lib.ones(p.shape)
            opt.step()
        return [p.detach().numpy() for p in (w, b, extra)], repr(opt)
    (ours, r1), (theirs, r2) = run(sg), run(torch)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    assert r1 == r2


def _same_error(fn):
    with pytest.raises(Exception) as t:
        fn(torch)
    with pytest.raises(Exception) as s:
        fn(sg)
    assert type(s.value) is type(t.value)
    assert str(s.value) == str(t.value)


@pytest.mark.parametrize("fn", [
    lambda m: m.optim.SGD([], lr=0.1),
    lambda m: m.optim.SGD(m.nn.Parameter(m.ones(1)), lr=0.1),
    lambda m: m.optim.SGD([m.ones(1, requires_grad=True) * 2], lr=0.1),
    lambda m: m.optim.SGD([1.0], lr=0.1),
    lambda m: m.optim.SGD([m.nn.Parameter(m.ones(1))], lr=-1),
    lambda m: m.optim.SGD([m.nn.Parameter(m.ones(1))], lr=0.1, nesterov=True),
    lambda m: m.optim.Adam([m.nn.Parameter(m.ones(1))], betas=(1.0, 0.9)),
    lambda m: m.optim.Adam([m.nn.Parameter(m.ones(1))], eps=-1),
    lambda m: m.optim.RMSprop([m.nn.Parameter(m.ones(1))], alpha=-1),
    lambda m: m.optim.Adagrad([m.nn.Parameter(m.ones(1))], lr_decay=-1),
    lambda m: m.optim.Adadelta([m.nn.Parameter(m.ones(1))], rho=1.5),
    lambda m: m.optim.Adadelta([m.nn.Parameter(m.ones(1))], lr=-0.1),
    lambda m: m.optim.Adadelta([m.nn.Parameter(m.ones(1))], eps=-1),
    lambda m: m.optim.Adadelta([m.nn.Parameter(m.ones(1))], weight_decay=-1),
    lambda m: (lambda p: m.optim.SGD([{"params": [p]}, {"params": [p]}], lr=0.1))(
        m.nn.Parameter(m.ones(1))),
    lambda m: m.optim.SGD([{"params": {m.nn.Parameter(m.ones(1))}}], lr=0.1),
])
def test_bad_arguments_raise_pytorchs_errors(fn):
    _same_error(fn)


def test_duplicate_parameters_warn_as_pytorch():
    p = sg.nn.Parameter(sg.ones(1))
    with pytest.warns(UserWarning, match="duplicate parameters"):
        sg.optim.SGD([p, p], lr=0.1)


def test_zero_grad_and_closure():
    p = sg.nn.Parameter(sg.tensor([2.0]))
    opt = sg.optim.SGD([p], lr=0.25)

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss
    loss = opt.step(closure)
    assert float(loss) == 4.0 and p.tolist() == [1.0]
    opt.zero_grad(set_to_none=False)
    assert p.grad.tolist() == [0.0]
    opt.zero_grad()
    assert p.grad is None


def test_step_bumps_the_version_as_an_inplace_update():
    p = sg.nn.Parameter(sg.tensor([2.0]))
    y = p * p                       # saves p for its backward
    y.sum().backward(retain_graph=True)
    sg.optim.SGD([p], lr=0.1).step()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
