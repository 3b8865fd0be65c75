"""The guards of a compiled training step are read again only when something they
depend on may have changed (an optimizer's ``param_groups`` / ``state`` count their
changes, modules count attribute assignments): every change made between calls must
still take effect. Each scenario runs the compiled step and torch's eager step side by
side, makes the same change to both, and compares parameters after every step, both
dtypes."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

import symgrad as sg
from tests.compiler.test_state_in_place import _closure_step
from tests.compiler.test_train_step import DTYPES, TOL, _batches, _model


def _pair(dtype, batchnorm=False, opt="SGD", **kw):
    model, tmodel = _model(sg, dtype, batchnorm), _model(torch, dtype, batchnorm)
    kw = kw or dict(lr=0.1, momentum=0.9)
    return (model, getattr(sg.optim, opt)(model.parameters(), **kw),
            tmodel, getattr(torch.optim, opt)(tmodel.parameters(), **kw))


def _runner(model, opt, tmodel, topt, dtype):
    x, y = _batches(dtype, 1)[0]
    step = _closure_step(model, opt, sg.tensor(x), sg.tensor(y))

    def both(n=3):
        for _ in range(n):
            topt.zero_grad()
            tl = torch.nn.functional.cross_entropy(tmodel(torch.tensor(x)), torch.tensor(y))
            tl.backward()
            topt.step()
            np.testing.assert_allclose(float(step()), tl.item(), **TOL[dtype])
            for (name, p), tp in zip(model.named_parameters(), tmodel.parameters()):
                np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(),
                                           err_msg=name, **TOL[dtype])
    return both, step


CHANGES = {
    "lr": lambda opt: opt.param_groups[0].__setitem__("lr", 0.02),
    "momentum (a flag)": lambda opt: opt.param_groups[0].__setitem__("momentum", 0.3),
    "nesterov (a flag)": lambda opt: opt.param_groups[0].update(nesterov=True),
    "weight_decay (nonzero)": lambda opt: opt.param_groups[0].setdefault("weight_decay", 0)
    or opt.param_groups[0].__setitem__("weight_decay", 0.1),
    "replace the group": lambda opt: opt.param_groups.__setitem__(
        0, dict(opt.param_groups[0], lr=0.03, momentum=0.5)),
    "replace the group list": lambda opt: setattr(
        opt, "param_groups", [dict(g, lr=0.04) for g in opt.param_groups]),
    "drop a parameter in place": lambda opt: opt.param_groups[0]["params"].pop(),
    "replace a state tensor": lambda opt: _replace_buffer(opt),
    "clear the state": lambda opt: opt.state.clear(),
}


def _replace_buffer(opt):
    p = opt.param_groups[0]["params"][0]
    buf = opt.state[p]["momentum_buffer"]
    opt.state[p]["momentum_buffer"] = (buf * 0.5).clone() if hasattr(buf, "clone") else buf


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("change", list(CHANGES))
def test_a_change_between_calls_takes_effect(change, dtype):
    model, opt, tmodel, topt = _pair(dtype)
    both, step = _runner(model, opt, tmodel, topt, dtype)
    both()
    with torch.no_grad():
        CHANGES[change](topt)
    CHANGES[change](opt)
    both()
    CHANGES["lr"](topt)          # and a change after that one
    CHANGES["lr"](opt)
    opt.param_groups[0]["lr"] = topt.param_groups[0]["lr"] = 0.07
    both()


@pytest.mark.parametrize("dtype", DTYPES)
def test_add_param_group_takes_effect(dtype):
    model, tmodel = _model(sg, dtype), _model(torch, dtype)
    opt = sg.optim.Adam(model[0].parameters(), lr=0.01)
    topt = torch.optim.Adam(tmodel[0].parameters(), lr=0.01)
    both, _ = _runner(model, opt, tmodel, topt, dtype)
    both()
    opt.add_param_group({"params": model[2].parameters(), "lr": 0.02})
    topt.add_param_group({"params": tmodel[2].parameters(), "lr": 0.02})
    both()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("opt_name", ["SGD", "Adam"])
def test_load_state_dict_takes_effect(opt_name, dtype):
    kw = dict(lr=0.1, momentum=0.9) if opt_name == "SGD" else dict(lr=0.01)
    model, opt, tmodel, topt = _pair(dtype, opt=opt_name, **kw)
    both, _ = _runner(model, opt, tmodel, topt, dtype)
    both(2)
    saved, tsaved = copy.deepcopy(opt.state_dict()), copy.deepcopy(topt.state_dict())
    both(2)
    opt.load_state_dict(saved)
    topt.load_state_dict(tsaved)
    both()
    saved["param_groups"][0]["lr"] = tsaved["param_groups"][0]["lr"] = 0.05
    opt.load_state_dict(saved)
    topt.load_state_dict(tsaved)
    both()


@pytest.mark.parametrize("dtype", DTYPES)
def test_train_eval_switch_takes_effect(dtype):
    model, opt, tmodel, topt = _pair(dtype, batchnorm=True)
    both, step = _runner(model, opt, tmodel, topt, dtype)
    both()
    for mode in (False, True, False):
        model.train(mode)
        tmodel.train(mode)
        both(2)
        np.testing.assert_allclose(model[1].running_mean.numpy(),
                                   tmodel[1].running_mean.numpy(), **TOL[dtype])
    model[1].training = True            # one submodule, by assignment
    tmodel[1].training = True
    both(2)


def test_unobserved_containers_still_take_effect():
    """State stored as a plain dict (not counted): the layout is read in full each call."""
    dtype = np.float64
    model, opt, tmodel, topt = _pair(dtype)
    both, _ = _runner(model, opt, tmodel, topt, dtype)
    both()
    for o in (opt, topt):
        p = o.param_groups[0]["params"][1]
        o.state[p] = dict(o.state[p])
    both()
    opt.param_groups[0]["momentum"] = topt.param_groups[0]["momentum"] = 0.0
    both()
