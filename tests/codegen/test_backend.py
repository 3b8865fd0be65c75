"""The LLVM backend against torch and the numpy backend (the reference semantics).

Every case runs through ``symgrad.compile`` / ``value_and_grad`` with ``backend="llvm"``;
references are torch (autograd, float64 and float32) or the numpy rules, never numbers
the LLVM backend produced.  Tolerances are set by dtype only.
"""
from __future__ import annotations

import math
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import symgrad
from symgrad.dispatch import bind
from symgrad.graph.primitives import PRIMITIVES
from codegen import target
from machines import machine, foreign_machine  # noqa: E402,F401  (fixtures)

TOL = {np.dtype("float64"): dict(rtol=1e-9, atol=1e-11),
       np.dtype("float32"): dict(rtol=1e-4, atol=1e-5)}
RNG = np.random.default_rng(1234)


def P(name, *operands, **attrs):
    """A primitive applied inside a traced function."""
    return bind(PRIMITIVES[name], *operands, **attrs)


def _nnf(lib):
    return lib.nn.functional


def _flat(result):
    """Output arrays of a native entry (a bare array, a tuple, or nested tuples)."""
    if isinstance(result, tuple):
        return [a for r in result for a in _flat(r)]
    return [result]


def _close(got, want, dtype):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), **TOL[np.dtype(dtype)])


def _torch_value_and_grad(fn, args, argnums):
    ts = [torch.tensor(a, requires_grad=(i in argnums and a.dtype.kind == "f"))
          for i, a in enumerate(args)]
    out = fn(torch, *ts)
    grads = torch.autograd.grad(out, [ts[i] for i in argnums], allow_unused=True)
    return out.detach().numpy(), [g.numpy() if g is not None else np.zeros_like(args[i])
                                  for g, i in zip(grads, argnums)]


# ---- programs written against the torch API: value and gradient vs torch ----------------
def chain(lib, x):
    y = x
    for _ in range(3):
        y = y.tanh() * 0.5 + y.sin() * y - (-y * y).exp()
    return y.sum()


def transcendental(lib, x):
    return ((x.abs() + 1).log() + x.sigmoid() * x.cos() + _nnf(lib).softplus(x)
            + (x * x + 1).sqrt() + (x * 0.3).exp().pow(1.5) + x.tan().clamp(-3, 3)
            + (x * 0.1).expm1() + (x.abs()).log1p()).mean()


def piecewise(lib, x):
    return (lib.where(x > 0, x.relu() * 2, x * x) + x.clamp(-0.5, 0.7)
            + x.abs() * (x > 0.3)).sum()


def broadcasting(lib, a, b, c):
    return ((a + b) * c - a / (1 + b * b) + (a * c).exp() / 10).sum()


def reductions(lib, x):
    total = 0
    for ax in (0, 1, 2):
        for keep in (False, True):
            total = total + (x.sum(ax, keepdim=keep).sin().sum() + x.mean(ax, keepdim=keep).exp().sum()
                             + x.amax(ax, keepdim=keep).tanh().sum() + x.amin(ax, keepdim=keep).sum()
                             + x.prod(ax, keepdim=keep).sum())
    return total + x.sum() + x.mean() + x.amax() + x.amin() + x.sum((0, 2)).pow(2).sum()


def softmax_xent(lib, x, labels):
    return _nnf(lib).cross_entropy(x, labels) + lib.logsumexp(x, 1).sum() \
        + _nnf(lib).log_softmax(x, dim=0).mean()


def layout(lib, x):
    y = x.permute(2, 0, 1).reshape(5, 12)
    z = x[1:, ::2, -1] * x[0, 1:3, 2:4]
    w = lib.cat([x[:, :2, :], x[:, 1:, :] * 2], 1)
    s = lib.stack([x[0], x[1]], 0)
    return (y.tanh().sum() + z.sum() + w.sin().sum() + s.exp().sum() + x.transpose(0, 2)[1:].sum()
            + x.unsqueeze(1).expand(3, 2, 4, 5).sum())


def logistic(lib, w, b, X, y):
    return _nnf(lib).binary_cross_entropy_with_logits(X @ w + b, y)


def mlp(lib, W1, b1, W2, b2, X, t):
    return _nnf(lib).cross_entropy((X @ W1 + b1).tanh() @ W2 + b2, t)


def matmuls(lib, a, b, v, c, d):
    return ((a @ b).tanh().sum() + (a @ v).sum() + (v @ v) + (b.transpose(0, 1) @ v[:3]).sum()
            + (c @ d).sum() + (c @ b[:, :2].transpose(0, 1)[:, :3].transpose(0, 1)).sum()
            + (v[:3] @ b).sum())


def big_matmul(lib, a, b):
    return (a @ b).sin().sum() + (a.transpose(0, 1) @ a).sum()


