"""``nn.RNN`` / ``LSTM`` / ``GRU`` and the cells against PyTorch: reprs, state-dict keys,
default initialisation from the same seed, outputs and gradients (input, h0 / c0, every
parameter) in both dtypes for every option (layers, bias, batch_first, bidirectional,
projections, unbatched input, dropout), PyTorch's errors, and a compiled training step
equal to the eager one."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg

from .helpers import DTYPES, close, outputs_and_grads_match, same_error

rng = np.random.default_rng(16)
TDT = {np.float32: torch.float32, np.float64: torch.float64}
SDT = {np.float32: sg.float32, np.float64: sg.float64}


def _both(name, dtype, *args, **kw):
    """The layer ``name`` in both libraries from the same seed (initialisation is
    compared, not copied)."""
    torch.manual_seed(3)
    tm = getattr(torch.nn, name)(*args, dtype=TDT[dtype], **kw)
    sg.manual_seed(3)
    sm = getattr(sg.nn, name)(*args, dtype=SDT[dtype], **kw)
    return tm, sm


def _same_parameters(sm, tm):
    assert [k for k, _ in sm.named_parameters()] == [k for k, _ in tm.named_parameters()]
    assert list(sm.state_dict()) == list(tm.state_dict())
    for (k, s), (_, t) in zip(sm.named_parameters(), tm.named_parameters()):
        np.testing.assert_array_equal(s.detach().numpy(), t.detach().numpy(), err_msg=k)


def _flat(out):
    """Every tensor of a layer's result, in order."""
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    if hasattr(out, "batch_sizes"):
        return [out.data]
    return [out]


def _check_run(tm, sm, arrays, dtype, factor=4.0):
    """``module(*arrays)`` in both: the outputs and, under random cotangents, the
    gradients of the arrays and of every parameter equal torch's."""
    ts = [None if a is None else
          (tuple(torch.tensor(v, requires_grad=True) for v in a) if isinstance(a, tuple)
           else torch.tensor(a, requires_grad=True)) for a in arrays]
    ss = [None if a is None else
          (tuple(sg.tensor(v, requires_grad=True) for v in a) if isinstance(a, tuple)
           else sg.tensor(a, requires_grad=True)) for a in arrays]
    t_out, s_out = _flat(tm(*ts)), _flat(sm(*ss))
    assert len(t_out) == len(s_out)
    outputs_and_grads_match(s_out, t_out, _flat(ss), _flat(ts), dtype, rng, (tm, sm), factor)


LAYERS = [
    ("RNN", {}),
    ("RNN", dict(nonlinearity="relu", num_layers=2)),
    ("RNN", dict(bias=False, batch_first=True, bidirectional=True)),
    ("LSTM", {}),
    ("LSTM", dict(num_layers=2, bidirectional=True)),
    ("LSTM", dict(proj_size=3, batch_first=True)),
    ("LSTM", dict(proj_size=2, num_layers=2, bidirectional=True, bias=False)),
    ("GRU", {}),
    ("GRU", dict(num_layers=3, batch_first=True)),
    ("GRU", dict(bidirectional=True, bias=False)),
]


