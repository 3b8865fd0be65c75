"""``loss.backward()`` inside a compiled function reaching a tensor passed as an
*argument* (review10 #15: its ``.grad`` stayed None): a leaf's ``.grad`` is set, then
accumulated over calls; a non-leaf's gradient flows on through its history (and into its
``.grad`` after ``retain_grad()``); arguments not requiring grad and numpy arrays get
none; a function reading or assigning an argument's ``.grad`` runs as written. Each
compared with ``torch.compile(backend="eager")`` on the same program."""
import logging
import warnings

import numpy as np
import pytest
import torch

import symgrad as sg

DTYPES = [(np.float32, sg.float32, torch.float32, 1e-6),
          (np.float64, sg.float64, torch.float64, 1e-13)]


def _grad(t):
    return None if t.grad is None else np.asarray(t.grad.tolist())


def _check(a, b, tol):
    if a is None or b is None:
        assert a is None and b is None, (a, b)
    else:
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def _loss_backward(x):
    loss = (x.sin() * x).sum()
    loss.backward()
    return loss.detach()


def _two_backwards(x, w):
    (x * w).sum().backward(retain_graph=False)
    loss = (x * x * w).sum()
    loss.backward()
    return loss.detach() * 2


@pytest.mark.parametrize("np_dt,sg_dt,t_dt,tol", DTYPES)
def test_leaf_argument_grad_set_then_accumulated(backend, np_dt, sg_dt, t_dt, tol):
    x0 = np.array([0.5, -1.25, 2.0], dtype=np_dt)
    xs = sg.tensor(x0, requires_grad=True)
    xt = torch.tensor(x0, requires_grad=True)
    cs, ct = sg.compile(_loss_backward, backend=backend), torch.compile(_loss_backward,
                                                                          backend="eager")
    for _ in range(3):
        ls, lt = cs(xs), ct(xt)
        _check(np.asarray(ls.tolist()), lt.detach().numpy(), tol)
        assert xs.grad.dtype is sg_dt
        _check(_grad(xs), _grad(xt), tol)


@pytest.mark.parametrize("np_dt,sg_dt,t_dt,tol", DTYPES)
def test_two_arguments_two_backwards(backend, np_dt, sg_dt, t_dt, tol):
    rng = np.random.default_rng(0)
    x0, w0 = rng.normal(size=(2, 3)).astype(np_dt), rng.normal(size=(3,)).astype(np_dt)
    xs, ws = sg.tensor(x0, requires_grad=True), sg.tensor(w0, requires_grad=True)
    xt, wt = torch.tensor(x0, requires_grad=True), torch.tensor(w0, requires_grad=True)
    cs, ct = sg.compile(_two_backwards, backend=backend), torch.compile(_two_backwards,
                                                                          backend="eager")
    for _ in range(2):
        _check(np.asarray(cs(xs, ws).tolist()), ct(xt, wt).detach().numpy(), tol)
        _check(_grad(xs), _grad(xt), tol)
        _check(_grad(ws), _grad(wt), tol)


@pytest.mark.parametrize("np_dt,sg_dt,t_dt,tol", DTYPES)
def test_argument_without_requires_grad_and_numpy(backend, np_dt, sg_dt, t_dt, tol):
    x0, w0 = np.array([1.0, 2.0, 3.0], dtype=np_dt), np.array([0.5, 0.25, 2.0], dtype=np_dt)
    xs, xt = sg.tensor(x0, requires_grad=True), torch.tensor(x0, requires_grad=True)
    cs, ct = sg.compile(_two_backwards, backend=backend), torch.compile(_two_backwards,
                                                                          backend="eager")
    ws, wt = sg.tensor(w0), torch.tensor(w0)        # (requires_grad=False)
    cs(xs, ws)
    ct(xt, wt)
    assert ws.grad is None and wt.grad is None
    _check(_grad(xs), _grad(xt), tol)
    w_np = w0.copy()              # a numpy argument: data, no gradient
    cs(xs, w_np)
    ct(xt, torch.from_numpy(w_np.copy()))
    np.testing.assert_array_equal(w_np, w0)
    _check(_grad(xs), _grad(xt), tol)


