"""Tutorial programs using nn / optim, run unchanged but for the initial weights (set from
one array in both libraries): symgrad's printed losses and final weights equal PyTorch's."""
from __future__ import annotations

import io
import re
from contextlib import redirect_stdout

import numpy as np
import pytest
import torch

import symgrad as sg

# "Learning PyTorch with Examples": nn.Sequential polynomial fit, with each optimizer
POLYNOMIAL = '''
import math
x = torch.linspace(-math.pi, math.pi, 2000)
y = torch.sin(x)
p = torch.tensor([1, 2, 3])
xx = x.unsqueeze(-1).pow(p)
model = torch.nn.Sequential(
    torch.nn.Linear(3, 1),
    torch.nn.Flatten(0, 1)
)
INIT(model)
loss_fn = torch.nn.MSELoss(reduction='sum')
learning_rate = LR
optimizer = OPTIMIZER(model.parameters(), lr=learning_rate)
for t in range(STEPS):
    y_pred = model(xx)
    loss = loss_fn(y_pred, y)
    if t % 100 == 99:
        print(t, loss.item())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
linear_layer = model[0]
print(f'Result: y = {linear_layer.bias.item()} + {linear_layer.weight[:, 0].item()} x + {linear_layer.weight[:, 1].item()} x^2 + {linear_layer.weight[:, 2].item()} x^3')
'''


def _run(lib, optimizer: str, lr: float, steps: int) -> str:
    init = {"0.weight": np.array([[0.1, -0.2, 0.05]], np.float32),
            "0.bias": np.array([0.3], np.float32)}

    def set_init(model):
        model.load_state_dict({k: lib.tensor(v) for k, v in init.items()})
    src = (POLYNOMIAL.replace("INIT(model)", "set_init(model)")
           .replace("OPTIMIZER", f"torch.optim.{optimizer}").replace("LR", repr(lr))
           .replace("STEPS", str(steps)))
    out = io.StringIO()
    with redirect_stdout(out):
        exec(src, {"torch": lib, "set_init": set_init})
    return out.getvalue()


def _numbers(text: str) -> list[float]:
    return [float(v) for v in re.findall(r"-?\d+\.\d+(?:e[-+]\d+)?", text)]


@pytest.mark.parametrize("optimizer,lr", [("SGD", 1e-6), ("RMSprop", 1e-3), ("Adam", 1e-3)])
def test_polynomial_tutorial_prints_what_pytorch_prints(optimizer, lr):
    ours, theirs = _run(sg, optimizer, lr, 600), _run(torch, optimizer, lr, 600)
    assert ours.count("\n") == theirs.count("\n")
    np.testing.assert_allclose(_numbers(ours), _numbers(theirs), rtol=2e-3, atol=1e-4)
