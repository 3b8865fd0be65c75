"""Regression tests for review9's findings (each against torch 2.13)."""
import numpy as np
import pytest
import torch

import symgrad as sg

DTYPES = [(sg.float32, torch.float32), (sg.float64, torch.float64)]


@pytest.mark.parametrize("sdt,tdt", DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_logcumsumexp_jvp_and_hessian(sdt, tdt, dim):
    """A6: forward mode through logcumsumexp is PyTorch's JVP rule, not NaN."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 4)) * 3
    t = rng.standard_normal((3, 4))
    tol = dict(rtol=1e-5, atol=1e-5) if sdt is sg.float32 else dict(rtol=1e-10, atol=1e-12)
    _, want = torch.func.jvp(lambda v: torch.logcumsumexp(v, dim),
                             (torch.tensor(x, dtype=tdt),), (torch.tensor(t, dtype=tdt),))
    _, got = sg.jvp(lambda v: sg.logcumsumexp(v, dim), (sg.tensor(x, dtype=sdt),),
                    (sg.tensor(t, dtype=sdt),))
    # (torch's own JVP loses ~1e-6 relative in float64 on this input: checked against
    # the exact cumsum(e t) / cumsum(e), e = exp(x - max), in float64 numpy too)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
    xm = np.moveaxis(x, dim, 0)
    e = np.exp(xm - xm.max(0))
    exact = np.moveaxis(np.cumsum(e * np.moveaxis(t, dim, 0), 0) / np.cumsum(e, 0), 0, dim)
    np.testing.assert_allclose(got.numpy(), exact, **tol)

    def f(L, v):
        return L.logcumsumexp(v, 0).pow(2).sum()
    v = x[0]
    want = torch.autograd.functional.hessian(lambda a: f(torch, a), torch.tensor(v, dtype=tdt))
    got = sg.hessian(lambda a: f(sg, a))(sg.tensor(v, dtype=sdt))
    np.testing.assert_allclose(got.numpy(), want.numpy(), **tol)


INT_DTYPES = ["uint8", "int8", "int16", "int32", "int64", "bool"]


def _err(fn):
    try:
        fn()
    except Exception as e:          # noqa: BLE001 -- the type and text are compared
        return type(e), str(e)
    return None


@pytest.mark.parametrize("name", INT_DTYPES)
def test_invert_and_bitwise_not(name):
    """A1: ``~`` / ``bitwise_not`` on integers is bit by bit (bool: logical), eager and
    compiled, and the in-place method."""
    vals = [0, 1, 1, 0] if name == "bool" else [0, 1, 5, 100]
    tt = torch.tensor(vals, dtype=getattr(torch, name))
    st = sg.tensor(vals, dtype=getattr(sg, name if name != "bool" else "bool"))
    for got, want in [(~st, ~tt), (sg.bitwise_not(st), torch.bitwise_not(tt)),
                      (st.bitwise_not(), tt.bitwise_not()),
                      (sg.compile(lambda v: ~v)(st), ~tt)]:
        assert str(got.dtype) == str(want.dtype)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    s2, t2 = st.clone(), tt.clone()
    s2.bitwise_not_()
    t2.bitwise_not_()
    np.testing.assert_array_equal(s2.numpy(), t2.numpy())


def test_invert_float_errors():
    for sdt, tdt in DTYPES:
        s, t = sg.ones(2, dtype=sdt), torch.ones(2, dtype=tdt)
        assert _err(lambda: ~s) == _err(lambda: ~t)
        assert _err(lambda: s.bitwise_not()) == _err(lambda: t.bitwise_not())
        assert _err(lambda: sg.bitwise_not(s)) == _err(lambda: torch.bitwise_not(t))


@pytest.mark.parametrize("op", ["__iand__", "__ior__", "__ixor__", "__iadd__", "__isub__",
                                "__imul__"])
def test_inplace_integer_downcast(op):
    """B6: an integer result cast into a narrower integer tensor in place (torch allows
    integral -> integral); float -> int and int -> bool still refused."""
    t = torch.tensor([200, 7], dtype=torch.uint8)
    s = sg.tensor([200, 7], dtype=sg.uint8)
    getattr(t, op)(torch.tensor([300, 3]))
    getattr(s, op)(sg.tensor([300, 3]))
    assert str(s.dtype) == str(t.dtype)
    np.testing.assert_array_equal(s.numpy(), t.numpy())
    if op in ("__iadd__", "__imul__"):
        assert _err(lambda: getattr(sg.tensor([1, 2]), op)(sg.tensor([0.5, 1.0]))) == \
            _err(lambda: getattr(torch.tensor([1, 2]), op)(torch.tensor([0.5, 1.0])))
    assert _err(lambda: getattr(sg.tensor([True]), op)(sg.tensor([3]))) == \
        _err(lambda: getattr(torch.tensor([True]), op)(torch.tensor([3])))


NORM_VALUES = [0.0, -0.0, 5e-324, -5e-324, 1e-200, -1e-200, 1e-30, 1.5, -2.0, 1e200, -1e200,
               1e30, float("inf"), float("-inf"), float("nan")]


def _same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))


@pytest.mark.parametrize("sdt,tdt", DTYPES)
@pytest.mark.parametrize("p", [1, 2, 3, -1, float("inf"), float("-inf"), 0.5, -2.5, 1.5])
def test_one_element_norm_value_and_gradient(sdt, tdt, p):
    """A5: a norm of one element is |x| and its gradient PyTorch's norm backward (NaN at
    NaN / ±inf / where |x|^(p-1) under- or overflows), eager and compiled."""
    with np.errstate(over="ignore"):
        vals = np.array(NORM_VALUES).astype(np.float32 if sdt is sg.float32 else np.float64)
    t = torch.tensor(vals, dtype=tdt).reshape(-1, 1).requires_grad_()
    want = torch.linalg.vector_norm(t, p, dim=1)
    (wg,) = torch.autograd.grad(want.sum(), t)
    s = sg.tensor(vals, dtype=sdt).reshape(-1, 1).requires_grad_()
    got = sg.linalg.vector_norm(s, p, dim=1)
    (gg,) = sg.autograd.grad(got.sum(), s)
    assert _same(got.detach().numpy(), want.detach().numpy())
    assert _same(gg.numpy(), wg.numpy())
    cg = sg.grad(lambda v: sg.linalg.vector_norm(v, p, dim=1).sum())(s.detach())
    # (compiled pow may round its last bit otherwise; NaN exactly where torch's)
    np.testing.assert_allclose(cg.numpy(), wg.numpy(), rtol=4 * np.finfo(vals.dtype).eps)


def test_one_element_norm_second_derivative():
    for p in (2, 3, 0.5):
        t = torch.tensor([[1.5], [-2.0]], dtype=torch.float64, requires_grad=True)
        (g,) = torch.autograd.grad(torch.linalg.vector_norm(t, p, dim=1).pow(3).sum(), t,
                                   create_graph=True)
        (h,) = torch.autograd.grad(g.sum(), t)
        s = sg.tensor([[1.5], [-2.0]], dtype=sg.float64, requires_grad=True)
        (sg1,) = sg.autograd.grad(sg.linalg.vector_norm(s, p, dim=1).pow(3).sum(), s,
                                  create_graph=True)
        (sh,) = sg.autograd.grad(sg1.sum(), s)
        np.testing.assert_allclose(sg1.detach().numpy(), g.detach().numpy(), rtol=1e-12)
        np.testing.assert_allclose(sh.numpy(), h.numpy(), rtol=1e-12)


@pytest.mark.parametrize("sdt,tdt", DTYPES)
@pytest.mark.parametrize("driver", ["gels", "gelsd", "gelss"])
def test_lstsq_vector_rhs_residuals_shape(sdt, tdt, driver):
    """A8: a vector right-hand side keeps the residuals' last axis, as torch."""
    A = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    for a, b in [(A, np.array([1.0, 2.0, 4.0])),
                 (np.broadcast_to(A, (2, 3, 2)), np.array([[1.0, 2.0, 4.0], [0.0, 0.0, 1.0]]))]:
        want = torch.linalg.lstsq(torch.tensor(a, dtype=tdt), torch.tensor(b, dtype=tdt),
                                  driver=driver).residuals
        got = sg.linalg.lstsq(sg.tensor(a, dtype=sdt), sg.tensor(b, dtype=sdt),
                              driver=driver).residuals
        assert tuple(got.shape) == tuple(want.shape)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5)


