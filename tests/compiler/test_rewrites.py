"""Rewrites preserve values and gradients; the stable ones keep results finite where the
naive formula overflows; the derivative comes out as a formula."""
import numpy as np
import pytest
import sympy
import torch

import symgrad
from symgrad.compiler.rewrite import simplify, stabilize, transpose_products
from symgrad.compiler.fusion import fuse
from symgrad.graph.interpret import evaluate
from symgrad.graph.node import toposort


def _lowered(fn, *args, backend="numpy"):
    return symgrad.value_and_grad(fn, backend=backend).lower(*args)


PROGRAMS = {
    "identities": lambda x: ((x * 1 + 0 - 0) / 1 + (x - x) - (-(-x))).exp().sum(),
    "log_exp": lambda x: (x.exp().log() * 2 + (x ** 1) + x ** 2).sum(),
    "layout": lambda x: x.reshape(2, 3).reshape(3, 2).t().t().permute(1, 0).sum(),
    "logsigmoid": lambda x: x.sigmoid().log().sum() + (1 - x.sigmoid()).log().sum(),
    "softplus_naive": lambda x: (1 + x.exp()).log().sum() + x.exp().log1p().mean(),
    "logsumexp_naive": lambda x: x.exp().sum().log(),
    "where_sqrt": lambda x: symgrad.where(x > 0, x.sqrt(), 0.0).sum(),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_optimised_graph_equals_unoptimised(name):
    x = np.random.default_rng(0).uniform(-2, 2, 6)
    lo = _lowered(PROGRAMS[name], x)
    env_raw = {lo.raw.inputs[0]: x}
    env_opt = {lo.optimized.inputs[0]: x}
    raw = evaluate(lo.raw.outputs, env_raw)
    opt = evaluate(lo.optimized.outputs, env_opt)
    for r, o in zip(raw, opt):
        np.testing.assert_allclose(o, r, rtol=1e-12, atol=1e-12)
    assert lo.stats["optimized"] <= lo.stats["transformed"]


def test_rewrites_against_the_naive_trace():
    """Evaluate the naive (un-stabilised) forward graph and compare with the rewritten one."""
    x = np.random.default_rng(1).uniform(-3, 3, 6)
    for name, fn in PROGRAMS.items():
        traced = symgrad.compile(fn, backend="numpy").lower(x)
        naive = evaluate(traced.raw.outputs, {traced.raw.inputs[0]: x})
        rewritten = fuse(simplify(stabilize(list(traced.raw.outputs))))
        got = evaluate(rewritten, {traced.raw.inputs[0]: x})
        np.testing.assert_allclose(got[0], naive[0], rtol=1e-12, err_msg=name)


def test_identities_remove_nodes():
    x = np.ones(4)
    lo = symgrad.compile(PROGRAMS["identities"], backend="numpy").lower(x)
    text = lo.as_text()
    assert "neg" not in text and " mul " not in text.replace("fused", "")


@pytest.mark.parametrize("v", [-1000.0, -100.0, -20.5, 0.0, 20.5, 100.0, 1000.0])
def test_stable_rewrites_finite_at_extremes(v, backend):
    """Finite and exact (20.5: past softplus's threshold, e^-20.5 ~ 1e-9 matters)."""
    x = np.array([v, -v, 0.5])
    for fn, ref in [
        (lambda a: a.sigmoid().log().sum(), lambda a: torch.nn.functional.logsigmoid(a).sum()),
        (lambda a: (1 + a.exp()).log().sum(),
         lambda a: torch.logaddexp(a, torch.zeros_like(a)).sum()),
        (lambda a: a.exp().log1p().sum(), lambda a: torch.logaddexp(a, torch.zeros_like(a)).sum()),
        (lambda a: (1 - a.sigmoid()).log().sum(),
         lambda a: torch.nn.functional.logsigmoid(-a).sum()),
        (lambda a: symgrad.nn.functional.binary_cross_entropy_with_logits(
            a, symgrad.full_like(a, 0.3)),
         lambda a: torch.nn.functional.binary_cross_entropy_with_logits(
             a, torch.full_like(a, 0.3))),
        (lambda a: a.exp().sum().log(), lambda a: torch.logsumexp(a, 0)),
        (lambda a: -(0.3 * a.sigmoid().log() + 0.7 * (1 - a.sigmoid()).log()).mean(),
         lambda a: torch.nn.functional.binary_cross_entropy_with_logits(
             a, torch.full_like(a, 0.3))),
    ]:
        value, grad = symgrad.value_and_grad(fn, backend=backend)(x)
        xt = torch.tensor(x, requires_grad=True)
        want = ref(xt)
        want.backward()
        assert np.isfinite(value) and np.all(np.isfinite(grad))
        np.testing.assert_allclose(value, want.item(), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(grad, xt.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_where_gradient_does_not_leak_nan(backend):
    g = symgrad.grad(lambda x: symgrad.where(x > 0, x.sqrt(), 0.0).sum(), backend=backend)
    got = g(np.array([-1.0, 4.0]))
    np.testing.assert_array_equal(got, [0.0, 0.25])


def test_symbolic_derivative_of_the_seed_example():
    lo = symgrad.value_and_grad(lambda x: (3 * (x + 2) ** 2).mean(),
                                backend="numpy").lower(np.ones((2, 2)))
    value, grad = lo.symbolic()
    for i in range(2):
        for j in range(2):
            xij = sympy.Symbol(f"x_{i}_{j}", real=True)
            assert sympy.simplify(grad[i, j] - sympy.Rational(3, 2) * (xij + 2)) == 0
    xs = [sympy.Symbol(f"x_{i}_{j}", real=True) for i in range(2) for j in range(2)]
    assert sympy.simplify(value - sum(3 * (s + 2) ** 2 for s in xs) / 4) == 0


def test_formulas_and_dot():
    lo = symgrad.value_and_grad(lambda x: (x.tanh() * x).sum(), backend="numpy").lower(np.ones(3))
    formulas = lo.formulas()
    assert formulas and all(isinstance(f, sympy.Expr) for f in formulas.values())
    # d/dx (tanh(x) x) = tanh(x) + x (1 - tanh(x)^2), with tanh(x) materialised as a0
    a0, a1 = sympy.symbols("a0 a1", real=True)
    assert any(sympy.simplify(f - (a0 + a1 * (1 - a0 ** 2))) == 0 for f in formulas.values())
    latex = lo.formulas(latex=True)
    assert all(isinstance(s, str) and "a_{0}" in s for s in latex.values())
    dot = lo.dot()
    assert dot.startswith("digraph") and "->" in dot


def _matmuls(lo) -> list[str]:
    return [line for line in lo.as_text().splitlines() if "= matmul" in line]


@pytest.mark.parametrize("backend", ["numpy", "llvm"])
def test_linear_weight_gradient_is_one_product_in_its_own_layout(backend):
    """``linear``'s weight gradient, ``(x.T @ dz).T``, becomes ``dz.T @ x`` (a 3x5 product
    written as such, no transposing copy); values and gradients equal torch's."""
    rng = np.random.default_rng(2)
    x, w, b = rng.standard_normal((4, 5)), rng.standard_normal((3, 5)), rng.standard_normal(3)

    def loss(w, b, x):
        return symgrad.nn.functional.linear(x, w, b).tanh().sum()

    vg = symgrad.value_and_grad(loss, argnums=(0, 1), backend=backend)
    lo = vg.lower(w, b, x)
    grad_w = lo.optimized.outputs[1]
    assert grad_w.op == "matmul" and grad_w.shape == (3, 5)
    value, (gw, gb) = vg(w, b, x)
    tw, tb = torch.tensor(w, requires_grad=True), torch.tensor(b, requires_grad=True)
    want = torch.nn.functional.linear(torch.tensor(x), tw, tb).tanh().sum()
    want.backward()
    np.testing.assert_allclose(value, want.item(), rtol=1e-12)
    np.testing.assert_allclose(gw, tw.grad.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gb, tb.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_transposed_product_with_another_use_is_kept():
    """A product used both as is and transposed is computed once (no second product)."""
    x, w = np.ones((4, 5)), np.ones((5, 3))
    lo = symgrad.compile(lambda x, w: ((x @ w).sum(), (x @ w).T * 2), backend="numpy").lower(x, w)
    assert len(_matmuls(lo)) == 1
    got = symgrad.compile(lambda x, w: ((x @ w).sum(), (x @ w).T * 2), backend="llvm")(x, w)
    np.testing.assert_allclose(got[1], (x @ w).T * 2)


def test_batched_transposed_product():
    """Batch axes stay; only the last two swap: ``(a @ b).mT == b.mT @ a.mT``."""
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((2, 4, 5)), rng.standard_normal((2, 5, 3))
    lo = symgrad.compile(lambda a, b: (a @ b).permute(0, 2, 1) * 3, backend="numpy").lower(a, b)
    outs = transpose_products(list(lo.raw.outputs))
    assert any(x.op == "matmul" for x in outs[0].args)          # no permute of a product left
    got = evaluate(outs, dict(zip(lo.raw.inputs, (a, b))))[0]
    np.testing.assert_allclose(got, np.swapaxes(a @ b, 1, 2) * 3, rtol=1e-12)
    f = symgrad.compile(lambda a, b: (a @ b).permute(0, 2, 1) * 3, backend="llvm")
    np.testing.assert_allclose(f(a, b), np.swapaxes(a @ b, 1, 2) * 3, rtol=1e-12)


def test_safe_where_guards_each_leaf_once():
    """The NaN-safe ``where`` rewrite is idempotent: cross-entropy's mean (a division
    guarded by "no target counted") has no ``where(c, 1, where(c, 1, x))`` chains (it
    had 16-deep ones, one per round of the rewrite loop)."""
    from symgrad.graph.node import toposort
    rng = np.random.default_rng(0)
    x, lab = rng.standard_normal((4, 3)), rng.integers(0, 3, 4)
    lo = symgrad.value_and_grad(lambda x, lab: symgrad.nn.functional.cross_entropy(x, lab),
                                backend="numpy").lower(x, lab)
    wheres = [n for n in toposort(lo.raw.outputs) if n.op == "where"]
    assert wheres
    for n in wheres:
        for arg in n.args[1:]:
            assert not (arg.op == "where" and arg.args[0] is n.args[0])
    value, grad = symgrad.value_and_grad(lambda x, lab: symgrad.nn.functional.cross_entropy(x, lab),
                                         backend="llvm")(x, lab)
    tx = torch.tensor(x, requires_grad=True)
    want = torch.nn.functional.cross_entropy(tx, torch.tensor(lab))
    want.backward()
    np.testing.assert_allclose(value, want.item(), rtol=1e-12)
    np.testing.assert_allclose(grad, tx.grad.numpy(), rtol=1e-12, atol=1e-15)



@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_folding_does_not_make_large_constants(dtype):
    """A jacobian's seed rows (an identity built from iotas) stay a formula computed from
    indices: folded, eye(40) would be 1,600 elements of constant data in the kernel.
    The answers are torch's."""
    rng = np.random.default_rng(2)
    A = (rng.normal(size=(40, 40)) / 6).astype(dtype)
    x = rng.normal(size=40).astype(dtype)

    def f(x, A):
        return symgrad.tanh(A @ x)
    lo = symgrad.jacobian(f).lower(x, A)
    consts = [n for n in toposort(lo.optimized.outputs) if n.op == "const"]
    assert all(n.size <= 256 for n in consts), [n.shape for n in consts]
    want = torch.autograd.functional.jacobian(
        lambda x: torch.tanh(torch.tensor(A) @ x), torch.tensor(x)).numpy()
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for backend in ("llvm", "numpy"):
        got = np.asarray(symgrad.jacobian(f, backend=backend)(x, A))
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


sg = symgrad
_SIGNED_ZERO_CASES = {
    "x + 0.0": lambda t, x: x + 0.0, "0.0 + x": lambda t, x: 0.0 + x,
    "0.0 - x": lambda t, x: 0.0 - x, "x - 0.0": lambda t, x: x - 0.0,
    "x - (-0.0)": lambda t, x: x - (-0.0), "x + (-0.0)": lambda t, x: x + (-0.0),
    "-0.0 - x": lambda t, x: -0.0 - x, "sin(x) + 0.0": lambda t, x: t.sin(x) + 0.0,
    "1 / (x * 3 + 0.0)": lambda t, x: 1 / (x * 3 + 0.0),
    "atan2(x + 0.0, -1)": lambda t, x: t.atan2(x + 0.0, -t.ones_like(x)),
    "x + zeros_like(x)": lambda t, x: x + t.zeros_like(x),
    "zeros_like(x) - x": lambda t, x: t.zeros_like(x) - x,
}


@pytest.mark.parametrize("backend", ["llvm", "numpy"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(_SIGNED_ZERO_CASES))
def test_adding_a_zero_keeps_ieee_signed_zeros(name, dtype, backend):
    """Only x + (-0.0) and x - (+0.0) are identities in IEEE arithmetic (-0.0 + 0.0 is
    +0.0): compiled values and gradients have torch's sign bits at +-0.0."""
    f = _SIGNED_ZERO_CASES[name]
    xs = np.array([-0.0, 0.0, 1.5, -2.0], dtype)
    want = f(torch, torch.tensor(xs)).numpy()
    got = np.asarray(sg.compile(lambda x: f(sg, x), backend=backend)(xs))
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    # (sign bits are exact above; magnitudes may differ by an ulp where a case contracts
    # a multiply-add into an fma on one side and not the other, target-dependent)
    np.testing.assert_allclose(got, want, rtol=4 * np.finfo(dtype).eps, atol=0)
    xt = torch.tensor(xs, requires_grad=True)
    f(torch, xt).sum().backward()
    g = np.asarray(sg.grad(lambda x: f(sg, x).sum(), backend=backend)(xs))
    np.testing.assert_array_equal(np.signbit(g), np.signbit(xt.grad.numpy()))
    np.testing.assert_allclose(g, xt.grad.numpy(), rtol=4 * np.finfo(dtype).eps, atol=0)
