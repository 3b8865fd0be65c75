"""``symgrad.func``'s transforms against ``torch.func``: values, layouts, PyTorch's errors,
both dtypes; their results join eager autograd; a transform written in a loop traces
once."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg

DTYPES = [("float32", 2e-6), ("float64", 1e-13)]


def _same(a, b, tol):
    """Equal pytrees of tensors (symgrad vs torch), within tol."""
    if isinstance(b, torch.Tensor):
        assert isinstance(a, sg.Tensor) and tuple(a.shape) == tuple(b.shape), (a, b)
        assert a.dtype.name == str(b.dtype).replace("torch.", "")
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol, atol=tol)
        return
    assert type(a) is type(b), (a, b)
    if isinstance(b, dict):
        assert list(a) == list(b)
        for k in b:
            _same(a[k], b[k], tol)
        return
    assert len(a) == len(b)
    for u, v in zip(a, b):
        _same(u, v, tol)


CASES = {
    "grad": lambda F, L, x, y: F.grad(lambda x: (L.sin(x) * x ** 2).sum())(x),
    "grad_argnums": lambda F, L, x, y: F.grad(lambda x, y: (x * L.exp(y)).sum(),
                                              argnums=(0, 1))(x, y),
    "grad_negative_argnum": lambda F, L, x, y: F.grad(lambda x, y: (x * y).sum(), argnums=-1)(x, y),
    "grad_aux": lambda F, L, x, y: F.grad(lambda x: ((x ** 2).sum(), {"d": x * 2}),
                                          has_aux=True)(x),
    "grad_dict": lambda F, L, x, y: F.grad(lambda d: (d["a"] ** 2 * d["b"]).sum())(
        {"a": x, "b": y}),
    "grad_and_value": lambda F, L, x, y: F.grad_and_value(lambda x: L.tanh(x).sum())(x),
    "grad_and_value_aux": lambda F, L, x, y: F.grad_and_value(
        lambda x: ((x ** 3).sum(), x.mean()), has_aux=True)(x),
    "grad_of_constant": lambda F, L, x, y: F.grad(lambda x: L.tensor(3.0))(x),
    "vjp": lambda F, L, x, y: (lambda o: (o[0], o[1](L.ones_like(x))))(F.vjp(L.sin, x)),
    "vjp_two": lambda F, L, x, y: (lambda o: (o[0], o[1]((y, L.ones_like(x)))))(
        F.vjp(lambda a, b: (a * b, L.cos(a)), x, y)),
    "vjp_aux": lambda F, L, x, y: (lambda o: (o[1](y), o[2]))(
        F.vjp(lambda a: (L.sin(a) * a, a.sum()), x, has_aux=True)),
    "jvp": lambda F, L, x, y: F.jvp(lambda a: L.sin(a) * a, (x,), (y,)),
    "jvp_two": lambda F, L, x, y: F.jvp(lambda a, b: (a * b).sum() * a, (x, y), (y, x)),
    "jvp_aux": lambda F, L, x, y: F.jvp(lambda a: (L.exp(a), a * 2), (x,), (y,), has_aux=True),
    "jacrev": lambda F, L, x, y: F.jacrev(lambda a: L.sin(a) * a.sum())(x),
    "jacrev_argnums": lambda F, L, x, y: F.jacrev(lambda a, b: a * b, argnums=(0, 1))(x, y),
    "jacrev_outputs": lambda F, L, x, y: F.jacrev(lambda a: {"o": a * 2, "s": a.sum()})(x),
    "jacrev_aux": lambda F, L, x, y: F.jacrev(lambda a: (L.tanh(a), a.sum()), has_aux=True)(x),
    "jacfwd": lambda F, L, x, y: F.jacfwd(lambda a: L.exp(a) * a.sum())(x),
    "jacrev_of_jacrev": lambda F, L, x, y: F.jacrev(F.jacrev(lambda a: a ** 3))(x),
    "hessian": lambda F, L, x, y: F.hessian(lambda a: (L.sin(a) * a ** 2).sum())(x),
    "hessian_argnums": lambda F, L, x, y: F.hessian(lambda a, b: (a ** 2 * b).sum(),
                                                    argnums=(0, 1))(x, y),
    "vmap_grad": lambda F, L, x, y: F.vmap(F.grad(lambda a: (a ** 3).sum()))(
        L.stack([x, y])),
}


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_values_and_layouts_are_torch_funcs(case, dtype, tol):
    rng = np.random.default_rng(len(case))
    x0, y0 = rng.normal(size=3).astype(dtype), rng.normal(size=3).astype(dtype)
    want = CASES[case](torch.func, torch, torch.tensor(x0), torch.tensor(y0))
    got = CASES[case](sg.func, sg, sg.tensor(x0), sg.tensor(y0))
    _same(got, want, tol * 50)


ERRORS = {
    "non_scalar": lambda F, L, x: F.grad(L.sin)(x),
    "not_a_tensor_out": lambda F, L, x: F.grad(lambda a: 3.0)(x),
    "argnum_range": lambda F, L, x: F.grad(lambda a: a.sum(), argnums=1)(x),
    "argnums_empty": lambda F, L, x: F.grad(lambda a, b: a.sum(), argnums=())(x, x),
    "argnums_repeated": lambda F, L, x: F.grad(lambda a, b: a.sum(), argnums=(0, 0))(x, x),
    "argnums_type": lambda F, L, x: F.grad(lambda a: a.sum(), argnums=[0])(x),
    "aux_missing": lambda F, L, x: F.grad(lambda a: a.sum(), has_aux=True)(x),
    "aux_not_tensor": lambda F, L, x: F.grad(lambda a: (a.sum(), 1), has_aux=True)(x),
    "float_argument": lambda F, L, x: F.grad(lambda a: a.sum())(3.0),
    "int_argument": lambda F, L, x: F.grad(lambda a: a.sum())(L.tensor([1, 2])),
    "jvp_primals_not_tuple": lambda F, L, x: F.jvp(L.sin, x, x),
    "jvp_tangent_shape": lambda F, L, x: F.jvp(L.sin, (x,), (x[:2],)),
    "jvp_strict": lambda F, L, x: F.jvp(lambda a: L.ones(3), (x,), (x,), strict=True),
    "vjp_cotangent_shape": lambda F, L, x: F.vjp(L.sin, x)[1](L.ones(2)),
    "jacrev_chunk": lambda F, L, x: F.jacrev(L.sin, chunk_size=0)(x),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_errors_are_torch_funcs(case):
    with pytest.raises(Exception) as want:
        ERRORS[case](torch.func, torch, torch.tensor([1.0, 2.0, 3.0]))
    with pytest.raises(Exception) as got:
        ERRORS[case](sg.func, sg, sg.tensor([1.0, 2.0, 3.0]))
    assert type(got.value) is type(want.value)
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("dtype,tol", DTYPES)
def test_results_join_eager_autograd(dtype, tol):
    """A gradient of a function of x and of parameters it closes over is itself
    differentiated by backward(), as torch.func's is (MAML-style)."""
    x0, w0 = np.array([0.4, -1.1, 2.0], dtype), np.array([1.5, 0.5, -2.0], dtype)
    out = {}
    for lib in (torch, sg):
        x = lib.tensor(x0, requires_grad=True)
        w = lib.tensor(w0, requires_grad=True)
        g = lib.func.grad(lambda a: (w * lib.sin(a) * a ** 2).sum())(x)
        (g ** 2).sum().backward()
        out[lib.__name__] = (g, x.grad, w.grad)
    _same(out["symgrad"], out["torch"], tol * 100)


