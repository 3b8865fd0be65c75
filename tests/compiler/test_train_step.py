"""A whole training step compiled: ``opt.zero_grad(); loss = f(model(x), y);
loss.backward(); opt.step()`` inside ``symgrad.compile``, against torch eager running the
same step on the same weights and data, step by step: losses, parameters, ``.grad``,
optimizer state and BatchNorm's running statistics, both dtypes. Also what decides when
it recompiles (the first call creating optimizer state, guards on options and modes,
options fed per call) and its errors."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg
from tests.optim.test_optimizers import CASES

DTYPES = (np.float32, np.float64)
TOL = {np.float32: dict(rtol=2e-5, atol=2e-6), np.float64: dict(rtol=1e-11, atol=1e-13)}


def _model(lib, dtype, batchnorm=False, momentum=0.1):
    torch.manual_seed(0)           # torch draws the weights; symgrad's copies them
    layers = [torch.nn.Linear(6, 12)]
    if batchnorm:
        layers.append(torch.nn.BatchNorm1d(12, momentum=momentum))
    layers += [torch.nn.Tanh(), torch.nn.Linear(12, 3)]
    tm = torch.nn.Sequential(*layers).to(getattr(torch, np.dtype(dtype).name))
    if lib is torch:
        return tm
    sl = [sg.nn.Linear(6, 12)]
    if batchnorm:
        sl.append(sg.nn.BatchNorm1d(12, momentum=momentum))
    sl += [sg.nn.Tanh(), sg.nn.Linear(12, 3)]
    m = sg.nn.Sequential(*sl).to(getattr(sg, np.dtype(dtype).name))
    m.load_state_dict({k: sg.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    return m


def _batches(dtype, n=5):
    rng = np.random.default_rng(3)
    return [(rng.normal(size=(8, 6)).astype(dtype), rng.integers(0, 3, size=8))
            for _ in range(n)]


def _torch_steps(model, opt, batches, sched=None):
    losses = []
    for x, y in batches:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(torch.tensor(x)), torch.tensor(y))
        loss.backward()
        opt.step()
        if sched is not None:
            sched.step()
        losses.append(loss.item())
    return losses


def _compiled_step(model, opt, backend="llvm"):
    @sg.compile(backend=backend)
    def step(x, y):
        opt.zero_grad()
        loss = sg.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def _train_both(model, opt, tmodel, topt, dtype, backend="llvm"):
    """Five steps of the compiled step and of torch's eager one: equal losses and state;
    returns the compiled step."""
    step = _compiled_step(model, opt, backend)
    batches = _batches(dtype)
    want = _torch_steps(tmodel, topt, batches)
    got = [float(step(x, y)) for x, y in batches]
    np.testing.assert_allclose(got, want, **TOL[dtype])
    _same_state(model, opt, tmodel, topt, dtype)
    return step


def _same_state(model, opt, tmodel, topt, dtype):
    tol = TOL[dtype]
    sd = model.state_dict()
    for k, v in tmodel.state_dict().items():
        np.testing.assert_allclose(sd[k].numpy(), v.numpy(), err_msg=k, **tol)
    for p, tp in zip(model.parameters(), tmodel.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), **tol)
    want, got = topt.state_dict()["state"], opt.state_dict()["state"]
    assert sorted(want) == sorted(got)
    for i in want:
        assert list(want[i]) == list(got[i])
        for name, v in want[i].items():
            np.testing.assert_allclose(np.asarray(got[i][name].numpy()), v.numpy(),
                                       err_msg=f"state {i} {name}", **tol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,kw", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_compiled_step_equals_torch_eager(name, kw, dtype):
    model, tmodel = _model(sg, dtype), _model(torch, dtype)
    opt, topt = getattr(sg.optim, name)(model.parameters(), **kw), \
        getattr(torch.optim, name)(tmodel.parameters(), **kw)
    step = _train_both(model, opt, tmodel, topt, dtype)
    # a first step that creates optimizer state runs once uncompiled, then one program
    stateful = bool(topt.state_dict()["state"]) and name != "Adagrad"
    assert step.cache_info().misses == 1 + stateful
    assert step.cache_info().hits == len(_batches(dtype)) - 1 - stateful


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("momentum", [0.1, None])
def test_batchnorm_running_statistics_update_in_the_compiled_step(dtype, momentum):
    """Train mode: batch statistics, running_mean / running_var / num_batches_tracked
    updated by each call (momentum None: the cumulative average over the calls)."""
    model, tmodel = _model(sg, dtype, True, momentum), _model(torch, dtype, True, momentum)
    opt = sg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    topt = torch.optim.SGD(tmodel.parameters(), lr=0.1, momentum=0.9)
    _train_both(model, opt, tmodel, topt, dtype)
    batches = _batches(dtype)
    assert int(model[1].num_batches_tracked) == len(batches)
    # eval mode is another program: the guard on `training` retraces
    model.eval()
    tmodel.eval()
    x, y = batches[0]

    @sg.compile
    def evaluate(x):
        return model(x)
    first = evaluate(x)
    np.testing.assert_allclose(first, tmodel(torch.tensor(x)).detach().numpy(),
                               **TOL[dtype])
    model.train()
    evaluate(x)
    assert evaluate.last_miss_reason == "Sequential.training: False → True"


@pytest.mark.parametrize("dtype", DTYPES)
def test_train_and_eval_programs_are_both_kept(dtype):
    """A compiled function called in train and eval mode by turns compiles once per mode
    (the program of the other mode is kept), not once per switch; each call equals torch
    eager, and train mode's running statistics updates are those of torch."""
    model, tmodel = _model(sg, dtype, True), _model(torch, dtype, True)
    opt = sg.optim.SGD(model.parameters(), lr=0.1)
    topt = torch.optim.SGD(tmodel.parameters(), lr=0.1)
    step = _compiled_step(model, opt)

    @sg.compile
    def forward(x):
        return model(x)
    for i, (x, y) in enumerate(_batches(dtype, 8)):
        mode = i % 2 == 0
        model.train(mode)
        tmodel.train(mode)
        want = tmodel(torch.tensor(x)).detach().numpy()
        np.testing.assert_allclose(forward(x), want, **TOL[dtype])
        if mode:                     # a training step between, as a training loop has
            want = _torch_steps(tmodel, topt, [(x, y)])
            np.testing.assert_allclose(float(step(x, y)), want[0], **TOL[dtype])
    assert forward.cache_info().misses == 2
    assert forward.cache_info().hits == 6
    assert step.cache_info().misses == 1 and step.cache_info().hits == 3
    _same_state(model, opt, tmodel, topt, dtype)