def runtime_index(lib, x, i):
    return (x[i] * 2).sum() + x[:, i].exp().sum()


def _r(*shape):
    return lambda dt: (RNG.standard_normal(shape)).astype(dt)


TORCH_CASES = {
    "chain": (chain, lambda dt: (RNG.uniform(-2, 2, 1000).astype(dt),), (0,)),
    "transcendental": (transcendental, lambda dt: (RNG.uniform(-1, 1, 300).astype(dt),), (0,)),
    "piecewise": (piecewise, lambda dt: (RNG.standard_normal(257).astype(dt),), (0,)),
    "broadcasting": (broadcasting, lambda dt: (_r(4, 1, 3)(dt), _r(5, 1)(dt), _r(3)(dt)), (0, 1, 2)),
    "reductions": (reductions, lambda dt: ((RNG.standard_normal((3, 4, 5)) * 0.5).astype(dt),), (0,)),
    "softmax_xent": (softmax_xent, lambda dt: (_r(6, 7)(dt), RNG.integers(0, 7, 6)), (0,)),
    "layout": (layout, lambda dt: (_r(3, 4, 5)(dt),), (0,)),
    "logistic": (logistic, lambda dt: (_r(5)(dt), np.array(0.1, dt), _r(300, 5)(dt),
                                       (RNG.random(300) > 0.5).astype(dt)), (0, 1)),
    "mlp": (mlp, lambda dt: ((_r(12, 40)(dt) * 0.3), np.zeros(40, dt), (_r(40, 10)(dt) * 0.3),
                             np.zeros(10, dt), _r(64, 12)(dt), RNG.integers(0, 10, 64)), (0, 1, 2, 3)),
    "matmuls": (matmuls, lambda dt: (_r(4, 3)(dt), _r(3, 4)(dt), _r(3)(dt), _r(2, 4, 3)(dt),
                                     _r(2, 3, 5)(dt)), (0, 1, 2, 3, 4)),
    "big_matmul": (big_matmul, lambda dt: (_r(40, 50)(dt) * 0.2, _r(50, 60)(dt) * 0.2), (0, 1)),
}


@pytest.mark.usefixtures("machine")
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", sorted(TORCH_CASES))
def test_value_and_grad_vs_torch(case, dtype):
    fn, make, argnums = TORCH_CASES[case]
    args = make(np.dtype(dtype))
    vg = symgrad.value_and_grad(lambda *a: fn(symgrad, *a),
                                argnums=argnums if len(argnums) > 1 else argnums[0], backend="llvm")
    value, grads = vg(*args)
    grads = grads if isinstance(grads, tuple) else (grads,)
    want_value, want_grads = _torch_value_and_grad(fn, args, argnums)
    _close(value, want_value, dtype)
    for g, w in zip(grads, want_grads):
        _close(g, w, dtype)


@pytest.mark.usefixtures("machine")
def test_runtime_int64_indices_vs_torch():
    x, i = RNG.standard_normal((5, 6)), np.array([4, 0, -1, 2, 2])
    vg = symgrad.value_and_grad(lambda x, i: runtime_index(symgrad, x, i), backend="llvm")
    value, grad = vg(x, i)
    want_value, (want_grad,) = _torch_value_and_grad(runtime_index, (x, i), (0,))
    _close(value, want_value, "float64")
    _close(grad, want_grad, "float64")
    value2, _ = vg(x, np.array([1, 1, 1, 1, 1]))          # same code, new index values
    _close(value2, _torch_value_and_grad(runtime_index, (x, np.array([1] * 5)), (0,))[0], "float64")


