"""The compile path never imports sympy: trace, autodiff, rewrites, fusion, lowering,
dynamic sizes and cache keys run on symgrad's own formula type (sympy is for inspection
only). Each compile kind runs on its first call in a fresh process (disk cache off), which
prints its results and whether sympy got loaded; the results are checked against PyTorch."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

PRELUDE = """
import json, sys
import numpy as np
import symgrad
rng = np.random.default_rng(0)
w = rng.standard_normal((4, 3)); x = rng.standard_normal((6, 4)); v = rng.standard_normal(5)
def f(w, x):
    h = x @ w
    return (h.tanh() * h.sigmoid() / (1 + h * h) + (h - 0.5).relu() * 3.0).sum()
def out(*arrays):
    print(json.dumps({"sympy": "sympy" in sys.modules,
                      "values": [np.asarray(a, dtype=np.float64).tolist() for a in arrays]}))
"""

CASES = {
    "value_and_grad": "val, g = symgrad.value_and_grad(f)(w, x); out(val, g)",
    "grad": "out(symgrad.grad(f, argnums=1)(w, x))",
    "jacobian": "out(symgrad.jacobian(lambda v: v.sin() * v.exp() / (1 + v * v))(v))",
    "hessian": "out(symgrad.hessian(lambda v: (v.tanh() * v.exp() + v.sigmoid() / v.cosh()).sum())(v))",
    "vmap": "out(symgrad.jit(symgrad.vmap(lambda r: (r.exp() * r).sum() / (1 + r.abs().sum())))(x))",
    "scan": """
def rnn(w, x):
    def step(hc, xt):
        hc = (xt @ w + hc.sum() * 0.1).tanh()
        return hc, hc.sum()
    h, ys = symgrad.scan(step, symgrad.zeros(3, dtype=symgrad.float64), x)
    return h.sum() + (ys * ys).sum()
val, g = symgrad.value_and_grad(rnn)(w, x); out(val, g)""",
    "fori_loop": """
def loop(v):
    return symgrad.fori_loop(0, 4, lambda i, c: (c * 0.9).sin() + c.exp() * 0.01, v).sum()
val, g = symgrad.value_and_grad(loop)(v); out(val, g)""",
    "dynamic": """
vg = symgrad.value_and_grad(f)
res = []
for n in (6, 9, 13):
    xn = np.resize(x, (n, 4)) * (1 + n / 10)
    val, g = vg(w, xn); res += [val, g]
out(*res)""",
    "module": """
