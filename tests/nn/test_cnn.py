"""A small CNN (Conv2d - BatchNorm2d - ReLU - MaxPool2d - Conv2d - ... - Flatten - Linear)
trained with SGD as a PyTorch user writes it, against the same torch model with copied
weights: losses step by step (float32 to rtol 1e-4, float64 tighter), parameters and
running statistics after training; its compiled gradient (``value_and_grad`` over
``functional_call``) against torch's; a 1-D CNN with average pooling the same way."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg

from .helpers import DTYPES, close, twin

rng = np.random.default_rng(3)


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


def _batches(shape, classes, n, dtype):
    return [(rng.normal(size=shape).astype(dtype), rng.integers(0, classes, shape[0]))
            for _ in range(n)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("build, shape, classes", [(_cnn, (16, 1, 14, 14), 5),
                                                   (_cnn1d, (8, 2, 29), 3)])
def test_training_steps_equal_torch(build, shape, classes, dtype):
    tm, sm = twin(build, dtype)
    t_opt = torch.optim.SGD(tm.parameters(), lr=0.05, momentum=0.9)
    s_opt = sg.optim.SGD(sm.parameters(), lr=0.05, momentum=0.9)
    rtol = 1e-4 if dtype == np.float32 else 1e-10
    for step, (x, y) in enumerate(_batches(shape, classes, 6, dtype)):
        t_opt.zero_grad()
        s_opt.zero_grad()
        t_loss = torch.nn.functional.cross_entropy(tm(torch.tensor(x)), torch.tensor(y))
        s_loss = sg.nn.CrossEntropyLoss()(sm(sg.tensor(x)), sg.tensor(y))
        t_loss.backward()
        s_loss.backward()
        t_opt.step()
        s_opt.step()
        np.testing.assert_allclose(float(s_loss), t_loss.item(), rtol=rtol, err_msg=f"step {step}")
    for (k, v), (_, w) in zip(sm.state_dict().items(), tm.state_dict().items()):
        close(v, w, dtype if v.dtype.is_floating_point else None, k, factor=50)
    sm.eval()
    tm.eval()
    x = _batches(shape, classes, 1, dtype)[0][0]
    close(sm(sg.tensor(x)), tm(torch.tensor(x)), dtype, "eval output", factor=50)


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