# ---- primitive programs: LLVM vs the numpy backend (numpy rules) ---------------------------
def _prims():
    i64 = lambda *v: np.array(v, dtype=np.int64)
    x34 = RNG.standard_normal((3, 4))
    return {
        "gather": (lambda x, i: P("gather", x, i, axis=1), (x34, i64([0, 3], [1, 1], [-1, 2]))),
        "gather_axis0": (lambda x, i: P("gather", x, i, axis=0), (x34, i64([2, 0, 1, 1]).reshape(1, 4))),
        "take_2d_index": (lambda x, i: P("take", x, i, axis=1), (x34, i64([0, 3, 2], [1, -4, 0]))),
        "gather_scatter": (lambda g, i: P("gather_scatter", g, i, axis=1, size=5),
                           (RNG.standard_normal((3, 2)), i64([0, 4], [4, 4], [-1, 0]))),
        "scatter_add": (lambda g, i: P("scatter_add", g, i, axis=0, size=4),
                        (RNG.standard_normal((5, 3)), i64(0, 3, 3, -1, 2))),
        "index_put": (lambda x, i, v: P("index_put", x, i, v),
                      (RNG.standard_normal(6), i64(1, 5, -1, 1), RNG.standard_normal(4))),
        "cumsum": (lambda x: P("cumsum", x, axis=1), (x34,)),
        "cumsum_f32": (lambda x: P("cumsum", x, axis=0), (x34.astype(np.float32),)),
        "argmax_nan": (lambda x: (P("argmax", x, axis=1, keepdim=False), P("argmin", x, axis=0, keepdim=True)),
                       (np.array([[1.0, 3.0, 3.0, 0.0], [2.0, np.nan, 5.0, np.nan], [-1, -2, -3, -2]]),)),
        "flip": (lambda x: P("flip", x, axes=(0, 1)) * x, (x34,)),
        "pad_step2": (lambda x: P("pad_slice", x, shape=(7, 4), starts=(1, 0), stops=(7, 4), steps=(2, 1)).exp(),
                      (x34,)),
        "pad_then_add": (lambda x: P("pad_slice", x, shape=(5, 4), starts=(2, 0), stops=(5, 4), steps=(1, 1))
                         + P("pad_slice", x * 2, shape=(5, 4), starts=(0, 0), stops=(3, 4), steps=(1, 1)),
                         (x34,)),
        "cat_axis1": (lambda x, y: P("cat", x, y.exp(), x, axis=1), (x34, RNG.standard_normal((3, 2)))),
        "iota_full": (lambda x: x * P("iota", shape=(3, 4), axis=1, dtype=symgrad.float64)
                      + P("full", shape=(3, 4), value=2.5, dtype=symgrad.float64), (x34,)),
        "casts": (lambda x: (P("cast", x * 3, dtype=symgrad.int64), P("cast", x, dtype=symgrad.bool),
                             P("cast", x, dtype=symgrad.float32)),
                  (np.array([[-1.7, 0.0, 2.5, np.nan]]),)),
        "int64_ops": (lambda a, b: (a * b + a - 3, (a > b), (a == b) | (a < 0)),
                      (i64(-3, 0, 5, 7), i64(2, 0, 5, -1))),
        "bool_reduce": (lambda m: (P("amax", m, axes=(1,), keepdim=False), P("amin", m, axes=(0,), keepdim=False),
                                   P("sum", P("cast", m, dtype=symgrad.int64), axes=(0, 1), keepdim=False)),
                        (np.array([[True, False], [False, False], [True, True]]),)),
        "select_view_output": (lambda x: (P("select", x, axis=1, index=-1), x.transpose(0, 1), x),
                               (x34,)),
        "duplicate_outputs": (lambda x: (x.sum(), x.sum(), x * 2, x * 2), (x34,)),
        "batched_broadcast_matmul": (lambda a, b: (a @ b, b.transpose(0, 1) @ a[0].transpose(0, 1)),
                                     (RNG.standard_normal((2, 3, 4)), RNG.standard_normal((4, 5)))),
        "int_matmul": (lambda a, b: a @ b, (i64([1, 2], [3, 4], [5, 6]), i64([1, 0, 2], [0, 1, -1]))),
        "empty_sum": (lambda x: (x.sum(), x.sum(0), x * 2), (np.zeros((0, 3)),)),
    }


PRIMS = _prims()


@pytest.mark.usefixtures("machine")
@pytest.mark.parametrize("case", sorted(PRIMS))
def test_primitives_vs_numpy_backend(case):
    fn, args = PRIMS[case]
    got = symgrad.compile(fn, backend="llvm")(*args)
    want = symgrad.compile(fn, backend="numpy")(*args)
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        if g.dtype.kind == "f":
            np.testing.assert_allclose(g, w, **TOL[g.dtype], equal_nan=True)
        else:
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("index, ok", [([0, 2], True), ([-3, -1], True), ([0, 3], False),
                                       ([-4], False), ([1 << 40], False)])
@pytest.mark.usefixtures("machine")
def test_index_out_of_range_raises_index_error(index, ok):
    f = symgrad.compile(lambda x, i: P("take", x, i, axis=0) * 2, backend="llvm")
    x, i = np.arange(3.0), np.array(index, dtype=np.int64)
    exe = f.lower(x, i).compile()
    entry = exe.native_entry()
    if ok:
        np.testing.assert_array_equal(f(x, i), np.take(x, i) * 2)
        np.testing.assert_array_equal(_flat(entry(x, i))[0], np.take(x, i) * 2)
        return
    with pytest.raises(IndexError) as numpy_error:
        np.take(x, i)
    for call in (lambda: f(x, i), lambda: exe([x, i]), lambda: entry(x, i)):
        with pytest.raises(IndexError) as error:
            call()
        # numpy's message in PyTorch's words ("dimension", not "axis")
        assert str(error.value) == str(numpy_error.value).replace(" axis ", " dimension ")


