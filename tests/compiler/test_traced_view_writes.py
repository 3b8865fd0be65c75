"""In-place writes through a view of a tensor inside compiled transforms (review5 #6):
``b = x * 1; b[:, 1].add_(10)`` under ``value_and_grad`` / ``grad`` / ``func.grad`` /
``compile`` must change b's value AND carry the gradient through the write, for every
view kind (slices, transposes, reshapes, ``diagonal()``, ``detach()``) and in-place op;
a write through ``diagonal()`` on an argument or a closed-over parameter of a compiled
step reaches it. Reference: PyTorch 2.13 eager (value and gradient), float32 and
float64, on every backend."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg

A = np.arange(1., 13.).reshape(3, 4) / 4 - 1.3
W = np.arange(12.).reshape(3, 4) / 5 - 0.7
DTYPES = [np.float32, np.float64]
TOL = {np.float32: dict(rtol=2e-5, atol=2e-5), np.float64: dict(rtol=1e-12, atol=1e-12)}

VIEWS = {
    "col": lambda b: b[:, 1],
    "row": lambda b: b[1],
    "rows": lambda b: b[1:],
    "T": lambda b: b.T,
    "mT": lambda b: b.mT,
    "t()[1]": lambda b: b.t()[1],
    "permute": lambda b: b.permute(1, 0),
    "movedim": lambda b: b.movedim(0, 1),
    "transpose[0]": lambda b: b.transpose(0, 1)[0],
    "squeeze": lambda b: b[None].squeeze(0),
    "unsqueeze": lambda b: b.unsqueeze(1),
    "flatten": lambda b: b.flatten(),
    "view": lambda b: b.view(2, 6),
    "view(-1)[:3]": lambda b: b.view(-1)[:3],
    "unflatten": lambda b: b.unflatten(1, (2, 2)),
    "reshape[3:6]": lambda b: b.reshape(12)[3:6],
    "ellipsis": lambda b: b[..., 1],
    "None": lambda b: b[None, :, 2],
    "step": lambda b: b[::2],
    "step cols": lambda b: b[:, 1::2],
    "diagonal": lambda b: b.diagonal(),
    "diagonal(1)": lambda b: b.diagonal(1),
    "diagonal(-1)": lambda b: b.diagonal(-1),
    "detach": lambda b: b.detach(),
    "detach()[0]": lambda b: b.detach()[0],
    "[0].detach()": lambda b: b[0].detach(),
}


def _loss(T, b):
    return (b * b * T.tensor(W, dtype=b.dtype)).sum()


def _torch(f, dtype):
    t = torch.tensor(A.astype(dtype), requires_grad=True)
    v = f(torch, t)
    v.backward()
    return v.item(), t.grad.numpy()


def _check(f, dtype, backend):
    tv, tg = _torch(f, dtype)
    v, g = sg.value_and_grad(lambda x: f(sg, x), backend=backend)(A.astype(dtype))
    assert np.asarray(g).dtype == dtype
    np.testing.assert_allclose(float(v), tv, **TOL[dtype])
    np.testing.assert_allclose(np.asarray(g), tg, **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("view", list(VIEWS), ids=list(VIEWS))
def test_mul_through_each_view_kind(view, dtype, backend):
    def f(T, x):
        b = x * 1
        VIEWS[view](b).mul_(3.0)
        return _loss(T, b)
    _check(f, dtype, backend)


def _index(T):
    return T.tensor([2, 0])


OPS = {
    "add_": lambda v, T: v.add_(10.0),
    "iadd": lambda v, T: v.__iadd__(2.5),
    "mul_ tensor": lambda v, T: v.mul_(T.linspace(-1, 2, v.shape[0], dtype=v.dtype)),
    "exp_": lambda v, T: v.exp_(),
    "clamp_": lambda v, T: v.clamp_(max=0.2),
    "zero_": lambda v, T: v.zero_(),
    "fill_": lambda v, T: v.fill_(0.5),
    "copy_": lambda v, T: v.copy_(v.flip(0) * 2),
    "copy_ sort": lambda v, T: v.copy_(v.sort()[0]),
    "masked_fill_": lambda v, T: v.masked_fill_(v > 0, 0.25),
    "index_add_": lambda v, T: v.index_add_(0, _index(T), v[:2] * 3),
    "index_fill_": lambda v, T: v.index_fill_(0, _index(T), -1.0),
    "scatter_": lambda v, T: v.scatter_(0, _index(T), v[:2] * 2),
    "scatter_add_": lambda v, T: v.scatter_add_(0, _index(T), v[:2] * 2),
    "index_put_ acc": lambda v, T: v.index_put_((_index(T),), v[:2] * 2, accumulate=True),
}
# each op through a 1-d view (a column) and, for the 2-d ones, a 2-d view (rows 1:)
OPS_2D = {
    "triu_": lambda v, T: v.triu_(),
    "tril_": lambda v, T: v.tril_(-1),
    "add_ rows": lambda v, T: v.add_(v.sum(0)),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("view,op", [(v, o) for v in ("col", "diagonal") for o in OPS]
                         + [("T2d", o) for o in OPS_2D])
def test_each_inplace_op_through_a_view(op, view, dtype, backend):
    get = {"col": lambda b: b[:, 1], "diagonal": lambda b: b.diagonal(),
           "T2d": lambda b: b.T[1:]}[view]
    fn = OPS.get(op) or OPS_2D[op]

    def f(T, x):
        b = x * 1
        fn(get(b), T)
        return _loss(T, b)
    _check(f, dtype, backend)


@pytest.mark.parametrize("dtype", DTYPES)
def test_grad_and_func_grad_and_compile_backward(dtype, backend):
    def f(T, x):
        b = x * 1
        b[:, 1].add_(10.0)
        b.diagonal().mul_(2.0)
        v = b[1:]
        v += 1
        return _loss(T, b)
    tv, tg = _torch(f, dtype)
    a = A.astype(dtype)
    np.testing.assert_allclose(np.asarray(sg.grad(lambda x: f(sg, x), backend=backend)(a)),
                               tg, **TOL[dtype])
    np.testing.assert_allclose(np.asarray(sg.func.grad(lambda x: f(sg, x))(sg.tensor(a))),
                               tg, **TOL[dtype])
    x = sg.tensor(a, requires_grad=True)
    out = sg.compile(lambda x: f(sg, x), backend=backend)(x)
    out.backward()
    np.testing.assert_allclose(out.item(), tv, **TOL[dtype])
    np.testing.assert_allclose(x.grad.numpy(), tg, **TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_compiled_module_writing_through_diagonal(dtype, backend):
    def build(T):
        T.manual_seed(0)

        class M(T.nn.Module):
            def __init__(self):
                super().__init__()
                self.w = T.nn.Parameter(T.arange(1., 17., dtype=getattr(T, str(dtype)[6:]))
                                        .reshape(4, 4) / 7)

            def forward(self, x):
                b = self.w * x
                b.diagonal().mul_(2)
                b.detach()[0].add_(1)
                return (b * b).sum()
        return M()
    x = np.linspace(-1, 1, 16).reshape(4, 4)
    tm, m = build(torch), build(sg)
    tv = tm(torch.tensor(x, dtype=dtype))
    tv.backward()
    cm = sg.compile(m, backend=backend)
    v = cm(sg.tensor(x, dtype=getattr(sg, str(dtype)[6:])))
    v.backward()
    tol = TOL[np.float32 if dtype == torch.float32 else np.float64]
    np.testing.assert_allclose(v.item(), tv.item(), **tol)
    np.testing.assert_allclose(m.w.grad.numpy(), tm.w.grad.numpy(), **tol)


@pytest.mark.parametrize("where", ["closed-over", "argument"])
@pytest.mark.parametrize("view", ["diagonal", "column"])
def test_state_written_through_a_view_in_a_compiled_step(where, view, backend):
    get = (lambda t: t.diagonal()) if view == "diagonal" else (lambda t: t[:, 0])

    def run(T, compiled):
        if where == "closed-over":
            w = T.nn.Parameter(T.ones(3, 3))

            def step(x):
                with T.no_grad():
                    get(w).mul_(2.0)
                return (w * x).sum()
            f = sg.compile(step, backend=backend) if compiled else step
            return [float(f(T.ones(3, 3)).detach()) for _ in range(3)], float(w.sum())
        a = T.ones(3, 3)

        def g(a):
            get(a).mul_(2.0)
            return a.sum() * 1
        f = sg.compile(g, backend=backend) if compiled else g
        return [float(f(a)) for _ in range(3)], float(a.sum())
    assert run(sg, True) == run(torch, False)
