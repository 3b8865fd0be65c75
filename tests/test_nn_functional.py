"""symgrad.nn.functional against torch.nn.functional: values, dtypes, grad_fn names and
gradients for every reduction, the numerically hard cases (logits of ±100 and ±1000) and
the errors (type and text) for bad input."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg

from oracle import DTYPES, check, rng

F = pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
R = pytest.mark.parametrize("reduction", ["mean", "sum", "none"])


def u(shape, dtype=np.float64, lo=-2.0, hi=2.0, seed=0):
    return np.asarray(rng(seed).uniform(lo, hi, shape).astype(dtype))


def fn(name):
    return lambda m: getattr(m.nn.functional, name)


def _same_error(f):
    res = []
    for m in (sg, torch):
        try:
            f(m)
            res.append(None)
        except Exception as e:   # noqa: BLE001 - type and text are compared
            res.append(e)
    s, t = res
    assert t is not None, "torch did not raise"
    assert s is not None, f"symgrad did not raise; torch raised {type(t).__name__}: {t}"
    assert type(s) is type(t), f"{type(s).__name__}: {s}  vs torch {type(t).__name__}: {t}"
    assert str(s) == str(t)


# --- activations ----------------------------------------------------------------------------

@F
@pytest.mark.parametrize("name", ["relu", "sigmoid", "tanh", "softplus"])
@pytest.mark.parametrize("shape", [(3, 4), (), (0, 3)], ids=str)
def test_activations(name, shape, dtype):
    x = u(shape, dtype, -30, 30, seed=1)
    check(lambda m, t: fn(name)(m)(t), x)


@F
@pytest.mark.parametrize("beta,threshold", [(1.0, 20.0), (2.0, 20.0), (0.5, 5.0), (3.0, 1.0),
                                            (1.0, 0.0), (-1.0, 20.0)])
def test_softplus_beta_threshold(beta, threshold, dtype):
    x = np.concatenate([u((20,), dtype, -15, 15, seed=2),
                        np.array([threshold / beta, 0.0, 30.0, -30.0], dtype)]).astype(dtype)
    check(lambda m, t: m.nn.functional.softplus(t, beta=beta, threshold=threshold), x)
    check(lambda m, t: m.nn.functional.softplus(t, beta, threshold), x)


def test_relu_inplace_and_on_integers():
    for m in (sg, torch):
        t = m.tensor([-1.0, 2.0])
        out = m.nn.functional.relu(t, inplace=True)
        assert out is t and t.tolist() == [0.0, 2.0]
    check(lambda m, t: m.nn.functional.relu(t), np.array([-2, 0, 3]))


@F
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape,dim", [((3, 4), 1), ((3, 4), 0), ((2, 3, 4), -1),
                                       ((2, 3, 4), 1), ((5,), 0), ((), 0), ((0, 3), 1)],
                         ids=str)
def test_softmax_family(name, shape, dim, dtype):
    x = u(shape, dtype, -5, 5, seed=3)
    check(lambda m, t: fn(name)(m)(t, dim=dim), x)
    check(lambda m, t: fn(name)(m)(t, dim, dtype=m.float64), x)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("ndim", [0, 1, 2, 3, 4])
def test_softmax_implicit_dim_warns_and_picks_torch_dim(name, ndim):
    x = u((2,) * ndim, seed=4)
    for m in (sg, torch):
        with pytest.warns(UserWarning, match="Implicit dimension choice"):
            fn(name)(m)(m.tensor(x))
    check(lambda m, t: fn(name)(m)(t), x)


@F
def test_linear(dtype):
    x, w, b = u((5, 3), dtype, seed=5), u((4, 3), dtype, seed=6), u((4,), dtype, seed=7)
    check(lambda m, a, ww, bb: m.nn.functional.linear(a, ww, bb), x, w, b)
    check(lambda m, a, ww: m.nn.functional.linear(a, ww), x, w)
    check(lambda m, a, ww, bb: m.nn.functional.linear(a, ww, bb), u((2, 5, 3), dtype, seed=8),
          w, b)
    check(lambda m, a, ww, bb: m.nn.functional.linear(a, ww, bb), u((3,), dtype, seed=9), w, b)
    check(lambda m, a, ww: m.nn.functional.linear(a, ww), u((2, 5, 3), dtype, seed=10), w)


def test_linear_errors():
    _same_error(lambda m: m.nn.functional.linear(m.ones(2, 3), m.ones(4, 2)))
    _same_error(lambda m: m.nn.functional.linear(m.ones(2, 3), m.ones(4, 3), m.ones(5)))


# --- losses ---------------------------------------------------------------------------------

@F
@R
@pytest.mark.parametrize("shape", [(4, 3), (5,), (), (0,)], ids=str)
def test_bce_with_logits(reduction, shape, dtype):
    x, t = u(shape, dtype, -4, 4, seed=11), u(shape, dtype, 0, 1, seed=12)
    check(lambda m, a, b: m.nn.functional.binary_cross_entropy_with_logits(
        a, b, reduction=reduction), x, t)


@F
@R
def test_bce_with_logits_weight_and_pos_weight(reduction, dtype):
    x, t = u((4, 3), dtype, -4, 4, seed=13), u((4, 3), dtype, 0, 1, seed=14)
    w, pw = u((3,), dtype, 0.1, 2, seed=15), u((3,), dtype, 0.1, 3, seed=16)
    bce = "binary_cross_entropy_with_logits"
    rg = [True, True, False, False]           # torch refuses gradients for the weights
    check(lambda m, a, b, ww: fn(bce)(m)(a, b, weight=ww, reduction=reduction), x, t, w,
          requires_grad=rg)
    check(lambda m, a, b, p: fn(bce)(m)(a, b, pos_weight=p, reduction=reduction), x, t, pw,
          requires_grad=rg)
    check(lambda m, a, b, ww, p: fn(bce)(m)(a, b, weight=ww, pos_weight=p,
                                            reduction=reduction), x, t, w, pw,
          requires_grad=rg)


@F
@R
@pytest.mark.parametrize("big", [100.0, 1000.0, 1e30])
def test_bce_with_logits_is_stable_at_huge_logits(big, reduction, dtype):
    x = np.array([big, -big, big, -big, 0.0], dtype)
    t = np.array([1.0, 0.0, 0.0, 1.0, 0.5], dtype)
    s, th = check(lambda m, a, b: m.nn.functional.binary_cross_entropy_with_logits(
        a, b, reduction=reduction), x, t)
    assert np.all(np.isfinite(s.detach().numpy()))
    xs = sg.tensor(x, requires_grad=True)
    sg.nn.functional.binary_cross_entropy_with_logits(xs, sg.tensor(t)).backward()
    assert np.all(np.isfinite(xs.grad.numpy()))
    pw = np.array([2.0], dtype)
    check(lambda m, a, b, p: m.nn.functional.binary_cross_entropy_with_logits(
        a, b, pos_weight=p, reduction=reduction), x, t, pw, requires_grad=[True, True, False])


@R
def test_bce_with_logits_has_no_threshold(reduction):
    """torch's value is exact past |x| = 20 (no softplus threshold): e^-20.5 ~ 1e-9
    relative is far above float64 rounding."""
    x = np.array([-20.5, -25.0, -30.0, -36.0, 20.5, 25.0, -19.5, -700.0, -800.0])
    t = np.array([0.25, 0.5, 1.0, 0.0, 0.75, 0.0, 0.3, 0.9, 0.1])
    check(lambda m, a, b: m.nn.functional.binary_cross_entropy_with_logits(
        a, b, reduction=reduction), x, t, rtol=1e-14, atol=0.0, grad_rtol=1e-14, grad_atol=1e-300)


@F
@R
def test_binary_cross_entropy(reduction, dtype):
    x = np.concatenate([u((10,), dtype, 0.01, 0.99, seed=17),
                        np.array([0.0, 1.0, 1e-45 if dtype == np.float32 else 1e-300], dtype)])
    t = np.concatenate([u((10,), dtype, 0, 1, seed=18), np.array([0.3, 0.6, 1.0], dtype)])
    x, t = x.astype(dtype), t.astype(dtype)
    check(lambda m, a, b: m.nn.functional.binary_cross_entropy(a, b, reduction=reduction),
          x, t)
    w = u((13,), dtype, 0.1, 2, seed=19)
    check(lambda m, a, b, ww: m.nn.functional.binary_cross_entropy(a, b, weight=ww,
                                                                    reduction=reduction),
          x, t, w, requires_grad=[True, True, False])


@F
@R
@pytest.mark.parametrize("name", ["mse_loss", "l1_loss"])
def test_mse_and_l1(name, reduction, dtype):
    x, t = u((4, 3), dtype, seed=20), u((4, 3), dtype, seed=21)
    t[0, 0] = x[0, 0]                  # |x - t| = 0: l1's subgradient 0, as torch
    check(lambda m, a, b: fn(name)(m)(a, b, reduction=reduction), x, t)
    check(lambda m, a, b: fn(name)(m)(a, b, reduction=reduction), u((), dtype, seed=22),
          u((), dtype, seed=23))


@pytest.mark.parametrize("name", ["mse_loss", "l1_loss"])
def test_mse_and_l1_broadcast_warning(name):
    x, t = u((4, 3), seed=24), u((3,), seed=25)
    for m in (sg, torch):
        with pytest.warns(UserWarning, match="target size"):
            fn(name)(m)(m.tensor(x), m.tensor(t))
    check(lambda m, a, b: fn(name)(m)(a, b), x, t)


CE_SHAPES = [((5, 4), (5,)), ((4,), ()), ((2, 4, 3), (2, 3)), ((2, 3, 2, 2), (2, 2, 2))]


def _targets(shape, n_classes, seed, ignore=None):
    t = rng(seed).integers(0, n_classes, shape)
    if ignore is not None and t.size:
        t.reshape(-1)[0] = ignore
    return np.asarray(t, dtype=np.int64)


@F
@R
@pytest.mark.parametrize("shapes", CE_SHAPES, ids=str)
def test_cross_entropy_class_indices(shapes, reduction, dtype):
    (xs, ts) = shapes
    c = xs[1] if len(xs) > 1 else xs[0]
    x, t = u(xs, dtype, -3, 3, seed=26), _targets(ts, c, 27)
    w = u((c,), dtype, 0.2, 2, seed=28)
    ce = lambda m: m.nn.functional.cross_entropy  # noqa: E731
    rg = [True, False, False]                 # nll_loss refuses gradients for the weight
    check(lambda m, a, b: ce(m)(a, b, reduction=reduction), x, t)
    check(lambda m, a, b, ww: ce(m)(a, b, weight=ww, reduction=reduction), x, t, w,
          requires_grad=rg)
    if ts:
        ti = _targets(ts, c, 29, ignore=-100)
        check(lambda m, a, b: ce(m)(a, b, reduction=reduction), x, ti)
        tj = _targets(ts, c, 30, ignore=1)
        check(lambda m, a, b, ww: ce(m)(a, b, weight=ww, ignore_index=1, reduction=reduction),
              x, tj, w, requires_grad=rg)
    for ls in (0.1, 0.5):
        check(lambda m, a, b: ce(m)(a, b, label_smoothing=ls, reduction=reduction), x, t)
        check(lambda m, a, b, ww: ce(m)(a, b, weight=ww, label_smoothing=ls,
                                        reduction=reduction), x, t, w, requires_grad=rg)
        if ts:
            check(lambda m, a, b, ww: ce(m)(a, b, weight=ww, label_smoothing=ls,
                                            ignore_index=1, reduction=reduction), x, tj, w,
                  requires_grad=rg)


@F
@R
@pytest.mark.parametrize("shapes", CE_SHAPES, ids=str)
def test_cross_entropy_probabilities(shapes, reduction, dtype):
    (xs, _) = shapes
    c = xs[1] if len(xs) > 1 else xs[0]
    x = u(xs, dtype, -3, 3, seed=31)
    p = u(xs, dtype, 0, 1, seed=32)
    p = (p / p.sum(axis=1 if len(xs) > 1 else 0, keepdims=True)).astype(dtype)
    w = u((c,), dtype, 0.2, 2, seed=33)
    ce = lambda m: m.nn.functional.cross_entropy  # noqa: E731
    check(lambda m, a, b: ce(m)(a, b, reduction=reduction), x, p)
    check(lambda m, a, b, ww: ce(m)(a, b, weight=ww, reduction=reduction), x, p, w)
    check(lambda m, a, b: ce(m)(a, b, label_smoothing=0.2, reduction=reduction), x, p)
    check(lambda m, a, b, ww: ce(m)(a, b, weight=ww, label_smoothing=0.3,
                                    reduction=reduction), x, p, w)


@F
def test_cross_entropy_all_targets_ignored(dtype):
    x, t = u((3, 4), dtype, seed=34), np.full((3,), -100, np.int64)
    check(lambda m, a, b: m.nn.functional.cross_entropy(a, b), x, t)
    check(lambda m, a, b: m.nn.functional.cross_entropy(a, b, reduction="sum"), x, t)


@F
def test_cross_entropy_extreme_logits(dtype):
    x = np.array([[1000.0, -1000.0, 0.0], [-1e4, 1e4, 5.0]], dtype)
    t = np.array([1, 1])
    check(lambda m, a, b: m.nn.functional.cross_entropy(a, b), x, t)


@F
@R
@pytest.mark.parametrize("shapes", CE_SHAPES, ids=str)
def test_nll_loss(shapes, reduction, dtype):
    (xs, ts) = shapes
    c = xs[1] if len(xs) > 1 else xs[0]
    x, t, w = u(xs, dtype, -3, 0, seed=35), _targets(ts, c, 36), u((c,), dtype, 0.2, 2, seed=37)
    nll = lambda m: m.nn.functional.nll_loss  # noqa: E731
    check(lambda m, a, b: nll(m)(a, b, reduction=reduction), x, t)
    rg = [True, False, False]
    check(lambda m, a, b, ww: nll(m)(a, b, weight=ww, reduction=reduction), x, t, w,
          requires_grad=rg)
    if ts:
        check(lambda m, a, b, ww: nll(m)(a, b, weight=ww, ignore_index=0, reduction=reduction),
              x, _targets(ts, c, 38, ignore=0), w, requires_grad=rg)
    if len(xs) <= 2:                     # uint8 targets are accepted too (not by the 2d kernel)
        check(lambda m, a, b: nll(m)(a, b, reduction=reduction), x, t.astype(np.uint8))


BOUNDS = np.array([-1.0, 0.0, 3.0, 6.0, 7.0, -6.0, 1.0, -0.5, float("nan"), float("inf")])
HARDTANH = [lambda m, t: m.nn.functional.relu6(t), lambda m, t: m.nn.ReLU6()(t),
            lambda m, t: m.nn.functional.hardtanh(t, 0.0, 6.0),
            lambda m, t: m.nn.functional.hardtanh(t), lambda m, t: m.nn.Hardtanh(-0.5, 1.0)(t),
            lambda m, t: t.clamp(0.0, 6.0), lambda m, t: t.clamp(-1.0, 1.0),
            lambda m, t: t.clamp_min(0.0), lambda m, t: t.clamp_max(6.0)]


@F
@pytest.mark.parametrize("f", HARDTANH)
def test_hardtanh_and_clamp_gradient_at_the_bounds(f, dtype):
    """hardtanh / relu6 pass no gradient at exactly min / max (PyTorch's strict
    hardtanh_backward; it was 1 there), clamp passes it (inclusive): eager, a second
    derivative and compiled gradients against torch."""
    x = BOUNDS.astype(dtype)
    res = []
    for m in (torch, sg):
        t = m.tensor(x, requires_grad=True)
        y = f(m, t)
        (g,) = m.autograd.grad((y * y).sum(), t, create_graph=True)
        (gg,) = m.autograd.grad(g.sum(), t)
        (g1,) = m.autograd.grad(f(m, t).sum(), t)
        res.append([y.detach().numpy(), g.detach().numpy(), gg.numpy(), g1.numpy(),
                    type(y.grad_fn).__name__])
    for want, got in zip(*res):
        np.testing.assert_array_equal(got, want)
    for backend in ("llvm", "numpy"):
        g = sg.grad(lambda v: f(sg, v).sum(), backend=backend)(x)
        np.testing.assert_array_equal(g, res[0][3], err_msg=backend)


INF = float("inf")
NONFINITE_IGNORED = [np.array([[-1.0, 2.0, -0.5], [-INF, -INF, -INF], [-0.1, -3, -2]]),
                     np.array([[-1.0, 2.0, -0.5], [np.nan, INF, -INF], [-0.1, -3, -2]])]


@F
@R
@pytest.mark.parametrize("xi", [0, 1])
@pytest.mark.parametrize("name", ["nll_loss", "cross_entropy"])
def test_ignored_target_with_nonfinite_input(name, xi, reduction, dtype):
    """An ignored target whose input row holds inf / NaN: its loss is 0, not NaN (it was
    multiplied by 0), and nll_loss gives its row no gradient even from an inf cotangent
    -- eager, compiled and compiled gradients, against torch."""
    x, t = NONFINITE_IGNORED[xi].astype(dtype), np.array([0, 1, 2])
    w = np.array([1.0, 2.0, 3.0], dtype)
    kws = [{}, {"weight": w}] + ([{"label_smoothing": 0.1}] if name == "cross_entropy" else [])
    for kw in kws:
        res = []
        for m in (torch, sg):
            a = m.tensor(x, requires_grad=True)
            k = {key: m.tensor(v) if isinstance(v, np.ndarray) else v for key, v in kw.items()}
            y = getattr(m.nn.functional, name)(a, m.tensor(t), ignore_index=1,
                                               reduction=reduction, **k)
            y.sum().backward()
            res.append((y.detach().numpy(), a.grad.numpy()))
        for want, got in zip(*res):     # (the zeros' signs too)
            np.testing.assert_array_equal(np.signbit(got) & ~np.isnan(got),
                                          np.signbit(want) & ~np.isnan(want))
            np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-7)

        def loss(a, m=sg, kw=kw):
            k = {key: m.tensor(v) for key, v in kw.items() if isinstance(v, np.ndarray)}
            k.update({key: v for key, v in kw.items() if not isinstance(v, np.ndarray)})
            return getattr(m.nn.functional, name)(a, m.tensor(t), ignore_index=1,
                                                  reduction=reduction, **k).sum()
        for backend in ("llvm", "numpy"):
            value, grad = sg.value_and_grad(loss, backend=backend)(x)
            np.testing.assert_allclose(value, res[0][0].sum(), rtol=2e-6, err_msg=backend)
            np.testing.assert_allclose(grad, res[0][1], rtol=2e-6, atol=1e-7, err_msg=backend)
    if name == "nll_loss" and reduction == "none":
        res = []
        for m in (torch, sg):
            a = m.tensor(x, requires_grad=True)
            y = m.nn.functional.nll_loss(a, m.tensor(t), ignore_index=1, reduction="none")
            y.backward(m.tensor(np.array([1.0, INF, 2.0], dtype)))
            res.append(a.grad.numpy())
        np.testing.assert_array_equal(res[1], res[0])


# --- errors ---------------------------------------------------------------------------------

ERRORS = [
    # integer / bool inputs of floating-point kernels (gelu and nll_loss computed them)
    lambda m: m.nn.functional.gelu(m.tensor([1, 2])),
    lambda m: m.nn.functional.gelu(m.tensor([True, False]), approximate="tanh"),
    lambda m: m.nn.functional.nll_loss(m.tensor([[1, 2]]), m.tensor([1])),
    lambda m: m.nn.functional.nll_loss(m.tensor([[1, 2]], dtype=m.int32), m.tensor([5])),
    lambda m: m.nn.functional.nll_loss(m.tensor([1, 2]), m.tensor(1)),
    lambda m: m.nn.functional.nll_loss(m.tensor([[[1], [2]]]), m.tensor([[1]])),
    lambda m: m.nn.functional.cross_entropy(m.tensor([[[1], [2]]]), m.tensor([[1]])),
    lambda m: m.nn.functional.log_softmax(m.tensor([[1], [2]]), 0),
    lambda m: m.nn.functional.softmax(m.tensor([[1], [2]]), 0),
    lambda m: m.nn.functional.softmax(m.tensor([[1], [2]]), -1),
    lambda m: m.nn.functional.mse_loss(m.ones(3), m.ones(3), reduction="avg"),
    lambda m: m.nn.functional.l1_loss(m.ones(3), m.ones(3), reduction="bad"),
    lambda m: m.nn.functional.binary_cross_entropy_with_logits(m.ones(3), m.ones(2)),
    lambda m: m.nn.functional.binary_cross_entropy_with_logits(m.ones(3), m.ones(3),
                                                               reduction="x"),
    lambda m: m.nn.functional.binary_cross_entropy(m.ones(3), m.ones(2)),
    lambda m: m.nn.functional.binary_cross_entropy(m.ones(3) * 2, m.ones(3)),
    lambda m: m.nn.functional.binary_cross_entropy(m.ones(3) * -1, m.ones(3)),
    lambda m: m.nn.functional.binary_cross_entropy(m.ones(3), m.ones(3), reduction="x"),
    lambda m: m.nn.functional.cross_entropy(m.ones(3, 4), m.tensor([0, 4, 1])),
    lambda m: m.nn.functional.cross_entropy(m.ones(3, 4), m.tensor([0, -1, 1])),
    lambda m: m.nn.functional.cross_entropy(m.ones(3, 4), m.tensor([0, 1])),
    lambda m: m.nn.functional.cross_entropy(m.ones(3, 4), m.ones(3, 5)),
    lambda m: m.nn.functional.cross_entropy(m.ones(3, 4), m.tensor([0.0, 1.0, 2.0])),
    lambda m: m.nn.functional.cross_entropy(m.ones(3, 4), m.tensor([0, 1, 2]), reduction="x"),
    lambda m: m.nn.functional.nll_loss(m.ones(3, 4), m.tensor([0, 1, 2]).float()),
    lambda m: m.nn.functional.nll_loss(m.ones(3, 4), m.tensor([0, 1])),
    lambda m: m.nn.functional.nll_loss(m.ones(3, 4), m.tensor([0, 9, 1])),
    lambda m: m.nn.functional.nll_loss(m.tensor(1.0), m.tensor(0)),
    lambda m: m.nn.functional.nll_loss(m.ones(3, 4), m.tensor([[0, 1, 2]])),
    lambda m: m.nn.functional.softmax(m.ones(3, dtype=m.int64), 0),
    lambda m: m.nn.functional.log_softmax(m.ones(3), 1),
    lambda m: m.nn.functional.softmax(m.ones(3), 2),
    lambda m: m.nn.functional.nll_loss(m.ones(3, 4), m.tensor([0, 1, 2], dtype=m.int32)),
    lambda m: m.nn.functional.nll_loss(m.ones(2, 4, 3), m.zeros(2, 3, dtype=m.uint8)),
    lambda m: m.nn.functional.nll_loss(m.ones(2, 4, 3), m.zeros(2, 3)),
    lambda m: m.nn.functional.nll_loss(m.ones(3, 4), m.zeros(3, 5, dtype=m.int64)),
    lambda m: m.nn.functional.nll_loss(m.ones(4), m.tensor([0, 1])),
    lambda m: m.nn.functional.nll_loss(m.ones(2, 4, 3), m.zeros(2, 4, dtype=m.int64)),
    lambda m: m.nn.functional.nll_loss(m.ones(2, 4, 3), m.zeros(3, 3, dtype=m.int64)),
    lambda m: m.nn.functional.nll_loss(m.ones(2, 4, 3), m.full((2, 3), 7)),
    lambda m: m.nn.functional.nll_loss(m.ones(3, 4), m.tensor([0, 1, 2]), weight=m.ones(3)),
    lambda m: m.nn.functional.cross_entropy(m.ones(3, 4), m.ones(3, 4) / 4, weight=m.ones(3)),
    lambda m: m.nn.functional.cross_entropy(m.ones(3, 4), m.tensor([0, 1, 2]),
                                            label_smoothing=1.5),
    lambda m: m.nn.functional.linear(m.ones(2, 2, 3), m.ones(4, 3), m.ones(5)),
    lambda m: m.nn.functional.linear(m.ones(3), m.ones(4, 2)),
    lambda m: m.nn.functional.linear(m.ones(2, 2, 3), m.ones(4, 2)),
    lambda m: m.nn.functional.binary_cross_entropy_with_logits(
        m.ones(3, requires_grad=True), m.ones(3), weight=m.ones(3, requires_grad=True)),
    lambda m: m.nn.functional.binary_cross_entropy_with_logits(
        m.ones(3, requires_grad=True), m.ones(3), pos_weight=m.ones(3, requires_grad=True)),
    lambda m: m.nn.functional.binary_cross_entropy(
        m.ones(3, requires_grad=True) / 2, m.ones(3), weight=m.ones(3, requires_grad=True)),
    lambda m: m.nn.functional.nll_loss(m.ones(3, 4, requires_grad=True), m.tensor([0, 1, 2]),
                                       weight=m.ones(4, requires_grad=True)),
    lambda m: m.nn.functional.cross_entropy(m.ones(3, 4), m.tensor([0, 1, 2]),
                                            weight=m.ones(4, requires_grad=True)),
]


@pytest.mark.parametrize("case", range(len(ERRORS)))
def test_errors_match_torch(case):
    _same_error(ERRORS[case])


@F
def test_cross_entropy_probabilities_of_empty_batch_and_promotion(dtype):
    check(lambda m, a, b: m.nn.functional.cross_entropy(a, b), np.zeros((0, 4), dtype),
          np.zeros((0, 4), dtype))
    check(lambda m, a, b: m.nn.functional.cross_entropy(a, b), u((3, 4), dtype, seed=40),
          u((3, 4), np.float64, 0, 1, seed=41))


def test_loss_weights_may_require_grad_under_no_grad():
    for m in (sg, torch):
        with m.no_grad():
            m.nn.functional.nll_loss(m.ones(3, 4), m.tensor([0, 1, 2]),
                                     weight=m.ones(4, requires_grad=True))


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("name,target", [("nll_loss", [0, -1, 1]), ("cross_entropy", [0, -2, 1]),
                                         ("nll_loss", [0, 5, 1]), ("cross_entropy", [4, 0, 1])])
def test_targets_out_of_range_raise_as_torch(name, target, compiled):
    """A target outside [0, C) raises PyTorch's IndexError, compiled too (it was read
    wrapped: -1 as the last class), at every call of a compiled loss."""
    x = np.log(np.array([[0.1, 0.2, 0.3, 0.4]] * 3))
    with pytest.raises(IndexError) as want:
        getattr(torch.nn.functional, name)(torch.tensor(x), torch.tensor(target))
    f = getattr(sg.nn.functional, name)
    f = sg.compile(f) if compiled else f
    if compiled:
        f(sg.tensor(x), sg.tensor([0, 1, 2]))            # compiled with good targets first
    with pytest.raises(IndexError) as got:
        f(sg.tensor(x), sg.tensor(target))
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("backend", ["llvm", "numpy"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,ignore", [("nll_loss", -100), ("cross_entropy", -100),
                                         ("cross_entropy", -1), ("nll_loss", 7)])
def test_compiled_loss_checks_targets_at_every_batch_size(name, ignore, dtype, backend):
    """A compiled loss (value and gradient) called at several batch sizes -- one
    shape-generic kernel on llvm -- checks its targets at every call: ignore_index
    targets pass, anything else outside [0, C) raises PyTorch's IndexError (never read
    wrapped); values and gradients as torch's."""
    C = 5
    fs = getattr(sg.nn.functional, name)
    ft = getattr(torch.nn.functional, name)
    g = sg.value_and_grad(lambda x, t: fs(x, t, ignore_index=ignore), backend=backend)
    rng = np.random.default_rng(3)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-13)
    for n in (4, 3, 7, 12, 5):
        x = rng.normal(size=(n, C)).astype(dtype)
        if name == "nll_loss":
            x = np.log(np.exp(x) / np.exp(x).sum(1, keepdims=True)).astype(dtype)
        t = rng.integers(0, C, size=n)
        t[1] = ignore                                   # an ignored target passes
        xt = torch.tensor(x, requires_grad=True)
        want = ft(xt, torch.tensor(t), ignore_index=ignore)
        want.backward()
        v, gx = g(x, t)
        np.testing.assert_allclose(np.asarray(v), want.detach().numpy(), **tol)
        np.testing.assert_allclose(np.asarray(gx), xt.grad.numpy(), **tol)
        for bad in (-1, -2, C, C + 1):
            if bad == ignore:
                continue
            tb = t.copy()
            tb[-1] = bad
            with pytest.raises(IndexError) as w:
                ft(torch.tensor(x), torch.tensor(tb), ignore_index=ignore)
            with pytest.raises(IndexError) as got:
                g(x, tb)
            assert str(got.value) == str(w.value)
    if backend == "llvm":
        assert g.cache_info().misses == 2, g.last_miss_reason  # one size, then generic