def test_linalg_errors_and_empty():
    """B2, B3, C1, C7: solve_triangular on 0x0 and mismatched batches, pinv(hermitian) of a
    non-square matrix, lstsq's dim rule, pinv(rcond=)."""
    for L in (torch, sg):
        assert tuple(L.linalg.solve_triangular(L.ones(0, 0), L.ones(0, 2), upper=True).shape) \
            == (0, 2)
        assert tuple(L.linalg.solve_triangular(L.ones(2, 0, 0), L.ones(0, 3), upper=False).shape) \
            == (2, 0, 3)
    for f in [lambda L: L.linalg.solve_triangular(L.ones(2, 3, 3), L.ones(2, 3, 3, 1),
                                                  upper=True),
              lambda L: L.linalg.pinv(L.ones(2, 3, dtype=L.float64), hermitian=True),
              lambda L: L.linalg.lstsq(L.ones(3, 3), L.ones(5, 3, 2)),
              lambda L: L.linalg.lstsq(L.ones(2, 3, 3), L.ones(3))]:
        assert _err(lambda: f(sg)) == _err(lambda: f(torch))
    A = np.diag([1.0, 0.05, 1e-3])
    A[0, 1] = 0.3
    for sdt, tdt in DTYPES:
        for kw in [dict(rcond=0.01), dict(rcond=0.1, hermitian=True)]:
            np.testing.assert_allclose(sg.linalg.pinv(sg.tensor(A, dtype=sdt), **kw).numpy(),
                                       torch.linalg.pinv(torch.tensor(A, dtype=tdt),
                                                         **kw).numpy(), rtol=1e-5, atol=1e-6)


def test_mode_bool_and_nanmedian_texts():
    """B5, C5."""
    for v in ([True, False, True], [[True, False, True], [False, False, True]]):
        got, want = sg.tensor(v).mode(0), torch.tensor(v).mode(0)
        np.testing.assert_array_equal(got.values.numpy(), want.values.numpy())
        np.testing.assert_array_equal(got.indices.numpy(), want.indices.numpy())
    for f in [lambda L: L.nanmedian(L.ones(2, 0), 1), lambda L: L.nanmedian(L.tensor([True])),
              lambda L: L.tensor([True]).nanmedian(0), lambda L: L.tensor([True]).median(0)]:
        assert _err(lambda: f(sg)) == _err(lambda: f(torch))


def test_quantile_size_limit():
    """C6: rows longer than 2**24 are refused as torch."""
    for f in [lambda L: L.quantile(L.zeros(2 ** 24 + 1), 0.5),
              lambda L: L.nanquantile(L.zeros(1, 2 ** 24 + 1), 0.5, dim=1)]:
        assert _err(lambda: f(sg)) == _err(lambda: f(torch)) is not None
