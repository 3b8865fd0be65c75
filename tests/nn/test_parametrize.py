"""nn.utils.parametrize, parametrizations.weight_norm / spectral_norm, the hook-based
weight_norm / spectral_norm and stateless.functional_call against PyTorch: reprs, state
dicts, values and gradients (spectral norm's power iteration from the same seed), caching,
assignment through right_inverse, removal, errors and warnings."""
import warnings

import numpy as np
import pytest
import torch

import symgrad as sg
from tests.nn.helpers import close, same_error


def _sym(m):
    class Symmetric(m.nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).transpose(-1, -2)

        def right_inverse(self, A):
            return A.triu()
    return Symmetric()


def _scale(m):
    class Scale(m.nn.Module):
        def __init__(self):
            super().__init__()
            self.s = m.nn.Parameter(m.tensor(2.0, dtype=m.float64))

        def forward(self, X):
            return X * self.s
    return Scale()


def _twice(m):
    class Twice(m.nn.Module):
        def forward(self, X):
            return X * 2

        def right_inverse(self, X):
            return X / 2
    return Twice()


def _grads(mod):
    return {k: p.grad for k, p in mod.named_parameters()}


BUILDS = {
    "symmetric": lambda m, P: P.register_parametrization(m.nn.Linear(3, 3).double(), "weight",
                                                         _sym(m)),
    "two_parametrizations": lambda m, P: P.register_parametrization(
        P.register_parametrization(m.nn.Linear(3, 3).double(), "weight", _sym(m)), "weight",
        _scale(m)),
    "buffer": lambda m, P: P.register_parametrization(m.nn.BatchNorm1d(3).double(),
                                                      "running_var", _twice(m)),
    "weight_norm": lambda m, P: m.nn.utils.parametrizations.weight_norm(
        m.nn.Linear(4, 3).double()),
    "weight_norm_conv_dim1": lambda m, P: m.nn.utils.parametrizations.weight_norm(
        m.nn.Conv2d(2, 3, 2).double(), dim=1),
    "weight_norm_dim_none": lambda m, P: m.nn.utils.parametrizations.weight_norm(
        m.nn.Linear(4, 3).double(), dim=None),
    "spectral_norm": lambda m, P: m.nn.utils.parametrizations.spectral_norm(
        m.nn.Linear(4, 3).double(), n_power_iterations=2),
    "spectral_norm_conv_t": lambda m, P: m.nn.utils.parametrizations.spectral_norm(
        m.nn.ConvTranspose2d(2, 3, 2).double()),
    "old_weight_norm": lambda m, P: m.nn.utils.weight_norm(m.nn.Linear(4, 3).double()),
    "old_spectral_norm": lambda m, P: m.nn.utils.spectral_norm(m.nn.Linear(4, 3).double()),
}
INPUTS = {"weight_norm_conv_dim1": (2, 2, 4, 4), "spectral_norm_conv_t": (2, 2, 3, 3),
          "buffer": (4, 3), "symmetric": (2, 3), "two_parametrizations": (2, 3)}


@pytest.mark.parametrize("name", sorted(BUILDS))
def test_parametrized_modules_equal_torch(name):
    def run(m, P):
        m.manual_seed(3)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            mod = BUILDS[name](m, P)
        x = m.tensor(np.random.default_rng(0).normal(size=INPUTS.get(name, (2, 4))))
        outs = [mod(x)]
        (outs[0].pow(2) + outs[0]).sum().backward()
        mod.eval()
        outs.append(mod(x))
        return mod, outs, [str(v.message) for v in w if v.category is FutureWarning]
    (s, so, sw), (t, to, tw) = run(sg, sg.nn.utils.parametrize), \
        run(torch, torch.nn.utils.parametrize)
    assert repr(s) == repr(t) and sw == tw
    assert list(s.state_dict()) == list(t.state_dict())
    for (k, a), b in zip(s.state_dict().items(), t.state_dict().values()):
        close(a, b, what=k, factor=10)
    for a, b in zip(so, to):
        close(a, b, factor=10)
    gs, gt = _grads(s), _grads(t)
    assert list(gs) == list(gt)
    for k in gt:
        if gt[k] is None:
            assert gs[k] is None
        else:
            close(gs[k], gt[k], what=k, factor=10)


def test_cached_assignment_and_removal_as_torch():
    def run(m, P):
        m.manual_seed(0)
        lin = P.register_parametrization(m.nn.Linear(3, 3).double(), "weight", _sym(m))
        calls = []
        lin.parametrizations.weight[0].register_forward_hook(lambda *a: calls.append(1))
        with P.cached():
            a, b = lin.weight, lin.weight
        same = a is b
        n_cached = len(calls)
        lin.weight = m.tensor(np.arange(9.0).reshape(3, 3))
        after_set = lin.weight.detach().numpy().copy()
        orig = lin.parametrizations.weight.original.detach().numpy().copy()
        flags = (P.is_parametrized(lin), P.is_parametrized(lin, "weight"),
                 P.is_parametrized(lin, "bias"), P.type_before_parametrizations(lin).__name__)
        P.remove_parametrizations(lin, "weight", leave_parametrized=False)
        kept_orig = lin.weight.detach().numpy().copy()
        return (same, n_cached, after_set.tolist(), orig.tolist(), flags, kept_orig.tolist(),
                type(lin).__name__, isinstance(lin.weight, m.nn.Parameter), repr(lin))
    assert run(sg, sg.nn.utils.parametrize) == run(torch, torch.nn.utils.parametrize)


