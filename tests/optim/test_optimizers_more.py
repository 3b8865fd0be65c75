"""Adamax, NAdam, RAdam, ASGD and Rprop against torch.optim: the same parameters and
gradient sequence through many steps of every option, both dtypes, state dicts and
reprs; inside a compiled training step equal to torch's eager one; swa_utils
(AveragedModel, SWALR, update_bn) against torch's."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg
from tests.optim.test_optimizers import DTYPES, _same_error, assert_same_run

CASES = [
    ("Adamax", dict(lr=0.01)),
    ("Adamax", dict(lr=0.02, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.1, maximize=True)),
    ("Adamax", dict(lr=0.01, foreach=True)),
    ("NAdam", dict(lr=0.01)),
    ("NAdam", dict(lr=0.02, weight_decay=0.1, momentum_decay=0.01)),
    ("NAdam", dict(lr=0.01, weight_decay=0.2, decoupled_weight_decay=True, maximize=True)),
    ("NAdam", dict(lr=0.01, foreach=True)),
    ("RAdam", dict(lr=0.01)),
    ("RAdam", dict(lr=0.01, betas=(0.9, 0.9), weight_decay=0.1)),          # rho_t > 5 early
    ("RAdam", dict(lr=0.02, weight_decay=0.2, decoupled_weight_decay=True, maximize=True)),
    ("RAdam", dict(lr=0.01, betas=(0.8, 0.8), foreach=True)),
    ("ASGD", dict(lr=0.05)),
    ("ASGD", dict(lr=0.05, lambd=0.01, alpha=0.5, t0=5, weight_decay=0.1)),
    ("ASGD", dict(lr=0.02, t0=3, maximize=True, foreach=True)),
    ("Rprop", dict(lr=0.01)),
    ("Rprop", dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-3, 0.1), maximize=True)),
    ("Rprop", dict(lr=0.01, foreach=True)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,kw", CASES)
def test_updates_equal_torch(name, kw, dtype):
    assert_same_run(name, kw, dtype)


@pytest.mark.parametrize("fn", [
    lambda m: m.optim.Adamax([m.nn.Parameter(m.ones(1))], lr=-1),
    lambda m: m.optim.Adamax([m.nn.Parameter(m.ones(1))], betas=(0.9, 1.0)),
    lambda m: m.optim.NAdam([m.nn.Parameter(m.ones(1))], momentum_decay=-1),
    lambda m: m.optim.NAdam([m.nn.Parameter(m.ones(1))], eps=-1),
    lambda m: m.optim.RAdam([m.nn.Parameter(m.ones(1))], weight_decay=-1),
    lambda m: m.optim.ASGD([m.nn.Parameter(m.ones(1))], weight_decay=-1),
    lambda m: m.optim.Rprop([m.nn.Parameter(m.ones(1))], etas=(1.1, 1.2)),
    lambda m: m.optim.Rprop([m.nn.Parameter(m.ones(1))], lr=-0.1),
    lambda m: m.optim.swa_utils.SWALR(m.optim.SGD([m.nn.Parameter(m.ones(1))], lr=0.1), 0.05,
                                      anneal_strategy="exp"),
    lambda m: m.optim.swa_utils.SWALR(m.optim.SGD([m.nn.Parameter(m.ones(1))], lr=0.1), 0.05,
                                      anneal_epochs=-1),
    lambda m: m.optim.swa_utils.get_ema_avg_fn(1.5),
])
def test_bad_arguments_raise_pytorchs_errors(fn):
    _same_error(fn)


COMPILED = [("Adamax", dict(lr=0.01, weight_decay=0.1)), ("NAdam", dict(lr=0.01)),
            ("NAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
            ("RAdam", dict(lr=0.01, betas=(0.9, 0.9))), ("ASGD", dict(lr=0.05, t0=2)),
            ("Rprop", dict(lr=0.01))]


@pytest.mark.parametrize("dtype", ("float32", "float64"))
@pytest.mark.parametrize("name,kw", COMPILED)
def test_compiled_training_step_equals_torch(name, kw, dtype):
    """Forward, loss, backward and the update in one compiled call; 7 steps (RAdam
    crosses rho_t = 5, ASGD starts averaging), each step's loss and parameters as
    torch's eager step."""
    # float32: 7 steps each divide by sqrt(v) + eps, which amplifies the last-bit
    # differences of the compiled gradient (its summation order is not ATen's)
    tol = {"float32": dict(rtol=1e-4, atol=1e-5), "float64": dict(rtol=1e-10, atol=1e-12)}[dtype]
    torch.manual_seed(0)
    t = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    t = t.to(getattr(torch, dtype))
    s = sg.nn.Sequential(sg.nn.Linear(5, 8), sg.nn.Tanh(), sg.nn.Linear(8, 3))
    s = s.to(getattr(sg, dtype))
    s.load_state_dict({k: sg.tensor(v.numpy()) for k, v in t.state_dict().items()})
    opt_t = getattr(torch.optim, name)(t.parameters(), **kw)
    opt_s = getattr(sg.optim, name)(s.parameters(), **kw)

    @sg.compile
    def step(x, y):
        opt_s.zero_grad()
        loss = sg.nn.functional.cross_entropy(s(x), y)
        loss.backward()
        opt_s.step()
        return loss.detach()
    rng = np.random.default_rng(0)
    for _ in range(7):
        x = rng.normal(size=(6, 5)).astype(dtype)
        y = rng.integers(0, 3, 6)
        ls = step(sg.tensor(x), sg.tensor(y))
        opt_t.zero_grad()
        lt = torch.nn.functional.cross_entropy(t(torch.tensor(x)), torch.tensor(y))
        lt.backward()
        opt_t.step()
        np.testing.assert_allclose(ls.numpy(), lt.detach().numpy(), **tol)
        for a, b in zip(s.parameters(), t.parameters()):
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), **tol)
    for k, st in opt_t.state_dict()["state"].items():
        for field, v in st.items():
            np.testing.assert_allclose(opt_s.state_dict()["state"][k][field].numpy(), v.numpy(),
                                       **tol)


