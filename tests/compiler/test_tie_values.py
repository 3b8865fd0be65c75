"""``maximum`` / ``minimum`` at ties, compiled: the value is PyTorch's bit for bit (an odd
subnormal kept -- the mean ``x/2 + y/2`` rounded it), and
the gradient of a chain of them splits as torch's."""
import numpy as np
import pytest
import torch

import symgrad as sg

TINY = 5e-324
A = [-0.0, 0.0, np.inf, -np.inf, TINY, 3 * TINY, -3 * TINY, 1e308, 1.0]
B = [0.0, -0.0, np.inf, -np.inf, TINY, 3 * TINY, -3 * TINY, 1e308, 1.0]


@pytest.mark.parametrize("backend", ["llvm", "numpy"])
@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_tie_values_bit_equal(name, backend):
    want = getattr(torch, name)(torch.tensor(A, dtype=torch.float64),
                                torch.tensor(B, dtype=torch.float64)).numpy()
    f = sg.compile(lambda x, y: getattr(sg, name)(x, y) * 1, backend=backend)
    got = f(sg.tensor(A, dtype=sg.float64), sg.tensor(B, dtype=sg.float64)).numpy()
    np.testing.assert_array_equal(got, want)
    # (the sign of a +0 / -0 tie is whatever torch's kernel for this CPU's vector unit
    # returns -- not promised across hosts -- so signs are compared off zero only)
    nonzero = want != 0
    np.testing.assert_array_equal(np.signbit(got[nonzero]), np.signbit(want[nonzero]))


@pytest.mark.parametrize("backend", ["llvm", "numpy"])
def test_nested_ties_of_odd_subnormals_split_as_torch(backend):
    """``maximum(v0, maximum(v1, v0))`` with v0 == v1 == an odd subnormal (fuzz seed
    103002339): v0's gradient is 3/4 of the weight, as torch's."""
    v = np.array([3 * TINY, 1.0, 7 * TINY])
    w = np.array([0.5, 2.0, 1.5])

    def loss(L, a, b):
        return (L.maximum(a, L.maximum(b, a)) * L.tensor(w)).sum()
    ta, tb = (torch.tensor(v, requires_grad=True) for _ in range(2))
    want = torch.autograd.grad(loss(torch, ta, tb), (ta, tb))
    got = sg.compile(sg.grad(lambda a, b: loss(sg, a, b), argnums=(0, 1)),
                     backend=backend)(v, v)
    for g, t in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), t.numpy())
