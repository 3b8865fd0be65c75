"""The engine may hand a gradient's buffer to .grad without copying (as PyTorch does):
it must never make two .grad tensors, or a .grad and a user's tensor, share memory."""
import numpy as np
import pytest
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


def test_gradient_from_a_broadcast_is_a_writeable_copy():
    """mean's backward broadcasts a 0-d cotangent (a read-only stride-0 view): .grad
    must be its own writeable memory, as in PyTorch."""
    for lib in (symgrad, torch):
        x = lib.ones(2, 3, requires_grad=True)
        x.mean().backward()
        x.grad.add_(1)
        x.grad[0, 0] = 5
        if lib is symgrad:
            got = x.grad.numpy().copy()
    np.testing.assert_array_equal(got, x.grad.numpy())


def test_float32_gradients_stay_float32_through_python_scalars():
    x = symgrad.ones(3, requires_grad=True)
    t = torch.ones(3, requires_grad=True)
    for lib, v in ((symgrad, x), (torch, t)):
        ((v * 0.1 + 2) ** 2.5 / 3.0).exp().sum().backward()
    assert x.grad.dtype is symgrad.float32
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-6)


def test_autograd_grad_returns_independent_tensors():
    x = symgrad.ones(3, requires_grad=True)
    y = symgrad.ones(3, requires_grad=True)
    gx, gy = symgrad.autograd.grad((x * 2 + y * 3).sum(), (x, y))
    assert type(gx) is symgrad.Tensor and gx.dtype is symgrad.float32
    assert gx.grad_fn is None and not gx.requires_grad
    gx.add_(1)
    np.testing.assert_array_equal(gy.numpy(), [3, 3, 3])
    assert x.grad is None and y.grad is None


def test_autograd_grad_of_a_sum_is_an_expanded_view_as_in_torch():
    """Both return sum's broadcast cotangent itself: writing into it is refused."""
    for lib in (symgrad, torch):
        x = lib.ones(3, requires_grad=True)
        gx, = lib.autograd.grad(x.sum(), (x,))
        with pytest.raises(RuntimeError, match="more than one element of the written-to"):
            gx.add_(1)