def _models(m, dtype=np.float64):
    m.manual_seed(1)
    net = m.nn.Sequential(m.nn.Linear(3, 4), m.nn.BatchNorm1d(4), m.nn.ReLU(), m.nn.Linear(4, 2))
    return net.to(getattr(m, np.dtype(dtype).name))


@pytest.mark.parametrize("kind", ("swa", "ema", "ema_multi", "swa_multi", "buffers"))
def test_averaged_model_equals_torch(kind):
    def run(m):
        net = _models(m)
        su = m.optim.swa_utils
        kw = {"swa": {}, "ema": {"avg_fn": su.get_ema_avg_fn(0.9)},
              "ema_multi": {"multi_avg_fn": su.get_ema_multi_avg_fn(0.8)},
              "swa_multi": {"multi_avg_fn": su.get_swa_multi_avg_fn()},
              "buffers": {"use_buffers": True}}[kind]
        avg = su.AveragedModel(net, **kw)
        rng = np.random.default_rng(3)
        opt = m.optim.SGD(net.parameters(), lr=0.1)
        for _ in range(4):
            x = m.tensor(rng.normal(size=(5, 3)))
            opt.zero_grad()
            net(x).pow(2).sum().backward()
            opt.step()
            avg.update_parameters(net)
        out = avg(m.tensor(np.ones((2, 3))))
        return avg, out
    (s, so), (t, to) = run(sg), run(torch)
    assert repr(s) == repr(t)
    assert list(s.state_dict()) == list(t.state_dict())
    for (k, a), b in zip(s.state_dict().items(), t.state_dict().values()):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-14, err_msg=k)
    np.testing.assert_allclose(so.detach().numpy(), to.detach().numpy(), rtol=1e-12)


def test_update_bn_equals_torch():
    def run(m):
        net = _models(m)
        data = [m.tensor(np.random.default_rng(i).normal(size=(4, 3))) for i in range(3)]
        loader = [(x, 0) for x in data]
        net.eval()
        m.optim.swa_utils.update_bn(loader, net)
        return net
    s, t = run(sg), run(torch)
    assert s.training == t.training
    for (k, a), b in zip(s.state_dict().items(), t.state_dict().values()):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, err_msg=k)


@pytest.mark.parametrize("kw", (dict(swa_lr=0.05), dict(swa_lr=[0.05, 0.2], anneal_epochs=3,
                                                        anneal_strategy="linear"),
                                dict(swa_lr=0.01, anneal_epochs=0)))
def test_swalr_rates_equal_torch(kw):
    def run(m):
        a, b = m.nn.Parameter(m.ones(2)), m.nn.Parameter(m.ones(1))
        opt = m.optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.3}], lr=0.1)
        sched = m.optim.swa_utils.SWALR(opt, **kw)
        rates = [sched.get_last_lr()]
        for _ in range(14):
            opt.step()
            sched.step()
            rates.append(sched.get_last_lr())
        return rates, sched.state_dict()
    (rs, ss), (rt, st) = run(sg), run(torch)
    np.testing.assert_allclose(rs, rt, rtol=1e-15)
    assert set(ss) == set(st)