def test_remove_and_errors_as_torch():
    def removed(m, P, name):
        m.manual_seed(1)
        mod = BUILDS[name](m, P)
        P.remove_parametrizations(mod, "weight")
        return mod
    for name in ("weight_norm", "spectral_norm", "two_parametrizations"):
        s, t = removed(sg, sg.nn.utils.parametrize, name), \
            removed(torch, torch.nn.utils.parametrize, name)
        assert repr(s) == repr(t) and list(s.state_dict()) == list(t.state_dict())
        for (k, a), b in zip(s.state_dict().items(), t.state_dict().values()):
            close(a, b, what=k)
    same_error(lambda m: m.nn.utils.parametrize.register_parametrization(
        m.nn.Linear(2, 2), "nothing", _sym(m)))
    same_error(lambda m: m.nn.utils.parametrize.remove_parametrizations(m.nn.Linear(2, 2),
                                                                        "weight"))
    same_error(lambda m: m.nn.utils.parametrize.remove_parametrizations(
        m.nn.utils.parametrizations.weight_norm(m.nn.Linear(2, 2)), "weight",
        leave_parametrized=False))
    same_error(lambda m: m.nn.utils.parametrizations.spectral_norm(m.nn.Linear(2, 2),
                                                                   n_power_iterations=0))
    same_error(lambda m: m.nn.utils.parametrizations.spectral_norm(m.nn.Linear(2, 2), dim=3))


def test_old_style_removal_as_torch():
    for fn, rm in (("weight_norm", "remove_weight_norm"),
                   ("spectral_norm", "remove_spectral_norm")):
        def run(m):
            m.manual_seed(2)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                lin = getattr(m.nn.utils, fn)(m.nn.Linear(3, 2).double())
            getattr(m.nn.utils, rm)(lin)
            return lin
        s, t = run(sg), run(torch)
        assert list(s.state_dict()) == list(t.state_dict())
        for (k, a), b in zip(s.state_dict().items(), t.state_dict().values()):
            close(a, b, what=k)


def test_stateless_functional_call_warns_and_calls():
    res = {}
    for m in (torch, sg):
        m.manual_seed(0)
        lin = m.nn.Linear(2, 1).double()
        params = {"weight": m.ones(1, 2, dtype=m.float64), "bias": m.zeros(1, dtype=m.float64)}
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            out = m.nn.utils.stateless.functional_call(lin, params, (m.ones(3, 2,
                                                                           dtype=m.float64),))
        res[m] = (out.detach().numpy().tolist(), [str(x.message) for x in w])
    assert res[sg] == res[torch]


def test_weight_norm_in_a_compiled_training_step():
    """A weight-normed layer trained by a compiled step: losses and parameters as torch's."""
    def build(m):
        m.manual_seed(4)
        net = m.nn.Sequential(m.nn.utils.parametrizations.weight_norm(m.nn.Linear(3, 4)),
                              m.nn.Tanh(), m.nn.Linear(4, 1)).double()
        return net, m.optim.SGD(net.parameters(), lr=0.1)
    (s, opt_s), (t, opt_t) = build(sg), build(torch)

    @sg.compile
    def step(x, y):
        opt_s.zero_grad()
        loss = ((s(x) - y) ** 2).mean()
        loss.backward()
        opt_s.step()
        return loss.detach()
    rng = np.random.default_rng(0)
    for _ in range(3):
        x, y = rng.normal(size=(5, 3)), rng.normal(size=(5, 1))
        ls = step(sg.tensor(x), sg.tensor(y))
        opt_t.zero_grad()
        lt = ((t(torch.tensor(x)) - torch.tensor(y)) ** 2).mean()
        lt.backward()
        opt_t.step()
        close(ls, lt.detach())
    for (k, a), b in zip(s.state_dict().items(), t.state_dict().values()):
        close(a, b, what=k, factor=10)


def test_a_hook_based_weight_norm_checkpoint_loads_into_the_parametrization():
    def run(m):
        m.manual_seed(5)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            old = m.nn.utils.weight_norm(m.nn.Linear(3, 2).double())
        new = m.nn.utils.parametrizations.weight_norm(m.nn.Linear(3, 2).double())
        res = new.load_state_dict(old.state_dict())
        return repr(res), {k: v.numpy().tolist() for k, v in new.state_dict().items()}
    assert run(sg) == run(torch)


def test_load_state_dict_pre_hook_renames_keys_as_torch():
    def run(m):
        lin = m.nn.Linear(2, 2)
        seen = []

        def rename(module, state_dict, prefix, local_metadata, strict, missing, unexpected,
                   errors):
            seen.append((type(module).__name__, prefix, strict))
            if prefix + "w" in state_dict:
                state_dict[prefix + "weight"] = state_dict.pop(prefix + "w")
        net = m.nn.Sequential(lin)
        lin.register_load_state_dict_pre_hook(rename)
        res = net.load_state_dict({"0.w": m.ones(2, 2), "0.bias": m.zeros(2)})
        return seen, repr(res), lin.weight.detach().numpy().tolist()
    assert run(sg) == run(torch)
