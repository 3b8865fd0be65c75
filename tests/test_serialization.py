"""symgrad.save / symgrad.load: tensors, module state dicts and optimizer states round-trip
exactly (a model and its optimizer resume identically); weights-only loading refuses any
other global, so a malicious file cannot run code."""
from __future__ import annotations

import io
import os
import pickle

import numpy as np
import pytest
import torch

import symgrad as sg


def test_tensors_and_containers_round_trip(tmp_path):
    obj = {"a": sg.tensor([[1.5, 2.0]], dtype=sg.float64), "i": sg.arange(4),
           "b": sg.tensor([True, False]), "nested": [(1, 2.5, "s", None)],
           "p": sg.nn.Parameter(sg.ones(2)), "dt": sg.float32}
    path = tmp_path / "x.pt"
    sg.save(obj, path)
    back = sg.load(path)
    assert back["a"].dtype == sg.float64 and back["a"].tolist() == [[1.5, 2.0]]
    assert back["i"].dtype == sg.int64 and back["b"].dtype == sg.bool
    assert back["nested"] == [(1, 2.5, "s", None)] and back["dt"] is sg.float32
    assert isinstance(back["p"], sg.nn.Parameter) and back["p"].requires_grad


def test_model_and_optimizer_resume_identically(tmp_path):
    def make():
        model = sg.nn.Sequential(sg.nn.Linear(3, 4), sg.nn.Tanh(), sg.nn.Linear(4, 1))
        return model, sg.optim.Adam(model.parameters(), lr=0.01)
    x, y = sg.randn(8, 3), sg.randn(8, 1)

    def train(model, opt, n):
        for _ in range(n):
            opt.zero_grad()
            sg.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
    m1, o1 = make()
    train(m1, o1, 5)
    sg.save({"model": m1.state_dict(), "opt": o1.state_dict()}, tmp_path / "ck.pt")
    m2, o2 = make()
    ck = sg.load(tmp_path / "ck.pt")
    m2.load_state_dict(ck["model"])
    o2.load_state_dict(ck["opt"])
    train(m1, o1, 3)
    train(m2, o2, 3)
    for a, b in zip(m1.parameters(), m2.parameters()):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


class Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def test_weights_only_refuses_code(tmp_path):
    path = tmp_path / "evil.pt"
    sg.save({"x": Evil()}, path)
    with pytest.raises(pickle.UnpicklingError, match="Unsupported global: GLOBAL (posix|nt).system"):
        sg.load(path)
    # PyTorch refuses the same kind of file the same way (its own format)
    tpath = tmp_path / "evil_torch.pt"
    torch.save({"x": Evil()}, tpath)
    with pytest.raises(pickle.UnpicklingError, match="posix.system|nt.system"):
        torch.load(tpath)


class Point:
    def __init__(self, x):
        self.x = x


def test_safe_globals_allow_a_trusted_class():
    buf = io.BytesIO()
    sg.save(Point(3), buf)
    buf.seek(0)
    with pytest.raises(pickle.UnpicklingError):
        sg.load(io.BytesIO(buf.getvalue()))
    with sg.serialization.safe_globals([Point]):
        assert sg.load(io.BytesIO(buf.getvalue())).x == 3
    assert sg.load(io.BytesIO(buf.getvalue()), weights_only=False).x == 3


def test_not_a_symgrad_file(tmp_path):
    torch.save({"w": torch.ones(1)}, tmp_path / "t.pt")
    with pytest.raises(RuntimeError, match="not a file written by symgrad.save"):
        sg.load(tmp_path / "t.pt")
    with pytest.raises(AssertionError, match="Torch not compiled with CUDA enabled"):
        sg.load(tmp_path / "t.pt", map_location="cuda")
