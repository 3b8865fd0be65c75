"""symgrad.func.functional_call against torch.func.functional_call: eager gradients,
compiled gradients of a module's loss as a function of its parameters (the JAX-style
training step), the module left unchanged, tied weights, strict errors."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg

from oracle import tol


def _models():
    tm = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    sm = sg.nn.Sequential(sg.nn.Linear(4, 8), sg.nn.Tanh(), sg.nn.Linear(8, 3))
    sm.load_state_dict({k: sg.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    return tm, sm


def _data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(6, 4)).astype(np.float32), rng.integers(0, 3, size=6)


def _torch_grads(tm, params, x, y):
    tp = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    loss = torch.nn.functional.cross_entropy(
        torch.func.functional_call(tm, tp, (torch.tensor(x),)), torch.tensor(y))
    loss.backward()
    return float(loss.detach()), {k: v.grad.numpy() for k, v in tp.items()}


@pytest.mark.parametrize("backend", ["llvm", "numpy"])
def test_compiled_gradient_of_a_module_loss_equals_torch(backend):
    tm, sm = _models()
    x, y = _data()
    params = {k: (v.detach().numpy() * 0.5).astype(np.float32) for k, v in tm.named_parameters()}

    def loss(p, xb, yb):
        return sg.nn.functional.cross_entropy(sg.func.functional_call(sm, p, (xb,)), yb)
    value, grads = sg.value_and_grad(loss, backend=backend)(params, x, y)
    t_value, t_grads = _torch_grads(tm, params, x, y)
    np.testing.assert_allclose(value, t_value, **tol(np.float32))
    for k in t_grads:
        np.testing.assert_allclose(grads[k], t_grads[k], **tol(np.float32), err_msg=k)
    # the module itself is untouched
    for k, v in tm.named_parameters():
        np.testing.assert_array_equal(dict(sm.named_parameters())[k].detach().numpy(),
                                      v.detach().numpy())


def test_compiled_sgd_loop_over_a_parameter_dict_equals_torch():
    tm, sm = _models()
    x, y = _data()
    params = {k: v.detach().numpy().copy() for k, v in tm.named_parameters()}
    vg = sg.value_and_grad(lambda p, xb, yb: sg.nn.functional.cross_entropy(
        sg.func.functional_call(sm, p, (xb,)), yb))
    opt = torch.optim.SGD(tm.parameters(), lr=0.1)
    for _ in range(10):
        _, g = vg(params, x, y)
        params = {k: params[k] - 0.1 * g[k] for k in params}
        opt.zero_grad()
        torch.nn.functional.cross_entropy(tm(torch.tensor(x)), torch.tensor(y)).backward()
        opt.step()
    for k, v in tm.named_parameters():
        np.testing.assert_allclose(params[k], v.detach().numpy(), rtol=1e-4, atol=1e-5)


def test_eager_functional_call_gradients_equal_torch():
    tm, sm = _models()
    x, y = _data()
    params = {k: v.detach().numpy().copy() for k, v in tm.named_parameters()}
    sp = {k: sg.tensor(v, requires_grad=True) for k, v in params.items()}
    loss = sg.nn.functional.cross_entropy(sg.func.functional_call(sm, sp, (sg.tensor(x),)),
                                          sg.tensor(y))
    loss.backward()
    _, t_grads = _torch_grads(tm, params, x, y)
    for k in t_grads:
        np.testing.assert_allclose(sp[k].grad.numpy(), t_grads[k], **tol(np.float32))
    assert all(p.grad is None for p in sm.parameters())


def test_tied_weights_and_strict_errors_are_pytorchs():
    def build(m):
        net = m.nn.Sequential(m.nn.Linear(2, 2, bias=False), m.nn.Linear(2, 2, bias=False))
        net[1].weight = net[0].weight
        return net
    t, s = build(torch), build(sg)
    w = np.eye(2, dtype=np.float32) * 3
    x = np.ones((1, 2), np.float32)
    to = torch.func.functional_call(t, {"0.weight": torch.tensor(w)}, (torch.tensor(x),))
    so = sg.func.functional_call(s, {"0.weight": sg.tensor(w)}, (sg.tensor(x),))
    np.testing.assert_allclose(so.detach().numpy(), to.detach().numpy())
    with pytest.raises(RuntimeError) as te:
        torch.func.functional_call(t, {"nope": torch.ones(1)}, (torch.tensor(x),), strict=True)
    with pytest.raises(RuntimeError) as se:
        sg.func.functional_call(s, {"nope": sg.ones(1)}, (sg.tensor(x),), strict=True)
    assert str(se.value) == str(te.value)
