"""einsum (issue 15 item 4) against torch 2.13: values, grad_fn names and gradients in
float32 and float64, a second derivative, the compiled gradient on both backends, and
PyTorch's errors; diagonal / diag / diag_embed / trace, which einsum's repeated labels use."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg

from op_checks import check_everywhere, same_error

R = np.random.default_rng(0)


def T(*shape):
    return R.standard_normal(shape)


EINSUMS = [
    ("ij,jk->ik", (T(3, 4), T(4, 5))), ("ij,jk", (T(3, 4), T(4, 5))),
    ("ij->ji", (T(3, 4),)), ("ij->", (T(3, 4),)), ("ij->j", (T(3, 4),)),
    ("ii->i", (T(3, 3),)), ("ii", (T(3, 3),)), ("iij->j", (T(3, 3, 2),)),
    ("i,i->", (T(4), T(4))), ("i,j->ij", (T(4), T(3))), ("ij,j->i", (T(3, 4), T(4))),
    ("bij,bjk->bik", (T(2, 3, 4), T(2, 4, 5))),
    ("...ij,...jk->...ik", (T(2, 3, 4), T(2, 4, 5))), ("ij,ij->ij", (T(3, 4), T(3, 4))),
    ("ij,ij->i", (T(3, 4), T(3, 4))), ("ij,ij", (T(3, 4), T(3, 4))),
    ("ij,kl->ijkl", (T(3, 4), T(2, 2))), ("...j,j->...", (T(2, 3, 4), T(4))),
    ("bn,anm,bm->ba", (T(2, 5), T(3, 5, 4), T(2, 4))),
    ("ij,jk,kl->il", (T(2, 3), T(3, 4), T(4, 5))), ("i i, j ->ij", (T(3, 3), T(2))),
    ("...,...->...", (T(2, 1, 3), T(4, 1))), ("bij,bkj->bik", (T(1, 3, 4), T(2, 5, 4))),
    ("ij,j->j", (T(3, 4), T(4))), ("Ab,bC->AC", (T(2, 3), T(3, 2))),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("eq, arrays", EINSUMS, ids=[e for e, _ in EINSUMS])
def test_einsum_as_torch(eq, arrays, dtype):
    arrays = [a.astype(dtype) for a in arrays]
    check_everywhere(lambda m, *xs: m.einsum(eq, *xs), *arrays,
                     compiled=dtype == np.float64 or len(arrays) > 2)


def test_einsum_operand_forms():
    a, b = T(2, 3), T(3, 4)
    check_everywhere(lambda m, x, y: m.einsum("ij,jk", [x, y]), a, b, second=False,
                     compiled=False)
    check_everywhere(lambda m, x, y: m.einsum(x, [0, 1], y, [1, 2], [0, 2]), a, b,
                     second=False, compiled=False)
    check_everywhere(lambda m, x, y: m.einsum(x, [Ellipsis, 1], y, [1, 2]), a, b,
                     second=False, compiled=False)


BAD = [("ij,jk->ik", [(3, 4)]), ("ij->ik", [(3, 4)]), ("ij->ii", [(3, 4)]), ("ijk", [(3, 4)]),
       ("...ijk", [(3, 4)]), ("ij,ij", [(3, 4), (4, 5)]), ("i1", [(3, 4)]), ("ii", [(3, 4)]),
       (".ij", [(3, 4)]), ("...i...j", [(3, 4)]), ("ij->.", [(3, 4)]),
       ("ij->......", [(3, 4)]), ("ij->i-", [(3, 4)]), ("ij", [(3, 4), (4, 5)]), ("ij", []),
       ("...ij,...ij->...", [(2, 3, 4), (3, 3, 4)])]


@pytest.mark.parametrize("eq, shapes", BAD, ids=[e for e, _ in BAD])
def test_einsum_errors_as_torch(eq, shapes):
    same_error(lambda m: m.einsum(eq, *[m.ones(s) for s in shapes]))
    same_error(lambda m: m.einsum(m.ones(2), [60]))


# ---- diagonals ----------------------------------------------------------------------------
X3 = T(2, 3, 4)
DIAGS = {
    "diagonal": lambda m, x: m.diagonal(x), "diagonal_offset": lambda m, x: x.diagonal(1, 1, 2),
    "diagonal_neg": lambda m, x: m.diagonal(x, -1, 2, 1),
    "diagonal_empty": lambda m, x: m.diagonal(x, 5, 1, 2),
    "diag_matrix": lambda m, x: m.diag(x[0]), "diag_matrix_offset": lambda m, x: x[1].diag(-1),
    "diag_vector": lambda m, x: m.diag(x[0, 0]), "diag_vector_offset": lambda m, x: m.diag(x[0, 1], 2),
    "diag_vector_neg": lambda m, x: x[1, 2].diag(-1),
    "diag_embed": lambda m, x: m.diag_embed(x), "diag_embed_dims": lambda m, x: m.diag_embed(x, 1, 0, 2),
    "diag_embed_neg": lambda m, x: x.diag_embed(-2, 3, 1),
    "trace": lambda m, x: m.trace(x[0]), "trace_method": lambda m, x: x[1].t().trace(),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(DIAGS))
def test_diagonals_as_torch(name, dtype):
    check_everywhere(DIAGS[name], X3.astype(dtype))


def test_diagonal_is_a_view_as_in_torch():
    for m in (sg, torch):
        x = m.tensor(X3[0], requires_grad=True)
        y = x * 1
        y.diagonal(1).mul_(3)
        (y * y).sum().backward()
        assert y.grad_fn.name() == "torch::autograd::CopySlices"
        if m is sg:
            ours = (y.detach().numpy().copy(), x.grad.numpy().copy())
        else:
            np.testing.assert_allclose(ours[0], y.detach().numpy(), rtol=1e-12)
            np.testing.assert_allclose(ours[1], x.grad.numpy(), rtol=1e-12)
    a, b = sg.tensor(X3[0]), torch.tensor(X3[0])
    a.diagonal().fill_(0)
    b.diagonal().fill_(0)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert sg.diagonal(a)._base is a


def test_integer_trace_and_diag_as_torch():
    x = np.arange(12).reshape(3, 4)
    for fn in (lambda m, v: m.trace(v), lambda m, v: m.diag(v, 1), lambda m, v: m.diagonal(v)):
        a, b = fn(sg, sg.tensor(x)), fn(torch, torch.tensor(x))
        assert str(a.dtype) == str(b.dtype)
        np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("snippet", [
    lambda m: m.diagonal(m.ones(3, 4), 0, 0, 0), lambda m: m.diagonal(m.ones(3, 4), 0, 0, 2),
    lambda m: m.diag(m.ones(2, 2, 2)), lambda m: m.diag(m.tensor(1.0)),
    lambda m: m.trace(m.ones(3)), lambda m: m.trace(m.ones(2, 2, 2)),
    lambda m: m.diag_embed(m.ones(3), 0, 0, 0),
])
def test_diagonal_errors_as_torch(snippet):
    same_error(snippet)