def test_hybrid_program_names_its_numpy_steps():
    x = RNG.standard_normal((3, 4))
    vg = symgrad.value_and_grad(lambda x: x.prod(1).sum(), backend="llvm")
    value, grad = vg(x)
    want_value, (want_grad,) = _torch_value_and_grad(lambda lib, x: x.prod(1).sum(), (x,), (0,))
    _close(value, want_value, "float64")
    _close(grad, want_grad, "float64")
    text = vg.lower(x).compile().as_text("program")
    assert "runs through numpy: prod_others" in text


def test_benchmark_workloads_are_fully_native():
    import bench.workloads as W
    from codegen.plan import build_plan
    for family, sizes in [("seed", {}), ("rosenbrock", {"N": 100}), ("logreg", {"N": 50, "D": 5}),
                          ("mlp", {"B": 4, "D": 20, "H": 8, "C": 3}), ("chain", {"N": 64}),
                          ("matmul-tanh", {"N": 12}), ("attention", {"T": 6, "d": 3}),
                          ("rnn", {"T": 4, "B": 3, "W": 5})]:
        fam = W.FAMILIES[family]
        arrays = fam.make_inputs(np.random.default_rng(0), np.dtype("float64"), **sizes)
        names = list(arrays)
        argnums = tuple(names.index(p) for p in fam.params)
        vg = symgrad.value_and_grad(lambda *a: fam.loss(symgrad, *a),
                                    argnums=argnums if len(argnums) > 1 else argnums[0])
        plan = build_plan(vg.lower(*arrays.values()).optimized)
        assert not plan.hybrid, (family, plan.summary())
        # called with numpy arrays, each takes the native fast path (no Python dispatcher)
        vg(*arrays.values())
        assert getattr(type(vg), "_native_for", None) is not None, family


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_benchmark_product_workloads_match_torch(dtype):
    """The compiled value and gradients of the product-bound benchmark workloads (one
    product and tanh, causal attention, an RNN) agree with torch float64 at shapes whose
    products have tails (no dimension a multiple of a vector)."""
    from dataclasses import replace
    from bench import check
    from bench.workloads import Workload, reference
    for family, sizes in [("matmul-tanh", {"N": 37}), ("attention", {"T": 19, "d": 5}),
                          ("rnn", {"T": 5, "B": 3, "W": 11})]:
        w = replace(Workload(family, dtype, tuple(sizes.items())), _cache={})
        vg = symgrad.value_and_grad(lambda *a: w.loss(symgrad, *a),
                                    argnums=tuple(range(len(w.params))), backend="llvm")
        value, grads = vg(*w.ordered())
        ref_value, ref_grads = reference(w)
        res = check.check(np.asarray(value, np.float64), [np.asarray(g, np.float64) for g in grads],
                          ref_value, ref_grads, dtype, w.params)
        assert res.ok, (family, res.describe())


# ---- inspection -------------------------------------------------------------------------------
def test_as_text_kinds():
    f = symgrad.compile(lambda x: (x.exp() * 2).sum(), backend="llvm")
    exe = f.lower(np.ones(5)).compile()
    assert "define" in exe.as_text("llvm") and "exp" in exe.as_text("llvm")
    assert "define" in exe.as_text("llvm-opt")
    assert "ret" in exe.as_text("asm")
    assert "fully native" in exe.as_text("program") and "sum" in exe.as_text("program")
    with pytest.raises(ValueError):
        exe.as_text("pdf")


def _libm_calls(ir_text):
    """Calls to libm (or to LLVM intrinsics that become libm calls).  llvm.sqrt is a
    hardware instruction and is allowed."""
    names = "exp|exp2|log|log2|log10|sin|cos|tan|tanh|pow|log1p|expm1|atan|sinh|cosh"
    pattern = rf"call [^@\n]*@\"?(?:(?:{names})f?|llvm\.(?:{names})\.[vf0-9a-z]+)\"?\("
    return re.findall(pattern, ir_text)


@pytest.mark.parametrize("dtype, bits", [("float64", 64), ("float32", 32)])
def test_large_elementwise_function_uses_the_targets_vectors(dtype, bits, machine):
    elem = "double" if bits == 64 else "float"
    f = symgrad.compile(lambda x, y: ((x.exp() + y.log()) * x.tanh() + (x * y).sigmoid()).sum()
                        + (x * y + 1).sqrt().mean(), backend="llvm")
    assert f.target == machine
    x = RNG.uniform(0.5, 2, 4096).astype(dtype)
    opt = f.lower(x, x).compile().as_text("llvm-opt")
    assert machine.loop_vector_type(elem, bits) in opt
    assert not _libm_calls(opt), _libm_calls(opt)[:5]