@pytest.mark.parametrize("compiled", [False, True])
def test_embedding_of_a_negative_index_raises_as_torch(compiled):
    w = np.arange(12.0).reshape(3, 4)
    with pytest.raises(IndexError) as want:
        torch.nn.functional.embedding(torch.tensor([0, -1, 1]), torch.tensor(w))
    f = sg.nn.functional.embedding
    f = sg.compile(f) if compiled else f
    if compiled:
        np.testing.assert_array_equal(np.asarray(f(sg.tensor([0, 2, 1]), sg.tensor(w))),
                                      w[[0, 2, 1]])
    with pytest.raises(IndexError) as got:
        f(sg.tensor([0, -1, 1]), sg.tensor(w))
    assert str(got.value) == str(want.value)


BAD_ARGUMENTS = {
    "hardtanh_bounds": lambda L: L.nn.functional.hardtanh(L.zeros(3), 1.0, -1.0),
    "Hardtanh_bounds": lambda L: L.nn.Hardtanh(1.0, -1.0),
    "Hardtanh_equal": lambda L: L.nn.Hardtanh(0.5, 0.5),
    "repeat_interleave_float": lambda L: L.repeat_interleave(L.ones(3), L.tensor([1.0, 2.0, 1.0])),
    "repeat_interleave_float_counts": lambda L: L.repeat_interleave(L.tensor([1.0, 2.0])),
    "normal_int_mean": lambda L: L.normal(L.tensor([1, 2]), 1.0),
}