def test_kept_programs_per_signature_are_bounded():
    """Programs kept for other states of a signature's world are bounded: with eight
    combinations of three modules' modes, the last few are kept (a call in one of those
    compiles nothing), older ones compile again; every call answers as torch does."""
    from symgrad.compiler import dispatcher
    model, tmodel = _model(sg, np.float64), _model(torch, np.float64)
    f = sg.compile(lambda x: model(x))
    x = _batches(np.float64, 1)[0][0]
    want = tmodel(torch.tensor(x)).detach().numpy()
    combos = [tuple(bool(k >> j & 1) for j in range(3)) for k in range(8)]

    def call(combo):
        for module, mode in zip(model, combo):
            module.train(mode)
        np.testing.assert_allclose(f(x), want, rtol=1e-12, atol=1e-14)
    for combo in combos:
        call(combo)
    assert sum(map(len, f._variants.values())) == dispatcher._VARIANTS_PER_KEY
    assert f.cache_info().misses == 8
    call(combos[-2])                       # kept: no compile
    assert f.cache_info().misses == 8
    call(combos[0])                        # forgotten: compiled again
    assert f.cache_info().misses == 9


@pytest.mark.parametrize("dtype", DTYPES)
def test_options_changed_between_calls_are_read_per_call(dtype):
    """A scheduler's lr, a changed momentum or betas: no recompile, the update uses the
    new values, as torch's eager step does."""
    model, tmodel = _model(sg, dtype), _model(torch, dtype)
    opt = sg.optim.SGD(model.parameters(), lr=0.2, momentum=0.9, weight_decay=0.01)
    topt = torch.optim.SGD(tmodel.parameters(), lr=0.2, momentum=0.9, weight_decay=0.01)
    sched = sg.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    tsched = torch.optim.lr_scheduler.StepLR(topt, step_size=1, gamma=0.5)
    step = _compiled_step(model, opt)
    batches = _batches(dtype, 6)
    want = _torch_steps(tmodel, topt, batches[:4], tsched)
    got = []
    for x, y in batches[:4]:
        got.append(float(step(x, y)))
        sched.step()
    for o in (opt, topt):
        o.param_groups[0]["momentum"] = 0.5
    want += _torch_steps(tmodel, topt, batches[4:])
    got += [float(step(x, y)) for x, y in batches[4:]]
    np.testing.assert_allclose(got, want, **TOL[dtype])
    _same_state(model, opt, tmodel, topt, dtype)
    assert step.cache_info().misses == 2          # the first (state-creating) call, then one


