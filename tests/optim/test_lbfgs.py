"""optim.LBFGS against torch.optim.LBFGS: fixed steps and the strong-Wolfe line search on
convex and non-convex problems, both dtypes, several outer steps each; the state PyTorch
keeps (its keys, its evaluation counts) and a saved state resuming identically."""
from __future__ import annotations

import io

import numpy as np
import pytest
import torch

import symgrad as sg

DTYPES = (np.float32, np.float64)


def _tol(dtype):
    return dict(rtol=1e-3, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-9, atol=1e-12)


def _convex(lib, dtype):
    rng = np.random.default_rng(0)
    m = rng.normal(size=(5, 5))
    a = lib.tensor((m @ m.T / 5 + np.eye(5)).astype(dtype))
    b = lib.tensor(rng.normal(size=5).astype(dtype))
    x = lib.nn.Parameter(lib.tensor(np.zeros(5, dtype)))
    return [x], lambda: 0.5 * (x @ (a @ x)) - (b * x).sum() + 0.1 * (x ** 4).sum()


def _rosenbrock(lib, dtype):
    """Two parameters, a valley: the line search brackets and zooms."""
    x = lib.nn.Parameter(lib.tensor(np.array([-1.5, 2.0], dtype)))
    c = lib.nn.Parameter(lib.tensor(np.array([0.5], dtype)))
    return [x, c], lambda: (100 * (x[1] - x[0] ** 2) ** 2 + (1 - x[0]) ** 2
                            + (c - 0.25).pow(2).sum() * 3)


def _logistic(lib, dtype):
    rng = np.random.default_rng(2)
    data = lib.tensor(rng.normal(size=(40, 3)).astype(dtype))
    labels = lib.tensor((rng.random(40) > 0.5).astype(dtype))
    w = lib.nn.Parameter(lib.tensor(np.zeros((3,), dtype)))
    b = lib.nn.Parameter(lib.tensor(np.zeros((), dtype)))

    def loss():
        z = data @ w + b
        return (lib.nn.functional.softplus(z) - labels * z).mean() + 0.01 * (w * w).sum()
    return [w, b], loss


def _run(lib, problem, dtype, kw, outer=4):
    params, f = problem(lib, dtype)
    opt = lib.optim.LBFGS(params, **kw)

    def closure():
        opt.zero_grad()
        loss = f()
        loss.backward()
        return loss
    losses = [float(opt.step(closure).detach()) for _ in range(outer)]
    return losses, [p.detach().numpy().copy() for p in params], opt


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kw", [dict(), dict(lr=0.5, history_size=3, max_iter=7)])
def test_fixed_steps_equal_torch(kw, dtype):
    l1, x1, _ = _run(sg, _convex, dtype, kw)
    l2, x2, _ = _run(torch, _convex, dtype, kw)
    np.testing.assert_allclose(l1, l2, **_tol(dtype))
    np.testing.assert_allclose(x1[0], x2[0], **_tol(dtype))


