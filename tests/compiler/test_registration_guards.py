"""Every write to a module's registration tables -- whichever library path makes it
(``load_state_dict(assign=True)``, ``.double()`` / ``.to()``, the containers' ``del`` /
``insert`` / ``pop`` / ``clear``, ``ParameterList`` / ``ParameterDict``) -- makes a compiled
function read the module's new tensors, and a compiled call that runs while a table is being
written (another thread) cannot make it miss the write. Answers are compared with torch
running the same model after the same change."""
from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

import symgrad as sg
from symgrad.compiler import sources
from symgrad.nn.modules.registration import RegistrationTable

R = np.random.default_rng(11)
X = R.standard_normal((2, 3))


def _pair(dtype="float64"):
    """A symgrad and a torch Sequential with the same weights."""
    sg.manual_seed(0)
    s = sg.nn.Sequential(sg.nn.Linear(3, 3), sg.nn.Tanh(), sg.nn.Linear(3, 3), sg.nn.Tanh(),
                         sg.nn.Linear(3, 3)).to(getattr(sg, dtype))
    t = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Tanh(), torch.nn.Linear(3, 3),
                            torch.nn.Tanh(), torch.nn.Linear(3, 3)).to(getattr(torch, dtype))
    with torch.no_grad():
        for (name, p) in s.named_parameters():
            t.get_parameter(name).copy_(torch.tensor(p.detach().numpy()))
    return s, t


def _linear_pair(dtype):
    sg.manual_seed(3)
    s = sg.nn.Linear(3, 3).to(getattr(sg, dtype))
    t = torch.nn.Linear(3, 3).to(getattr(torch, dtype))
    with torch.no_grad():
        t.weight.copy_(torch.tensor(s.weight.detach().numpy()))
        t.bias.copy_(torch.tensor(s.bias.detach().numpy()))
    return s, t


def _check(compiled, t, x, dtype):
    tol = 1e-5 if dtype == "float32" else 1e-12
    got = compiled(x)
    expect = t(torch.tensor(x)).detach().numpy()
    np.testing.assert_allclose(np.asarray(got), expect, rtol=tol, atol=tol)