def test_options_deciding_the_update_retrace():
    model, tmodel = _model(sg, np.float64), _model(torch, np.float64)
    opt = sg.optim.Adam(model.parameters(), lr=0.01)
    topt = torch.optim.Adam(tmodel.parameters(), lr=0.01)
    step = _compiled_step(model, opt)
    batches = _batches(np.float64, 6)
    want = _torch_steps(tmodel, topt, batches[:3])
    got = [float(step(x, y)) for x, y in batches[:3]]
    for o in (opt, topt):
        o.param_groups[0]["weight_decay"] = 0.1       # a weight decay term now
    want += _torch_steps(tmodel, topt, batches[3:])
    got += [float(step(x, y)) for x, y in batches[3:]]
    assert "Adam options or state" in step.last_miss_reason
    np.testing.assert_allclose(got, want, **TOL[np.float64])
    _same_state(model, opt, tmodel, topt, np.float64)


@pytest.mark.parametrize("set_to_none", [True, False])
def test_gradients_of_the_compiled_step(set_to_none):
    """``.grad`` after a compiled backward is the eager one: a new tensor per call after
    zero_grad(set_to_none=True), the same tensor zeroed and refilled with
    set_to_none=False; without zero_grad, gradients accumulate across calls."""
    model, tmodel = _model(sg, np.float64), _model(torch, np.float64)
    batches = _batches(np.float64, 4)

    @sg.compile
    def grads(x, y):
        model.zero_grad(set_to_none=set_to_none)
        sg.nn.functional.cross_entropy(model(x), y).backward()

    @sg.compile
    def accumulate(x, y):
        sg.nn.functional.cross_entropy(model(x), y).backward()

    w = model[0].weight
    for x, y in batches[:2]:
        grads(x, y)
        tmodel.zero_grad(set_to_none=set_to_none)
        torch.nn.functional.cross_entropy(tmodel(torch.tensor(x)), torch.tensor(y)).backward()
    held = w.grad
    grads(*batches[2])
    assert (w.grad is held) == (not set_to_none)
    for x, y in batches[3:]:
        accumulate(x, y)
        accumulate(x, y)
    tmodel.zero_grad(set_to_none=set_to_none)
    torch.nn.functional.cross_entropy(tmodel(torch.tensor(batches[2][0])),
                                      torch.tensor(batches[2][1])).backward()
    for x, y in batches[3:]:
        for _ in range(2):
            torch.nn.functional.cross_entropy(tmodel(torch.tensor(x)), torch.tensor(y)).backward()
    for p, tp in zip(model.parameters(), tmodel.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), **TOL[np.float64])
    assert accumulate.cache_info().misses == 1 and accumulate.cache_info().hits == 1


def test_numpy_backend_and_reprs_of_state():
    model, tmodel = _model(sg, np.float32), _model(torch, np.float32)
    opt = sg.optim.AdamW(model.parameters(), lr=0.01)
    topt = torch.optim.AdamW(tmodel.parameters(), lr=0.01)
    _train_both(model, opt, tmodel, topt, np.float32, backend="numpy")
    assert repr(opt.state[model[0].weight]["step"]) == repr(
        topt.state[tmodel[0].weight]["step"])


def test_in_place_update_of_a_closed_over_tensor():
    """The general mechanism under the training step: a tensor the function closes over,
    updated in place, is state of the call (read, written; later reads in the call see
    the new value)."""
    w = sg.tensor([1.0, 2.0])
    count = sg.tensor(0)

    @sg.compile
    def f(x):
        w.mul_(x)
        count.add_(1)
        return (w * 2).sum()
    tw = torch.tensor([1.0, 2.0])
    for x in (np.float32(2.0), np.float32(3.0), np.float32(-1.0)):
        got = f(sg.tensor(x))
        tw.mul_(float(x))
        assert float(got) == (tw * 2).sum().item()
        np.testing.assert_array_equal(w.numpy(), tw.numpy())
    assert int(count) == 3 and count._version == 3
    assert f.cache_info().misses == 1