KWS = [dict(line_search_fn="strong_wolfe"),
       dict(line_search_fn="strong_wolfe", lr=0.5, history_size=3, max_iter=9),
       dict(line_search_fn="strong_wolfe", max_iter=30, max_eval=12)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kw", KWS)
@pytest.mark.parametrize("problem", [_convex, _rosenbrock, _logistic])
def test_strong_wolfe_equals_torch(problem, kw, dtype):
    # Rosenbrock in float32: the iterates agree bit for bit for the first iterations,
    # then last-bit differences of BLAS dots and sums grow along the valley -- one outer
    # step (up to 30 inner ones) there, with an absolute tolerance of 1e-3
    rosen32 = problem is _rosenbrock and dtype == np.float32
    outer = 1 if rosen32 else 4
    tol = dict(rtol=1e-3, atol=1e-3) if rosen32 else _tol(dtype)
    l1, x1, so = _run(sg, problem, dtype, kw, outer)
    l2, x2, to = _run(torch, problem, dtype, kw, outer)
    np.testing.assert_allclose(l1, l2, **tol)
    for a, b in zip(x1, x2):
        assert a.dtype == b.dtype
        np.testing.assert_allclose(a, b, **tol)
    ss, ts = so.state_dict()["state"][0], to.state_dict()["state"][0]
    assert sorted(ss) == sorted(ts)
    if dtype == np.float64:
        assert ss["func_evals"] == ts["func_evals"] and ss["n_iter"] == ts["n_iter"]
        assert len(ss["old_dirs"]) == len(ts["old_dirs"])


def test_first_iterations_are_bit_identical_in_float32():
    """Float32 rounds as PyTorch's (scalars of the parameters' dtype, Python floats for
    losses): the first iterations on Rosenbrock, line searches included, agree exactly."""
    kw = dict(line_search_fn="strong_wolfe", max_iter=6)
    _, x1, so = _run(sg, _rosenbrock, np.float32, kw, 1)
    _, x2, to = _run(torch, _rosenbrock, np.float32, kw, 1)
    np.testing.assert_allclose(x1[0], x2[0], rtol=2e-7)
    assert so.state_dict()["state"][0]["func_evals"] == to.state_dict()["state"][0]["func_evals"]


def test_rosenbrock_converges_as_torch():
    """Many outer steps on the valley: both reach the minimum (1, 1) with the same
    number of evaluations."""
    l1, x1, so = _run(sg, _rosenbrock, np.float64, dict(line_search_fn="strong_wolfe"), 10)
    l2, x2, to = _run(torch, _rosenbrock, np.float64, dict(line_search_fn="strong_wolfe"), 10)
    np.testing.assert_allclose(x1[0], [1.0, 1.0], atol=1e-4)
    np.testing.assert_allclose(x1[0], x2[0], atol=1e-9)
    assert so.state_dict()["state"][0]["func_evals"] == to.state_dict()["state"][0]["func_evals"]


@pytest.mark.parametrize("kw", [dict(), dict(line_search_fn="strong_wolfe", history_size=2)])
def test_saved_state_resumes_identically(kw):
    _, x_a, opt_a = _run(sg, _rosenbrock, np.float64, kw, outer=2)
    buf = io.BytesIO()
    sg.save(opt_a.state_dict(), buf)
    buf.seek(0)
    params, f = _rosenbrock(sg, np.float64)
    for p, v in zip(params, x_a):
        p.data.copy_(sg.tensor(v))
    opt_b = sg.optim.LBFGS(params, **kw)
    opt_b.load_state_dict(sg.load(buf))

    def closure(opt, fn):
        def c():
            opt.zero_grad()
            loss = fn()
            loss.backward()
            return loss
        return c
    opt_a.step(closure(opt_a, lambda: _rosenbrock_value(opt_a)))
    opt_b.step(closure(opt_b, f))
    for p_a, p_b in zip(opt_a.param_groups[0]["params"], params):
        np.testing.assert_array_equal(p_a.detach().numpy(), p_b.detach().numpy())


def _rosenbrock_value(opt):
    x, c = opt.param_groups[0]["params"]
    return 100 * (x[1] - x[0] ** 2) ** 2 + (1 - x[0]) ** 2 + (c - 0.25).pow(2).sum() * 3


@pytest.mark.parametrize("fn", [
    lambda m: m.optim.LBFGS([m.nn.Parameter(m.ones(1))], lr=-1.0),
    lambda m: m.optim.LBFGS([{"params": [m.nn.Parameter(m.ones(1))]},
                             {"params": [m.nn.Parameter(m.ones(1))]}]),
    lambda m: _run(m, _convex, np.float64, dict(line_search_fn="armijo")),
])
def test_bad_arguments_raise_pytorchs_errors(fn):
    with pytest.raises(Exception) as t:
        fn(torch)
    with pytest.raises(Exception) as s:
        fn(sg)
    assert type(s.value) is type(t.value) and str(s.value) == str(t.value)


def test_step_without_closure_is_a_type_error_as_torch():
    """PyTorch fails calling None (TypeError); the type is kept, the text says why."""
    with pytest.raises(TypeError, match="LBFGS requires a closure"):
        sg.optim.LBFGS([sg.nn.Parameter(sg.ones(1))]).step(None)