@pytest.mark.parametrize("name", sorted(BAD_ARGUMENTS))
def test_bad_arguments_raise_torchs_errors(name):
    with pytest.raises(Exception) as want:
        BAD_ARGUMENTS[name](torch)
    with pytest.raises(Exception) as got:
        BAD_ARGUMENTS[name](sg)
    assert type(got.value) is type(want.value) and str(got.value) == str(want.value)


@pytest.mark.parametrize("which", ["input", "weight", "bias"])
def test_layer_norm_checks_its_saved_tensors_as_torch(which):
    """An in-place update of the input, weight or bias between layer_norm and backward
    raises PyTorch's error (the eager kernel gave a silently wrong gradient)."""
    errors = []
    for lib in (torch, sg):
        a = lib.tensor([[0.0, 1.0, 2.8], [5.2, 8.0, 11.2]], requires_grad=True)
        w = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        b = lib.zeros(3, requires_grad=True)
        y = lib.nn.functional.layer_norm(a, (3,), w, b)
        with lib.no_grad():
            {"input": a, "weight": w, "bias": b}[which].mul_(2)
        with pytest.raises(RuntimeError) as e:
            y.sum().backward()
        errors.append(str(e.value).split(" is at version")[0])
    assert errors[0] == errors[1]


@pytest.mark.parametrize("args", ["weight [2]", "bias [2]", "weight [2, 3]", "input [3, 5]"])
def test_layer_norm_shape_errors_as_torch(args):
    def call(L):
        x = L.ones(3, 5) if args == "input [3, 5]" else L.ones(2, 3)
        shp = (4,) if args == "input [3, 5]" else (3,)
        extra = {"weight [2]": (L.ones(2),), "bias [2]": (None, L.ones(2)),
                 "weight [2, 3]": (L.ones(2, 3),), "input [3, 5]": ()}[args]
        return L.nn.functional.layer_norm(x, shp, *extra)
    with pytest.raises(RuntimeError) as want:
        call(torch)
    with pytest.raises(RuntimeError) as got:
        call(sg)
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_binary_cross_entropy_tiny_probabilities(dtype):
    """log(1 - x) as log1p(-x), as PyTorch (review 4 finding 15c: loss at x = 1e-8, t = 0
    was -0.0 in float32)."""
    x = np.array([1e-8, 1e-8, 1e-17, 0.0, 1.0, 0.3, 1 - 1e-7], dtype)
    t = np.array([0.0, 1e-8, 0.0, 0.0, 1.0, 0.5, 1.0], dtype)
    want = torch.nn.functional.binary_cross_entropy(torch.tensor(x), torch.tensor(t),
                                                    reduction="none").numpy()
    got = sg.nn.functional.binary_cross_entropy(sg.tensor(x), sg.tensor(t),
                                                     reduction="none").numpy()
    # (log and log1p from each library's math library: a few ulp apart in float32)
    tol = 1e-6 if dtype == "float32" else 1e-14
    np.testing.assert_allclose(got, want, rtol=tol, atol=0)
    for be in ("llvm", "numpy"):
        f = sg.compile(lambda a, b: sg.nn.functional.binary_cross_entropy(
            a, b, reduction="none"), backend=be)
        np.testing.assert_allclose(np.asarray(f(sg.tensor(x), sg.tensor(t)).numpy()),
                                   want, rtol=tol, atol=0)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_relu_keeps_negative_zero(dtype):
    """relu(-0.0) is -0.0 (PyTorch's clamp_min), NaN stays NaN; eager, llvm, numpy."""
    x = np.array([-0.0, 0.0, np.nan, -1.0, 2.0, -np.inf], dtype)
    want = torch.relu(torch.tensor(x)).numpy()
    outs = [sg.relu(sg.tensor(x)).numpy()]
    outs += [np.asarray(sg.compile(lambda v: sg.relu(v) * 1.0, backend=be)(sg.tensor(x)).numpy())
             for be in ("llvm", "numpy")]
    for got in outs:
        np.testing.assert_array_equal(got, want)
        assert np.array_equal(np.signbit(got), np.signbit(want))


