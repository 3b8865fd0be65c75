"""torch.stack against torch 2.13: values, StackBackward0 and its next_functions (the
inputs' own nodes, no reshapes in between), gradients in float32 and float64 along every
dim, mixed dtypes (promotion, no kernel) and create_graph."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg

from oracle import check

R = np.random.default_rng(17)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_values_and_gradients_as_torch(dtype, dim):
    a, b, c = (R.standard_normal((3, 4)).astype(dtype) for _ in range(3))
    check(lambda m, x, y, z: m.stack([x * 2, y, z], dim), a, b, c)


def test_next_functions_mixed_dtypes_and_second_derivative_as_torch():
    out = []
    for m in (torch, sg):
        a = m.tensor([1.0, 2.0], requires_grad=True)
        b = m.tensor([3.0, -1.0], dtype=m.float64, requires_grad=True)
        s = m.stack([a, a * 3])
        names = [type(f).__name__ for f, _ in s.grad_fn.next_functions]
        mixed = m.stack([a, b], 1)
        (g,) = m.autograd.grad((m.stack([a * a, a]) ** 2).sum(), a, create_graph=True)
        (h,) = m.autograd.grad(g.sum(), a)
        mixed.sum().backward()
        out.append((names, str(mixed.dtype).split(".")[1], mixed.detach().numpy().tolist(),
                    g.detach().numpy().tolist(), h.numpy().tolist(), a.grad.numpy().tolist(),
                    b.grad.numpy().tolist()))
    assert out[1] == out[0]
