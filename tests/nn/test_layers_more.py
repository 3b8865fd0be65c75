"""Instance / local-response / RMS normalisation, channel and alpha dropout, PReLU,
Softmax2d, Gumbel-softmax, Fold / Unfold, ChannelShuffle and LazyLinear against PyTorch:
values and gradients in float32 and float64, random draws for the same seed, running
statistics, reprs, state dicts, errors, and a compiled training step."""
import numpy as np
import pytest
import torch

import symgrad as sg
from tests.nn.helpers import DTYPES, close, same_error


def _run(fn, arrays, dtype, factor=4, seed=None):
    """fn(module, *tensors) under torch and symgrad: value and every input's gradient."""
    outs, grads = [], []
    for m in (torch, sg):
        if seed is not None:
            m.manual_seed(seed)
        ts = [m.tensor(a.astype(dtype), requires_grad=True) for a in arrays]
        out = fn(m, *ts)
        g = np.random.default_rng(9).normal(size=tuple(out.shape)).astype(dtype)
        out.backward(m.tensor(g))
        outs.append(out)
        grads.append([t.grad for t in ts])
    close(outs[1], outs[0], dtype, "value", factor)
    for i, (gs, gt) in enumerate(zip(grads[1], grads[0])):
        close(gs, gt, dtype, f"grad {i}", factor)


R = np.random.default_rng(0)
X4 = R.normal(size=(2, 3, 5, 4))
X3 = R.normal(size=(2, 4, 6))
X5 = R.normal(size=(2, 3, 3, 4, 2))
W3 = R.uniform(0.5, 1.5, size=3)
B3 = R.normal(size=3)

FUNCTIONAL = {
    "instance_norm_2d": (lambda m, x: m.nn.functional.instance_norm(x), [X4]),
    "instance_norm_affine": (lambda m, x, w, b: m.nn.functional.instance_norm(
        x, weight=w, bias=b, eps=1e-3), [X4, W3, B3]),
    "instance_norm_3d": (lambda m, x: m.nn.functional.instance_norm(x), [X5]),
    "lrn_3d_input": (lambda m, x: m.nn.functional.local_response_norm(x, 3, alpha=0.1), [X3]),
    "lrn_4d_input": (lambda m, x: m.nn.functional.local_response_norm(x, 2, 0.3, 0.6, 2.0), [X4]),
    "lrn_5d_input": (lambda m, x: m.nn.functional.local_response_norm(x, 4, 0.2), [X5]),
    "rms_norm": (lambda m, x: m.nn.functional.rms_norm(x, (5, 4)), [X4]),
    "rms_norm_weight_eps": (lambda m, x, w: m.nn.functional.rms_norm(x, [6], w, eps=1e-3),
                            [X3, R.normal(size=6)]),
    "prelu_one": (lambda m, x, w: m.nn.functional.prelu(x, w), [X4, np.array([0.2])]),
    "prelu_channels": (lambda m, x, w: m.nn.functional.prelu(x, w), [X4, W3]),
    "softmax2d": (lambda m, x: m.nn.Softmax2d()(x), [X4]),
    "unfold": (lambda m, x: m.nn.functional.unfold(x, 2), [X4]),
    "unfold_params": (lambda m, x: m.nn.functional.unfold(x, (2, 3), dilation=(2, 1),
                                                          padding=1, stride=(1, 2)), [X4]),
    "unfold_unbatched": (lambda m, x: m.nn.functional.unfold(x, 3, padding=1), [X4[0]]),
    "fold": (lambda m, x: m.nn.functional.fold(x, (5, 4), 2), [R.normal(size=(2, 12, 12))]),
    "fold_params": (lambda m, x: m.nn.functional.fold(x, (6, 7), (2, 3), dilation=(2, 1),
                                                      padding=1, stride=(1, 2)),
                    [R.normal(size=(2, 6, 24))]),
    "channel_shuffle": (lambda m, x: m.nn.ChannelShuffle(2)(x), [R.normal(size=(2, 6, 3))]),
    "pixel_unshuffle": (lambda m, x: m.nn.PixelUnshuffle(2)(x), [R.normal(size=(2, 3, 4, 6))]),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(FUNCTIONAL))
