"""Numpy arrays a compiled function reads from a global, a closure cell or an attribute,
and its defaults (review10 #8: an array updated in place or rebound, and a changed
``__defaults__``, were ignored -- the program kept the traced constant). Each compared
with ``torch.compile(backend="eager")`` running the same program."""
import logging
import warnings

import numpy as np
import pytest
import torch

import symgrad as sg

DTYPES = [(np.float32, sg.float32, torch.float32), (np.float64, sg.float64, torch.float64)]

NPG = None        # the global the programs read (set per test)


@pytest.fixture(autouse=True)
def _quiet():
    logging.disable(logging.WARNING)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
    logging.disable(logging.NOTSET)


def _programs(L):
    return {
        "tensor": lambda x: x * L.tensor(NPG),
        "as_tensor": lambda x: (x + L.as_tensor(NPG)).sin(),
        "from_numpy": lambda x: x - L.from_numpy(NPG).exp(),
        "operand": lambda x: x * NPG + 1,
        "twice": lambda x: x * L.tensor(NPG) + L.tensor(NPG).sum(),
    }


def _run(L, comp, name, np_dt, t_dt, steps):
    """The outputs of the compiled program after each change of the global."""
    global NPG
    NPG = np.array([1.0, 2.0, 3.0], dtype=np_dt)
    f = comp(_programs(L)[name])
    x = L.tensor(np.array([0.5, -1.0, 2.0], dtype=np_dt))
    out = []
    for step in steps:
        if step == "mutate":
            NPG[:] = [6.0, -2.0, 0.25]
        elif step == "rebind":
            NPG = np.array([2.0, 4.0, 8.0], dtype=np_dt)
        elif step == "reshape":
            NPG = np.full((2, 3), 3.0, dtype=np_dt)
        out.append(np.asarray(f(x).tolist()))
    return out


STEPS = ["first", "mutate", "first", "rebind", "mutate", "reshape"]


@pytest.mark.parametrize("np_dt,sg_dt,t_dt", DTYPES)
@pytest.mark.parametrize("name", sorted(_programs(np)))
def test_global_array_updates_follow_torch_compile(backend, name, np_dt, sg_dt, t_dt):
    want = _run(torch, lambda f: torch.compile(f, backend="eager"), name, np_dt, t_dt, STEPS)
    got = _run(sg, lambda f: sg.compile(f, backend=backend), name, np_dt, t_dt, STEPS)
    tol = 1e-6 if np_dt == np.float32 else 1e-14
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def test_closure_cell_and_attribute_arrays(backend):
    class Cfg:
        pass
    cfg = Cfg()
    cfg.scale = np.array([1.0, 2.0])
    cell = np.array([3.0, 4.0])
    outs = {}
    for L, comp in ((torch, lambda f: torch.compile(f, backend="eager")),
                    (sg, lambda f: sg.compile(f, backend=backend))):
        c = cell.copy()
        cfg.scale = np.array([1.0, 2.0])
        f = comp(lambda x: x * L.tensor(c) + L.tensor(cfg.scale))
        x = L.ones(2, dtype=L.float64)
        res = [f(x).tolist()]
        c[0] = -7.0
        cfg.scale[1] = 10.0
        res.append(f(x).tolist())
        cfg.scale = np.array([0.5, 0.25])
        res.append(f(x).tolist())
        outs[L.__name__] = res
    assert outs["symgrad"] == outs["torch"]


def test_integer_index_array_is_guarded(backend):
    global NPG
    for L, comp in ((torch, lambda f: torch.compile(f, backend="eager")),
                    (sg, lambda f: sg.compile(f, backend=backend))):
        NPG = np.array([2, 0])
        f = comp(lambda x: x[L.tensor(NPG)] * 2)
        x = L.tensor([10.0, 20.0, 30.0])
        res = [f(x).tolist()]
        NPG[0] = 1
        res.append(f(x).tolist())
        NPG = np.array([0, 0, 2])
        res.append(f(x).tolist())
        assert res == [[60.0, 20.0], [40.0, 20.0], [20.0, 20.0, 60.0]], L.__name__