def test_a_transform_written_in_a_loop_traces_once():
    def loss(a):
        return (sg.tanh(a) ** 2).sum()
    x = sg.tensor([0.1, 0.2, 0.3])
    for _ in range(4):
        sg.func.grad(loss)(x)
    program = next(iter(sg.compiler.api._WRAPPERS[loss].values()))
    assert program.cache_info().misses == 1 and program.cache_info().hits == 3


@pytest.mark.parametrize("dtype,tol", DTYPES)
def test_maml_inner_step_with_functional_call(dtype, tol):
    """grad over functional_call's parameter dict, an inner SGD step, the outer loss
    backpropagated through the inner gradient (second order), as torch.func."""
    w0 = np.array([[0.1, 0.2, 0.3], [-0.4, 0.5, 0.6]], dtype)
    x0 = np.linspace(-1, 1, 12).reshape(4, 3).astype(dtype)
    out = {}
    for lib in (torch, sg):
        m = lib.nn.Linear(3, 2).to(getattr(lib, dtype))
        with lib.no_grad():
            m.weight.copy_(lib.tensor(w0))
            m.bias.copy_(lib.tensor(np.array([0.1, -0.1], dtype)))
        params = dict(m.named_parameters())
        x, y = lib.tensor(x0), lib.ones(4, 2, dtype=getattr(lib, dtype))

        def loss(p, x, y):
            return lib.nn.functional.mse_loss(lib.func.functional_call(m, p, (x,)), y)
        g = lib.func.grad(loss)(params, x, y)
        loss({k: v - 0.1 * g[k] for k, v in params.items()}, x, y).backward()
        out[lib.__name__] = (g["weight"], m.weight.grad, m.bias.grad)
    _same(out["symgrad"], out["torch"], tol * 100)


REBOUND = sg.tensor([1.0, 1.0, 1.0])


def test_a_rebound_global_is_seen():
    """The program's guards search the user's function (review3 finding 3)."""
    global REBOUND
    x = sg.tensor([1.0, 2.0, 3.0])

    def g(a):
        return (a * REBOUND).sum()
    first = sg.func.grad(g)(x).tolist()
    REBOUND = sg.tensor([5.0, 5.0, 5.0])
    try:
        assert (first, sg.func.grad(g)(x).tolist()) == ([1.0] * 3, [5.0] * 3)
        assert sg.func.jacrev(lambda a: a * REBOUND)(x).diagonal().tolist() == [5.0] * 3
    finally:
        REBOUND = sg.tensor([1.0, 1.0, 1.0])