EDITS = {
    "del_item": lambda m: m.__delitem__(2),
    "del_slice": lambda m: m.__delitem__(slice(1, 3)),
    "insert": lambda m, L=None: m.insert(1, L),
    "append": lambda m, L=None: m.append(L),
    "extend": lambda m, L=None: m.extend([L]),
    "setitem": lambda m, L=None: m.__setitem__(0, L),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("edit", sorted(EDITS))
def test_sequential_edits(edit, dtype):
    s, t = _pair(dtype)
    x = X.astype(dtype)
    f = sg.compile(s)
    _check(f, t, x, dtype)
    if edit.startswith("del"):
        EDITS[edit](s), EDITS[edit](t)
    else:
        sl, tl = _linear_pair(dtype)
        EDITS[edit](s, sl), EDITS[edit](t, tl)
    _check(f, t, x, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_load_state_dict_assign(dtype):
    s, t = _pair(dtype)
    x = X.astype(dtype)
    f = sg.compile(lambda x: s(x).tanh())
    f(x)
    new = {k: R.standard_normal(tuple(v.shape)).astype(dtype) for k, v in s.state_dict().items()}
    s.load_state_dict({k: sg.tensor(v) for k, v in new.items()}, assign=True)
    t.load_state_dict({k: torch.tensor(v) for k, v in new.items()}, assign=True)
    got = f(x)
    np.testing.assert_allclose(got, t(torch.tensor(x)).tanh().detach().numpy(),
                               rtol=1e-5 if dtype == "float32" else 1e-12)


class _Scaled(sg.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("scale", sg.full((3,), 2.0))

    def forward(self, x):
        return x * self.scale


@pytest.mark.parametrize("convert", ["double", "to", "float"])
def test_apply_replaces_buffers(convert):
    s = _Scaled()
    if convert == "float":
        s.double()
    f = sg.compile(s)
    x = sg.tensor(X)
    f(x)
    {"double": s.double, "to": lambda: s.to(sg.float64), "float": s.float}[convert]()
    s.scale.mul_(10)                 # (an in-place update of the new buffer is seen too)
    got = f(x)
    dt = torch.float32 if convert == "float" else torch.float64
    expect = torch.tensor(X).to(torch.float64 if convert != "float" else torch.float64) \
        * torch.full((3,), 20.0, dtype=dt)
    assert str(got.dtype) == str(expect.dtype)
    np.testing.assert_allclose(got.numpy(), expect.numpy(), rtol=1e-6)


def test_module_dict_list_and_parameter_containers():
    sg.manual_seed(0)
    torch.manual_seed(0)
    w = [R.standard_normal(3) for _ in range(3)]
    md = sg.nn.ModuleDict({"a": sg.nn.Identity(), "b": sg.nn.Tanh()})
    ml = sg.nn.ModuleList([sg.nn.Identity(), sg.nn.Tanh()])
    pl = sg.nn.ParameterList([sg.tensor(w[0]), sg.tensor(w[1])])
    pd = sg.nn.ParameterDict({"p": sg.tensor(w[0]), "q": sg.tensor(w[1])})

    def f(x):
        y = x
        for m in md.values():
            y = m(y)
        for m in ml:
            y = m(y)
        for p in pl:
            y = y * p
        for p in pd.values():
            y = y + p
        return y
    cf = sg.compile(f)
    x = sg.tensor(X)

    def expect():
        tx = torch.tensor(X)
        for m in md.values():
            tx = tx.tanh() if isinstance(m, sg.nn.Tanh) else tx
        for m in ml:
            tx = tx.tanh() if isinstance(m, sg.nn.Tanh) else tx
        for p in pl:
            tx = tx * torch.tensor(p.detach().numpy())
        for p in pd.values():
            tx = tx + torch.tensor(p.detach().numpy())
        return tx.numpy()
    np.testing.assert_allclose(cf(x).detach().numpy(), expect(), rtol=1e-12)
    edits = [lambda: md.pop("b"), lambda: md.__setitem__("c", sg.nn.Tanh()), md.clear,
             lambda: ml.__delitem__(1), lambda: ml.insert(0, sg.nn.Tanh()),
             lambda: pl.__setitem__(1, sg.tensor(w[2])), lambda: pl.append(sg.tensor(w[2])),
             lambda: pd.__delitem__("p"), lambda: pd.__setitem__("q", sg.tensor(w[2]))]
    for edit in edits:
        edit()
        np.testing.assert_allclose(cf(x).detach().numpy(), expect(), rtol=1e-12)


@pytest.mark.parametrize("method", ["setitem", "delitem", "pop", "popitem", "clear", "update",
                                    "setdefault", "ior"])
def test_every_table_write_advances_the_counter(method):
    t = RegistrationTable(a=1)
    before = sources._registration[0]
    {"setitem": lambda: t.__setitem__("b", 2), "delitem": lambda: t.__delitem__("a"),
     "pop": lambda: t.pop("a"), "popitem": t.popitem, "clear": t.clear,
     "update": lambda: t.update(b=2), "setdefault": lambda: t.setdefault("b", 2),
     "ior": lambda: t.__ior__({"b": 2})}[method]()
    assert sources._registration[0] != before


def test_pickled_module_keeps_reporting_writes():
    import pickle
    lin = pickle.loads(pickle.dumps(sg.nn.Linear(3, 3).double()))
    assert all(type(lin.__dict__[k]) is RegistrationTable
               for k in ("_parameters", "_buffers", "_modules"))
    f = sg.compile(lin)
    f(X)
    new = R.standard_normal(3)
    lin._parameters["bias"] = sg.nn.Parameter(sg.tensor(new))
    expect = torch.tensor(X) @ torch.tensor(lin.weight.detach().numpy()).T + torch.tensor(new)
    np.testing.assert_allclose(f(X), expect.numpy(), rtol=1e-12)


# ---- a compiled call from another thread, at the worst moment ---------------------------
class _Biased(sg.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("b", sg.zeros(3, dtype=sg.float64))

    def forward(self, x):
        return x + self.b


def _at_line(code, line, action):
    """Run ``action`` once (no tracing inside) when ``code`` reaches ``line`` -- another
    thread scheduled exactly there."""
    fired = []

    def local(frame, event, arg):
        if event == "line" and frame.f_lineno == line and not fired:
            fired.append(1)
            sys.settrace(None)
            action()
        return local

    def tracer(frame, event, arg):
        return local if frame.f_code is code and not fired else None
    sys.settrace(tracer)
    return fired


def _line_of(fn, text):
    import inspect
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, s in enumerate(lines) if text in s)


@pytest.mark.parametrize("where", ["before the write", "between write and bump"])
def test_call_while_a_table_is_written(where):
    m = _Biased()
    cm = sg.compile(m)
    x = sg.zeros(3, dtype=sg.float64)
    cm(x)
    fn = RegistrationTable.__setitem__
    line = _line_of(fn, "dict.__setitem__" if where == "before the write"
                    else "registration_changed()")
    try:
        fired = _at_line(fn.__code__, line, lambda: cm(x))
        m.b = sg.full((3,), 5.0, dtype=sg.float64)
    finally:
        sys.settrace(None)
    assert fired
    np.testing.assert_array_equal(cm(x).numpy(), np.full(3, 5.0))


def test_write_while_the_guard_rereads():
    """A write landing after the guard re-read the paths but before it records what it saw
    is seen at the next call (the counter is taken before re-reading)."""
    m = _Biased()
    cm = sg.compile(m)
    x = sg.zeros(3, dtype=sg.float64)
    cm(x)
    m.note = "unrelated"             # (a registration change: the next call re-reads the paths)
    fn = sources.Guards._governed_replaced
    line = _line_of(fn, "self._seen = now")
    try:
        fired = _at_line(fn.__code__, line,
                         lambda: setattr(m, "b", sg.full((3,), 5.0, dtype=sg.float64)))
        cm(x)
    finally:
        sys.settrace(None)
    assert fired
    np.testing.assert_array_equal(cm(x).numpy(), np.full(3, 5.0))


def test_unrelated_registration_change_needs_no_recompile():
    m = _Biased()
    cm = sg.compile(m)
    x = sg.zeros(3, dtype=sg.float64)
    cm(x)
    misses = cm.cache_info().misses
    m.note = "unrelated"
    m.train()
    np.testing.assert_array_equal(cm(x).numpy(), np.zeros(3))
    assert cm.cache_info().misses == misses