def test_functional_layers_equal_torch(name, dtype):
    fn, arrays = FUNCTIONAL[name]
    _run(fn, arrays, dtype)


RANDOM = {
    "dropout": (lambda m, x: m.nn.functional.dropout(x, 0.3), X4),
    "dropout1d": (lambda m, x: m.nn.functional.dropout1d(x, 0.4), X3),
    "dropout1d_unbatched": (lambda m, x: m.nn.functional.dropout1d(x, 0.4), X3[0]),
    "dropout2d": (lambda m, x: m.nn.Dropout2d(0.5)(x), X4),
    "dropout3d": (lambda m, x: m.nn.Dropout3d(0.25)(x), X5),
    "dropout3d_unbatched": (lambda m, x: m.nn.functional.dropout3d(x, 0.25), X5[0]),
    "alpha_dropout": (lambda m, x: m.nn.AlphaDropout(0.2)(x), X4),
    "feature_alpha_dropout": (lambda m, x: m.nn.functional.feature_alpha_dropout(
        x, 0.3, training=True), X4),
    "gumbel_softmax": (lambda m, x: m.nn.functional.gumbel_softmax(x, tau=0.7), X3),
    "gumbel_softmax_hard": (lambda m, x: m.nn.functional.gumbel_softmax(x, hard=True, dim=1),
                            X3),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(RANDOM))
def test_random_layers_draw_torchs_numbers(name, dtype):
    fn, x = RANDOM[name]
    _run(fn, [x], dtype, seed=11)


@pytest.mark.parametrize("p", (0.0, 1.0))
def test_dropout_edge_probabilities_and_eval(p):
    for build in (lambda m: m.nn.Dropout2d(p), lambda m: m.nn.AlphaDropout(p),
                  lambda m: m.nn.FeatureAlphaDropout(p)):
        _run(lambda m, x: build(m)(x), [X4], np.float64, seed=1)
        _run(lambda m, x: build(m).eval()(x), [X4], np.float64, seed=1)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cls", ("InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"))
def test_instance_norm_modules_running_stats_and_unbatched(cls, dtype):
    x = {"InstanceNorm1d": X3[:, :3], "InstanceNorm2d": X4, "InstanceNorm3d": X5}[cls]
    mods = [getattr(m.nn, cls)(3, affine=True, track_running_stats=True, momentum=0.3)
            .to(getattr(m, np.dtype(dtype).name)) for m in (torch, sg)]
    for step in range(3):
        _run(lambda m, t: mods[m is sg](t), [x * (step + 1)], dtype)
        for k, v in mods[0].state_dict().items():
            close(mods[1].state_dict()[k], v, dtype, k)
    for mod in mods:
        mod.eval()
    _run(lambda m, t: mods[m is sg](t), [x], dtype)
    _run(lambda m, t: getattr(m.nn, cls)(3)(t), [x[0]], dtype)        # unbatched


REPRS = [
    lambda m: m.nn.InstanceNorm1d(3), lambda m: m.nn.InstanceNorm2d(3, affine=True,
                                                                    track_running_stats=True),
    lambda m: m.nn.InstanceNorm3d(4, eps=1e-3, momentum=None, bias=False, affine=True),
    lambda m: m.nn.LocalResponseNorm(3), lambda m: m.nn.RMSNorm([3, 4]),
    lambda m: m.nn.RMSNorm(3, eps=1e-5, elementwise_affine=False), lambda m: m.nn.Dropout1d(),
    lambda m: m.nn.Dropout2d(0.2), lambda m: m.nn.Dropout3d(inplace=True),
    lambda m: m.nn.AlphaDropout(), lambda m: m.nn.FeatureAlphaDropout(0.1, True),
    lambda m: m.nn.PReLU(), lambda m: m.nn.PReLU(3, 0.1), lambda m: m.nn.Softmax2d(),
    lambda m: m.nn.Fold((4, 5), 2), lambda m: m.nn.Unfold(kernel_size=(2, 3), stride=2),
    lambda m: m.nn.ChannelShuffle(2), lambda m: m.nn.LazyLinear(3),
    lambda m: m.nn.LazyLinear(3, bias=False),
]