def test_lbfgs_is_refused_inside_compile():
    model = _model(sg, np.float64)
    opt = sg.optim.LBFGS(model.parameters())
    x, y = _batches(np.float64, 1)[0]

    @sg.compile
    def step(x, y):
        def closure():
            opt.zero_grad()
            loss = sg.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            return loss
        return opt.step(closure)
    before = [p.detach().numpy().copy() for p in model.parameters()]
    with pytest.raises(RuntimeError, match="LBFGS cannot run inside symgrad.compile"):
        step(x, y)
    for p, b in zip(model.parameters(), before):
        np.testing.assert_array_equal(p.detach().numpy(), b)
        assert p.grad is None


def test_gradient_transforms_refuse_state_updates():
    model = _model(sg, np.float64)
    opt = sg.optim.SGD(model.parameters(), lr=0.1)
    x, y = _batches(np.float64, 1)[0]

    def loss(x):
        opt.zero_grad()
        out = sg.nn.functional.cross_entropy(model(x), sg.tensor(y))
        out.backward()
        opt.step()
        return out
    with pytest.raises(RuntimeError, match="attempted to update a tensor it closes over"):
        sg.grad(loss)(x)


def test_state_updating_functions_are_not_exported_nor_inlined():
    w = sg.tensor([1.0, 2.0])

    def f(x):
        w.add_(x)
        return w.sum()
    with pytest.raises(ValueError, match="cannot export f: it updates state"):
        sg.export(f, np.ones(2))
    g = sg.compile(f)
    with pytest.raises(RuntimeError, match="updates state .* inside another trace"):
        sg.vmap(g)(np.ones((3, 2)))
    np.testing.assert_array_equal(w.numpy(), [1.0, 2.0])


def test_dropout_draws_a_new_mask_at_each_call():
    """Dropout in a compiled training step: the mask is an input drawn per call (a
    fraction p of zeros, the rest 1 / (1 - p), as torch's), not a constant of the code."""
    sg.manual_seed(0)       # (the fraction check below is statistical: a fixed stream)
    drop = sg.nn.Dropout(0.25)
    f = sg.compile(lambda x: drop(x))
    x = np.ones((400, 50), np.float32)
    masks = [f(x) for _ in range(3)]
    t = torch.nn.functional.dropout(torch.ones(400, 50), 0.25)
    for m in masks:
        assert set(np.unique(m)) == set(np.unique(t.numpy()))
        assert abs((m == 0).mean() - 0.25) < 0.01
    assert (masks[0] != masks[1]).any() and (masks[1] != masks[2]).any()
    assert f.cache_info().misses == 1
    drop.eval()
    np.testing.assert_array_equal(f(x), x)
    assert f.last_miss_reason == "Dropout.training: True → False"


def test_state_changed_outside_the_compiled_step():
    """Between calls: gradients left by an eager backward (the compiled backward must
    add to them), a loaded optimizer state dict (new state tensors): as torch eager."""
    model, tmodel = _model(sg, np.float64), _model(torch, np.float64)
    opt = sg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    topt = torch.optim.SGD(tmodel.parameters(), lr=0.1, momentum=0.9)
    batches = _batches(np.float64, 6)

    @sg.compile
    def step(x, y):                   # no zero_grad: the caller's job
        loss = sg.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def tstep(x, y):
        loss = torch.nn.functional.cross_entropy(tmodel(torch.tensor(x)), torch.tensor(y))
        loss.backward()
        topt.step()
        return loss.item()
    got, want = [], []
    for k, (x, y) in enumerate(batches):
        if k != 3:                    # step 3 adds to the gradients of step 2
            opt.zero_grad()
            topt.zero_grad()
        if k == 4:
            saved, tsaved = opt.state_dict(), topt.state_dict()
            opt.load_state_dict(saved)
            topt.load_state_dict(tsaved)
        got.append(float(step(x, y)))
        want.append(tstep(x, y))
    np.testing.assert_allclose(got, want, **TOL[np.float64])
    _same_state(model, opt, tmodel, topt, np.float64)


def test_in_place_update_through_a_view_of_a_closed_over_tensor():
    w = sg.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    tw = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])

    @sg.compile
    def f(x):
        w[0].mul_(x)
        w[:, 2] += 1
        return w.sum()
    for x in (2.0, -0.5):
        got = f(sg.tensor(x))
        tw[0].mul_(x)
        tw[:, 2] += 1
        assert float(got) == tw.sum().item()
        np.testing.assert_array_equal(w.numpy(), tw.numpy())


