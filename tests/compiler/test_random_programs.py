"""Random programs built from the registered primitives: compiled == eager == torch, and
the optimised graph == the unoptimised one (values and gradients)."""
import numpy as np
import torch
from hypothesis import given, settings, strategies as st

import symgrad
from symgrad.graph.interpret import evaluate

# (name, arity, fn(lib, a[, b])) — domains kept valid for any real input
UNARY = [
    ("tanh", lambda L, a: a.tanh()), ("sin", lambda L, a: a.sin()),
    ("cos", lambda L, a: a.cos()), ("sigmoid", lambda L, a: a.sigmoid()),
    ("softplus", lambda L, a: L.nn.functional.softplus(a)),
    ("exp_tame", lambda L, a: (a.tanh() * 2).exp()),
    ("log_pos", lambda L, a: (1 + a * a).log()), ("sqrt_pos", lambda L, a: (1 + a * a).sqrt()),
    ("neg", lambda L, a: -a), ("square", lambda L, a: a ** 2), ("scale", lambda L, a: a * 0.7 + 0.1),
    ("abs", lambda L, a: a.abs()), ("clamp", lambda L, a: a.clamp(-0.5, 0.8)),
    ("log1p_pos", lambda L, a: (a * a).log1p()), ("expm1_tame", lambda L, a: a.tanh().expm1()),
]
BINARY = [
    ("add", lambda L, a, b: a + b), ("sub", lambda L, a, b: a - b),
    ("mul", lambda L, a, b: a * b), ("div_safe", lambda L, a, b: a / (1 + b * b)),
    ("maximum", lambda L, a, b: L.maximum(a, b)), ("minimum", lambda L, a, b: L.minimum(a, b)),
    ("where", lambda L, a, b: L.where(a > b, a * 2, b)),
    ("pow_pos", lambda L, a, b: (1 + a * a) ** b.tanh()),
]
REDUCE = [
    ("sum0", lambda L, a: a.sum(0, keepdim=True)), ("mean1", lambda L, a: a.mean(1, keepdim=True)),
    ("amax1", lambda L, a: a.amax(1, keepdim=True)),
    ("lse1", lambda L, a: L.logsumexp(a, 1, keepdim=True)),
    ("softmax1", lambda L, a: L.softmax(a, 1)), ("matmul", lambda L, a: a @ a.t() @ a),
    ("transpose", lambda L, a: a.t().t()), ("flip_index", lambda L, a: a[:, list(range(a.shape[1] - 1, -1, -1))]),
    ("slice", lambda L, a: L.cat([a[:, 1:], a[:, :1]], 1)),
]

op = st.one_of(
    st.tuples(st.just("u"), st.integers(0, len(UNARY) - 1), st.integers(0, 9)),
    st.tuples(st.just("b"), st.integers(0, len(BINARY) - 1), st.integers(0, 9)),
    st.tuples(st.just("r"), st.integers(0, len(REDUCE) - 1), st.integers(0, 9)),
)


def run(program, L, x, y):
    vals = [x, y]
    for kind, k, pick in program:
        a = vals[pick % len(vals)]
        if kind == "u":
            vals.append(UNARY[k][1](L, a))
        elif kind == "b":
            vals.append(BINARY[k][1](L, a, vals[(pick * 7 + 1) % len(vals)]))
        else:
            vals.append(REDUCE[k][1](L, a))
    return (vals[-1] * vals[-1]).sum() + vals[-1].mean()


@settings(max_examples=40, deadline=None)
@given(program=st.lists(op, min_size=1, max_size=7), seed=st.integers(0, 2 ** 16))
def test_compiled_eager_torch_agree(program, seed):
    rng = np.random.default_rng(seed)
    x, y = rng.standard_normal((3, 4)), rng.standard_normal((1, 4))
    # torch
    xt = torch.tensor(x, requires_grad=True)
    yt = torch.tensor(y, requires_grad=True)
    tv = run(program, torch, xt, yt)
    tgx, tgy = torch.autograd.grad(tv, [xt, yt], allow_unused=True, materialize_grads=True)
    # eager symgrad
    xs = symgrad.tensor(x, requires_grad=True)
    ys = symgrad.tensor(y, requires_grad=True)
    ev = run(program, symgrad, xs, ys)
    egx, egy = symgrad.autograd.grad(ev, [xs, ys], allow_unused=True, materialize_grads=True)
    # compiled, both backends
    for backend in ("numpy", "llvm"):
        f = symgrad.value_and_grad(lambda a, b: run(program, symgrad, a, b), argnums=(0, 1),
                                   backend=backend)
        cv, (cgx, cgy) = f(x, y)
        for got in ((cv, cgx, cgy), (ev.item(), egx.numpy(), egy.numpy())):
            for g, w in zip(got, (tv.item(), tgx.numpy(), tgy.numpy())):
                np.testing.assert_allclose(g, w, rtol=1e-8, atol=1e-9)


@settings(max_examples=30, deadline=None)
@given(program=st.lists(op, min_size=1, max_size=7), seed=st.integers(0, 2 ** 16))
def test_optimised_equals_unoptimised(program, seed):
    rng = np.random.default_rng(seed)
    x, y = rng.standard_normal((3, 4)), rng.standard_normal((1, 4))
    lo = symgrad.value_and_grad(lambda a, b: run(program, symgrad, a, b), argnums=(0, 1),
                                backend="numpy").lower(x, y)
    raw = evaluate(lo.raw.outputs, dict(zip(lo.raw.inputs, (x, y))))
    opt = evaluate(lo.optimized.outputs, dict(zip(lo.optimized.inputs, (x, y))))
    for r, o in zip(raw, opt):
        np.testing.assert_allclose(o, r, rtol=1e-10, atol=1e-12)
