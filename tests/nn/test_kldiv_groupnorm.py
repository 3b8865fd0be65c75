"""The checks the brief asked of existing layers: KLDivLoss (every reduction, log_target,
legacy arguments) and GroupNorm (affine or not, 3-D to 5-D inputs) against PyTorch --
values, gradients, both dtypes, reprs, errors -- and both inside a compiled step."""
import warnings

import numpy as np
import pytest
import torch

import symgrad as sg
from tests.nn.helpers import DTYPES, close, same_error

R = np.random.default_rng(0)
LOGP = np.log(R.dirichlet(np.ones(5), size=4))
P = R.dirichlet(np.ones(5), size=4)


def _both(fn, arrays, dtype, grad_of=(0,)):
    res = []
    for m in (torch, sg):
        ts = [m.tensor(a.astype(dtype), requires_grad=i in grad_of) for i, a in enumerate(arrays)]
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            out = fn(m, *ts)
        g = np.random.default_rng(1).normal(size=tuple(out.shape)).astype(dtype)
        out.backward(m.tensor(g))
        res.append((out, [ts[i].grad for i in grad_of], [str(x.message) for x in w]))
    (so, sg_, sw), (to, tg, tw) = res[1], res[0]
    close(so, to, dtype, "value", factor=4)
    for a, b in zip(sg_, tg):
        close(a, b, dtype, "grad", factor=4)
    assert sw == tw


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kw", [dict(reduction="mean"), dict(reduction="batchmean"),
                                dict(reduction="sum"), dict(reduction="none"),
                                dict(reduction="batchmean", log_target=True),
                                dict(size_average=False)])
def test_kl_div_equals_torch(kw, dtype):
    target = np.log(P) if kw.get("log_target") else P
    _both(lambda m, x, t: m.nn.KLDivLoss(**kw)(x, t), [LOGP, target], dtype)
    _both(lambda m, x, t: m.nn.functional.kl_div(x, t, **kw), [LOGP, target], dtype, (0, 1))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,groups,affine", [((3, 6, 5), 3, True), ((2, 4, 3, 3), 2, False),
                                                 ((2, 6, 2, 3, 2), 6, True), ((2, 4), 1, True)])
def test_group_norm_equals_torch(shape, groups, affine, dtype):
    x = R.normal(size=shape)
    c = shape[1]
    w, b = R.uniform(0.5, 1.5, size=c), R.normal(size=c)

    def run(m, xt, wt, bt):
        mod = m.nn.GroupNorm(groups, c, eps=1e-3, affine=affine).to(getattr(m, np.dtype(dtype).name))
        if affine:
            with m.no_grad():
                mod.weight.copy_(wt)
                mod.bias.copy_(bt)
        return mod(xt) + m.nn.functional.group_norm(xt, groups, wt, bt)
    _both(run, [x, w, b], dtype, (0, 1, 2))
    assert repr(sg.nn.GroupNorm(groups, c, affine=affine)) == \
        repr(torch.nn.GroupNorm(groups, c, affine=affine))


@pytest.mark.parametrize("build", [
    lambda m: m.nn.functional.kl_div(m.zeros(2, 3), m.zeros(2, 3), reduction="max"),
    lambda m: m.nn.GroupNorm(4, 6),
    lambda m: m.nn.functional.group_norm(m.zeros(2, 6, 3), 4),
    lambda m: m.nn.functional.group_norm(m.zeros(2, 6, 3), 3, m.ones(4)),
])
def test_errors_are_torchs(build):
    same_error(build)


@pytest.mark.parametrize("dtype", DTYPES)
def test_compiled_step_with_group_norm_and_kl_div(dtype):
    def build(m):
        m.manual_seed(0)
        net = m.nn.Sequential(m.nn.Conv1d(2, 4, 3), m.nn.GroupNorm(2, 4), m.nn.Flatten(),
                              m.nn.Linear(12, 5), m.nn.LogSoftmax(dim=1))
        net = net.to(getattr(m, np.dtype(dtype).name))
        return net, m.optim.Adam(net.parameters(), lr=0.01)
    (s, opt_s), (t, opt_t) = build(sg), build(torch)
    s.load_state_dict({k: sg.tensor(v.numpy()) for k, v in t.state_dict().items()})

    @sg.compile
    def step(x, y):
        opt_s.zero_grad()
        loss = sg.nn.functional.kl_div(s(x), y, reduction="batchmean")
        loss.backward()
        opt_s.step()
        return loss.detach()
    rng = np.random.default_rng(0)
    for _ in range(3):
        x = rng.normal(size=(4, 2, 5)).astype(dtype)
        y = rng.dirichlet(np.ones(5), size=4).astype(dtype)
        ls = step(sg.tensor(x), sg.tensor(y))
        opt_t.zero_grad()
        lt = torch.nn.functional.kl_div(t(torch.tensor(x)), torch.tensor(y), reduction="batchmean")
        lt.backward()
        opt_t.step()
        close(ls, lt.detach(), dtype, factor=50)
    for (k, a), b in zip(s.state_dict().items(), t.state_dict().values()):
        close(a, b, dtype, k, factor=200)
