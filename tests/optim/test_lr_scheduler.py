"""optim.lr_scheduler against torch.optim.lr_scheduler: every schedule's rates (and cycled
momentum) step by step, on resumed runs and with step(epoch); composite schedules;
PyTorch's warnings and errors; state dicts resuming identically."""
from __future__ import annotations

import io
import warnings

import numpy as np
import pytest
import torch

import symgrad as sg


def _opt(lib, name="SGD", groups=1):
    params = [lib.nn.Parameter(lib.ones(2)) for _ in range(groups)]
    extra = {"momentum": 0.9} if name == "SGD" else {}
    return getattr(lib.optim, name)([{"params": [p], "lr": 0.1 * (i + 1)}
                                     for i, p in enumerate(params)], lr=0.1, **extra)


SCHEDULES = [
    ("StepLR", dict(step_size=3, gamma=0.5)),
    ("MultiStepLR", dict(milestones=[2, 5, 5, 9], gamma=0.3)),
    ("ExponentialLR", dict(gamma=0.9)),
    ("CosineAnnealingLR", dict(T_max=7, eta_min=0.001)),
    ("LambdaLR", dict(lr_lambda=lambda e: 1 / (1 + e))),
    ("MultiplicativeLR", dict(lr_lambda=lambda e: 0.95)),
    ("ConstantLR", dict(factor=0.5, total_iters=4)),
    ("LinearLR", dict(start_factor=0.2, end_factor=0.9, total_iters=6)),
    ("PolynomialLR", dict(total_iters=8, power=2.0)),
    ("CosineAnnealingWarmRestarts", dict(T_0=3, T_mult=2, eta_min=0.01)),
    ("OneCycleLR", dict(max_lr=0.5, total_steps=20)),
    ("OneCycleLR", dict(max_lr=[0.5, 0.7], epochs=4, steps_per_epoch=5,
                        anneal_strategy="linear", three_phase=True)),
    ("CyclicLR", dict(base_lr=0.01, max_lr=0.1, step_size_up=3)),
    ("CyclicLR", dict(base_lr=[0.01, 0.02], max_lr=0.2, step_size_up=2, step_size_down=5,
                      mode="triangular2")),
    ("CyclicLR", dict(base_lr=0.01, max_lr=0.1, step_size_up=4, mode="exp_range", gamma=0.9,
                      base_momentum=0.7, max_momentum=0.95)),
    ("CyclicLR", dict(base_lr=0.01, max_lr=0.1, step_size_up=2, scale_fn=lambda x: 0.5 ** x,
                      scale_mode="iterations", cycle_momentum=False)),
]
# (the resumed / step(epoch) runs have one parameter group: no per-group lists)
ONE_GROUP = [s for s in SCHEDULES
             if s[0] != "OneCycleLR" and not isinstance(s[1].get("base_lr"), list)]


def _trace(lib, opt, sched, steps=19):
    lrs, moms = [], []
    for _ in range(steps):
        for g in opt.param_groups:
            for p in g["params"]:
                p.grad = lib.ones(2)
        opt.step()
        sched.step()
        lrs.append(sched.get_last_lr())
        g = opt.param_groups[0]
        moms.append(g.get("momentum", g.get("betas", (None,))[0]))
    return lrs, moms


@pytest.mark.parametrize("opt_name", ["SGD", "Adam"])
@pytest.mark.parametrize("name,kw", SCHEDULES)
def test_schedules_equal_torch(name, kw, opt_name):
    def run(lib):
        opt = _opt(lib, opt_name, groups=2)
        sched = getattr(lib.optim.lr_scheduler, name)(opt, **kw)
        first = sched.get_last_lr()
        lrs, moms = _trace(lib, opt, sched)
        return (first, lrs, moms), [p.detach().numpy() for g in opt.param_groups
                                    for p in g["params"]]
    (ours, p1), (theirs, p2) = run(sg), run(torch)
    assert ours == theirs                 # rates and momenta: the same floats
    for a, b in zip(p1, p2):              # parameters: float32 updates, within rounding
        np.testing.assert_allclose(a, b, rtol=1e-6)