def _state_arrays(name, kw, batch, dtype, hidden=5):
    dirs = 2 if kw.get("bidirectional") else 1
    n = kw.get("num_layers", 1) * dirs
    out = kw.get("proj_size", 0) or hidden
    shape_h = (n, batch, out) if batch else (n, out)
    h = rng.normal(size=shape_h).astype(dtype)
    if name != "LSTM":
        return h
    shape_c = (n, batch, hidden) if batch else (n, hidden)
    return (h, rng.normal(size=shape_c).astype(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,kw", LAYERS)
@pytest.mark.parametrize("given_state", [False, True])
def test_layer_equals_torch(name, kw, dtype, given_state):
    tm, sm = _both(name, dtype, 4, 5, **kw)
    assert repr(sm) == repr(tm)
    _same_parameters(sm, tm)
    shape = (3, 6, 4) if kw.get("batch_first") else (6, 3, 4)
    x = rng.normal(size=shape).astype(dtype)
    state = _state_arrays(name, kw, 3, dtype) if given_state else None
    _check_run(tm, sm, [x, state], dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,kw", [LAYERS[1], LAYERS[4], LAYERS[5], LAYERS[9]])
@pytest.mark.parametrize("given_state", [False, True])
def test_unbatched_input(name, kw, dtype, given_state):
    tm, sm = _both(name, dtype, 4, 5, **kw)
    x = rng.normal(size=(6, 4)).astype(dtype)
    state = _state_arrays(name, kw, None, dtype) if given_state else None
    _check_run(tm, sm, [x, state], dtype)


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
def test_dropout_between_layers(name):
    """Training with dropout 1 zeroes what reaches the second layer (so both libraries'
    results are determined); in eval mode dropout is off."""
    for p, train in ((1.0, True), (0.5, False)):
        tm, sm = _both(name, np.float64, 3, 4, num_layers=2, dropout=p)
        tm.train(train)
        sm.train(train)
        x = rng.normal(size=(5, 2, 3))
        _check_run(tm, sm, [x], np.float64)


def test_dropout_changes_training_output():
    sm = sg.nn.GRU(3, 4, num_layers=2, dropout=0.5)
    x = sg.randn(5, 2, 3)
    sg.manual_seed(0)
    a = sm(x)[0]
    sm.eval()
    b = sm(x)[0]
    assert not np.allclose(a.detach().numpy(), b.detach().numpy())


CELLS = [("RNNCell", {}), ("RNNCell", dict(nonlinearity="relu", bias=False)),
         ("LSTMCell", {}), ("LSTMCell", dict(bias=False)), ("GRUCell", {}),
         ("GRUCell", dict(bias=False))]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,kw", CELLS)
@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("given_state", [False, True])
def test_cell_equals_torch(name, kw, dtype, batched, given_state):
    tm, sm = _both(name, dtype, 4, 5, **kw)
    assert repr(sm) == repr(tm)
    _same_parameters(sm, tm)
    lead = (3,) if batched else ()
    x = rng.normal(size=lead + (4,)).astype(dtype)
    state = None
    if given_state:
        state = rng.normal(size=lead + (5,)).astype(dtype)
        if name == "LSTMCell":
            state = (state, rng.normal(size=lead + (5,)).astype(dtype))
    _check_run(tm, sm, [x, state], dtype)


def test_cell_loop_as_documented():
    """PyTorch's docstring loop: an LSTMCell stepped over time by hand."""
    tm, sm = _both("LSTMCell", np.float32, 10, 20)
    x = rng.normal(size=(2, 3, 10)).astype(np.float32)
    h0, c0 = (rng.normal(size=(3, 20)).astype(np.float32) for _ in range(2))
    outs = []
    for lib, m in ((torch, tm), (sg, sm)):
        hx, cx = lib.tensor(h0), lib.tensor(c0)
        steps = []
        for i in range(2):
            hx, cx = m(lib.tensor(x[i]), (hx, cx))
            steps.append(hx)
        outs.append(lib.stack(steps, dim=0))
    close(outs[1], outs[0], np.float32)


@pytest.mark.parametrize("build", [
    lambda nn: nn.RNN(3, 4, 2, "relu", False, True, 0.25, True),
    lambda nn: nn.RNN(3, 4, nonlinearity="relu"),
    lambda nn: nn.LSTM(3, 4, 1, True, False, 0.0, False, 2),
    lambda nn: nn.GRU(3, 4, dropout=0.5, num_layers=3),
    lambda nn: nn.RNNCell(3, 4, nonlinearity="relu"),
    lambda nn: nn.LSTMCell(3, 4, bias=False),
])
def test_positional_arguments_and_reprs(build):
    torch.manual_seed(0)
    tm = build(torch.nn)
    sg.manual_seed(0)
    sm = build(sg.nn)
    assert repr(sm) == repr(tm)
    _same_parameters(sm, tm)
    assert sm.all_weights.__len__() == tm.all_weights.__len__() if hasattr(tm, "all_weights") \
        else True


@pytest.mark.parametrize("build", [
    lambda nn: nn.RNN(3, 4, nonlinearity="sigmoid"),
    lambda nn: nn.GRU(3, 4, proj_size=2),
    lambda nn: nn.RNN(3, 4, proj_size=2),
    lambda nn: nn.LSTM(3, 4, proj_size=4),
    lambda nn: nn.LSTM(3, 4, proj_size=-1),
    lambda nn: nn.LSTM(3, 4, dropout=1.5),
    lambda nn: nn.LSTM(3, 4, dropout=True),
    lambda nn: nn.LSTM(3, 4, bias=1),
    lambda nn: nn.LSTM(3, 4, batch_first=None),
    lambda nn: nn.LSTM(3.0, 4),
    lambda nn: nn.LSTM(0, 4),
    lambda nn: nn.LSTM(3, "4"),
    lambda nn: nn.LSTM(3, 0),
    lambda nn: nn.LSTM(3, 4, num_layers=0),
])
def test_constructor_errors(build):
    same_error(lambda lib: build(lib.nn))


def test_dropout_with_one_layer_warns():
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1, "
                                         "but got dropout=0.5 and num_layers=1"):
        sg.nn.GRU(3, 4, dropout=0.5)


@pytest.mark.parametrize("call", [
    lambda lib, m: m[0](lib.zeros(2, 3, 4, 3)),
    lambda lib, m: m[0](lib.zeros(5, 2, 2)),
    lambda lib, m: m[0](lib.zeros(5, 2, 3, dtype=lib.float64)),
    lambda lib, m: m[0](lib.zeros(5, 2, 3), lib.zeros(1, 3, 4)),
    lambda lib, m: m[0](lib.zeros(5, 2, 3), lib.zeros(3, 4)),
    lambda lib, m: m[0](lib.zeros(5, 3), lib.zeros(1, 1, 4)),
    lambda lib, m: m[1](lib.zeros(5, 2, 3), (lib.zeros(1, 2, 4), lib.zeros(1, 3, 4))),
    lambda lib, m: m[1](lib.zeros(5, 2, 3), (lib.zeros(1, 3, 4), lib.zeros(1, 2, 4))),
    lambda lib, m: m[1](lib.zeros(5, 2, 3), (lib.zeros(2, 4), lib.zeros(1, 2, 4))),
    lambda lib, m: m[1](lib.zeros(5, 3), (lib.zeros(1, 1, 4), lib.zeros(1, 4))),
    lambda lib, m: m[1](lib.zeros(5)),
    lambda lib, m: m[2](lib.zeros(5)),
    lambda lib, m: m[3](lib.zeros(2, 2, 3)),
    lambda lib, m: m[3](lib.zeros(2, 3), lib.zeros(1, 2, 4)),
    lambda lib, m: m[4](lib.zeros(2, 2, 3)),
    lambda lib, m: m[4](lib.zeros(2, 3), (lib.zeros(2, 4), lib.zeros(1, 2, 4))),
    lambda lib, m: m[5](lib.zeros(2, 3), lib.zeros(1, 1, 4)),
])
def test_forward_errors(call):
    def build(lib):
        mods = (lib.nn.RNN(3, 4), lib.nn.LSTM(3, 4), lib.nn.GRU(3, 4), lib.nn.RNNCell(3, 4),
                lib.nn.LSTMCell(3, 4), lib.nn.GRUCell(3, 4))
        return call(lib, mods)
    same_error(build)


def test_flatten_parameters_and_all_weights():
    m = sg.nn.LSTM(3, 4, num_layers=2, bidirectional=True, proj_size=2)
    m.flatten_parameters()
    t = torch.nn.LSTM(3, 4, num_layers=2, bidirectional=True, proj_size=2)
    assert [[tuple(w.shape) for w in ws] for ws in m.all_weights] == \
        [[tuple(w.shape) for w in ws] for ws in t.all_weights]
    assert m._flat_weights_names == t._flat_weights_names


def test_double_after_construction():
    """``.double()`` of a float32 layer runs in float64 (the weights are looked up at
    every call)."""
    tm, sm = _both("LSTM", np.float32, 4, 5, num_layers=2)
    tm, sm = tm.double(), sm.double()
    _check_run(tm, sm, [rng.normal(size=(6, 3, 4))], np.float64)


# ---- compiled -----------------------------------------------------------------------------
class _Tagger:
    """An embedding, a recurrent layer and a linear read-out (a sequence tagger), built
    in either library from the same seed."""

    @staticmethod
    def build(lib, name, dtype, **kw):
        lib.manual_seed(5)

        class Net(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = getattr(lib.nn, name)(4, 6, **kw)
                self.out = lib.nn.Linear(12 if kw.get("bidirectional") else 6, 3)

            def forward(self, x):
                y, _ = self.rnn(x)
                return self.out(y)
        return Net().to({torch: TDT, sg: SDT}[lib][dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,kw", [("LSTM", dict(num_layers=2)),
                                     ("GRU", dict(bidirectional=True, batch_first=True)),
                                     ("RNN", {})])
def test_compiled_training_step_equals_eager_torch(name, kw, dtype):
    tm = _Tagger.build(torch, name, dtype, **kw)
    sm = _Tagger.build(sg, name, dtype, **kw)
    _same_parameters(sm, tm)
    topt = torch.optim.Adam(tm.parameters(), lr=0.01)
    sopt = sg.optim.Adam(sm.parameters(), lr=0.01)

    @sg.compile(fullgraph=True)        # (a graph break would raise)
    def step(x, y):
        sopt.zero_grad()
        loss = sg.nn.functional.cross_entropy(sm(x).reshape(-1, 3), y.reshape(-1))
        loss.backward()
        sopt.step()
        return loss
    data = [(rng.normal(size=(5, 2, 4)).astype(dtype), rng.integers(0, 3, size=(5, 2)))
            for _ in range(4)]
    for x, y in data:
        topt.zero_grad()
        t_loss = torch.nn.functional.cross_entropy(tm(torch.tensor(x)).reshape(-1, 3),
                                                   torch.tensor(y).reshape(-1))
        t_loss.backward()
        topt.step()
        s_loss = step(sg.tensor(x), sg.tensor(y))
        close(s_loss.detach(), t_loss.detach(), dtype, "loss", factor=10)
    for (k, s), (_, t) in zip(sm.named_parameters(), tm.named_parameters()):
        close(s, t, dtype, k, factor=10)


@pytest.mark.parametrize("dtype", DTYPES)
def test_compiled_gradient_of_packed_lstm(dtype):
    """Lengths known when tracing: the packed run compiles; its gradient equals torch's."""
    from symgrad.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
    tm, sm = _both("LSTM", dtype, 4, 5, bidirectional=True)
    x = rng.normal(size=(6, 3, 4)).astype(dtype)
    lengths = [4, 6, 2]
    tx = torch.tensor(x, requires_grad=True)
    tp = torch.nn.utils.rnn.pack_padded_sequence(tx, lengths, enforce_sorted=False)
    t_out, _ = torch.nn.utils.rnn.pad_packed_sequence(tm(tp)[0])
    t_loss = t_out.tanh().sum()
    t_loss.backward()

    def loss(xv):
        out, _ = pad_packed_sequence(sm(pack_padded_sequence(xv, lengths,
                                                             enforce_sorted=False))[0])
        return out.tanh().sum()
    value, grad = sg.value_and_grad(loss)(x)
    close(np.asarray(value), t_loss, dtype, "loss", factor=10)
    close(np.asarray(grad), tx.grad, dtype, "grad", factor=10)


def test_grad_fn_names():
    """Where PyTorch's CPU kernels are not oneDNN's (float64), the results' grad_fns."""
    x = np.random.default_rng(0).normal(size=(4, 3, 2))
    for build in (lambda nn: nn.GRU(2, 3), lambda nn: nn.RNN(2, 3), lambda nn: nn.LSTM(2, 3),
                  lambda nn: nn.GRUCell(2, 3), lambda nn: nn.RNNCell(2, 3),
                  lambda nn: nn.LSTMCell(2, 3)):
        names = []
        for lib in (torch, sg):
            m = build(lib.nn).double()
            cell = "Cell" in type(m).__name__
            out = m(lib.tensor(x[0] if cell else x, requires_grad=True))
            names.append([type(t.grad_fn).__name__ for t in _flat(out)])
        assert names[1] == names[0], type(m).__name__


def test_unknown_cell_nonlinearity_raises_at_forward():
    def build(lib):
        m = lib.nn.RNNCell(3, 4, nonlinearity="sigmoid")
        return m(lib.zeros(2, 3))
    same_error(build)
