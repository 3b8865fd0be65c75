"""torch.all / torch.any and their methods against PyTorch: dims, keepdim, dtypes (bool,
float, int, uint8), empty tensors, and compiled."""
import numpy as np
import pytest
import torch

import symgrad as sg

CASES = [np.array([[1.0, 0.0], [2.0, 3.0]]), np.array([[0, 0], [0, 5]], np.int64),
         np.array([True, False, True]), np.array([], np.float32), np.array([1, 2], np.uint8),
         np.zeros((2, 0, 3)), np.array(2.5)]


@pytest.mark.parametrize("kind", ["all", "any"])
@pytest.mark.parametrize("arr", CASES, ids=range(len(CASES)))
def test_all_any_equal_torch(kind, arr):
    for kw in ({}, {"dim": 0}, {"dim": -1, "keepdim": True}):
        if arr.ndim == 0 and kw:
            continue
        t = getattr(torch, kind)(torch.tensor(arr), **kw)
        s = getattr(sg, kind)(sg.tensor(arr), **kw)
        m = getattr(sg.tensor(arr), kind)(**kw)
        assert s.tolist() == t.tolist() == m.tolist()
        assert str(s.dtype) == str(t.dtype)


def test_all_compiled():
    f = sg.compile(lambda a: ((a > 0).all(dim=0), (a > 2).any()))
    out = f(np.array([[1.0, -1.0], [2.0, 3.0]]))
    assert out[0].tolist() == [True, False] and bool(out[1])