@pytest.mark.parametrize("np_dt,sg_dt,t_dt,tol", DTYPES)
def test_non_leaf_argument_gradient_flows_to_its_leaf(backend, np_dt, sg_dt, t_dt, tol):
    x0 = np.array([0.5, -1.0, 1.5], dtype=np_dt)
    cs, ct = sg.compile(_loss_backward, backend=backend), torch.compile(_loss_backward,
                                                                          backend="eager")
    for retain in (False, True):
        ls, lt = sg.tensor(x0, requires_grad=True), torch.tensor(x0, requires_grad=True)
        for _ in range(2):
            ys, yt = ls * 3, lt * 3           # a fresh non-leaf each call
            if retain:
                ys.retain_grad()
                yt.retain_grad()
            cs(ys)
            ct(yt)
            _check(_grad(ls), _grad(lt), tol)
            if retain:
                _check(_grad(ys), _grad(yt), tol)
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            ys.grad, yt.grad
        assert len(got) == (0 if retain else 2)    # (torch's non-leaf .grad warning)


def test_argument_hook_runs_once_per_call(backend):
    seen_s, seen_t = [], []
    xs = sg.tensor([1.0, 2.0], requires_grad=True)
    xt = torch.tensor([1.0, 2.0], requires_grad=True)
    xs.register_hook(lambda g: seen_s.append(g.tolist()) or g * 2)
    xt.register_hook(lambda g: seen_t.append(g.tolist()) or g * 2)
    cs, ct = sg.compile(_loss_backward, backend=backend), torch.compile(_loss_backward,
                                                                          backend="eager")
    for _ in range(2):
        cs(xs)
        ct(xt)
    np.testing.assert_allclose(seen_s, seen_t, rtol=1e-6)
    _check(_grad(xs), _grad(xt), 1e-6)


def _reads_grad(x):
    (x * x).sum().backward()
    return x.grad * 1


def _assigns_grad(x):
    x.grad = None
    (x * x).sum().backward()
    return x.detach() + 0


@pytest.mark.parametrize("fn", [_reads_grad, _assigns_grad])
def test_reading_or_assigning_argument_grad_runs_as_written(backend, fn):
    xs = sg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    xt = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    cs, ct = sg.compile(fn, backend=backend), torch.compile(fn, backend="eager")
    logging.disable(logging.WARNING)
    try:
        for _ in range(3):
            _check(np.asarray(cs(xs).tolist()), ct(xt).detach().numpy(), 1e-12)
            _check(_grad(xs), _grad(xt), 1e-12)
    finally:
        logging.disable(logging.NOTSET)


def test_optimizer_over_an_argument_runs_as_written(backend):
    """The argument is also reached through the closure (``opt = SGD([x]); step(x)``)."""
    outs = {}
    for L, comp in ((torch, lambda f: torch.compile(f, backend="eager")),
                    (sg, lambda f: sg.compile(f, backend=backend))):
        x = L.tensor([1.0, 2.0, 3.0], dtype=L.float64, requires_grad=True)
        opt = L.optim.SGD([x], lr=0.1, momentum=0.5)

        def step(x, opt=opt):
            opt.zero_grad()
            loss = (x * x.sin()).sum()
            loss.backward()
            opt.step()
            return loss.detach()
        cf = comp(step)
        logging.disable(logging.WARNING)
        try:
            losses = [cf(x).item() for _ in range(3)]
        finally:
            logging.disable(logging.NOTSET)
        outs[L.__name__] = (losses, x.detach().tolist(), x.grad.tolist())
    for a, b in zip(outs["symgrad"], outs["torch"]):
        np.testing.assert_allclose(a, b, rtol=1e-13)


def test_backward_under_no_grad_raises_as_torch(backend):
    def g(y):
        loss = (y ** 3).sum()
        loss.backward(retain_graph=True)
        loss.backward()
        return loss.detach()
    for L, comp in ((torch, lambda f: torch.compile(f, backend="eager")),
                    (sg, lambda f: sg.compile(f, backend=backend))):
        y = L.tensor([1.0, 2.0], requires_grad=True)
        cg = comp(g)
        cg(y)
        assert y.grad.tolist() == [6.0, 24.0]
        with L.no_grad():
            with pytest.raises(RuntimeError, match="element 0 of tensors does not require "
                                                   "grad and does not have a grad_fn"):
                cg(y)
        assert y.grad.tolist() == [6.0, 24.0]
        cg(y)
        assert y.grad.tolist() == [12.0, 48.0]


def test_retain_grad_of_a_non_leaf_argument_inside(backend):
    def f(y):
        y.retain_grad()
        (y * y).sum().backward()
        return y.detach() + 0
    got = {}
    for L, comp in ((torch, lambda f: torch.compile(f, backend="eager")),
                    (sg, lambda f: sg.compile(f, backend=backend))):
        x = L.tensor([1.0, 2.0], requires_grad=True)
        y = x * 3
        logging.disable(logging.WARNING)
        try:
            comp(f)(y)
        finally:
            logging.disable(logging.NOTSET)
        got[L.__name__] = (x.grad.tolist(), y.grad.tolist())
    assert got["symgrad"] == got["torch"]
