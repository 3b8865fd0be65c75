"""Tensor hooks registered inside a traced function: the recorded graph of
``loss.backward()`` inside ``symgrad.compile`` runs them (as eager does, checked against
torch); symbolic transforms, which cannot, refuse clearly instead of ignoring them."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg


def f(lib, x):
    y = x * 2
    y.register_hook(lambda g: g * 10)
    return (y * y).sum()


def test_backward_inside_compile_runs_the_hook_as_torch():
    xt = torch.ones(2, dtype=torch.float64, requires_grad=True)
    f(torch, xt).backward()
    x = sg.tensor(np.ones(2), requires_grad=True)

    def step(x):
        f(sg, x).backward()
        return x.grad
    np.testing.assert_array_equal(np.asarray(sg.compile(step)(x)), xt.grad.numpy())


@pytest.mark.parametrize("transform", [sg.grad, sg.value_and_grad, sg.hessian])
def test_symbolic_transforms_refuse_hooks(transform):
    x = sg.tensor(np.ones(2), requires_grad=True)
    with pytest.raises(RuntimeError, match="cannot run tensor hooks registered on traced"):
        transform(lambda x: f(sg, x))(x)