@pytest.mark.parametrize("build", REPRS)
def test_reprs_state_dicts_and_default_init_are_torchs(build):
    torch.manual_seed(0)
    sg.manual_seed(0)
    t, s = build(torch), build(sg)
    assert repr(s) == repr(t)
    ts, ss = t.state_dict(), s.state_dict()
    assert list(ss) == list(ts)
    for k, v in ts.items():
        if type(v).__name__ == "Parameter" or type(v).__name__ == "Tensor":
            close(ss[k], v, what=k)


@pytest.mark.parametrize("dtype", DTYPES)
def test_lazy_linear_materialises_on_first_call_as_torch(dtype):
    torch.manual_seed(4)
    sg.manual_seed(4)
    t = torch.nn.LazyLinear(3, dtype=getattr(torch, np.dtype(dtype).name))
    s = sg.nn.LazyLinear(3, dtype=getattr(sg, np.dtype(dtype).name))
    assert repr(s.weight) == repr(t.weight) == "<UninitializedParameter>"
    x = R.normal(size=(2, 5)).astype(dtype)
    close(s(sg.tensor(x)), t(torch.tensor(x)), dtype)
    assert type(s) is sg.nn.Linear and repr(s) == repr(t)
    assert type(s.weight) is sg.nn.Parameter
    for (k, a), b in zip(s.state_dict().items(), t.state_dict().values()):
        close(a, b, dtype, k)


@pytest.mark.parametrize("build", [
    lambda m: m.nn.functional.instance_norm(m.ones(2, 3, 1)),
    lambda m: m.nn.InstanceNorm2d(3, affine=True)(m.ones(2, 4, 2, 2)),
    lambda m: m.nn.InstanceNorm2d(3)(m.ones(2, 2)),
    lambda m: m.nn.functional.local_response_norm(m.ones(2, 3), 2),
    lambda m: m.nn.functional.rms_norm(m.ones(2, 3), [4]),
    lambda m: m.nn.functional.rms_norm(m.ones(2, 3), [3], m.ones(4)),
    lambda m: m.nn.functional.dropout1d(m.ones(2, 3, 4, 5)),
    lambda m: m.nn.functional.alpha_dropout(m.ones(3), 1.5),
    lambda m: m.nn.functional.prelu(m.ones(2, 4), m.ones(3)),
    lambda m: m.nn.functional.prelu(m.ones(2, 3), m.ones(3, 1)),
    lambda m: m.nn.Softmax2d()(m.ones(2, 3)),
    lambda m: m.nn.functional.unfold(m.ones(2, 3), 2),
    lambda m: m.nn.functional.unfold(m.ones(1, 2, 3, 3), 4),
    lambda m: m.nn.functional.fold(m.ones(1, 5, 9), (4, 4), 2),
    lambda m: m.nn.functional.fold(m.ones(1, 4, 8), (4, 4), 2),
    lambda m: m.nn.functional.fold(m.ones(4, 8), (4, 4), 2, stride=0),
    lambda m: m.nn.functional.channel_shuffle(m.ones(2, 5, 3), 2),
    lambda m: m.nn.functional.channel_shuffle(m.ones(2, 4), 2),
    lambda m: m.nn.functional.channel_shuffle(m.ones(2, 4, 3), 0),
    lambda m: m.nn.functional.unfold(m.ones(3), 2),
    lambda m: m.nn.functional.unfold(m.ones(1, 1, 3, 3), 2, dilation=0),
    lambda m: m.nn.functional.unfold(m.ones(1, 1, 3, 3), 2, padding=-1),
    lambda m: m.nn.functional.fold(m.ones(1, 4, 4), (3, 3), 0),
    lambda m: m.nn.functional.fold(m.ones(1, 4, 4), (0, 3), 2),
    lambda m: m.nn.functional.fold(m.ones(4), (3, 3), 2),
    lambda m: m.nn.functional.unfold(m.ones(1, 1, 1, 1), 2),
    lambda m: m.nn.functional.rms_norm(m.ones(2, 3), [3, 4]),
])
def test_errors_are_torchs(build):
    same_error(build)