@pytest.mark.parametrize("dtype, bits", [("float64", 64), ("float32", 32)])
def test_masked_row_max_is_vectorised_and_exact(dtype, bits, machine):
    """``masked_fill(-inf)`` then ``amax`` over rows (causal attention's softmax): the
    max reduction runs on the target's vectors (from 256-bit vectors on; narrower
    targets are left to LLVM's cost model) and equals torch's, bit for bit: NaN
    propagates, +0 beats -0, a fully masked row is -inf."""
    elem = "double" if bits == 64 else "float"
    rng = np.random.default_rng(3)
    s = rng.standard_normal((4, 128, 128)).astype(dtype)
    s[0, 5, 77] = np.nan
    s[1, 9, :] = -0.0
    s[1, 9, 100] = 0.0
    s[2, 3, :] = -np.abs(s[2, 3, :])
    mask = np.triu(np.ones((128, 128), bool), 1)
    mask[7, :] = True
    f = symgrad.compile(lambda s, m: (s * 0.125).masked_fill(m, float("-inf"))
                        .amax(dim=-1, keepdim=True), backend="llvm")
    got = f(s, mask)
    want = (torch.from_numpy(s) * 0.125).masked_fill(torch.from_numpy(mask), float("-inf")) \
        .amax(dim=-1, keepdim=True).numpy()
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    if machine.vector_bits >= 256:      # every function that reduces does so on vectors
        opt = f.lower(s, mask).compile().as_text("llvm-opt")
        vector = f"call <{machine.lanes(bits)} x {elem}> @llvm.maximum.v{machine.lanes(bits)}f{bits}("
        reducing = [fn for fn in opt.split("\ndefine ")[1:]
                    if f"call {elem} @llvm.maximum.f{bits}(" in fn]
        assert reducing and all(vector in fn for fn in reducing)


def test_programs_for_other_machines_are_inspected_not_run(foreign_machine):
    """compile(target=...) for a machine this host cannot run: every text stage is
    there, for that machine; a call is a clear error, not a SIGILL."""
    vg = symgrad.value_and_grad(lambda x, w: ((x @ w).tanh() ** 2).sum() + x.sin().sum(),
                                target=foreign_machine.name)
    x, w = RNG.standard_normal((64, 100)), RNG.standard_normal((100, 32))
    lowered = vg.lower(x, w)
    asm = lowered.as_text("asm")
    opt = lowered.as_text("llvm-opt")
    assert f'target triple = "{foreign_machine.triple}"' in opt
    if foreign_machine.arch == "x86_64":
        assert f"{'zmm' if foreign_machine.vector_bits == 512 else 'ymm'}" in asm
    else:
        assert "xmm" not in asm and "fmla" in asm
    assert "not runnable here" in repr(lowered.compile())
    with pytest.raises(target.TargetError, match="cannot run in this process"):
        vg(x, w)


# ---- reduction accuracy -------------------------------------------------------------------------
@pytest.mark.usefixtures("machine")
def test_float64_sum_at_least_as_accurate_as_numpy_pairwise():
    rng = np.random.default_rng(7)
    x = rng.standard_normal(1_000_003) * 10.0 ** rng.uniform(-4, 4, 1_000_003)
    exact = math.fsum(x)
    scale = math.fsum(np.abs(x))
    ours = float(symgrad.compile(lambda v: v.sum(), backend="llvm")(x))
    ours_mean = float(symgrad.compile(lambda v: v.mean(), backend="llvm")(x))
    numpy_err = abs(float(np.sum(x)) - exact) / scale
    assert abs(ours - exact) / scale <= max(numpy_err, 4 * 2.0 ** -53)
    assert abs(ours_mean - exact / x.size) / (scale / x.size) <= max(numpy_err, 4 * 2.0 ** -53)


@pytest.mark.usefixtures("machine")
def test_float64_axis_sums_vs_fsum():
    x = np.random.default_rng(8).standard_normal((300, 5000)) * 1e3
    f = symgrad.compile(lambda v: (v.sum(1), v.sum(0)), backend="llvm")
    rows, cols = f(x)
    for got, slices in ((rows, x), (cols, x.T)):
        exact = np.array([math.fsum(s) for s in slices])
        np_err = np.abs(slices.sum(1) - exact)
        scale = np.array([math.fsum(np.abs(s)) for s in slices])
        assert np.all(np.abs(got - exact) <= np.maximum(np_err, 4 * 2.0 ** -53 * scale))


@pytest.mark.usefixtures("machine")
def test_float32_sums_are_correctly_rounded_vs_fsum():
    rng = np.random.default_rng(9)
    x = (rng.standard_normal(2_000_001) + 0.25).astype(np.float32)
    exact = math.fsum(x.astype(np.float64))
    ours = symgrad.compile(lambda v: v.sum(), backend="llvm")(x)
    assert ours.dtype == np.float32
    assert abs(float(ours) - exact) <= float(np.spacing(np.float32(exact)))     # <= 1 ulp
    assert abs(float(ours) - exact) <= abs(float(np.sum(x)) - exact) + float(np.spacing(np.float32(exact)))
    m = x[:2_000_000].reshape(1000, 2000)
    cols = symgrad.compile(lambda v: v.sum(0), backend="llvm")(np.ascontiguousarray(m))
    exact_cols = np.array([math.fsum(c) for c in m.astype(np.float64).T])
    assert np.all(np.abs(cols - exact_cols) <= np.spacing(np.abs(exact_cols).astype(np.float32)))