def test_layer_norm_mixed_float_dtypes_refused():
    """review 4 finding 17: float32 input with float64 weight / bias (and the reverse)
    raise PyTorch's CPU errors; same dtypes run."""
    def case(xd, wd, bd):
        def run(L):
            x = L.ones(2, 3, dtype=getattr(L, xd))
            w = None if wd is None else L.ones(3, dtype=getattr(L, wd))
            b = None if bd is None else L.ones(3, dtype=getattr(L, bd))
            return L.nn.functional.layer_norm(x, (3,), w, b)
        return run
    import itertools
    bad = [(x, w, b) for x, w, b in itertools.product(("float32", "float64"),
                                                       (None, "float32", "float64"),
                                                       (None, "float32", "float64"))
           if {w, b} - {None, x}]
    for args in bad:
        with pytest.raises(RuntimeError) as want:
            case(*args)(torch)
        with pytest.raises(RuntimeError) as got:
            case(*args)(sg)
        assert str(got.value) == str(want.value)
    for args in (("float32", "float32", "float32"), ("float64", None, "float64")):
        np.testing.assert_array_equal(case(*args)(sg).numpy(), case(*args)(torch).numpy())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_binary_cross_entropy_second_derivative_as_torch(dtype):
    """BCE's gradient is PyTorch's (x - t) / max((1 - x) x, 1e-12) and its derivative is
    PyTorch's double backward, (x² - 2xt + t) / ((x + eps)² (1 - x + eps)²), not the clamp
    differentiated (review4 #15 a/b: 1e12 at saturated / exact predictions, the wrong sign
    at x = 1e-8 in float32). Values, gradients, autograd.grad(create_graph=True) and
    hessians against torch's, eager, llvm and numpy."""
    x = np.array([1e-8, 1e-8, 1e-17, 0.0, 1.0, 0.3, 1 - 1e-7, 0.0, 1.0, 0.999, 0.5], dtype)
    t = np.array([0.0, 1e-8, 0.0, 0.0, 1.0, 0.5, 1.0, 0.25, 0.0, 1.0, 0.5], dtype)
    tol = dict(rtol=1e-5, atol=0) if dtype == "float32" else dict(rtol=1e-13, atol=0)

    def bce(L, v, w):
        return L.nn.functional.binary_cross_entropy(v, w, reduction="none")

    def orders(L):
        v = L.tensor(x, requires_grad=True)
        w = L.tensor(t, requires_grad=True)
        loss = bce(L, v, w)
        gx, gt = L.autograd.grad(loss.sum(), (v, w), create_graph=True)
        hxx, hxt = L.autograd.grad(gx.sum(), (v, w))
        return [a.detach().numpy() for a in (loss, gx, gt, hxx, hxt)]
    want = orders(torch)
    for name, w, g in zip(("loss", "d/dx", "d/dt", "d2/dx2", "d2/dxdt"), want, orders(sg)):
        np.testing.assert_allclose(g, w, err_msg=name, **tol)
    assert np.isfinite(want[3]).all() and want[3][3] == 0 and want[3][4] == 0
    tt = torch.tensor(t)
    h_want = torch.func.hessian(lambda v: bce(torch, v, tt).sum())(torch.tensor(x)).numpy()
    for be in ("llvm", "numpy"):
        h = sg.hessian(lambda v: bce(sg, v, sg.tensor(t)).sum(), backend=be)(x)
        np.testing.assert_allclose(np.asarray(h), h_want, err_msg=be, **tol)
        g = sg.grad(lambda v: bce(sg, v, sg.tensor(t)).sum(), backend=be)(x)
        np.testing.assert_allclose(np.asarray(g), want[1], err_msg=be, **tol)
