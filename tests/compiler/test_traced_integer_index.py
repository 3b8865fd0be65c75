"""``x[i]`` with a traced integer (an int argument of jit, a 0-d index tensor in compile,
a batched index under vmap) indexes dynamically as JAX / torch.compile do (review6 #8),
where it raised TracerBoolError. Values and gradients against jax.jit / jax.grad /
jax.vmap and torch eager. An out-of-range position raises torch's IndexError (JAX
clamps it: symgrad gives no such silent other answer)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy

DTYPES = [(np.float32, 1e-6), (np.float64, 1e-14)]
Z = np.arange(20.0).reshape(4, 5) / 7

CASES = {
    "row": (lambda Z, i, j: Z[i], (2, 0)),
    "negative": (lambda Z, i, j: Z[i] * 2, (-1, 0)),
    "column": (lambda Z, i, j: Z[:, j], (0, 3)),
    "both": (lambda Z, i, j: Z[i, j] + Z[j - 2, i], (1, 3)),
    "with_slice": (lambda Z, i, j: Z[i, 1:] * Z[:, j].sum(), (2, -2)),
    "with_none": (lambda Z, i, j: Z[None, i, ..., None], (3, 0)),
}


@pytest.mark.parametrize("dt,tol", DTYPES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_jit_and_grad_as_jax(name, dt, tol):
    fn, (i, j) = CASES[name]
    z = Z.astype(dt)
    want = jax.jit(fn)(z, i, j)
    got = sg.jit(fn)(z, i, j)
    assert tuple(got.shape) == want.shape
    np.testing.assert_allclose(got, want, rtol=tol)
    want_g = jax.grad(lambda z, i, j: (fn(z, i, j) ** 2).sum())(z, i, j)
    got_g = sg.grad(lambda z, i, j: (fn(z, i, j) ** 2).sum())(z, i, j)
    np.testing.assert_allclose(got_g, want_g, rtol=tol)


def test_vmap_over_batched_indices_as_jax():
    idx = np.array([0, 2, 4, 1])
    np.testing.assert_allclose(sg.vmap(lambda x, i: x[i])(Z, idx),
                               jax.vmap(lambda x, i: x[i])(Z, idx), rtol=1e-14)
    want = jax.vmap(jax.grad(lambda x, i: (x[i] * x).sum()))(Z, idx)
    got = sg.vmap(sg.grad(lambda x, i: (x[i] * x).sum()))(Z, idx)
    np.testing.assert_allclose(got, want, rtol=1e-14)


@pytest.mark.parametrize("dt,tol", DTYPES)
def test_compiled_tensor_index_backward_as_torch(dt, tol):
    f = sg.compile(lambda x, i: (x[i] * x[:, i]).sum() + x[i, i])
    for i in (1, -2, 3):
        xt = torch.tensor(Z[:, :4].astype(dt), requires_grad=True)
        want = (xt[torch.tensor(i)] * xt[:, torch.tensor(i)]).sum() + xt[torch.tensor(i),
                                                                         torch.tensor(i)]
        want.backward()
        xs = sg.tensor(Z[:, :4].astype(dt), requires_grad=True)
        got = f(xs, sg.tensor(i))
        got.backward()
        np.testing.assert_allclose(got.item(), want.item(), rtol=tol)
        np.testing.assert_allclose(xs.grad.numpy(), xt.grad.numpy(), rtol=tol)


def test_traced_index_assignment_as_jax():
    def f(x, i):
        y = x * 1
        y[i] = 0.0
        return y
    want = jax.jit(lambda x, i: (x * 1).at[i].set(0.0))(Z, 1)
    np.testing.assert_allclose(sg.jit(f)(Z, 1), want)


@pytest.mark.parametrize("backend", ["llvm", "numpy"])
@pytest.mark.parametrize("i", [4, 9, -5, -11])
def test_out_of_range_traced_index_raises_torchs_error(i, backend):
    with pytest.raises(IndexError) as want:
        torch.tensor(Z)[torch.tensor(i)]
    f = sg.compile(lambda x, i: x[i] * 2, backend=backend)
    assert f(sg.tensor(Z), sg.tensor(-1)).shape == (5,)
    with pytest.raises(IndexError) as got:
        f(sg.tensor(Z), sg.tensor(i))
    assert str(got.value) == str(want.value)
    with pytest.raises(IndexError, match=f"index {i} is out of bounds"):
        sg.jit(lambda x, i: x[i])(Z, i)


def test_refused_combinations_say_so():
    with pytest.raises(IndexError, match="traced integer together with index tensors"):
        sg.jit(lambda x, i: x[i, np.array([0, 1])])(Z, 1)
    with pytest.raises(IndexError, match="must be long, int, byte or bool"):
        sg.jit(lambda x, i: x[i])(Z, 1.0)
