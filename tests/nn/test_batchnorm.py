"""batch_norm and BatchNorm1d / BatchNorm2d / BatchNorm3d against PyTorch: outputs and gradients
(input, weight, bias) in training and evaluation in float32 and float64; running
statistics step by step (momentum, momentum=None's cumulative average, unbiased
variance, num_batches_tracked); affine=False, bias=False, track_running_stats=False;
compiled gradients; second derivatives; reprs, state dicts (PyTorch's pre-version-2
loading) and PyTorch's errors."""
from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest
import torch

import symgrad as sg

from .helpers import DTYPES, close, pair, same_error, twin

rng = np.random.default_rng(2)
SHAPES = [(5, 3), (4, 3, 6), (2, 3, 4, 5), (7, 3, 1, 1), (2, 3, 2, 3, 4)]


def _stats(dtype):
    return (rng.normal(size=3).astype(dtype), rng.uniform(0.5, 2, size=3).astype(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("affine", ["both", "weight", "none"])
def test_functional_values_gradients_and_running_stats_equal_torch(shape, dtype, training,
                                                                    affine):
    x = (rng.normal(size=shape) * 3 + 1).astype(dtype)
    (sx, tx) = pair(x)
    sw, tw = pair(rng.normal(size=3).astype(dtype)) if affine != "none" else (None, None)
    sb, tb = pair(rng.normal(size=3).astype(dtype)) if affine == "both" else (None, None)
    rm, rv = _stats(dtype)
    srm, trm = pair(rm, False)
    srv, trv = pair(rv, False)
    s_out = sg.nn.functional.batch_norm(sx, srm, srv, sw, sb, training, 0.3, 1e-3)
    t_out = torch.nn.functional.batch_norm(tx, trm, trv, tw, tb, training, 0.3, 1e-3)
    close(s_out, t_out, dtype, "output")
    close(srm, trm, dtype, "running_mean")
    close(srv, trv, dtype, "running_var")
    g = rng.normal(size=shape).astype(dtype)
    s_out.backward(sg.tensor(g))
    t_out.backward(torch.tensor(g))
    close(sx.grad, tx.grad, dtype, "grad input", factor=4)
    for s, t, what in ((sw, tw, "weight"), (sb, tb, "bias")):
        if s is not None:
            close(s.grad, t.grad, dtype, f"grad {what}", factor=4)
    assert type(s_out.grad_fn).__name__ == type(t_out.grad_fn).__name__


@pytest.mark.parametrize("dtype", DTYPES)
def test_batch_statistics_without_running_stats(dtype):
    x = rng.normal(size=(6, 3, 5)).astype(dtype)
    (sx, tx) = pair(x)
    s_out = sg.nn.functional.batch_norm(sx, None, None, training=True)
    t_out = torch.nn.functional.batch_norm(tx, None, None, training=True)
    close(s_out, t_out, dtype)
    s_out.pow(3).sum().backward()
    t_out.pow(3).sum().backward()
    close(sx.grad, tx.grad, dtype, factor=4)


MODULES = [
    lambda m: m.nn.BatchNorm1d(3),
    lambda m: m.nn.BatchNorm2d(3, eps=1e-3, momentum=0.5),
    lambda m: m.nn.BatchNorm2d(3, momentum=None),
    lambda m: m.nn.BatchNorm1d(3, affine=False),
    lambda m: m.nn.BatchNorm2d(3, bias=False),
    lambda m: m.nn.BatchNorm2d(3, track_running_stats=False),
    lambda m: m.nn.BatchNorm1d(3, momentum=None, affine=False, track_running_stats=False),
    lambda m: m.nn.BatchNorm3d(3, momentum=0.3),
    lambda m: m.nn.BatchNorm3d(3, affine=False, track_running_stats=False),
]


@pytest.mark.parametrize("build", MODULES)
def test_module_repr_and_state_dict_are_pytorchs(build):
    s, t = build(sg), build(torch)
    assert repr(s) == repr(t)
    assert list(s.state_dict()) == list(t.state_dict())
    for (k, v), (_, w) in zip(s.state_dict().items(), t.state_dict().items()):
        assert str(v.dtype) == str(w.dtype), k
        np.testing.assert_array_equal(v.numpy(), w.numpy(), err_msg=k)
    assert [k for k, _ in s.named_buffers()] == [k for k, _ in t.named_buffers()]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("build", MODULES)
def test_module_trains_then_evaluates_as_pytorchs(build, dtype):
    """Three training batches (statistics updated each time), then evaluation; the
    gradients of the affine parameters each step."""
    tm, sm = twin(build, dtype)
    shape = {"BatchNorm1d": (6, 3), "BatchNorm2d": (4, 3, 5, 2),
             "BatchNorm3d": (2, 3, 2, 3, 2)}[type(tm).__name__]
    for step in range(4):
        if step == 3:
            tm.eval()
            sm.eval()
        x = (rng.normal(size=shape) * (step + 1) + step).astype(dtype)
        sx, tx = pair(x)
        s_out, t_out = sm(sx), tm(tx)
        close(s_out, t_out, dtype, f"output, step {step}")
        c = rng.normal(size=shape).astype(dtype)          # sum(out^2) is constant: not that
        (s_out * sg.tensor(c)).sum().backward()
        (t_out * torch.tensor(c)).sum().backward()
        close(sx.grad, tx.grad, dtype, f"grad input, step {step}", factor=4)
        for (k, p), (_, q) in zip(sm.named_parameters(), tm.named_parameters()):
            close(p.grad, q.grad, dtype, f"grad {k}, step {step}", factor=4)
            p.grad = q.grad = None
        for (k, v), (_, w) in zip(sm.state_dict().items(), tm.state_dict().items()):
            close(v, w, dtype if v.dtype.is_floating_point else None, f"{k}, step {step}")


def test_momentum_none_is_a_cumulative_average():
    sm, tm = sg.nn.BatchNorm1d(2, momentum=None), torch.nn.BatchNorm1d(2, momentum=None)
    for _ in range(3):
        x = rng.normal(size=(5, 2)).astype(np.float32)
        sm(sg.tensor(x))
        tm(torch.tensor(x))
    close(sm.running_mean, tm.running_mean, np.float32)
    close(sm.running_var, tm.running_var, np.float32)
    assert int(sm.num_batches_tracked) == int(tm.num_batches_tracked) == 3


def test_state_dict_without_num_batches_tracked_loads_as_in_pytorch():
    """A dict without version metadata (before version 2 there was no
    num_batches_tracked) loads; one saying version 2 must have it."""
    s, t = sg.nn.BatchNorm2d(3), torch.nn.BatchNorm2d(3)
    assert s.state_dict()._metadata == t.state_dict()._metadata
    plain = {k: v for k, v in s.state_dict().items() if k != "num_batches_tracked"}
    assert str(s.load_state_dict(plain)) == str(
        t.load_state_dict({k: v for k, v in t.state_dict().items() if k != "num_batches_tracked"}))
    assert "num_batches_tracked" not in plain          # the caller's dict is not changed

    def versioned(module):
        sd = module.state_dict()
        out = OrderedDict((k, v) for k, v in sd.items() if k != "num_batches_tracked")
        out._metadata = sd._metadata
        return out
    same_error(lambda m: (lambda mod: mod.load_state_dict(versioned(mod)))(m.nn.BatchNorm2d(3)))
    nested = sg.nn.Sequential(sg.nn.Linear(2, 3), sg.nn.BatchNorm1d(3))
    tnested = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.BatchNorm1d(3))
    assert nested.state_dict()._metadata == tnested.state_dict()._metadata


@pytest.mark.parametrize("backend", ["llvm", "numpy"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("training", [True, False])
def test_compiled_gradients_equal_torch(training, dtype, backend):
    """Batch statistics (no running statistics to update) or running ones (evaluation)."""
    x = rng.normal(size=(4, 3, 5)).astype(dtype)
    w, b = rng.normal(size=3).astype(dtype), rng.normal(size=3).astype(dtype)
    rm, rv = _stats(dtype)
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    stats = (None, None) if training else (torch.tensor(rm), torch.tensor(rv))
    t_loss = torch.nn.functional.batch_norm(tx, *stats, tw, tb, training).tanh().sum()
    t_loss.backward()
    s_stats = (None, None) if training else (sg.tensor(rm), sg.tensor(rv))

    def loss(xv, wv, bv):
        return sg.nn.functional.batch_norm(xv, *s_stats, wv, bv, training).tanh().sum()
    value, grads = sg.value_and_grad(loss, argnums=(0, 1, 2), backend=backend)(x, w, b)
    close(np.asarray(value), t_loss, dtype, factor=10)
    for got, t in zip(grads, (tx, tw, tb)):
        close(np.asarray(got), t.grad, dtype, factor=10)


def test_running_statistics_cannot_be_updated_inside_a_gradient_transform():
    """A gradient transform has no side effects: training a module that tracks running
    statistics there raises (as torch.func refuses to mutate captured tensors), and
    nothing is changed; in eval() mode it compiles. (symgrad.compile performs the update:
    tests/compiler/test_train_step.py.)"""
    m = sg.nn.BatchNorm1d(3)
    x = rng.normal(size=(4, 3)).astype(np.float32)
    params = {k: v.detach().numpy() for k, v in m.named_parameters()}

    def loss(p):
        return sg.func.functional_call(m, p, (sg.tensor(x),)).pow(2).sum()
    with pytest.raises(RuntimeError, match="attempted to update a tensor it closes over in "
                                           "place"):
        sg.grad(loss)(params)
    assert int(m.num_batches_tracked) == 0
    np.testing.assert_array_equal(m.running_mean.numpy(), np.zeros(3, np.float32))
    m.eval()
    t = torch.nn.BatchNorm1d(3).eval()
    tp = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    torch.func.functional_call(t, tp, (torch.tensor(x),)).pow(2).sum().backward()
    grads = sg.grad(loss)(params)
    for k in params:
        close(np.asarray(grads[k]), tp[k].grad, np.float32, k)


def test_second_derivatives_equal_torch():
    x = rng.normal(size=(5, 3, 2))
    v = rng.normal(size=x.shape)
    res = {}
    for lib in (torch, sg):
        xv = lib.tensor(x, requires_grad=True)
        wv = lib.tensor(np.array([0.5, 2.0, -1.0]), requires_grad=True)
        out = lib.nn.functional.batch_norm(xv, None, None, wv, None, True)
        gx, = lib.autograd.grad((out ** 3).sum(), xv, create_graph=True)
        res[lib] = lib.autograd.grad((gx * lib.tensor(v)).sum(), (xv, wv))
    close(res[sg][0], res[torch][0], np.float64, "d2/dx2", factor=10)
    close(res[sg][1], res[torch][1], np.float64, "d2/dxdw", factor=10)


def _x(m, *shape, dtype=None):
    return m.ones(*shape, dtype=dtype)


ERRORS = [
    lambda m: m.nn.BatchNorm2d(3)(_x(m, 2, 3, 4)),
    lambda m: m.nn.BatchNorm1d(3)(_x(m, 2, 3, 4, 5)),
    lambda m: m.nn.BatchNorm1d(3)(_x(m, 1, 3)),
    lambda m: m.nn.BatchNorm2d(3)(_x(m, 1, 3, 1, 1)),
    lambda m: m.nn.BatchNorm3d(3)(_x(m, 2, 3, 4, 4)),
    lambda m: m.nn.BatchNorm3d(3)(_x(m, 1, 3, 1, 1, 1)),
    lambda m: m.nn.BatchNorm1d(3)(_x(m, 2, 4)),
    lambda m: m.nn.BatchNorm2d(3)(_x(m, 2, 3, 4, 4, dtype=m.float64)),
    lambda m: m.nn.functional.batch_norm(_x(m, 2, 3), _x(m, 4), _x(m, 3), training=True),
    lambda m: m.nn.functional.batch_norm(_x(m, 2, 3), _x(m, 3), _x(m, 4), training=True),
    lambda m: m.nn.functional.batch_norm(_x(m, 2, 3), _x(m, 3), _x(m, 3), _x(m, 4)),
    lambda m: m.nn.functional.batch_norm(_x(m, 2, 3), _x(m, 3), _x(m, 3), _x(m, 2, 3)),
    lambda m: m.nn.functional.batch_norm(_x(m, 2, 3), _x(m, 3), _x(m, 3), None, _x(m, 4)),
    lambda m: m.nn.functional.batch_norm(_x(m, 2, 3), None, _x(m, 3), training=True),
    lambda m: m.nn.functional.batch_norm(_x(m, 2, 3), _x(m, 3), None, training=True),
    lambda m: m.nn.functional.batch_norm(_x(m, 2, 3), None, None),
    lambda m: m.nn.functional.batch_norm(_x(m, 2, 3), _x(m, 3), None),
    lambda m: m.nn.functional.batch_norm(_x(m, 2, 3), None, None, training=True, eps=0),
    lambda m: m.nn.functional.batch_norm(_x(m, 2, 3), _x(m, 3), _x(m, 3), eps=-1),
    lambda m: m.nn.functional.batch_norm(_x(m, 3), None, None, training=True),
    lambda m: m.nn.functional.batch_norm(_x(m, 1, 3, 1), None, None, training=True),
    lambda m: m.nn.functional.batch_norm(_x(m, 2, 3, dtype=m.int64), None, None, training=True),
    lambda m: m.nn.functional.batch_norm(_x(m, 2, 3), _x(m, 3, dtype=m.float64),
                                         _x(m, 3, dtype=m.float64), training=True),
    lambda m: m.nn.functional.batch_norm(_x(m, 2, 3), None, None, training=True, momentum=None),
]


@pytest.mark.parametrize("build", ERRORS)
def test_bad_input_raises_pytorchs_error(build):
    same_error(build)


@pytest.mark.parametrize("training", [False, True])
def test_running_stats_requiring_grad_refused(training):
    """review 4 finding 7b: PyTorch refuses running statistics that require grad (not
    differentiable), whatever the mode; under no_grad it runs."""
    def build(which):
        def run(lib):
            x = lib.ones(2, 3) * lib.arange(3.0)
            rm = lib.zeros(3, requires_grad=which in ("mean", "both"))
            rv = lib.ones(3, requires_grad=which in ("var", "both"))
            return lib.nn.functional.batch_norm(x, rm, rv, training=training)
        return run
    for which in ("mean", "var", "both"):
        same_error(build(which))
        with torch.no_grad():
            want = build(which)(torch).numpy()
        with sg.no_grad():
            got = build(which)(sg).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("affine", [True, False])
def test_evaluation_output_backward_reads_the_running_stats_a_later_training_step_updated(
        dtype, affine):
    """review4 #7a: torch's kernel updates the running statistics without bumping their
    version, and an evaluation-mode output's backward reads them when it runs: after
    eval forward -> train forward -> backward, the input and weight gradients use the
    updated statistics (and no in-place error is raised)."""
    x = (rng.normal(size=(6, 3, 2)) * 2 + 1).astype(dtype)
    x2 = (rng.normal(size=(6, 3, 2)) * 3 + 2).astype(dtype)
    g = rng.normal(size=(6, 3, 2)).astype(dtype)
    got = {}
    for lib in (torch, sg):
        m = lib.nn.BatchNorm1d(3, affine=affine, dtype=getattr(lib, np.dtype(dtype).name))
        m.eval()
        xt = lib.tensor(x, requires_grad=True)
        y = m(xt)
        m.train()
        m(lib.tensor(x2))
        versions = (m.running_mean._version, m.running_var._version)
        y.backward(lib.tensor(g))
        grads = [xt.grad] + ([m.weight.grad, m.bias.grad] if affine else [])
        got[lib.__name__] = ([t.detach().numpy() for t in grads],
                             m.running_var.numpy().copy(), versions)
    (tg, trv, tver), (sgr, srv, sver) = got["torch"], got["symgrad"]
    assert sver == tver
    close(srv, trv, what="running_var")
    for a, b, what in zip(sgr, tg, ("input grad", "weight grad", "bias grad")):
        close(a, b, what=what)


@pytest.mark.parametrize("backend", ["llvm", "numpy"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_compiled_evaluation_output_backward_reads_updated_running_stats(dtype, backend):
    """As above through ``symgrad.compile(model)``: the split backward program recomputes
    what it reads of the running statistics (not saved by the forward program)."""
    x = (rng.normal(size=(6, 3)) * 2 + 1).astype(dtype)
    x2 = (rng.normal(size=(6, 3)) * 3 + 2).astype(dtype)
    got = {}
    for lib in (torch, sg):
        m = lib.nn.BatchNorm1d(3, dtype=getattr(lib, np.dtype(dtype).name))
        m.eval()
        cm = sg.compile(m, backend=backend) if lib is sg else m
        xt = lib.tensor(x, requires_grad=True)
        y = cm(xt)
        m.train()
        m(lib.tensor(x2))
        (y * y).sum().backward()
        got[lib.__name__] = [xt.grad, m.weight.grad, m.bias.grad]
    for a, b, what in zip(got["symgrad"], got["torch"], ("input", "weight", "bias")):
        close(a, b, what=what + " grad", factor=10)


def test_running_stats_update_keeps_their_version_as_torch():
    for lib in (torch, sg):
        rm, rv = lib.zeros(3), lib.ones(3)
        lib.nn.functional.batch_norm(lib.tensor(rng.normal(size=(4, 3)).astype(np.float32)), rm, rv,
                                 training=True)
        assert (rm._version, rv._version) == (0, 0), lib.__name__
