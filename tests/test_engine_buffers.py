"""The engine may hand a gradient's buffer to .grad without copying (as PyTorch does):
it must never make two .grad tensors, or a .grad and a user's tensor, share memory."""
import numpy as np
import torch

import symgrad


def test_add_gradient_is_not_shared_between_inputs():
    a = symgrad.ones(3, requires_grad=True)
    b = symgrad.ones(3, requires_grad=True)
    (a * 2 + b).sum().backward()
    assert not np.shares_memory(a.grad.numpy(), b.grad.numpy())
    a.grad.add_(5)
    np.testing.assert_array_equal(b.grad.numpy(), [1, 1, 1])


def test_seed_given_by_the_user_is_copied():
    x = symgrad.ones(3, requires_grad=True)
    v = symgrad.tensor([1.0, 2.0, 3.0])
    x.backward(v)
    assert not np.shares_memory(x.grad.numpy(), v.numpy())
    v.mul_(10)
    np.testing.assert_array_equal(x.grad.numpy(), [1, 2, 3])


def test_gradient_of_a_view_is_not_shared_with_its_base():
    x = symgrad.ones(2, 3, requires_grad=True)
    y = symgrad.ones(6, requires_grad=True)
    (x.reshape(6) * 3 + y).sum().backward()
    assert not np.shares_memory(x.grad.numpy(), y.grad.numpy())


def test_accumulation_matches_torch():
    for lib in (symgrad, torch):
        w = lib.ones(4, requires_grad=True)
        for k in range(3):
            ((w * (k + 1)) ** 2).sum().backward()
        if lib is symgrad:
            got = w.grad.numpy().copy()
        else:
            want = w.grad.numpy()
    np.testing.assert_allclose(got, want)
