"""``unbind`` / ``narrow`` (review6 #12) as torch's: values, views (writes reach the
base), grad_fn names, gradients eager and compiled, both dtypes, error types and texts."""
import numpy as np
import pytest
import torch

import symgrad as sg

DTYPES = ["float32", "float64"]
A = np.arange(24.0).reshape(2, 3, 4) / 5


def _run(L, dt, fn):
    x = L.tensor(A, dtype=getattr(L, dt), requires_grad=True)
    out = fn(L, x)
    (out * L.arange(out.numel(), dtype=out.dtype).reshape(out.shape)).sum().backward()
    return out.detach().numpy(), x.grad.numpy()


CASES = {
    "unbind0": lambda L, x: L.stack([t * (k + 1) for k, t in enumerate(x.unbind())]),
    "unbind_neg": lambda L, x: L.stack(L.unbind(x, -1), 0) ** 2,
    "narrow": lambda L, x: x.narrow(1, 1, 2).exp(),
    "narrow_neg_start": lambda L, x: L.narrow(x, -1, -3, 2) * 3,
    "narrow_tensor_start": lambda L, x: x.narrow(2, L.tensor(1), 3).sin(),
    "narrow_empty": lambda L, x: x.narrow(1, 3, 0) + 1,
}


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_values_and_gradients_as_torch(name, dt):
    want = _run(torch, dt, CASES[name])
    got = _run(sg, dt, CASES[name])
    tol = 1e-6 if dt == "float32" else 1e-14
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


@pytest.mark.parametrize("name", ["unbind0", "narrow", "narrow_neg_start"])
def test_compiled_as_torch(name):
    fn = CASES[name]
    xt = torch.tensor(A, requires_grad=True)
    fn(torch, xt).sum().backward()
    xs = sg.tensor(A, requires_grad=True)
    sg.compile(lambda x: fn(sg, x).sum())(xs).backward()
    np.testing.assert_allclose(xs.grad.numpy(), xt.grad.numpy(), rtol=1e-14)


def test_views_and_names_as_torch():
    for L in (torch, sg):
        x = L.tensor(A.copy(), requires_grad=True)
        assert type(x.unbind(1)[0].grad_fn).__name__ == "UnbindBackward0"
        assert type(x.narrow(0, 0, 2).grad_fn).__name__ == "SliceBackward0"
        y = L.tensor(A.copy())
        y.unbind()[1].zero_()
        y.narrow(2, 0, 1).fill_(-1.0)
        if L is torch:
            want = y.numpy()
        else:
            np.testing.assert_array_equal(y.numpy(), want)


@pytest.mark.parametrize("call", [
    lambda L, x: x.narrow(0, 5, 1), lambda L, x: x.narrow(1, 1, 5),
    lambda L, x: x.narrow(1, 1, -1), lambda L, x: x.narrow(3, 0, 1),
    lambda L, x: L.tensor(1.0).unbind(), lambda L, x: x.unbind(3),
    lambda L, x: L.tensor(1.0).narrow(0, 0, 1)])
def test_errors_as_torch(call):
    got = []
    for L in (torch, sg):
        with pytest.raises(Exception) as e:
            call(L, L.tensor(A))
        got.append((type(e.value), str(e.value)))
    assert got[0] == got[1]
