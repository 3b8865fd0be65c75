"""symgrad.nn against torch.nn: module reprs, registration and traversal, state dicts and
their errors, layers forward and backward (weights copied from the torch module), a
hand-written SGD training loop, hooks, modes, dtype moves and devices."""
from __future__ import annotations

import re
from collections import OrderedDict

import numpy as np
import pytest
import torch

import symgrad as sg

from oracle import tol

DTYPES = (np.float32, np.float64)


def _np(t):
    return t.detach().numpy()


def _copy_weights(src: torch.nn.Module, dst: sg.nn.Module) -> None:
    """dst's parameters and buffers := src's (by state-dict key)."""
    state = OrderedDict((k, sg.tensor(v.detach().numpy().copy()))
                        for k, v in src.state_dict().items())
    dst.load_state_dict(state)


def _pair(build, dtype):
    """The same module in both libraries, torch's weights copied into symgrad's."""
    tm, sm = build(torch), build(sg)
    if dtype == np.float64:
        tm, sm = tm.double(), sm.double()
    _copy_weights(tm, sm)
    return tm, sm


# ---- reprs ---------------------------------------------------------------------------------
REPRS = [
    lambda m: m.nn.Linear(2, 3),
    lambda m: m.nn.Linear(2, 3, bias=False),
    lambda m: m.nn.Bilinear(2, 3, 4),
    lambda m: m.nn.Identity(),
    lambda m: m.nn.Flatten(),
    lambda m: m.nn.Unflatten(1, (2, 5)),
    lambda m: m.nn.Dropout(),
    lambda m: m.nn.Dropout(0.1, inplace=True),
    lambda m: m.nn.Embedding(10, 3),
    lambda m: m.nn.Embedding(10, 3, padding_idx=0),
    lambda m: m.nn.LayerNorm(5),
    lambda m: m.nn.LayerNorm([2, 3], elementwise_affine=False),
    lambda m: m.nn.ReLU(), lambda m: m.nn.ReLU(inplace=True), lambda m: m.nn.ReLU6(),
    lambda m: m.nn.LeakyReLU(), lambda m: m.nn.LeakyReLU(0.2), lambda m: m.nn.ELU(),
    lambda m: m.nn.GELU(), lambda m: m.nn.GELU(approximate="tanh"), lambda m: m.nn.SiLU(),
    lambda m: m.nn.Tanh(), lambda m: m.nn.Sigmoid(), lambda m: m.nn.Softplus(),
    lambda m: m.nn.Softmax(dim=1), lambda m: m.nn.LogSoftmax(dim=-1), lambda m: m.nn.Softmax(),
    lambda m: m.nn.Hardtanh(), lambda m: m.nn.MSELoss(), lambda m: m.nn.L1Loss(),
    lambda m: m.nn.SmoothL1Loss(), lambda m: m.nn.HuberLoss(), lambda m: m.nn.CrossEntropyLoss(),
    lambda m: m.nn.NLLLoss(), lambda m: m.nn.BCELoss(), lambda m: m.nn.BCEWithLogitsLoss(),
    lambda m: m.nn.Sequential(m.nn.Linear(4, 8), m.nn.ReLU(), m.nn.Linear(8, 2)),
    lambda m: m.nn.Sequential(OrderedDict([("fc", m.nn.Linear(2, 2)), ("act", m.nn.Tanh())])),
    lambda m: m.nn.ModuleList([m.nn.Linear(2, 2) for _ in range(3)] + [m.nn.ReLU()]),
    lambda m: m.nn.ModuleDict({"a": m.nn.Linear(1, 1), "b": m.nn.Sequential(m.nn.ReLU())}),
    lambda m: m.nn.ParameterList([m.nn.Parameter(m.ones(2, 3))]),
    lambda m: m.nn.Sequential(),
]


@pytest.mark.parametrize("build", REPRS)
def test_repr_is_pytorchs(build):
    assert repr(build(sg)) == repr(build(torch))


def test_parameter_repr_and_identity():
    t = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    s = sg.nn.Parameter(sg.tensor([1.0, 2.0]))
    assert repr(s) == repr(t)
    assert s.is_leaf and s.requires_grad and isinstance(s, sg.Tensor)
    assert not sg.nn.Parameter(sg.ones(2), requires_grad=False).requires_grad
    base = sg.zeros(3)
    p = sg.nn.Parameter(base)
    with sg.no_grad():
        p.add_(1)
    assert base.tolist() == [1.0, 1.0, 1.0]           # shares storage, as in PyTorch
    assert type(p * 2) is sg.Tensor


