"""Helpers for checking symgrad against PyTorch (the oracle) and finite differences.

A check runs the *same* lambda ``fn(m, *tensors)`` with ``m = symgrad`` and ``m = torch``
on tensors built from the same numpy arrays, then compares values, dtypes, shapes,
``grad_fn`` names and — after a backward pass with one random upstream gradient — the
gradient of every float input. References are always torch or finite differences.
"""
from __future__ import annotations

import re
import warnings

import numpy as np
import torch

import symgrad as sg

__all__ = ["TOL", "tol", "to_np", "assert_close", "check", "make_inputs", "rng",
           "sg_dtype", "th_dtype", "grad_fn_name", "check_vjp_fd", "DTYPES", "run_snippet",
           "same_as_torch"]

DTYPES = (np.float32, np.float64)

# relative / absolute tolerances by dtype; never loosened to make a test pass
TOL = {
    np.dtype(np.float32): dict(rtol=1e-5, atol=1e-6),
    np.dtype(np.float64): dict(rtol=1e-10, atol=1e-12),
}


def tol(dtype) -> dict:
    dt = np.dtype(dtype)
    return TOL.get(dt, dict(rtol=0, atol=0))


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def sg_dtype(np_dtype):
    return sg.dtypes.from_numpy_dtype(np_dtype)


def th_dtype(np_dtype):
    return getattr(torch, np.dtype(np_dtype).name if np.dtype(np_dtype) != np.bool_ else "bool")


def to_np(t) -> np.ndarray:
    """A numpy copy of a symgrad or torch tensor (or a Python scalar)."""
    if isinstance(t, torch.Tensor):
        return t.detach().numpy().copy()
    if isinstance(t, sg.Tensor):
        return np.array(t.detach().numpy(), copy=True)
    return np.asarray(t)


def _dtype_name(t) -> str:
    return str(t.dtype).replace("torch.", "")


def grad_fn_name(t):
    fn = t.grad_fn
    return None if fn is None else type(fn).__name__


