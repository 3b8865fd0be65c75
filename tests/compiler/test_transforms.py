"""jacobian / hessian / jvp / vjp, compiled, against torch.func."""
import numpy as np
import torch
import torch.func

import symgrad


def f_vec(lib, x):
    return (x.sin() * x[0] + x.exp().cumsum(0) if lib is torch else
            x.sin() * x[0] + _cumsum(x.exp()))


def _cumsum(v):
    from symgrad.dispatch import bind
    from symgrad.graph.primitives import PRIMITIVES
    return bind(PRIMITIVES["cumsum"], v, axis=0)


def vec(lib, x):
    return (x.tanh() * x.sum() + x ** 3)


def rosen(lib, x):
    return (100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2).sum()


def test_jacobian(backend):
    x = np.random.default_rng(0).standard_normal(5)
    got = symgrad.jacobian(lambda v: vec(symgrad, v), backend=backend)(x)
    want = torch.func.jacrev(lambda v: vec(torch, v))(torch.tensor(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_jacobian_two_arguments(backend):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((2, 3)), rng.standard_normal(3)
    got = symgrad.jacobian(lambda x, y: (x * y).exp(), argnums=(0, 1), backend=backend)(a, b)
    want = torch.func.jacrev(lambda x, y: (x * y).exp(), argnums=(0, 1))(
        torch.tensor(a), torch.tensor(b))
    for g, w in zip(got, want):
        assert g.shape == tuple(w.shape)
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-12, atol=1e-12)


def test_hessian_rosenbrock_10(backend):
    x = np.random.default_rng(2).standard_normal(10)
    got = symgrad.hessian(lambda v: rosen(symgrad, v), backend=backend)(x)
    want = torch.func.hessian(lambda v: rosen(torch, v))(torch.tensor(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


def test_jvp(backend):
    rng = np.random.default_rng(3)
    x, t = rng.standard_normal(6), rng.standard_normal(6)
    out, tan = symgrad.jvp(lambda v: vec(symgrad, v), (x,), (t,), backend=backend)
    w_out, w_tan = torch.func.jvp(lambda v: vec(torch, v), (torch.tensor(x),), (torch.tensor(t),))
    np.testing.assert_allclose(out, w_out.numpy(), rtol=1e-12)
    np.testing.assert_allclose(tan, w_tan.numpy(), rtol=1e-11, atol=1e-12)


def test_vjp(backend):
    rng = np.random.default_rng(4)
    x, u = rng.standard_normal(6), rng.standard_normal(6)
    out, fn = symgrad.vjp(lambda v: vec(symgrad, v), x, backend=backend)
    w_out, w_fn = torch.func.vjp(lambda v: vec(torch, v), torch.tensor(x))
    np.testing.assert_allclose(out, w_out.numpy(), rtol=1e-12)
    (ct,) = fn(u)                       # a tuple, one cotangent per primal (as JAX, torch)
    np.testing.assert_allclose(ct, w_fn(torch.tensor(u))[0].numpy(), rtol=1e-11, atol=1e-12)


def test_grad_of_several_arguments_keeps_structure(backend):
    f = symgrad.grad(lambda p, x: ((x @ p["w"] + p["b"]) ** 2).sum(), backend=backend)
    rng = np.random.default_rng(5)
    p = {"w": rng.standard_normal(3), "b": np.array(0.5)}
    x = rng.standard_normal((4, 3))
    g = f(p, x)
    assert set(g) == {"w", "b"}
    wt = torch.tensor(p["w"], requires_grad=True)
    bt = torch.tensor(p["b"], requires_grad=True)
    ((torch.tensor(x) @ wt + bt) ** 2).sum().backward()
    np.testing.assert_allclose(g["w"], wt.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(g["b"], bt.grad.numpy(), rtol=1e-12)
