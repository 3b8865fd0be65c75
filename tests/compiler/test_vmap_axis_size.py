"""``symgrad.vmap(axis_size=)`` as ``jax.vmap``'s (review6 #12): the batch size when no
argument is mapped (outputs broadcast over it), checked against mapped sizes; JAX's
error texts."""
import numpy as np
import pytest

import symgrad as sg

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_axis_size_as_jax(dt):
    x = np.linspace(-1, 1, 6).reshape(2, 3).astype(dt)
    for in_axes, axis_size, f in ((None, 3, lambda m: lambda v: m.tanh(v) * 2),
                                  (0, 2, lambda m: lambda v: (v ** 2).sum()),
                                  ((None,), 4, lambda m: lambda v: v.sum(0))):
        want = jax.vmap(f(jnp), in_axes=in_axes, axis_size=axis_size)(x)
        got = sg.vmap(f(sg), in_axes=in_axes, axis_size=axis_size)(x)
        assert tuple(got.shape) == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-6 if dt == np.float32 else 1e-14)
    want = jax.grad(lambda v: jax.vmap(lambda w: (w * v).sum(), in_axes=None,
                                       axis_size=3)(v[0]).sum())(x)
    got = sg.grad(lambda v: sg.vmap(lambda w: (w * v).sum(), in_axes=None,
                                    axis_size=3)(v[0]).sum())(x)
    np.testing.assert_allclose(got, want, rtol=1e-6 if dt == np.float32 else 1e-14)


def test_axis_size_errors_as_jax():
    for call in (lambda m, v: m.vmap(lambda x: x, in_axes=None)(v),
                 lambda m, v: m.vmap(lambda x: x, axis_size=3)(v)):
        msgs = []
        for m in (jax, sg):
            with pytest.raises(ValueError) as e:
                call(m, np.ones((4, 2)))
            msgs.append(str(e.value).replace("args[0]", "x").split("\n")[:2])
        assert msgs[0] == msgs[1]