@pytest.mark.parametrize("dtype", DTYPES)
def test_compiled_training_step_equals_torch(dtype):
    """Forward, backward and SGD through the new layers in one compiled step, each step's
    loss and parameters as torch's (dropout masks from the same seed)."""
    def build(m):
        m.manual_seed(2)
        net = m.nn.Sequential(m.nn.Conv2d(2, 4, 3, padding=1), m.nn.InstanceNorm2d(4, affine=True),
                              m.nn.PReLU(4), m.nn.ChannelShuffle(2), m.nn.Dropout2d(0.25),
                              m.nn.LocalResponseNorm(2), m.nn.Unfold(2), m.nn.Flatten(),
                              m.nn.RMSNorm(400), m.nn.Linear(400, 3))
        return net.to(getattr(m, np.dtype(dtype).name))
    t, s = build(torch), build(sg)
    s.load_state_dict({k: sg.tensor(v.numpy()) for k, v in t.state_dict().items()})
    opt_t = torch.optim.SGD(t.parameters(), lr=0.1, momentum=0.9)
    opt_s = sg.optim.SGD(s.parameters(), lr=0.1, momentum=0.9)

    @sg.compile
    def step(x, y):
        opt_s.zero_grad()
        loss = sg.nn.functional.cross_entropy(s(x), y)
        loss.backward()
        opt_s.step()
        return loss.detach()
    rng = np.random.default_rng(0)
    torch.manual_seed(5)
    sg.manual_seed(5)
    for _ in range(3):
        x = rng.normal(size=(4, 2, 6, 6)).astype(dtype)
        y = rng.integers(0, 3, 4)
        ls = step(sg.tensor(x), sg.tensor(y))
        opt_t.zero_grad()
        lt = torch.nn.functional.cross_entropy(t(torch.tensor(x)), torch.tensor(y))
        lt.backward()
        opt_t.step()
        close(ls, lt.detach(), dtype, "loss", factor=50)
        for (k, a), b in zip(s.state_dict().items(), t.state_dict().values()):
            close(a, b, dtype, k, factor=50)


@pytest.mark.parametrize("call", [lambda m: m.nn.functional.dropout2d(m.ones(2, 3)),
                                  lambda m: m.nn.functional.dropout2d(m.ones(2, 3, 4)),
                                  lambda m: m.nn.functional.dropout3d(m.ones(2, 3))])
def test_dropout_warnings_are_torchs(call):
    import warnings
    got = {}
    for m in (torch, sg):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            call(m)
        got[m] = [str(x.message) for x in w]
    assert got[sg] == got[torch] and got[torch]


def test_instance_norm_refuses_untracked_running_stats_of_an_old_checkpoint():
    same_error(lambda m: m.nn.Sequential(m.nn.InstanceNorm2d(3)).load_state_dict(
        {"0.running_mean": m.zeros(3), "0.running_var": m.ones(3)}))
    for m in (torch, sg):            # with its version metadata: loaded as any state dict
        sd = m.nn.Sequential(m.nn.InstanceNorm2d(3, track_running_stats=True)).state_dict()
        m.nn.Sequential(m.nn.InstanceNorm2d(3, track_running_stats=True)).load_state_dict(sd)