@pytest.mark.parametrize("name,kw", ONE_GROUP)
def test_resumed_schedules_equal_torch(name, kw):
    """last_epoch >= 0 (a resumed run): the initial step keeps the groups' rates."""
    def run(lib):
        opt = _opt(lib)
        for g in opt.param_groups:
            g["initial_lr"] = 0.3
        sched = getattr(lib.optim.lr_scheduler, name)(opt, last_epoch=4, **kw)
        return sched.get_last_lr(), _trace(lib, opt, sched, 10)
    assert run(sg) == run(torch)


@pytest.mark.parametrize("name,kw", ONE_GROUP)
def test_step_with_an_epoch_uses_the_closed_form_as_torch(name, kw):
    def run(lib):
        opt = _opt(lib)
        sched = getattr(lib.optim.lr_scheduler, name)(opt, **kw)
        out = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for e in (3, 7, 2, 11):
                opt.step()
                sched.step(e)
                out.append(sched.get_last_lr())
        return out, [str(w.message) for w in caught]
    assert run(sg) == run(torch)


def test_sequential_and_chained_equal_torch():
    def run(lib):
        S = lib.optim.lr_scheduler
        opt = _opt(lib, groups=2)
        warm = S.LinearLR(opt, start_factor=0.1, total_iters=3)
        cos = S.CosineAnnealingLR(opt, T_max=5)
        seq = S.SequentialLR(opt, [warm, cos], milestones=[3])
        a = seq.get_last_lr()
        lrs, _ = _trace(lib, opt, seq, 12)
        opt2 = _opt(lib)
        chain = S.ChainedScheduler([S.ConstantLR(opt2, factor=0.5, total_iters=2),
                                    S.ExponentialLR(opt2, gamma=0.9)])
        b = chain.get_last_lr()
        lrs2, _ = _trace(lib, opt2, chain, 6)
        return a, lrs, b, lrs2
    assert run(sg) == run(torch)


def test_reduce_lr_on_plateau_equals_torch():
    metrics = [1.0, 0.9, 0.95, 0.95, 0.95, 0.94, 0.96, 0.5, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6]

    def run(lib, **kw):
        opt = _opt(lib, groups=2)
        sched = lib.optim.lr_scheduler.ReduceLROnPlateau(opt, **kw)
        out = []
        for m in metrics:
            sched.step(m)
            out.append((sched.get_last_lr(), sched.num_bad_epochs, sched.in_cooldown))
        return out
    for kw in (dict(patience=2, factor=0.5, cooldown=1, min_lr=0.01),
               dict(mode="max", patience=1, threshold=0.05, threshold_mode="abs",
                    min_lr=[0.05, 0.01])):
        assert run(sg, **kw) == run(torch, **kw)