import symgrad.nn as nn
symgrad.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1), nn.Sigmoid())
cm = symgrad.compile(model)
xt = symgrad.tensor(x, dtype=symgrad.float32)
loss = (cm(xt) ** 2).mean()
loss.backward()
params = [p.detach().numpy() for p in model.parameters()]
grads = [p.grad.numpy() for p in model.parameters()]
out(loss.detach().numpy(), *params, *grads)""",
    "numpy_backend": "val, g = symgrad.value_and_grad(f, backend='numpy')(w, x); out(val, g)",
}


def _run(code: str, **env_vars) -> dict:
    env = {**os.environ, "SYMGRAD_DISK_CACHE": "0", **env_vars}
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    res = subprocess.run([sys.executable, "-c", PRELUDE + code], capture_output=True,
                         text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


def _inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((4, 3)), rng.standard_normal((6, 4)), rng.standard_normal(5))


def _f(w, x):
    h = x @ w
    return (h.tanh() * h.sigmoid() / (1 + h * h) + (h - 0.5).relu() * 3.0).sum()


def _value_and_grad(fn, *args, argnum=0):
    ts = [torch.tensor(a, requires_grad=(i == argnum)) for i, a in enumerate(args)]
    val = fn(*ts)
    val.backward()
    return [val.detach().numpy(), ts[argnum].grad.numpy()]


def _reference(kind: str, got: list):
    w, x, v = _inputs()
    if kind in ("value_and_grad", "numpy_backend"):
        return _value_and_grad(_f, w, x)
    if kind == "grad":
        return _value_and_grad(_f, w, x, argnum=1)[1:]
    if kind == "jacobian":
        return [torch.autograd.functional.jacobian(
            lambda v: v.sin() * v.exp() / (1 + v * v), torch.tensor(v)).numpy()]
    if kind == "hessian":
        return [torch.autograd.functional.hessian(
            lambda v: (v.tanh() * v.exp() + v.sigmoid() / v.cosh()).sum(),
            torch.tensor(v)).numpy()]
    if kind == "vmap":
        return [torch.vmap(lambda r: (r.exp() * r).sum() / (1 + r.abs().sum()))(
            torch.tensor(x)).numpy()]
    if kind == "scan":
        def rnn(w, x):
            hc = torch.zeros(3, dtype=torch.float64)
            total = 0
            for xt in x:
                hc = (xt @ w + hc.sum() * 0.1).tanh()
                total = total + hc.sum() ** 2
            return hc.sum() + total
        return _value_and_grad(rnn, w, x)
    if kind == "fori_loop":
        def loop(v):
            for _ in range(4):
                v = (v * 0.9).sin() + v.exp() * 0.01
            return v.sum()
        return _value_and_grad(loop, v)
    if kind == "dynamic":
        res = []
        for n in (6, 9, 13):
            res += _value_and_grad(_f, w, np.resize(x, (n, 4)) * (1 + n / 10))
        return res
    if kind == "module":
        # the same model in torch, with the weights the compiled model used
        params = [torch.tensor(np.asarray(p), requires_grad=True) for p in got[1:5]]
        # (in float64: the compiled model's float32 results are checked to float32's tolerance)
        w1, b1, w2, b2 = params
        xt = torch.tensor(x, dtype=torch.float32).double()
        y = torch.sigmoid(torch.tanh(xt @ w1.T + b1) @ w2.T + b2)
        loss = (y ** 2).mean()
        loss.backward()
        return [loss.detach().numpy(), *[p.detach().numpy() for p in params],
                *[p.grad.numpy() for p in params]]
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", sorted(CASES))
def test_first_compiled_call_does_not_import_sympy(kind):
    got = _run(CASES[kind])
    assert got["sympy"] is False, f"{kind}: the compile path imported sympy"
    want = _reference(kind, got["values"])
    rtol = 1e-5 if kind == "module" else 1e-10     # the module computes in float32
    assert len(got["values"]) == len(want)
    for g, r in zip(got["values"], want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(r, dtype=np.float64),
                                   rtol=rtol, atol=rtol * 1e-2)


def test_disk_cache_miss_and_hit_do_not_import_sympy(tmp_path):
    """Keys (formula fingerprints, the sympy version read from metadata) and a hit."""
    want = _reference("value_and_grad", [])
    for _ in range(2):                      # a miss that stores, then a hit
        got = _run(CASES["value_and_grad"], SYMGRAD_DISK_CACHE="1",
                   SYMGRAD_CACHE_DIR=str(tmp_path))
        assert got["sympy"] is False
        for g, r in zip(got["values"], want):
            np.testing.assert_allclose(np.asarray(g), r, rtol=1e-10, atol=1e-12)
    assert any(tmp_path.rglob("*"))


def test_inspection_converts_to_sympy():
    """formulas() / symbolic() still give sympy expressions (sympy imported there)."""
    code = """
lo = symgrad.value_and_grad(f).lower(w, x)
forms = lo.formulas()
import sympy
print(json.dumps({"n": len(forms), "sympy": all(isinstance(e, sympy.Expr) for e in forms.values()),
                  "latex": all(isinstance(s, str) for s in lo.formulas(latex=True).values())}))"""
    got = _run(code)
    assert got["n"] >= 1 and got["sympy"] and got["latex"]