def test_gradient_reads_the_array_of_the_call(backend):
    global NPG
    NPG = np.array([1.0, 2.0, 3.0])
    g = sg.grad(lambda x: (x * sg.tensor(NPG)).sum() * (x ** 2).sum(), backend=backend)
    x0 = np.array([0.5, -1.0, 2.0])
    for fill in (None, 4.0):
        if fill is not None:
            NPG[:] = fill
        xt = torch.tensor(x0, requires_grad=True)
        ((xt * torch.tensor(NPG)).sum() * (xt ** 2).sum()).backward()
        np.testing.assert_allclose(np.asarray(g(sg.tensor(x0)).tolist()), xt.grad.numpy(),
                                   rtol=1e-13)
    # a compiled function's output differentiated eagerly (its recomputation reads the
    # call's array)
    f = sg.compile(lambda x: (x * sg.tensor(NPG)).sin(), backend=backend)
    NPG[:] = [0.5, 1.5, 2.5]
    xs = sg.tensor(x0, requires_grad=True)
    f(xs).sum().backward()
    xt = torch.tensor(x0, requires_grad=True)
    (xt * torch.tensor(NPG)).sin().sum().backward()
    np.testing.assert_allclose(np.asarray(xs.grad.tolist()), xt.grad.numpy(), rtol=1e-13)


def test_changed_defaults_trace_again(backend):
    outs = {}
    for L, comp in ((torch, lambda f: torch.compile(f, backend="eager")),
                    (sg, lambda f: sg.compile(f, backend=backend))):
        def h(x, s=2.0):
            return x * s

        def k(x, *, s=3.0):
            return x + s
        ch, ck = comp(h), comp(k)
        x = L.ones(2, dtype=L.float64)
        res = [ch(x).tolist(), ck(x).tolist()]
        h.__defaults__ = (5.0,)
        k.__kwdefaults__ = {"s": -1.0}
        res += [ch(x).tolist(), ck(x).tolist()]
        outs[L.__name__] = res
    assert outs["symgrad"] == outs["torch"]


@pytest.mark.parametrize("np_dt,sg_dt,t_dt", DTYPES)
def test_global_array_read_in_loop_bodies(backend, np_dt, sg_dt, t_dt):
    """Read inside a fori_loop body (and a nested one): the loop captures the input."""
    global NPG

    def torch_prog(x):
        h = x
        for i in range(3):
            c = h
            for _ in range(2):
                c = c + torch.tensor(NPG) * i
            h = h * torch.tensor(NPG) + c
        return h

    def sg_prog(x):
        def outer(i, h):
            c = sg.fori_loop(0, 2, lambda j, c: c + sg.tensor(NPG) * i, h)
            return h * sg.tensor(NPG) + c
        return sg.fori_loop(0, 3, outer, x)
    results = {}
    for name, L, f in (("torch", torch, torch.compile(torch_prog, backend="eager")),
                       ("symgrad", sg, sg.compile(sg_prog, backend=backend))):
        NPG = np.array([1.0, 0.5, -2.0], dtype=np_dt)
        x = L.tensor(np.array([0.25, 1.0, 2.0], dtype=np_dt))
        res = [f(x).tolist()]
        NPG[:] = [2.0, -1.0, 0.75]
        res.append(f(x).tolist())
        NPG = np.array([3.0, 3.0, 3.0], dtype=np_dt)
        res.append(f(x).tolist())
        results[name] = res
    np.testing.assert_allclose(results["symgrad"], results["torch"], rtol=1e-6)


def test_global_array_read_in_python_is_a_guarded_constant(backend):
    """A value computed from the array read in Python (a slice bound from argmax): the
    array is a constant guarded by its contents -- a change traces again."""
    global NPG
    results = {}
    for name, L, comp in (("torch", torch, lambda f: torch.compile(f, backend="eager")),
                          ("symgrad", sg, lambda f: sg.compile(f, backend=backend))):
        NPG = np.array([1.0, 5.0, 3.0])
        f = comp(lambda x: x[: int(L.tensor(NPG).argmax()) + 1] * L.tensor(NPG)[0])
        x = L.arange(3.0, dtype=L.float64)
        res = [f(x).tolist()]
        NPG[:] = [9.0, 1.0, 2.0]
        res.append(f(x).tolist())
        NPG = np.array([9.0, 1.0, 20.0])
        res.append(f(x).tolist())
        results[name] = res
    assert results["symgrad"] == results["torch"]
