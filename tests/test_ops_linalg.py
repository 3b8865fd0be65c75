"""torch.linalg (issue 15 item 4) against torch 2.13: inv / inverse, solve, det,
slogdet / logdet, cholesky, svdvals and the norms -- values, grad_fn names and gradients in
float32 and float64 over batches, a second derivative, the compiled gradient on both
backends, and PyTorch's errors (LinAlgError for singular / indefinite matrices)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg

from op_checks import check_everywhere, same_error
from oracle import check_vjp_fd

R = np.random.default_rng(1)


def well_conditioned(*batch, n=3):
    return R.standard_normal(batch + (n, n)) + 3 * np.eye(n)


def spd(*batch, n=3):
    a = R.standard_normal(batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


A, AB, S, SB = well_conditioned(), well_conditioned(2), spd(), spd(2)
SINGULAR = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])

OPS = {
    "inv": (lambda m, a: m.linalg.inv(a), [A]), "inv_batch": (lambda m, a: m.linalg.inv(a), [AB]),
    "inverse": (lambda m, a: m.inverse(a), [A]), "inverse_method": (lambda m, a: a.inverse(), [AB]),
    "det": (lambda m, a: m.linalg.det(a), [AB]), "torch_det": (lambda m, a: m.det(a), [A]),
    "det_method": (lambda m, a: a.det(), [A]),
    "slogdet": (lambda m, a: tuple(m.linalg.slogdet(a)), [AB]),
    "slogdet_torch": (lambda m, a: tuple(m.slogdet(-a)), [A]),
    "logdet": (lambda m, a: m.logdet(a), [S]),
    "solve": (lambda m, a, b: m.linalg.solve(a, b), [A, R.standard_normal((3, 2))]),
    "solve_vector": (lambda m, a, b: m.linalg.solve(a, b), [A, R.standard_normal(3)]),
    "solve_batch_vectors": (lambda m, a, b: m.linalg.solve(a, b), [AB, R.standard_normal((2, 3))]),
    "solve_broadcast": (lambda m, a, b: m.linalg.solve(a, b), [A, R.standard_normal((2, 3, 2))]),
    "solve_right": (lambda m, a, b: m.linalg.solve(a, b, left=False), [AB, R.standard_normal((4, 3))]),
    "cholesky": (lambda m, a: m.linalg.cholesky(a), [S]),
    "cholesky_batch": (lambda m, a: m.linalg.cholesky(a), [SB]),
    "cholesky_upper": (lambda m, a: m.linalg.cholesky(a, upper=True), [SB]),
    "norm": (lambda m, a: m.linalg.norm(a), [AB]), "norm_fro": (lambda m, a: m.linalg.norm(a, "fro"), [A]),
    "norm_dim": (lambda m, a: m.linalg.norm(a, dim=1), [AB]),
    "norm_1": (lambda m, a: m.linalg.norm(a, 1), [A]),
    "norm_inf_dims": (lambda m, a: m.linalg.norm(a, float("inf"), dim=(0, 2), keepdim=True), [AB]),
    "norm_vec3": (lambda m, a: m.linalg.norm(a, 3, dim=2), [AB]),
    "vector_norm": (lambda m, a: m.linalg.vector_norm(a, 0.5, dim=(0, 2)), [AB]),
    "vector_norm_inf": (lambda m, a: m.linalg.vector_norm(a, float("-inf")), [AB]),
    "matrix_norm": (lambda m, a: m.linalg.matrix_norm(a), [AB]),
    "matrix_norm_1": (lambda m, a: m.linalg.matrix_norm(a, 1), [AB]),
    "matrix_norm_m1": (lambda m, a: m.linalg.matrix_norm(a, -1, dim=(2, 0)), [AB]),
    "matrix_norm_minf": (lambda m, a: m.linalg.matrix_norm(a, -float("inf"), keepdim=True), [AB]),
    "svdvals_wide": (lambda m, a: m.linalg.svdvals(a), [R.standard_normal((2, 3, 4))]),
    "svdvals_tall": (lambda m, a: m.linalg.svdvals(a), [R.standard_normal((4, 3))]),
    "matrix_norm_nuc": (lambda m, a: m.linalg.matrix_norm(a, "nuc"), [R.standard_normal((2, 3, 4))]),
    "matrix_norm_2": (lambda m, a: m.linalg.matrix_norm(a, 2), [R.standard_normal((2, 4, 3))]),
    "norm_m2": (lambda m, a: m.linalg.norm(a, -2), [A]),
    "matrix_norm_nuc_keepdim": (lambda m, a: m.linalg.matrix_norm(a, "nuc", dim=(2, 0), keepdim=True),
                                [R.standard_normal((2, 3, 4))]),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(OPS))
def test_linalg_as_torch(name, dtype):
    fn, arrays = OPS[name]
    loose = dict(rtol=1e-4, atol=1e-5) if dtype == np.float32 else {}
    check_everywhere(fn, *[a.astype(dtype) for a in arrays], **loose)


def test_det_gradient_of_singular_matrices_is_the_cofactor_matrix():
    """det is smooth: at a singular matrix of rank n-1 its gradient is the (non-zero)
    cofactor matrix, checked by finite differences (PyTorch 2.13 returns zeros where
    its determinant is exactly 0; see the README)."""
    check_vjp_fd(lambda a: sg.linalg.det(a), [SINGULAR])
    check_vjp_fd(lambda a: sg.linalg.det(a), [np.stack([SINGULAR, A, np.zeros((3, 3))])])
    a = sg.tensor(np.array([[1.0, 2.0], [2.0, 4.0]]), requires_grad=True)
    sg.linalg.det(a).backward()
    np.testing.assert_allclose(a.grad.numpy(), [[4.0, -2.0], [-2.0, 1.0]], atol=1e-12)


def test_values_at_singular_and_special_matrices_as_torch():
    for fn in (lambda m, a: m.linalg.det(a), lambda m, a: tuple(m.linalg.slogdet(a)),
               lambda m, a: m.logdet(a), lambda m, a: m.logdet(-a)):
        for a in (SINGULAR, -np.eye(3), np.eye(3)):
            ours, theirs = fn(sg, sg.tensor(a)), fn(torch, torch.tensor(a))
            for o, t in zip(ours if isinstance(ours, tuple) else (ours,),
                            theirs if isinstance(theirs, tuple) else (theirs,)):
                np.testing.assert_allclose(o.numpy(), t.numpy(), atol=1e-12)
    assert repr(sg.linalg.slogdet(sg.tensor(np.eye(2)))) == \
        repr(torch.linalg.slogdet(torch.tensor(np.eye(2))))


def test_linalg_error_is_a_runtime_error_named_as_torch():
    assert issubclass(sg.linalg.LinAlgError, RuntimeError)
    assert sg.linalg.LinAlgError.__name__ == torch.linalg.LinAlgError.__name__
    with pytest.raises(sg.linalg.LinAlgError):
        sg.linalg.inv(sg.tensor(SINGULAR))


def test_singular_matrix_in_compiled_code_raises_linalg_error():
    for backend in ("llvm", "numpy"):
        with pytest.raises(sg.linalg.LinAlgError, match="singular"):
            sg.compile(lambda a: sg.linalg.inv(a).sum(), backend=backend)(SINGULAR)


NPD = [[1.0, 2.0], [2.0, 1.0]]
BAD = [
    lambda m: m.linalg.inv(m.tensor([[1.0, 2.0], [2.0, 4.0]])),
    lambda m: m.linalg.inv(m.tensor(SINGULAR)),
    lambda m: m.linalg.inv(m.stack([m.eye(3), m.tensor(SINGULAR, dtype=m.float32)])),
    lambda m: m.inverse(m.tensor(SINGULAR)),
    lambda m: m.linalg.inv(m.ones(2, 3)), lambda m: m.linalg.inv(m.ones(3)),
    lambda m: m.linalg.inv(m.ones(2, 2, dtype=m.long)),
    lambda m: m.linalg.inv(m.ones(2, 3, dtype=m.long)),
    lambda m: m.linalg.solve(m.tensor(SINGULAR), m.ones(3, dtype=m.float64)),
    lambda m: m.linalg.solve(m.stack([m.eye(3), m.tensor(SINGULAR, dtype=m.float32)]),
                             m.ones(2, 3, 1)),
    lambda m: m.linalg.solve(m.eye(2), m.ones(3)), lambda m: m.linalg.solve(m.eye(2), m.ones(3, 1)),
    lambda m: m.linalg.solve(m.ones(2, 3), m.ones(2)), lambda m: m.linalg.solve(m.ones(2), m.ones(2)),
    lambda m: m.linalg.solve(m.eye(2), m.ones(2, dtype=m.float64)),
    lambda m: m.linalg.solve(m.eye(2), m.ones(2), left=False),
    lambda m: m.linalg.det(m.ones(2, 3)), lambda m: m.linalg.det(m.ones(3)),
    lambda m: m.linalg.det(m.ones(2, 2, dtype=m.long)),
    lambda m: m.linalg.slogdet(m.ones(2, 3)), lambda m: m.linalg.slogdet(m.ones(3)),
    lambda m: m.logdet(m.ones(2, 3)),
    lambda m: m.linalg.cholesky(m.tensor(NPD)),
    lambda m: m.linalg.cholesky(m.stack([m.eye(2), m.tensor(NPD)])),
    lambda m: m.linalg.cholesky(m.tensor([[4.0, 2, 0], [2, 1, 0], [0, 0, 1]])),
    lambda m: m.linalg.cholesky(m.ones(2, 3)), lambda m: m.linalg.cholesky(m.ones(3)),
    lambda m: m.linalg.cholesky(m.eye(2, dtype=m.long)),
    lambda m: m.linalg.norm(m.ones(2, 3, 4), "fro"), lambda m: m.linalg.norm(m.ones(2, 3, 4), 2),
    lambda m: m.linalg.norm(m.ones(4), "fro"), lambda m: m.linalg.norm(m.ones(2, 3, 4), 2, dim=(0, 1, 2)),
    lambda m: m.linalg.norm(m.ones(2, 3, 4), "fro", dim=(0, 1, 2)),
    lambda m: m.linalg.matrix_norm(m.ones(4)), lambda m: m.linalg.matrix_norm(m.ones(2, 3), 3),
    lambda m: m.linalg.matrix_norm(m.ones(2, 3), 0.5), lambda m: m.linalg.matrix_norm(m.ones(2, 3), "abc"),
    lambda m: m.linalg.matrix_norm(m.ones(2, 3, 4), dim=(1, 1)),
    lambda m: m.linalg.matrix_norm(m.ones(2, 3, 4), dim=(1, -2)),
    lambda m: m.linalg.vector_norm(m.ones(2), "fro"),
    lambda m: m.linalg.vector_norm(m.ones(3, dtype=m.long)),
    lambda m: m.linalg.matrix_norm(m.ones(3, 3, dtype=m.long)),
]


@pytest.mark.parametrize("snippet", BAD)
def test_linalg_errors_as_torch(snippet):
    same_error(snippet)


ZEROS = np.array([[0.0, 1.0, -2.0], [0.0, 0.0, 0.0], [0.5, 3.0, 1.0]])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("ord", [0, -1, -0.5, -1 / 3, 0.5, 3])
def test_vector_norm_of_orders_zero_and_negative_at_zeros_as_torch(dtype, ord):
    """ord 0 counts non-zeros and has no gradient (it passed the output's cotangent on as
    the input's gradient); a negative order is 0 where an element is 0 (it was finite)."""
    for dim, keepdim in [(None, False), (1, False), (1, True), (0, False)]:
        res = []
        for m in (torch, sg):
            x = m.tensor(ZEROS.astype(dtype), requires_grad=True)
            y = m.linalg.vector_norm(x, ord, dim=dim, keepdim=keepdim)
            w = m.arange(1.0, y.numel() + 1, dtype=y.dtype).reshape(y.shape)
            ((y * w).sum() + (x * x).sum()).backward()
            res.append((y.detach().numpy(), x.grad.numpy(), type(y.grad_fn).__name__))
        (ys, gs, ns), (yt, gt, nt) = res
        assert ns == nt
        np.testing.assert_allclose(ys, yt, rtol=1e-6)
        np.testing.assert_allclose(gs, gt, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_norm_of_order_zero_has_no_gradient_as_torch(dtype):
    for fn in (lambda m, x: m.linalg.vector_norm(x, 0), lambda m, x: x.norm(0),
               lambda m, x: x.norm(p=0, dim=1, keepdim=True), lambda m, x: m.norm(x, 0, dim=0),
               lambda m, x: m.linalg.norm(x[0], 0), lambda m, x: m.linalg.norm(x, 0, dim=1)):
        res = []
        for m in (torch, sg):
            x = m.tensor(ZEROS.astype(dtype), requires_grad=True)
            y = fn(m, x)
            y.sum().backward()
            res.append((y.detach().numpy(), x.grad, type(y.grad_fn).__name__))
        assert res[1][1] is None and res[0][1] is None
        assert res[1][2] == res[0][2]
        np.testing.assert_array_equal(res[1][0], res[0][0])
        g = sg.grad(lambda v: fn(sg, v).sum())(ZEROS.astype(dtype))
        np.testing.assert_array_equal(g, np.zeros_like(ZEROS))
        x = sg.tensor(ZEROS.astype(dtype), requires_grad=True)
        (g,) = sg.autograd.grad(fn(sg, x).sum() + (x ** 3).sum(), x, create_graph=True)
        xt = torch.tensor(ZEROS.astype(dtype), requires_grad=True)
        (gt,) = torch.autograd.grad(fn(torch, xt).sum() + (xt ** 3).sum(), xt, create_graph=True)
        np.testing.assert_allclose(sg.autograd.grad(g.sum(), x)[0].numpy(),
                                   torch.autograd.grad(gt.sum(), xt)[0].numpy())


@pytest.mark.parametrize("snippet", [
    lambda m: m.linalg.vector_norm(m.zeros(0), -1),
    lambda m: m.linalg.vector_norm(m.zeros(0), -1 / 3),
    lambda m: m.linalg.vector_norm(m.zeros(2, 0), -2.0, dim=1),
    lambda m: m.zeros(0).norm(-0.5),
    lambda m: m.linalg.vector_norm(m.tensor([1, 2]), 0),
])
def test_vector_norm_negative_order_errors_as_torch(snippet):
    same_error(snippet)


RANK1 = np.outer([1.0, 2.0, 3.0], [1.0, -1.0, 2.0])


def _det_second(m, a):
    (g,) = m.autograd.grad(m.linalg.det(a).sum(), a, create_graph=True)
    (gg,) = m.autograd.grad(g.sin().sum(), a)
    return gg.numpy()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["2x2", "3x3", "batch", "regular"])
def test_det_second_derivative_at_singular_matrices_as_torch(name, dtype):
    """The cofactor's VJP went through inv: LinAlgError at a singular matrix, where
    torch's second derivative is finite. Now through the SVD (exact there)."""
    m = {"2x2": np.array([[1.0, 2.0], [2.0, 4.0]]), "3x3": SINGULAR,
         "batch": np.stack([SINGULAR, A]), "regular": well_conditioned(n=4)}[name].astype(dtype)
    got = _det_second(sg, sg.tensor(m, requires_grad=True))
    want = _det_second(torch, torch.tensor(m, requires_grad=True))
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(got, want, **tol)
    for backend in ("llvm", "numpy"):
        h = sg.hessian(lambda x: sg.linalg.det(x).sum(), backend=backend)(m)
        th = torch.autograd.functional.hessian(lambda x: torch.linalg.det(x).sum(),
                                               torch.tensor(m))
        np.testing.assert_allclose(np.asarray(h), th.numpy(), **tol)


def test_cofactor_vjp_at_rank_deficient_matrices_by_finite_differences():
    """Rank n-2 and zero matrices (torch's SVD-based backward gives NaN there): the
    cofactor is a polynomial, its VJP exact -- checked by central differences."""
    def cofactor(a):                # d det / dA, differentiable (create_graph)
        if not a.requires_grad:     # (check_vjp_fd's evaluations under no_grad)
            with sg.enable_grad():
                b = a.detach().requires_grad_()
                return sg.autograd.grad(sg.linalg.det(b).sum(), b)[0]
        return sg.autograd.grad(sg.linalg.det(a).sum(), a, create_graph=True)[0]
    for m in (RANK1, np.zeros((3, 3)), np.stack([RANK1, SINGULAR, A])):
        check_vjp_fd(cofactor, [m], rtol=1e-5)
    a = sg.tensor(np.zeros((3, 3)), requires_grad=True)
    np.testing.assert_array_equal(_det_second(sg, a), np.zeros((3, 3)))
