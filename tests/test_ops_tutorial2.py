"""cumprod, repeat / tile / repeat_interleave, scatter / scatter_add / index_add (issue 15
item 4) against torch 2.13: values, grad_fn names and gradients in float32 and float64, a
second derivative, the compiled gradient on both backends, in-place forms and PyTorch's
errors. cumprod's gradient is compared on inputs with no, one and several zeros."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg

from op_checks import check_everywhere, same_error
from oracle import check_vjp_fd

R = np.random.default_rng(2)
X = R.standard_normal((3, 4))
ZEROS = np.array([[1.5, 2.0, 0.0, 3.0, 0.5], [0.0, 2.0, 3.0, 0.0, 5.0],
                  [1.0, -1.0, 1.0, 1.0, 0.0], [0.0, 0.0, 2.0, 3.0, 1.0],
                  [2.0, 0.5, -1.5, 1.2, 0.7]])
IDX = [[0, 1], [2, 3], [1, 1]]
PERM = [[2, 0, 1, 3], [1, 3, 0, 2], [0, 1, 2, 3]]

OPS = {
    "cumprod": (lambda m, x: m.cumprod(x, 1), X),
    "cumprod_dim0": (lambda m, x: x.cumprod(0), X),
    "cumprod_zeros": (lambda m, x: m.cumprod(x, 1), ZEROS),
    "cumprod_zeros_dim0": (lambda m, x: m.cumprod(x, -2), ZEROS),
    "cumprod_dtype": (lambda m, x: m.cumprod(x, 1, dtype=m.float64), X),
    "repeat": (lambda m, x: x.repeat(2, 1), X), "repeat_new_dims": (lambda m, x: x.repeat(2, 1, 3), X),
    "repeat_list": (lambda m, x: x.repeat([1, 2]), X),
    "tile": (lambda m, x: m.tile(x, (2,)), X), "tile_method": (lambda m, x: x.tile(2, 1, 2), X),
    "repeat_interleave": (lambda m, x: x.repeat_interleave(2), X),
    "repeat_interleave_dim": (lambda m, x: m.repeat_interleave(x, 3, dim=0), X),
    "repeat_interleave_counts": (lambda m, x: x.repeat_interleave(m.tensor([1, 0, 2]), dim=0), X),
    "repeat_interleave_one_count": (lambda m, x: m.repeat_interleave(x, m.tensor([2]), dim=1), X),
    "scatter": (lambda m, x: m.scatter(x, 1, m.tensor(IDX), x[:, 1:3] * 2 + 1), X),
    "scatter_value": (lambda m, x: x.scatter(1, m.tensor(IDX), 2.5), X),
    "scatter_perm": (lambda m, x: m.scatter(m.zeros(3, 4, dtype=x.dtype), 1, m.tensor(PERM), x), X),
    "scatter_dim0": (lambda m, x: x.scatter(0, m.tensor([[2, 0, 1, 2]]), x[1:].exp()[:1]), X),
    "scatter_add": (lambda m, x: m.scatter_add(x, 1, m.tensor(IDX), x.sin()[:, 2:]), X),
    "scatter_add_dim0": (lambda m, x: x.scatter_add(0, m.tensor([[0, 0, 1, 2], [2, 2, 2, 0]]),
                                                        (x * x)[1:]), X),
    "index_add": (lambda m, x: m.index_add(x, 0, m.tensor([0, 2]), x[:2] * 3), X),
    "index_add_alpha": (lambda m, x: x.index_add(1, m.tensor([3, 0, 3]), x[:, :3].cos(), alpha=0.5), X),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(OPS))
def test_op_as_torch(name, dtype):
    fn, x = OPS[name]
    check_everywhere(fn, x.astype(dtype))


@pytest.mark.parametrize("fn", [
    lambda v: sg.scatter(v, 1, sg.tensor([[0, 1], [2, 3], [3, 1]]), v.exp()),
    lambda v: sg.scatter_add(v, 0, sg.tensor([[0, 2, 1, 0]]), v * v),
    lambda v: v.scatter(1, sg.tensor([[3], [0]]), v.sin()),
])
def test_scatter_from_a_larger_source_by_finite_differences(fn):
    """A source larger than the index: its uncovered part gets a zero gradient (torch 2.13
    raises "ScatterBackward0 returned an invalid gradient" there), first and second order."""
    def gradient(v):
        with sg.enable_grad():
            w = v if v.requires_grad else v.detach().requires_grad_()
            return sg.autograd.grad((fn(w) ** 3).sum(), [w], create_graph=True)[0]
    check_vjp_fd(fn, [X])
    check_vjp_fd(gradient, [X])


def test_cumprod_gradient_with_zeros_everywhere():
    """Every position of a zero, one and two zeros per lane, first and second order."""
    for n in (1, 2, 5):
        for zeros in ([], [0], [n - 1], [0, n - 1], [1, 3]):
            x = R.uniform(0.5, 1.5, (2, n)) * R.choice([-1, 1], (2, n))
            x[:, [z for z in zeros if z < n]] = 0.0
            check_everywhere(lambda m, v: m.cumprod(v, 1), x, compiled=n == 5)


def test_integer_results_as_torch():
    v = np.arange(1, 7).reshape(2, 3)
    for fn in (lambda m, t: m.cumprod(t, 1), lambda m, t: t.repeat(2, 1),
               lambda m, t: m.repeat_interleave(t, 2, dim=1),
               lambda m, t: m.repeat_interleave(m.tensor([2, 0, 3])),
               lambda m, t: t.scatter(1, m.tensor([[2], [0]]), 9),
               lambda m, t: t.scatter_add(1, m.tensor([[2, 2]]), t[:1]),
               lambda m, t: m.cumprod(t > 2, 0)):
        a, b = fn(sg, sg.tensor(v)), fn(torch, torch.tensor(v))
        assert str(a.dtype) == str(b.dtype)
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_in_place_forms_as_torch():
    for name, args in (("scatter_", (1, IDX, "src2")), ("scatter_add_", (1, IDX, "src2")),
                       ("index_add_", (0, [2, 0], "src3")), ("scatter_", (1, IDX, 1.5))):
        res = []
        for m in (sg, torch):
            x = m.tensor(X, requires_grad=True)
            src = m.tensor(X * 3, requires_grad=True)
            y = x * 1
            a = [m.tensor(v) if isinstance(v, list) else src if v == "src" else
                 src[:, :2] if v == "src2" else src[:2] if v == "src3" else v for v in args]
            getattr(y, name)(*a)
            (y * y).sum().backward()
            res.append((y.grad_fn.name(), y.detach().numpy().copy(), x.grad.numpy().copy(),
                        None if src.grad is None else src.grad.numpy().copy()))
        assert res[0][0] == res[1][0]
        for p, q in zip(res[0][1:], res[1][1:]):
            assert (p is None) == (q is None) or not np.any(p if q is None else q)
            if p is not None and q is not None:
                np.testing.assert_allclose(p, q, rtol=1e-12)


BAD = [
    lambda m: m.ones(3, 4).repeat(2), lambda m: m.ones(3, 4).repeat(-1, 2),
    lambda m: m.tile(m.ones(3, 4), (2, -1)),
    lambda m: m.ones(3, 4).repeat_interleave(-1),
    lambda m: m.ones(3, 4).repeat_interleave(m.tensor([1, 2]), dim=0),
    lambda m: m.ones(3, 4).repeat_interleave(m.tensor([-1, 2, 1]), dim=0),
    lambda m: m.ones(3, 4).repeat_interleave(m.tensor([[1]]), dim=0),
    # output_size is checked against the repeats (it was ignored)
    lambda m: m.ones(2, 3).repeat_interleave(m.tensor([1, 2]), dim=0, output_size=2),
    lambda m: m.ones(2, 3).repeat_interleave(m.tensor([1, 2]), dim=0, output_size=4),
    lambda m: m.ones(2, 3).repeat_interleave(m.tensor([1, 2]), dim=0, output_size=-1),
    lambda m: m.ones(2, 3).repeat_interleave(m.tensor(2), dim=1, output_size=7),
    lambda m: m.ones(2, 3).repeat_interleave(2, dim=0, output_size=3),
    lambda m: m.ones(2, 3).repeat_interleave(2, output_size=5),
    lambda m: m.ones(2, 3).repeat_interleave(2, dim=1, output_size=-1),
    lambda m: m.repeat_interleave(m.tensor([1, 2]), output_size=4),
    lambda m: m.scatter(m.ones(3, 4), 1, m.tensor([[0.0]]), m.ones(3, 4)),
    lambda m: m.scatter(m.ones(3, 4), 1, m.tensor([[0]]), m.ones(3, 4, dtype=m.float64)),
    lambda m: m.scatter(m.ones(3, 4), 1, m.tensor([0]), m.ones(3, 4)),
    lambda m: m.scatter(m.ones(3, 4), 1, m.tensor([[5]]), m.ones(3, 4)),
    lambda m: m.scatter(m.ones(3, 4), 1, m.tensor([[-1]]), m.ones(3, 4)),
    lambda m: m.scatter(m.ones(3, 4), 1, m.zeros(4, 5, dtype=m.long), m.ones(3, 4)),
    lambda m: m.scatter(m.ones(3, 4), 0, m.zeros(3, 4, dtype=m.long), m.ones(2, 2)),
    lambda m: m.scatter(m.ones(3, 4), 1, m.tensor(IDX), m.ones(4)),
    lambda m: m.ones(3, 4).scatter(1, m.tensor(IDX), m.tensor(2.0)),
    lambda m: m.scatter(m.ones(3, 4), 2, m.tensor(IDX), m.ones(3, 4)),
    lambda m: m.scatter_add(m.ones(3, 4), 1, m.tensor([[9]]), m.ones(3, 4)),
    lambda m: m.scatter_add(m.ones(3, 4), 1, m.tensor([[0.0]]), m.ones(3, 4)),
    lambda m: m.index_add(m.ones(3, 4), 0, m.tensor([5]), m.ones(1, 4)),
    lambda m: m.index_add(m.ones(3, 4), 0, m.tensor([0, 1]), m.ones(1, 4)),
    lambda m: m.index_add(m.ones(3, 4), 0, m.tensor([0.0]), m.ones(1, 4)),
    lambda m: m.index_add(m.ones(3, 4), 0, m.tensor([[0]]), m.ones(1, 4)),
    lambda m: m.index_add(m.ones(3, 4), 0, m.tensor([0]), m.ones(1, 4, dtype=m.float64)),
]


@pytest.mark.parametrize("snippet", BAD)
def test_errors_as_torch(snippet):
    same_error(snippet)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_repeat_interleave_with_the_right_output_size_as_torch(dtype):
    x = np.arange(6.0).reshape(2, 3).astype(dtype)
    for f in (lambda m, t: t.repeat_interleave(m.tensor([1, 2]), dim=0, output_size=3),
              lambda m, t: t.repeat_interleave(2, dim=1, output_size=6),
              lambda m, t: t.repeat_interleave(3, output_size=18),
              lambda m, t: m.repeat_interleave(m.tensor([1, 2]), output_size=3)):
        res = []
        for m in (torch, sg):
            t = m.tensor(x, requires_grad=True)
            y = f(m, t)
            if y.requires_grad:
                (y * y).sum().backward()
            res.append((y.detach().numpy(), None if t.grad is None else t.grad.numpy()))
        np.testing.assert_array_equal(res[1][0], res[0][0])
        if res[0][1] is not None:
            np.testing.assert_array_equal(res[1][1], res[0][1])