def test_custom_module_repr_registration_and_traversal():
    def build(m):
        class Block(m.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = m.nn.Linear(3, 3)
                self.act = m.nn.Tanh()
                self.register_buffer("steps", m.zeros(1))
                self.register_buffer("scratch", m.zeros(2), persistent=False)

            def forward(self, x):
                return self.act(self.fc(x))

        class Net(m.nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = m.nn.ModuleList([Block(), Block()])
                self.head = m.nn.Linear(3, 1)
                self.scale = m.nn.Parameter(m.ones(1))
                self.shared = self.head             # the same module twice

            def forward(self, x):
                for b in self.blocks:
                    x = b(x)
                return self.head(x) * self.scale
        return Net()
    t, s = build(torch), build(sg)
    assert repr(s) == repr(t)
    assert [n for n, _ in s.named_parameters()] == [n for n, _ in t.named_parameters()]
    assert [n for n, _ in s.named_buffers()] == [n for n, _ in t.named_buffers()]
    assert [n for n, _ in s.named_modules()] == [n for n, _ in t.named_modules()]
    assert [n for n, _ in s.named_children()] == [n for n, _ in t.named_children()]
    assert list(s.state_dict()) == list(t.state_dict())
    assert len(list(s.parameters())) == len(list(t.parameters()))
    assert [n for n, _ in s.named_parameters(remove_duplicate=False)] == \
        [n for n, _ in t.named_parameters(remove_duplicate=False)]


@pytest.mark.parametrize("dtype", DTYPES)
def test_mlp_forward_backward_equal_torch(dtype):
    def build(m):
        return m.nn.Sequential(m.nn.Linear(5, 16), m.nn.GELU(), m.nn.Linear(16, 16), m.nn.ELU(),
                               m.nn.LayerNorm(16), m.nn.Linear(16, 3))
    tm, sm = _pair(build, dtype)
    x = np.random.default_rng(0).normal(size=(7, 5)).astype(dtype)
    y = np.random.default_rng(1).integers(0, 3, size=7)
    tl = torch.nn.CrossEntropyLoss()(tm(torch.tensor(x)), torch.tensor(y))
    sl = sg.nn.CrossEntropyLoss()(sm(sg.tensor(x)), sg.tensor(y))
    np.testing.assert_allclose(_np(sl), _np(tl), **tol(dtype))
    tl.backward()
    sl.backward()
    for (n, tp), (_, sp) in zip(tm.named_parameters(), sm.named_parameters()):
        np.testing.assert_allclose(_np(sp.grad), _np(tp.grad), **tol(dtype), err_msg=n)


@pytest.mark.parametrize("dtype", DTYPES)
def test_training_loop_with_hand_written_sgd_equals_torch(dtype):
    def build(m):
        return m.nn.Sequential(m.nn.Linear(4, 8), m.nn.Tanh(), m.nn.Linear(8, 1))
    tm, sm = _pair(build, dtype)
    rng = np.random.default_rng(2)
    for _ in range(20):
        x = rng.normal(size=(16, 4)).astype(dtype)
        y = rng.normal(size=(16, 1)).astype(dtype)
        for lib, model in ((torch, tm), (sg, sm)):
            model.zero_grad()
            loss = lib.nn.MSELoss()(model(lib.tensor(x)), lib.tensor(y))
            loss.backward()
            with lib.no_grad():
                for p in model.parameters():
                    p -= 0.05 * p.grad
    for (n, tp), (_, sp) in zip(tm.named_parameters(), sm.named_parameters()):
        np.testing.assert_allclose(_np(sp), _np(tp), rtol=1e-4 if dtype == np.float32 else 1e-10,
                                   atol=1e-5 if dtype == np.float32 else 1e-12, err_msg=n)


# ---- layers one by one ---------------------------------------------------------------------
LAYERS = [
    (lambda m: m.nn.Linear(6, 3), (4, 6)),
    (lambda m: m.nn.Linear(6, 3, bias=False), (2, 5, 6)),
    (lambda m: m.nn.LayerNorm(6), (4, 6)),
    (lambda m: m.nn.LayerNorm([3, 6], elementwise_affine=False), (2, 3, 6)),
    (lambda m: m.nn.LayerNorm(6, bias=False), (4, 6)),
    (lambda m: m.nn.ELU(alpha=0.7), (4, 6)),
    (lambda m: m.nn.GELU(), (4, 6)),
    (lambda m: m.nn.GELU(approximate="tanh"), (4, 6)),
    (lambda m: m.nn.SiLU(), (4, 6)),
    (lambda m: m.nn.LeakyReLU(0.2), (4, 6)),
    (lambda m: m.nn.Hardtanh(-0.5, 0.5), (4, 6)),
    (lambda m: m.nn.ReLU6(), (4, 6)),
    (lambda m: m.nn.Softplus(beta=2.0, threshold=3.0), (4, 6)),
    (lambda m: m.nn.Softmax(dim=1), (4, 6)),
    (lambda m: m.nn.LogSoftmax(dim=0), (4, 6)),
    (lambda m: m.nn.Flatten(), (2, 3, 4)),
    (lambda m: m.nn.Flatten(0, 1), (2, 3, 4)),
    (lambda m: m.nn.Unflatten(1, (2, 3)), (4, 6)),
    (lambda m: m.nn.Identity(), (4, 6)),
    (lambda m: m.nn.Dropout(0.3).eval(), (4, 6)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("build,shape", LAYERS)
def test_layer_forward_and_backward_equal_torch(build, shape, dtype):
    tm, sm = _pair(build, dtype)
    x = np.random.default_rng(3).normal(size=shape).astype(dtype) * 2
    g = np.random.default_rng(4).normal(size=tuple(tm(torch.tensor(x)).shape)).astype(dtype)
    tx, sx = torch.tensor(x, requires_grad=True), sg.tensor(x, requires_grad=True)
    to, so = tm(tx), sm(sx)
    np.testing.assert_allclose(_np(so), _np(to), **tol(dtype))
    assert (so.grad_fn is None) == (to.grad_fn is None)
    if to.grad_fn is not None:
        assert type(so.grad_fn).__name__ == type(to.grad_fn).__name__
    to.backward(torch.tensor(g))
    so.backward(sg.tensor(g))
    np.testing.assert_allclose(_np(sx.grad), _np(tx.grad), **tol(dtype))
    for (n, tp), (_, sp) in zip(tm.named_parameters(), sm.named_parameters()):
        np.testing.assert_allclose(_np(sp.grad), _np(tp.grad), **tol(dtype), err_msg=n)


@pytest.mark.parametrize("dtype", DTYPES)
def test_bilinear_equals_torch(dtype):
    tm, sm = _pair(lambda m: m.nn.Bilinear(3, 4, 2), dtype)
    rng = np.random.default_rng(5)
    a, b = rng.normal(size=(5, 3)).astype(dtype), rng.normal(size=(5, 4)).astype(dtype)
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    sa, sb = sg.tensor(a, requires_grad=True), sg.tensor(b, requires_grad=True)
    to, so = tm(ta, tb), sm(sa, sb)
    np.testing.assert_allclose(_np(so), _np(to), **tol(dtype))
    to.sum().backward()
    so.sum().backward()
    for s, t in ((sa, ta), (sb, tb), (sm.weight, tm.weight), (sm.bias, tm.bias)):
        np.testing.assert_allclose(_np(s.grad), _np(t.grad), **tol(dtype))


@pytest.mark.parametrize("padding_idx", [None, 1, -2])
def test_embedding_equals_torch(padding_idx):
    tm, sm = _pair(lambda m: m.nn.Embedding(6, 3, padding_idx=padding_idx), np.float32)
    idx = np.array([[0, 1, 4], [1, 1, 5]])
    to, so = tm(torch.tensor(idx)), sm(sg.tensor(idx))
    np.testing.assert_array_equal(_np(so), _np(to))
    assert type(so.grad_fn).__name__ == type(to.grad_fn).__name__
    g = np.random.default_rng(6).normal(size=(2, 3, 3)).astype(np.float32)
    to.backward(torch.tensor(g))
    so.backward(sg.tensor(g))
    np.testing.assert_allclose(_np(sm.weight.grad), _np(tm.weight.grad), **tol(np.float32))
    if padding_idx is not None:
        assert not np.any(_np(sg.nn.Embedding(6, 3, padding_idx=padding_idx).weight)[padding_idx])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("build", [
    lambda m: m.nn.SmoothL1Loss(), lambda m: m.nn.SmoothL1Loss(beta=0.5),
    lambda m: m.nn.SmoothL1Loss(reduction="sum", beta=0.0),
    lambda m: m.nn.HuberLoss(), lambda m: m.nn.HuberLoss(reduction="none", delta=0.3),
    lambda m: m.nn.MSELoss(reduction="sum"), lambda m: m.nn.L1Loss(reduction="none"),
])
def test_regression_losses_equal_torch(build, dtype):
    rng = np.random.default_rng(7)
    x, y = rng.normal(size=(4, 5)).astype(dtype), rng.normal(size=(4, 5)).astype(dtype)
    tx, sx = torch.tensor(x, requires_grad=True), sg.tensor(x, requires_grad=True)
    to, so = build(torch)(tx, torch.tensor(y)), build(sg)(sx, sg.tensor(y))
    np.testing.assert_allclose(_np(so), _np(to), **tol(dtype))
    assert type(so.grad_fn).__name__ == type(to.grad_fn).__name__
    to.sum().backward()
    so.sum().backward()
    np.testing.assert_allclose(_np(sx.grad), _np(tx.grad), **tol(dtype))


def test_dropout_scales_kept_elements_and_masks_the_gradient():
    sg.manual_seed(0)
    x = sg.ones(200, 50, requires_grad=True)
    layer = sg.nn.Dropout(0.25)
    y = layer(x)
    v = _np(y)
    kept = v != 0
    assert set(np.unique(v)) <= {0.0, np.float32(1 / 0.75)}
    assert abs(kept.mean() - 0.75) < 0.02
    assert type(y.grad_fn).__name__ == "NativeDropoutBackward0"
    y.sum().backward()
    np.testing.assert_allclose(_np(x.grad), v)
    assert layer.eval()(x) is x
    with pytest.raises(ValueError, match=re.escape("dropout probability has to be between 0 and "
                                                   "1, but got 1.5")):
        sg.nn.Dropout(1.5)


# ---- state dicts ---------------------------------------------------------------------------
def _messages(fn_t, fn_s):
    with pytest.raises(Exception) as et:
        fn_t()
    with pytest.raises(Exception) as es:
        fn_s()
    assert type(es.value) is type(et.value)
    assert str(es.value) == str(et.value)


def test_load_state_dict_errors_are_pytorchs_and_modify_nothing():
    t, s = torch.nn.Linear(2, 3), sg.nn.Linear(2, 3)
    before = _np(s.weight).copy()
    for edit in (lambda d: d.pop("bias"), lambda d: d.update(extra=d["bias"]),
                 lambda d: d.update(weight=d["weight"][:2])):
        dt = t.state_dict()
        edit(dt)
        ds = OrderedDict((k, sg.tensor(v.numpy() + 1)) for k, v in dt.items())
        _messages(lambda: t.load_state_dict(dt), lambda: s.load_state_dict(ds))
        np.testing.assert_array_equal(_np(s.weight), before)
    dt = t.state_dict()
    dt.pop("bias")
    ds = OrderedDict((k, sg.tensor(v.numpy())) for k, v in dt.items())
    rt, rs = t.load_state_dict(dt, strict=False), s.load_state_dict(ds, strict=False)
    assert repr(rs) == repr(rt)
    assert repr(s.load_state_dict(s.state_dict())) == repr(t.load_state_dict(t.state_dict()))


def test_state_dict_shares_storage_and_detaches():
    s = sg.nn.Linear(2, 2)
    sd = s.state_dict()
    assert not sd["weight"].requires_grad
    with sg.no_grad():
        s.weight.add_(1)
    np.testing.assert_array_equal(_np(sd["weight"]), _np(s.weight))


# ---- modes, hooks, bulk changes --------------------------------------------------------------
def test_train_eval_zero_grad_apply_requires_grad():
    s = sg.nn.Sequential(sg.nn.Linear(2, 2), sg.nn.Dropout())
    assert s.training and s[1].training
    s.eval()
    assert not s.training and not s[1].training
    s.train()
    assert s[1].training
    s(sg.ones(1, 2)).sum().backward()
    assert s[0].weight.grad is not None
    s.zero_grad()
    assert s[0].weight.grad is None
    seen = []
    s.apply(lambda m: seen.append(type(m).__name__))
    assert seen == ["Linear", "Dropout", "Sequential"]
    s.requires_grad_(False)
    assert not any(p.requires_grad for p in s.parameters())


def test_forward_hooks_run_and_can_replace():
    s = sg.nn.Linear(2, 2)
    calls = []
    h1 = s.register_forward_pre_hook(lambda m, args: (args[0] * 0,))
    h2 = s.register_forward_hook(lambda m, args, out: calls.append(out.shape))
    out = s(sg.ones(3, 2))
    np.testing.assert_allclose(_np(out), np.broadcast_to(_np(s.bias), (3, 2)))
    assert calls == [sg.Size([3, 2])]
    h1.remove()
    h2.remove()
    s(sg.ones(1, 2))
    assert len(calls) == 1


def test_to_double_keeps_parameter_objects():
    s = sg.nn.Linear(2, 2)
    w = s.weight
    s.to(sg.float64)
    assert s.weight is w and w.dtype == sg.float64 and isinstance(w, sg.nn.Parameter)
    s.float()
    assert w.dtype == sg.float32
    _messages(lambda: torch.nn.Linear(2, 2).to(torch.int64), lambda: s.to(sg.int64))


def test_devices():
    assert repr(sg.device("cpu")) == repr(torch.device("cpu"))
    assert str(sg.device("cuda", 1)) == str(torch.device("cuda", 1))
    assert sg.device("cpu") == "cpu" and sg.ones(1).device == sg.device("cpu")
    assert sg.cuda.is_available() is False
    _messages(lambda: torch.zeros(1, device="cuda"), lambda: sg.zeros(1, device="cuda"))
    _messages(lambda: torch.nn.Linear(1, 1).cuda(), lambda: sg.nn.Linear(1, 1).cuda())
    _messages(lambda: torch.nn.Linear(1, 1).to("cuda"), lambda: sg.nn.Linear(1, 1).to("cuda"))
    _messages(lambda: torch.device("tpu"), lambda: sg.device("tpu"))
    assert sg.nn.Linear(1, 1).to("cpu").weight.dtype == sg.float32
    assert sg.randn(size=(2, 3)).shape == (2, 3)


def test_attribute_errors_are_pytorchs():
    _messages(lambda: torch.nn.Linear(1, 1).nope, lambda: sg.nn.Linear(1, 1).nope)

    def assign(m):
        lin = m.nn.Linear(1, 1)
        lin.weight = m.ones(1, 1)
    _messages(lambda: assign(torch), lambda: assign(sg))


# ---- containers ----------------------------------------------------------------------------
def test_sequential_and_lists_behave_like_pytorchs():
    s = sg.nn.Sequential(sg.nn.Linear(2, 3), sg.nn.ReLU(), sg.nn.Linear(3, 1))
    t = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
    assert len(s) == 3 and isinstance(s[-1], sg.nn.Linear)
    assert repr(s[1:]) == repr(t[1:])
    s.append(sg.nn.Sigmoid())
    assert [n for n, _ in s.named_children()] == ["0", "1", "2", "3"]
    ml = sg.nn.ModuleList([sg.nn.Linear(1, 1)])
    ml.append(sg.nn.Linear(1, 2))
    assert len(list(ml.parameters())) == 4
    md = sg.nn.ModuleDict({"a": sg.nn.Linear(1, 1)})
    md["b"] = sg.nn.ReLU()
    assert list(md.keys()) == ["a", "b"] and "a" in md
    pd = sg.nn.ParameterDict({"w": sg.nn.Parameter(sg.ones(2))})
    assert [n for n, _ in pd.named_parameters()] == ["w"]


# ---- init ----------------------------------------------------------------------------------
@pytest.mark.parametrize("args", [("linear",), ("tanh",), ("relu",), ("leaky_relu",),
                                  ("leaky_relu", 0.2), ("selu",), ("sigmoid",), ("conv2d",)])
def test_calculate_gain_is_pytorchs(args):
    assert sg.nn.init.calculate_gain(*args) == torch.nn.init.calculate_gain(*args)


def test_initialisers_respect_pytorchs_bounds():
    w = sg.empty(64, 32)
    fan_in, fan_out = 32, 64
    b = np.sqrt(6 / (fan_in + fan_out))
    assert np.abs(_np(sg.nn.init.xavier_uniform_(w))).max() <= b
    b = np.sqrt(3) * np.sqrt(2) / np.sqrt(fan_in)
    assert np.abs(_np(sg.nn.init.kaiming_uniform_(w, nonlinearity="relu"))).max() <= b
    lin = sg.nn.Linear(40, 7)
    assert np.abs(_np(lin.weight)).max() <= 1 / np.sqrt(40)
    assert np.abs(_np(lin.bias)).max() <= 1 / np.sqrt(40)
    q = _np(sg.nn.init.orthogonal_(sg.empty(5, 8)))
    np.testing.assert_allclose(q @ q.T, np.eye(5), atol=1e-5)
    t = _np(sg.nn.init.trunc_normal_(sg.empty(1000), std=2.0, a=-1.0, b=1.5))
    assert t.min() >= -1.0 and t.max() <= 1.5
    assert _np(sg.nn.init.eye_(sg.empty(3, 3))).tolist() == np.eye(3).tolist()
    assert _np(sg.nn.init.constant_(sg.empty(2), 0.5)).tolist() == [0.5, 0.5]
    _messages(lambda: torch.nn.init.xavier_uniform_(torch.empty(3)),
              lambda: sg.nn.init.xavier_uniform_(sg.empty(3)))
    _messages(lambda: torch.nn.init.eye_(torch.empty(3, 3, 3)),
              lambda: sg.nn.init.eye_(sg.empty(3, 3, 3)))


# ---- utils ---------------------------------------------------------------------------------
@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf")])
@pytest.mark.parametrize("max_norm", [0.5, 100.0])
def test_clip_grad_norm_equals_torch(norm_type, max_norm):
    tm, sm = _pair(lambda m: m.nn.Sequential(m.nn.Linear(3, 4), m.nn.Linear(4, 2)), np.float32)
    x = np.random.default_rng(8).normal(size=(5, 3)).astype(np.float32)
    tm(torch.tensor(x)).pow(2).sum().backward()
    sm(sg.tensor(x)).pow(2).sum().backward()
    tn = torch.nn.utils.clip_grad_norm_(tm.parameters(), max_norm, norm_type)
    sn = sg.nn.utils.clip_grad_norm_(sm.parameters(), max_norm, norm_type)
    np.testing.assert_allclose(_np(sn), _np(tn), rtol=1e-5)
    for tp, sp in zip(tm.parameters(), sm.parameters()):
        np.testing.assert_allclose(_np(sp.grad), _np(tp.grad), rtol=1e-5, atol=1e-6)


def test_clip_grad_value_and_vectors_equal_torch():
    tm, sm = _pair(lambda m: m.nn.Linear(3, 2), np.float32)
    x = np.random.default_rng(9).normal(size=(5, 3)).astype(np.float32) * 10
    tm(torch.tensor(x)).sum().backward()
    sm(sg.tensor(x)).sum().backward()
    torch.nn.utils.clip_grad_value_(tm.parameters(), 0.7)
    sg.nn.utils.clip_grad_value_(sm.parameters(), 0.7)
    for tp, sp in zip(tm.parameters(), sm.parameters()):
        np.testing.assert_allclose(_np(sp.grad), _np(tp.grad))
    tv = torch.nn.utils.parameters_to_vector(tm.parameters())
    sv = sg.nn.utils.parameters_to_vector(sm.parameters())
    np.testing.assert_allclose(_np(sv), _np(tv))
    sg.nn.utils.vector_to_parameters(sv * 2, sm.parameters())
    np.testing.assert_allclose(_np(sm.weight), 2 * _np(tm.weight))


def _orders(L):
    m = L.nn.Linear(4, 8)
    m.weight = L.nn.Parameter(L.zeros(8, 4))
    out = [[n for n, _ in m.named_parameters()], list(m.state_dict())]
    s = L.nn.Sequential(L.nn.Linear(2, 2), L.nn.ReLU(), L.nn.Linear(2, 1))
    s[0] = L.nn.Tanh()
    setattr(s, "1", L.nn.Sigmoid())
    out += [[n for n, _ in s.named_modules()], list(s.state_dict())]
    b = L.nn.BatchNorm1d(3)
    b.running_mean = L.zeros(3)
    b.register_buffer("running_mean", L.ones(3))
    out += [list(b.state_dict()), [n for n, _ in b.named_buffers()]]

    class M(L.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = L.nn.Parameter(L.ones(1))
            self.b = L.nn.Linear(1, 1)
            self.c = L.nn.Parameter(L.ones(1))
    m = M()
    m.a = L.nn.Parameter(L.zeros(1))
    m.b = L.nn.Linear(1, 1)
    m.a = None
    out += [list(m.state_dict()), [n for n, _ in m.named_parameters()], list(m._parameters)]
    m.a = L.nn.Parameter(L.zeros(1))
    out.append(list(m.state_dict()))
    m.b = L.nn.Parameter(L.zeros(1))        # a module replaced by a parameter: moves
    out += [list(m.state_dict()), list(m._modules)]
    return out


def test_reassigned_parameters_modules_and_buffers_keep_their_place():
    """PyTorch's __setattr__ replaces an existing entry in place: a reassigned Parameter
    stays where it was in named_parameters() / state_dict() (it moved to the end)."""
    assert _orders(sg) == _orders(torch)
