"""A small CNN (Conv2d - BatchNorm2d - ReLU - MaxPool2d - Conv2d - ... - Flatten - Linear)
trained with SGD as a PyTorch user writes it, against the same torch model with copied
weights: losses step by step, parameters and running statistics after training (float64
against torch to rounding, float32 against torch's float64 run as closely as torch's own
float32 run); its compiled gradient (``value_and_grad`` over
``functional_call``) against torch's; a 1-D CNN with average pooling the same way."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg

from .helpers import DTYPES, SCALED, close, twin


def _cnn(m, track=True):
    nn = m.nn
    return nn.Sequential(nn.Conv2d(1, 6, 3, padding=1),
                         nn.BatchNorm2d(6, track_running_stats=track), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(6, 8, 3, stride=1, padding="same"),
                         nn.BatchNorm2d(8, track_running_stats=track), nn.ReLU(),
                         nn.MaxPool2d(2, ceil_mode=True), nn.Flatten(), nn.Linear(8 * 4 * 4, 5))


def _cnn1d(m):
    nn = m.nn
    return nn.Sequential(nn.Conv1d(2, 4, 5, stride=2, padding=2), nn.BatchNorm1d(4), nn.ReLU(),
                         nn.AvgPool1d(3, stride=2, ceil_mode=True, count_include_pad=False),
                         nn.Conv1d(4, 4, 3, groups=2, padding_mode="reflect", padding=1),
                         nn.ReLU(), nn.Flatten(), nn.Linear(4 * 7, 3))


def _batches(shape, classes, n, dtype, seed=3):
    rng = np.random.default_rng(seed)
    return [(rng.normal(size=shape).astype(dtype), rng.integers(0, classes, shape[0]))
            for _ in range(n)]


def _kink_margins(model) -> list:
    """Forward hooks recording, on every call of a ReLU or a (kernel = stride) max pool of
    ``model``, how near its input comes to a kink relative to the input's magnitude:
    the smallest |x| a ReLU sees, the smallest gap between a pool window's two largest
    elements. Where a margin is within rounding, float32 runs that round differently
    (torch's kernels differ by CPU) take different branches and their gradients differ
    by a whole term, so a float32 comparison is meaningful only with clear margins."""
    margins = []

    def relu(mod, args, out):
        x = args[0].detach()
        margins.append(float(x.abs().min() / x.abs().max()))

    def pool(mod, args, out):
        x = args[0].detach()
        k = mod.kernel_size if isinstance(mod.kernel_size, int) else mod.kernel_size[0]
        assert mod.stride in (k, (k, k)) and mod.padding in (0, (0, 0)), "kernel = stride only"
        dims = x.dim() - 2
        pad = [(-n) % k for n in x.shape[2:]]
        x = torch.nn.functional.pad(x, [p for n in reversed(pad) for p in (0, n)],
                                    value=-float("inf"))
        for d in range(dims):
            x = x.unfold(2 + d, k, k)
        top = x.reshape(*x.shape[:2 + dims], -1).topk(2, dim=-1).values
        gap = top[..., 0] - top[..., 1]
        finite = gap[torch.isfinite(gap) & (gap > 0)]   # exact ties (ReLU's zeros) stay exact
        margins.append(float(finite.min() / x[torch.isfinite(x)].abs().max()))

    for mod in model.modules():
        if isinstance(mod, torch.nn.ReLU):
            mod.register_forward_hook(relu)
        elif isinstance(mod, (torch.nn.MaxPool1d, torch.nn.MaxPool2d)):
            mod.register_forward_hook(pool)
    return margins


def _train(m, model, batches) -> np.ndarray:
    """Six SGD-with-momentum steps as a PyTorch user writes them (``m`` is torch or
    symgrad); the loss of each step."""
    opt = m.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for x, y in batches:
        opt.zero_grad()
        loss = m.nn.CrossEntropyLoss()(model(m.tensor(x)), m.tensor(y))
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return np.array(losses)


def _numbers(ours, theirs, truth, what: str) -> None:
    """float32 results ``ours`` and ``theirs`` (torch's) against the float64 ``truth``:
    our largest error may not exceed four times torch's plus one float32 rounding of the
    truth's magnitude."""
    a, b, t = (np.asarray(v.detach().numpy() if hasattr(v, "detach") else v, np.float64)
               for v in (ours, theirs, truth))
    scale = float(np.abs(t).max()) if t.size else 0.0
    err, torch_err = float(np.abs(a - t).max()), float(np.abs(b - t).max())
    assert err <= 4 * torch_err + SCALED[np.dtype(np.float32)] * scale, \
        f"{what}: symgrad's error {err:.3g}, torch's {torch_err:.3g} (magnitude {scale:.3g})"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("build, shape, classes, seed", [(_cnn, (4, 1, 14, 14), 5, 7),
                                                         (_cnn1d, (8, 2, 29), 3, 17)])
def test_training_steps_equal_torch(build, shape, classes, seed, dtype):
    """float64: symgrad's trajectory equals torch's to rounding. float32: training through
    BatchNorm amplifies each step's rounding, by an amount that depends on the kernels
    torch picks for the host's CPU; so both float32 trajectories are measured against
    torch's float64 one from the same start, and symgrad's error may not exceed a small
    multiple of torch's own, on data chosen to keep every ReLU and max-pool input clear of
    its kink (which the float64 run checks)."""
    batches = _batches(shape, classes, 6, dtype, seed)
    x = _batches(shape, classes, 1, dtype, seed + 1)[0][0]
    tm, sm = twin(build, dtype, seed)
    start = {k: v.detach().clone() for k, v in tm.state_dict().items()}
    s_losses, t_losses = _train(sg, sm, batches), _train(torch, tm, batches)
    sm.eval()
    tm.eval()
    outputs = sm(sg.tensor(x)), tm(torch.tensor(x))
    states = list(zip(sm.state_dict().items(), tm.state_dict().items()))
    if dtype == np.float64:
        np.testing.assert_allclose(s_losses, t_losses, rtol=1e-10)
        for (k, v), (_, w) in states:
            close(v, w, dtype if v.dtype.is_floating_point else None, k, factor=50)
        close(*outputs, dtype, "eval output", factor=50)
        return
    truth = build(torch).double()
    truth.load_state_dict({k: v.double() if v.is_floating_point() else v
                           for k, v in start.items()})
    margins = _kink_margins(truth)
    true_losses = _train(torch, truth, [(xb.astype(np.float64), yb) for xb, yb in batches])
    truth.eval()
    true_output = truth(torch.tensor(x.astype(np.float64)))
    assert min(margins) > 2e-5, f"data within {min(margins):.2g} of a kink: choose another seed"
    _numbers(s_losses, t_losses, true_losses, "losses")
    for ((k, v), (_, w)), u in zip(states, truth.state_dict().values()):
        if v.dtype.is_floating_point:
            _numbers(v, w, u, k)
        else:
            close(v, w, None, k)
    _numbers(*outputs, true_output, "eval output")


@pytest.mark.parametrize("backend", ["llvm", "numpy"])
@pytest.mark.parametrize("mode", ["eval", "batch statistics"])
def test_compiled_cnn_gradient_equals_torch(mode, backend):
    """value_and_grad over functional_call: evaluation mode (running statistics as
    constants), or training with batch statistics only (track_running_stats=False)."""
    track = mode == "eval"
    tm, sm = twin(lambda m: _cnn(m, track), np.float32)
    if track:
        tm.eval()
        sm.eval()
    x, y = _batches((8, 1, 14, 14), 5, 1, np.float32)[0]
    params = {k: v.detach().numpy().copy() for k, v in tm.named_parameters()}
    tp = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    t_loss = torch.nn.functional.cross_entropy(
        torch.func.functional_call(tm, tp, (torch.tensor(x),)), torch.tensor(y))
    t_loss.backward()

    def loss(p, xb, yb):
        return sg.nn.functional.cross_entropy(sg.func.functional_call(sm, p, (xb,)), yb)
    value, grads = sg.value_and_grad(loss, backend=backend)(params, x, y)
    np.testing.assert_allclose(value, float(t_loss), rtol=1e-5)
    scale = max(float(np.abs(tp[k].grad.numpy()).max()) for k in params)
    for k in params:
        if not track and k in ("0.bias", "4.bias"):     # before batch statistics: exactly 0
            assert np.abs(np.asarray(grads[k])).max() < 1e-5 * scale, k
            continue
        close(np.asarray(grads[k]), tp[k].grad, np.float32, k, factor=20)