# ---- argument checking (in a subprocess that must exit cleanly) ---------------------------------
_BAD_ARGS = textwrap.dedent("""
    import numpy as np, symgrad
    vg = symgrad.value_and_grad(lambda x, y: (x * y).sum(), backend="llvm")
    x, y = np.ones((2, 3)), np.ones(3)
    exe = vg.lower(x, y).compile()
    entry = exe.native_entry()
    cases = {"dtype": np.ones((2, 3), np.float32), "int dtype": np.ones((2, 3), np.int64),
             "shape": np.ones((3, 2)), "ndim": np.ones(6), "None": None,
             "list": [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], "str": "x", "scalar": 1.0}
    for what, bad in cases.items():
        for how, call in (("exe", lambda: exe([bad, y])), ("entry", lambda: entry(bad, y))):
            try:
                call()
            except (TypeError, ValueError) as e:
                assert str(e), what
            else:
                raise SystemExit(f"{how}: {what} was accepted")
    for how, call in (("count", lambda: entry(x)), ("not a list", lambda: exe(x))):
        try:
            call()
        except TypeError:
            pass
        else:
            raise SystemExit(f"{how} was accepted")
    strided = np.ones((3, 2)).T                       # non-contiguous: copied, correct
    swapped = np.ones((2, 3)).astype(">f8")
    for arr in (strided, swapped):
        v, g = entry(arr, y)
        assert float(v) == 6.0 and (g == 1).all(), (v, g)
        v, g = exe([arr, y])
        assert float(v) == 6.0
    print("clean")
""")