def test_in_place_update_through_a_view_of_a_traced_tensor():
    """(Before the view's writes reached their base in a trace, this returned zeros.)"""
    def f(lib, x):
        y = x * 1
        y[0].add_(1)
        y[:, 1].mul_(3)
        return y
    x = np.arange(6.0).reshape(2, 3)
    want = f(torch, torch.tensor(x)).numpy()
    for backend in ("llvm", "numpy"):
        np.testing.assert_array_equal(sg.compile(lambda a: f(sg, a), backend=backend)(x), want)


def test_aliases_of_a_closed_over_tensor_are_read_per_call():
    """``w.detach()`` / ``w.data`` inside the function read w's storage at each call, as
    w itself (before, the alias was a constant of the code: an old w after an update)."""
    w = sg.tensor([1.0, 2.0], requires_grad=True)
    tw = torch.tensor([1.0, 2.0], requires_grad=True)
    f = sg.compile(lambda x: (w.detach() * x).sum() + (w.data * x).sum())
    x = np.array([3.0, -1.0], np.float32)
    for scale in (1.0, 10.0):
        with sg.no_grad():
            w.mul_(scale)
        with torch.no_grad():
            tw.mul_(scale)
        tx = torch.tensor(x)
        assert float(f(x)) == ((tw.detach() * tx).sum() + (tw.data * tx).sum()).item()
    assert f.cache_info().misses == 1


@pytest.mark.parametrize("backend", ["llvm", "numpy"])
def test_a_compiled_function_calling_a_module_inside_another(backend):
    # a module call records a guard (Module.training) but no state output: the inner
    # function inlined into the outer trace returned (result, ()) instead of its result
    lin = sg.nn.Tanh()
    inner = sg.compile(lambda x: lin(x), backend=backend)
    outer = sg.compile(lambda x: inner(x) * 2, backend=backend)
    x = np.linspace(-1, 1, 5)
    want = (torch.tanh(torch.tensor(x)) * 2).numpy()
    np.testing.assert_allclose(inner(x), np.tanh(x), rtol=1e-12)
    np.testing.assert_allclose(outer(x), want, rtol=1e-12)


def test_guards_hold_on_the_native_fast_path():
    # plain numpy arguments take the native entry after the first call: it must still
    # check the guards (train / eval) and perform the effects (zero_grad)
    drop = sg.nn.Dropout(0.5)
    f = sg.compile(lambda x: drop(x) * 0 + x.sum())
    x = np.ones(4)
    for _ in range(3):
        f(x)
    drop.eval()
    np.testing.assert_allclose(f(x), np.full(4, 4.0))
    w = sg.tensor([1.0, 2.0], requires_grad=True)
    opt = sg.optim.SGD([w], lr=0.1)

    def g(x):
        opt.zero_grad()
        return x * 2
    gc = sg.compile(g)
    for _ in range(3):
        w.grad = sg.tensor([5.0, 5.0])
        np.testing.assert_allclose(gc(x), 2 * x)
        assert w.grad is None      # torch: zero_grad() sets .grad to None


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_freezing_parameters_after_compiling_the_step(dtype):
    """requires_grad_(False) on a layer (fine-tuning) after the step was compiled: the
    program that computed its gradient no longer applies (it traces again) and the layer
    stays as it is, as in PyTorch."""
    def run(lib, compiled):
        lib.manual_seed(0)
        m = lib.nn.Sequential(lib.nn.Linear(3, 3), lib.nn.Linear(3, 1)).to(getattr(lib, dtype))
        opt = lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        x = lib.tensor(np.linspace(-1, 1, 12).reshape(4, 3), dtype=getattr(lib, dtype))
        y = lib.tensor([[1.0], [0.0], [-1.0], [0.5]], dtype=getattr(lib, dtype))

        def step():
            opt.zero_grad()
            loss = ((m(x) - y) ** 2).mean()
            loss.backward()
            opt.step()
            return loss
        s = sg.compile(step) if compiled else step
        s()
        s()
        for p in m[0].parameters():
            p.requires_grad_(False)
        s()
        s()
        return [p.detach().numpy().copy() for p in m.parameters()], m[0].weight.grad
    want, want_grad = run(torch, False)
    got, got_grad = run(sg, True)
    assert got_grad is None and want_grad is None
    tol = 1e-6 if dtype == "float32" else 1e-12
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)