def assert_close(s, t, *, rtol=None, atol=None, check_dtype=True, what="value"):
    """symgrad result `s` equals torch result `t` (tensor, tuple of tensors or scalar)."""
    if isinstance(t, (tuple, list)):
        assert isinstance(s, (tuple, list)), f"{what}: expected a sequence, got {type(s)}"
        assert len(s) == len(t), f"{what}: length {len(s)} != {len(t)}"
        for i, (a, b) in enumerate(zip(s, t)):
            assert_close(a, b, rtol=rtol, atol=atol, check_dtype=check_dtype, what=f"{what}[{i}]")
        return
    if isinstance(t, torch.Tensor):
        assert isinstance(s, sg.Tensor), f"{what}: expected a symgrad Tensor, got {type(s)}"
        assert tuple(s.shape) == tuple(t.shape), \
            f"{what}: shape {tuple(s.shape)} != {tuple(t.shape)}"
        if check_dtype:
            assert _dtype_name(s) == _dtype_name(t), f"{what}: dtype {s.dtype} != {t.dtype}"
        a, b = to_np(s), to_np(t)
    else:
        numbers = (int, float)
        assert type(s) is type(t) or (isinstance(s, numbers) and isinstance(t, numbers)), \
            f"{what}: type {type(s)} != {type(t)}"
        a, b = np.asarray(s), np.asarray(t)
    if b.dtype.kind in "biu" or b.dtype == np.bool_:
        np.testing.assert_array_equal(a, b, err_msg=what)
        return
    d = tol(b.dtype) if b.dtype.kind == "f" else dict(rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(a, b, rtol=d["rtol"] if rtol is None else rtol,
                               atol=d["atol"] if atol is None else atol, equal_nan=True,
                               err_msg=what)


def make_inputs(arrays, requires_grad=None):
    """(symgrad tensors, torch tensors) built from the same numpy arrays; float arrays
    require grad unless `requires_grad` says otherwise. Non-arrays pass through."""
    s_in, t_in = [], []
    for i, a in enumerate(arrays):
        if not isinstance(a, np.ndarray):
            s_in.append(a)
            t_in.append(a)
            continue
        rg = a.dtype.kind == "f" if requires_grad is None else bool(requires_grad[i])
        s_in.append(sg.tensor(a.copy(), requires_grad=rg))
        t_in.append(torch.tensor(a.copy(), requires_grad=rg))
    return s_in, t_in


def _flat_outputs(out):
    if isinstance(out, (tuple, list)):
        res = []
        for o in out:
            res.extend(_flat_outputs(o))
        return res
    return [out]


def check(fn, *arrays, requires_grad=None, fn_torch=None, grad=True, names=True, seed=0,
          rtol=None, atol=None, grad_rtol=None, grad_atol=None, check_dtype=True):
    """Run `fn(m, *tensors)` with m=symgrad and m=torch; compare outputs, grad_fn names
    and gradients w.r.t. every input that requires grad (one random upstream gradient
    per differentiable output). Returns (symgrad outputs, torch outputs)."""
    s_in, t_in = make_inputs(arrays, requires_grad)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t_out = (fn_torch or fn)(torch, *t_in)
        s_out = fn(sg, *s_in)
    assert_close(s_out, t_out, rtol=rtol, atol=atol, check_dtype=check_dtype, what="forward")
    s_flat, t_flat = _flat_outputs(s_out), _flat_outputs(t_out)
    if names:
        for i, (a, b) in enumerate(zip(s_flat, t_flat)):
            if isinstance(b, torch.Tensor):
                assert grad_fn_name(a) == grad_fn_name(b), \
                    f"grad_fn of output {i}: {grad_fn_name(a)} != {grad_fn_name(b)}"
    if not grad:
        return s_out, t_out
    r = rng(seed + 1)
    s_roots, s_seeds, t_roots, t_seeds = [], [], [], []
    for a, b in zip(s_flat, t_flat):
        if isinstance(b, torch.Tensor) and b.requires_grad:
            assert a.requires_grad, "symgrad output does not require grad but torch's does"
            u = r.standard_normal(tuple(b.shape)).astype(to_np(b).dtype)
            s_roots.append(a)
            s_seeds.append(sg.tensor(u))
            t_roots.append(b)
            t_seeds.append(torch.tensor(u))
        elif isinstance(b, torch.Tensor):
            assert not (isinstance(a, sg.Tensor) and a.requires_grad), \
                "symgrad output requires grad but torch's does not"
    leaves = [(a, b) for a, b in zip(s_in, t_in)
              if isinstance(b, torch.Tensor) and b.requires_grad]
    if not t_roots or not leaves:
        return s_out, t_out
    torch.autograd.backward(t_roots, t_seeds)
    sg.autograd.backward(s_roots, s_seeds)
    for i, (a, b) in enumerate(leaves):
        if b.grad is None:
            assert a.grad is None or not np.any(to_np(a.grad)), f"grad {i}: torch has none"
            continue
        assert a.grad is not None, f"grad of input {i} is None, torch has one"
        assert_close(a.grad, b.grad, rtol=grad_rtol, atol=grad_atol, what=f"grad of input {i}")
    return s_out, t_out


def check_vjp_fd(f, xs, *, eps=1e-6, seed=0, rtol=1e-6, atol=1e-8):
    """HIPS autograd's check_vjp: for random u, v, compare <u, J v> (J v by central
    differences in float64) with <Jᵀ u, v> (symgrad's VJP). `f` maps float64 symgrad
    tensors to one tensor; `xs` are float64 numpy arrays."""
    r = rng(seed)
    xs = [np.asarray(x, dtype=np.float64) for x in xs]
    vs = [r.standard_normal(x.shape) for x in xs]
    with sg.no_grad():
        y0 = f(*[sg.tensor(x) for x in xs])
    u = r.standard_normal(tuple(y0.shape))
    # <Jᵀ u, v> by symgrad's reverse mode
    ts = [sg.tensor(x, requires_grad=True) for x in xs]
    y = f(*ts)
    gs = sg.autograd.grad([y], ts, [sg.tensor(u)], allow_unused=True)
    lhs = sum(float(np.sum(to_np(g) * v)) for g, v in zip(gs, vs) if g is not None)
    # <u, J v> by central differences
    with sg.no_grad():
        yp = to_np(f(*[sg.tensor(x + eps * v) for x, v in zip(xs, vs)]))
        ym = to_np(f(*[sg.tensor(x - eps * v) for x, v in zip(xs, vs)]))
    jv = (yp - ym) / (2 * eps)
    rhs = float(np.sum(u * jv))
    scale = max(1.0, abs(lhs), abs(rhs))
    assert abs(lhs - rhs) <= atol + rtol * scale, f"<Jᵀu, v> = {lhs} but <u, Jv> = {rhs}"


# ---- snippets run with both libraries -----------------------------------------------------
_ADDR = re.compile(r"0x[0-9a-fA-F]+")


def _masked(text: str) -> str:
    return _ADDR.sub("0xADDR", text)


def _normal(v):
    """A snippet's result in comparable form: a tensor as (masked repr, values, dtype,
    requires_grad, grad_fn class name), strings with addresses masked, containers
    element by element."""
    if isinstance(v, (torch.Tensor, sg.Tensor)):
        return ("tensor", _masked(repr(v)), to_np(v), _dtype_name(v), v.requires_grad,
                grad_fn_name(v))
    if isinstance(v, str):
        return _masked(v)
    if isinstance(v, (tuple, list)):
        return type(v)(_normal(x) for x in v)
    if isinstance(v, dict):
        return {k: _normal(x) for k, x in v.items()}
    if v is None or isinstance(v, (bool, int, float)):
        return v
    return _masked(repr(v))          # graph nodes, handles, classes: by their repr


def run_snippet(snippet, m):
    """(value, (error type, masked message) or None, [(warning category, masked message)])
    of ``snippet(m)``."""
    value, error = None, None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            value = _normal(snippet(m))
        except Exception as e:  # noqa: BLE001 -- compared with torch's
            error = (type(e).__name__, _masked(str(e)))
    return value, error, [(w.category.__name__, _masked(str(w.message))) for w in caught]


def _same(a, b, rtol, atol, what):
    if isinstance(b, tuple) and b and b[0] == "tensor":
        assert isinstance(a, tuple) and a and a[0] == "tensor", f"{what}: {a!r} is no tensor"
        assert a[1] == b[1], f"{what}: repr\n  symgrad: {a[1]}\n  torch:   {b[1]}"
        assert a[3:] == b[3:], f"{what}: (dtype, requires_grad, grad_fn) {a[3:]} != {b[3:]}"
        np.testing.assert_allclose(a[2], b[2], rtol=rtol, atol=atol, err_msg=what)
    elif isinstance(b, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b), f"{what}: {a!r} != {b!r}"
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, rtol, atol, f"{what}[{i}]")
    elif isinstance(b, dict):
        assert isinstance(a, dict) and a.keys() == b.keys(), f"{what}: {a!r} != {b!r}"
        for k in b:
            _same(a[k], b[k], rtol, atol, f"{what}[{k!r}]")
    elif isinstance(b, float) and isinstance(a, float):
        assert abs(a - b) <= atol + rtol * abs(b), f"{what}: {a} != {b}"
    else:
        assert a == b, f"{what}:\n  symgrad: {a!r}\n  torch:   {b!r}"


def same_as_torch(snippet, *, rtol=1e-6, atol=1e-7, warnings_too=True):
    """Run ``snippet(m)`` with m = torch and m = symgrad: the same values (tensors: same
    repr, dtype, requires_grad, grad_fn class and values within rtol / atol), the same
    error (type and text) and the same warnings. Returns torch's value."""
    want = run_snippet(snippet, torch)
    got = run_snippet(snippet, sg)
    assert got[1] == want[1], f"error\n  symgrad: {got[1]}\n  torch:   {want[1]}"
    _same(got[0], want[0], rtol, atol, "value")
    if warnings_too:
        assert got[2] == want[2], f"warnings\n  symgrad: {got[2]}\n  torch:   {want[2]}"
    return want[0]