def test_bad_arguments_raise_in_a_subprocess():
    r = subprocess.run([sys.executable, "-c", _BAD_ARGS], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "clean"


def test_native_entry_is_a_builtin_and_fast_path_matches():
    vg = symgrad.value_and_grad(lambda x: (3 * (x + 2) ** 2).mean(), backend="llvm")
    exe = vg.lower(np.ones((2, 2))).compile()
    entry = exe.native_entry()
    assert type(entry).__name__ == "builtin_function_or_method"
    value, grad = entry(np.ones((2, 2)))
    assert float(value) == 27.0 and (grad == 4.5).all()
    value, grad = vg(np.ones((2, 2)))
    assert float(value) == 27.0 and np.array_equal(grad, np.full((2, 2), 4.5))


# ---- two-thread loops ------------------------------------------------------------------------
def test_threaded_loops_survive_freed_code_and_concurrent_callers():
    """Big loops run on two threads; a helper that starts late must never touch code or
    buffers of a call that already returned (functions are created and dropped here in
    quick succession), and concurrent callers get exact results."""
    import threading
    from codegen.lower import parallel
    x = np.random.default_rng(3).standard_normal(1 << 20) * 0.1
    for k in range(8):
        f = symgrad.compile(lambda v, k=k: (v * (k + 1)).sin().sum() + v.exp().mean(), backend="llvm")
        exe = f.lower(x).compile()
        if parallel.threads() > 1:
            assert "symgrad_rt_post" in exe.as_text("llvm")
        got = float(exe([x])[0])
        want = math.fsum(np.sin(x * (k + 1))) + math.fsum(np.exp(x)) / x.size
        assert abs(got - want) <= 1e-12 * x.size
        del f, exe
    g = symgrad.compile(lambda v: (v.tanh() * 2 + v.sin()).sum(), backend="llvm")
    want = float(g(x))
    results = []
    threads = [threading.Thread(target=lambda: results.extend(float(g(x)) for _ in range(20)))
               for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [want] * 60


@pytest.mark.usefixtures("machine")
def test_helper_thread_splits_products_and_loops_as_torch():
    """An MLP step: the big product wakes the process's helper thread, the small products
    and loops after it are split while it spins; value and gradients equal torch's, call
    after call (chunks are taken by whichever thread comes first)."""
    from codegen import worker
    from codegen.lower import parallel
    rng = np.random.default_rng(7)
    X, labels = rng.standard_normal((128, 300)), rng.integers(0, 10, 128)
    params = [rng.uniform(-0.1, 0.1, s) for s in ((300, 96), (96,), (96, 10), (10,))]

    from bench.workloads import mlp_loss as loss     # the benchmark's MLP loss

    vg = symgrad.value_and_grad(lambda *a: loss(symgrad, *a), argnums=(0, 1, 2, 3), backend="llvm")
    tp = [torch.tensor(p, requires_grad=True) for p in params]
    want = loss(torch, *tp, torch.tensor(X), torch.tensor(labels))
    want.backward()
    text = vg.lower(*params, X, labels).compile().as_text("llvm")
    if parallel.threads() > 1:
        posts = re.findall(r'call i32 @"symgrad_rt_post"\(ptr %"ctrl", i32 (\d)\)', text)
        assert "1" in posts and posts.count("0") >= 3          # one wakes, small ones do not
    for _ in range(30):
        value, grads = vg(*params, X, labels)
        np.testing.assert_allclose(value, want.item(), **TOL[np.dtype("float64")])
        for g, p in zip(grads, tp):
            np.testing.assert_allclose(g, p.grad.numpy(), **TOL[np.dtype("float64")])
    if parallel.threads() > 1:
        assert worker.mailbox()["started"] == 1


@pytest.mark.usefixtures("machine")
def test_loop_after_a_split_product_runs_on_its_row_chunks():
    """A loop reading the split product's rows at its own row (bias + tanh; a column sum
    with per-chunk accumulators) runs in the product's row chunks (one step); one reading
    other rows (the transposed product) stays a step of its own.  All equal numpy's
    result, the column sum bit for bit call after call."""
    from codegen.lower import parallel
    rng = np.random.default_rng(11)
    X, W, b = rng.standard_normal((96, 200)), rng.standard_normal((200, 96)) * 0.1, rng.standard_normal(96)
    fused = symgrad.compile(lambda x, w, c: (x @ w + c).tanh() * 2, backend="llvm")
    mixed = symgrad.compile(lambda x, w: (x @ w).tanh() + (x @ w).T, backend="llvm")
    colsum = symgrad.compile(lambda x, w: (x @ w).tanh().sum(0), backend="llvm")
    texts = {name: f.lower(*args).compile().as_text("llvm")
             for name, f, args in (("fused", fused, (X, W, b)), ("mixed", mixed, (X, W)),
                                   ("colsum", colsum, (X, W)))}
    if parallel.threads() > 1:
        assert re.search(r'define internal void @"[^"]*\.matmul\+s1\.loop', texts["fused"])
        assert re.search(r'define internal void @"[^"]*\.matmul\+s1\.loop', texts["colsum"])
        assert "matmul+" not in texts["mixed"]
    first = colsum(X, W)
    np.testing.assert_allclose(first, np.tanh(X @ W).sum(0), rtol=1e-12, atol=1e-12)
    for _ in range(20):
        assert np.array_equal(colsum(X, W), first)
    want_fused = np.tanh(X @ W + b) * 2
    want_mixed = np.tanh(X @ W) + (X @ W).T
    for _ in range(20):
        np.testing.assert_allclose(fused(X, W, b), want_fused, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(mixed(X, W), want_mixed, rtol=1e-12, atol=1e-12)


def test_helper_thread_restarts_in_a_forked_child():
    """A forked child has no helper thread: its first big kernel starts a new one, and its
    results are exact (math.fsum reference)."""
    code = textwrap.dedent("""
        import math, os, numpy as np, symgrad
        from codegen import worker
        from codegen.lower import parallel
        x = np.random.default_rng(3).standard_normal(1 << 20) * 0.1
        f = symgrad.compile(lambda v: v.sin().sum(), backend="llvm")
        want = math.fsum(np.sin(x))
        assert abs(float(f(x)) - want) <= 1e-12 * x.size
        pid = os.fork()
        if pid == 0:
            ok = worker.mailbox() is None or worker.mailbox()["started"] == 0
            ok = ok and all(abs(float(f(x)) - want) <= 1e-12 * x.size for _ in range(5))
            ok = ok and (parallel.threads() < 2 or worker.mailbox()["started"] == 1)
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        print("ok" if os.waitstatus_to_exitcode(status) == 0 else "child failed")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "ok"


def test_costly_loops_are_interleaved_cheap_ones_left_to_llvm():
    """Loops with a transcendental body run several vector iterations side by side
    (llvm.loop metadata); results stay exact against math.fsum."""
    x = np.random.default_rng(5).standard_normal(5000)
    costly = symgrad.compile(lambda v: (v.exp() + v.tanh()).sum(), backend="llvm")
    cheap = symgrad.compile(lambda v: (v * 3 + 1).sum(), backend="llvm")
    several = re.compile(r'"llvm\.loop\.interleave\.count", i32 ([2-9]|\d\d)')   # (1: bookkeeping)
    assert several.search(costly.lower(x).compile().as_text("llvm"))
    assert not several.search(cheap.lower(x).compile().as_text("llvm"))
    assert abs(float(costly(x)) - math.fsum(np.exp(x) + np.tanh(x))) <= 1e-13 * x.size
    assert abs(float(cheap(x)) - math.fsum(x * 3 + 1)) <= 1e-13 * x.size


def _sin_chain(lib, x):
    for _ in range(6):
        x = lib.sin(x) * 0.9 + 0.1
    return x.sum()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_short_costly_loops_fold_their_tail_where_masks_are_cheap(machine, dtype):
    """A short loop with a costly body runs its last partial vector masked (no scalar
    remainder loop: a second copy of the body) on targets with cheap masked vector
    operations, and keeps the remainder elsewhere; value and gradient equal torch's at
    every length around the vector width."""
    vg = symgrad.value_and_grad(lambda v: _sin_chain(symgrad, v), backend="llvm")
    x = np.linspace(-1, 1, 100).astype(dtype)
    ir_text = vg.lower(x).compile().as_text("llvm")
    assert ("llvm.loop.vectorize.predicate.enable" in ir_text) == machine.masked_tails
    if machine.masked_tails:
        assert "llvm.masked.load" in vg.lower(x).compile().as_text("llvm-opt")
    tol = 1e-12 if dtype == "float64" else 2e-5
    for n in (1, 7, 8, 9, 15, 16, 17, 33, 100, 511):
        x = RNG.uniform(-2, 2, n).astype(dtype)
        value, grad = vg(x)
        xt = torch.tensor(x, requires_grad=True)
        want = _sin_chain(torch, xt)
        want.backward()
        assert abs(float(value) - want.item()) <= tol * n
        np.testing.assert_allclose(grad, xt.grad.numpy(), rtol=tol, atol=tol)


def test_folded_tails_on_other_machines(foreign_machine):
    """The tail-folding hint follows the target: AVX-512 and SVE fold, NEON does not."""
    vg = symgrad.value_and_grad(lambda v: _sin_chain(symgrad, v), target=foreign_machine.name)
    text = vg.lower(np.linspace(-1, 1, 100)).as_text("llvm")
    assert ("llvm.loop.vectorize.predicate.enable" in text) == foreign_machine.masked_tails
    assert foreign_machine.masked_tails == (foreign_machine.widest_vector_bits >= 512
                                            if foreign_machine.arch == "x86_64"
                                            else foreign_machine.scalable_vectors)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_bookkeeping_loops_are_neither_interleaved_nor_unrolled(machine, dtype):
    """Loops that fill, merge and finish accumulators (a column sum split over threads,
    its float64 compensation) carry ``unroll.disable`` and ``interleave.count 1``; the
    sums, maxima and means still equal torch's."""
    x = RNG.standard_normal((512, 300)).astype(dtype)
    tol = 1e-12 if dtype == "float64" else 1e-5
    for fn in (lambda v: v.exp().sum(0), lambda v: v.amax(0), lambda v: v.sum(0).mean()):
        f = symgrad.compile(fn, backend="llvm")
        text = f.lower(x).compile().as_text("llvm")
        hinted = [line for line in text.splitlines() if "llvm.loop.unroll.disable" in line]
        assert hinted and all("!{" in line for line in hinted)
        assert re.search(r'!"llvm\.loop\.interleave\.count", i32 1\b', text)
        want = fn(torch.tensor(x)).numpy()
        np.testing.assert_allclose(f(x), want, rtol=tol, atol=tol * 10)


@pytest.mark.usefixtures("machine")
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_argmax_indices_need_no_bounds_check(dtype):
    """A gather (and its gradient, gather_scatter) by the positions an argmax found along
    an axis of the same length skips the index check (in range by construction); max
    pooling's value and gradient still equal torch's."""
    x = RNG.standard_normal((3, 5, 4, 7)).astype(dtype)
    g = RNG.standard_normal((3, 5, 1, 7)).astype(dtype)

    def pool(lib, v):
        at = v.argmax(2, keepdim=True)
        return lib.gather(v, 2, at)
    f = symgrad.compile(lambda v: pool(symgrad, v), backend="llvm")
    vg = symgrad.value_and_grad(lambda v, w: (pool(symgrad, v) * w).sum(), backend="llvm")
    assert "index.error" not in f.lower(x).compile().as_text("llvm")
    assert "index.error" not in vg.lower(x, g).compile().as_text("llvm")
    xt = torch.tensor(x, requires_grad=True)
    want = pool(torch, xt)
    (want * torch.tensor(g)).sum().backward()
    _close(f(x), want.detach().numpy(), dtype)
    value, grad = vg(x, g)
    _close(grad, xt.grad.numpy(), dtype)
    bad = symgrad.compile(lambda v, i: symgrad.gather(v, 2, i), backend="llvm")
    with pytest.raises(RuntimeError, match="index 4 is out of bounds for dimension 2 with "
                                           "size 4"):      # other indices are still checked
        bad(x, np.full((3, 5, 1, 7), 4))