def _messages(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return [str(w.message) for w in caught]


@pytest.mark.parametrize("case", ["scheduler_first", "get_lr_by_hand", "right_order"])
def test_warnings_as_torch(case):
    def run(lib):
        opt = _opt(lib)
        sched = lib.optim.lr_scheduler.StepLR(opt, step_size=2)

        def body():
            if case == "scheduler_first":
                sched.step()
                opt.step()
            elif case == "get_lr_by_hand":
                sched.get_lr()
            else:
                opt.step()
                sched.step()
        return _messages(body)
    ours, theirs = run(sg), run(torch)
    assert ours == theirs
    assert bool(ours) == (case != "right_order")


@pytest.mark.parametrize("fn", [
    lambda m: m.optim.lr_scheduler.StepLR(_opt(m), 2, last_epoch=3),
    lambda m: m.optim.lr_scheduler.StepLR(object(), 2),
    lambda m: m.optim.lr_scheduler.LinearLR(_opt(m), start_factor=0),
    lambda m: m.optim.lr_scheduler.ConstantLR(_opt(m), factor=2),
    lambda m: m.optim.lr_scheduler.LambdaLR(_opt(m), [lambda e: 1, lambda e: 2]),
    lambda m: m.optim.lr_scheduler.MultiplicativeLR(_opt(m), 0.9),
    lambda m: m.optim.lr_scheduler.CosineAnnealingWarmRestarts(_opt(m), T_0=0),
    lambda m: m.optim.lr_scheduler.OneCycleLR(_opt(m), max_lr=1.0),
    lambda m: m.optim.lr_scheduler.OneCycleLR(_opt(m), max_lr=1.0, total_steps=10,
                                              pct_start=1),
    lambda m: (lambda s: [s.step() for _ in range(12)])(
        m.optim.lr_scheduler.OneCycleLR(_opt(m), max_lr=1.0, total_steps=10)),
    lambda m: m.optim.lr_scheduler.SequentialLR(_opt(m), [], milestones=[]),
    lambda m: (lambda o: m.optim.lr_scheduler.SequentialLR(
        o, [m.optim.lr_scheduler.StepLR(o, 2)], milestones=[3]))(_opt(m)),
    lambda m: (lambda o: m.optim.lr_scheduler.ChainedScheduler(
        [m.optim.lr_scheduler.ReduceLROnPlateau(o)]))(_opt(m)),
    lambda m: m.optim.lr_scheduler.ReduceLROnPlateau(_opt(m), factor=1.0),
    lambda m: m.optim.lr_scheduler.ReduceLROnPlateau(_opt(m), mode="best"),
    lambda m: m.optim.lr_scheduler.ReduceLROnPlateau(_opt(m), min_lr=[0.1, 0.2]),
    lambda m: m.optim.lr_scheduler.CyclicLR(_opt(m), 0.01, 0.1, mode="sawtooth"),
    lambda m: m.optim.lr_scheduler.CyclicLR(
        m.optim.Adagrad([m.nn.Parameter(m.ones(1))]), 0.01, 0.1),
    lambda m: m.optim.lr_scheduler.CyclicLR(_opt(m), [0.01, 0.02], 0.1),
    lambda m: m.optim.lr_scheduler.CyclicLR(object(), 0.01, 0.1),
])
def test_bad_arguments_raise_pytorchs_errors(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(Exception) as t:
            fn(torch)
        with pytest.raises(Exception) as s:
            fn(sg)
    assert type(s.value) is type(t.value)
    assert str(s.value) == str(t.value)


@pytest.mark.parametrize("name,kw", SCHEDULES + [("ReduceLROnPlateau", dict(patience=0))])
def test_state_dict_saves_and_resumes(name, kw):
    """A schedule's state dict (through symgrad.save / load) resumes where it stopped,
    and has PyTorch's keys."""
    def make(lib):
        opt = _opt(lib, groups=2)
        return opt, getattr(lib.optim.lr_scheduler, name)(opt, **kw)

    def advance(opt, sched, n):
        out = []
        for k in range(n):
            opt.step()
            if name == "ReduceLROnPlateau":
                sched.step(1.0)                    # a stalled metric
            else:
                sched.step()
            out.append(sched.get_last_lr())
        return out
    opt_a, a = make(sg)
    advance(opt_a, a, 5)
    buf = io.BytesIO()
    sg.save({"opt": opt_a.state_dict(), "sched": a.state_dict()}, buf)
    buf.seek(0)
    saved = sg.load(buf)
    opt_b, b = make(sg)
    opt_b.load_state_dict(saved["opt"])
    b.load_state_dict(saved["sched"])
    assert advance(opt_a, a, 6) == advance(opt_b, b, 6)
    _, t = make(torch)
    assert sorted(a.state_dict()) == sorted(t.state_dict())
