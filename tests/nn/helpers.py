"""What the layer tests share: the same arrays as torch and symgrad tensors, a comparison
scaled to the reference's magnitude (sums of many products are compared as numerical
analysis bounds them: relative to the largest element, per dtype), and error
comparisons (type and text)."""
from __future__ import annotations

import re
from collections import OrderedDict

import numpy as np
import pytest
import torch

import symgrad as sg

DTYPES = (np.float32, np.float64)
# relative to the largest element of the reference; never loosened to make a test pass
SCALED = {np.dtype(np.float32): 2e-6, np.dtype(np.float64): 1e-13}


def close(got, want, dtype=None, what="value", factor: float = 1.0) -> None:
    """``got`` (symgrad tensor / array) equals ``want`` (torch tensor / array) elementwise
    within ``factor * SCALED[dtype] * max|want|`` (plus the same relative to each
    element)."""
    a = got.detach().numpy() if hasattr(got, "detach") else np.asarray(got)
    b = want.detach().numpy() if hasattr(want, "detach") else np.asarray(want)
    assert a.shape == b.shape, f"{what}: shape {a.shape} != {b.shape}"
    dt = np.dtype(dtype or b.dtype)
    assert a.dtype == b.dtype, f"{what}: dtype {a.dtype} != {b.dtype}"
    if dt not in SCALED:                              # integers: exact
        np.testing.assert_array_equal(a, b, err_msg=what)
        return
    eps = SCALED[dt] * factor
    scale = float(np.abs(b).max()) if b.size else 0.0
    np.testing.assert_allclose(a, b, rtol=eps, atol=eps * max(scale, 1e-30), err_msg=what)


def pair(arr: np.ndarray, requires_grad: bool = True):
    """(symgrad tensor, torch tensor) of one array."""
    return (sg.tensor(arr.copy(), requires_grad=requires_grad),
            torch.tensor(arr.copy(), requires_grad=requires_grad))


def _sets_sorted(text: str) -> str:
    """``text`` with the items of every printed set ``{'a', 'b'}`` sorted: a set's print
    order depends on the string hashes of the process and on how the set was built
    (PyTorch builds {"zeros", "reflect", ...} from a constant its own .pyc stored), so
    only the items are PyTorch's to match."""
    return re.sub(r"\{('[^{}]*')\}",
                  lambda m: "{" + ", ".join(sorted(m.group(1).split(", "))) + "}", text)


def same_error(build) -> None:
    """``build(torch)`` and ``build(symgrad)`` raise the same exception type and text."""
    with pytest.raises(Exception) as te:
        build(torch)
    with pytest.raises(Exception) as se:
        build(sg)
    assert type(se.value) is type(te.value), (type(se.value), se.value, type(te.value), te.value)
    got, want = _sets_sorted(str(se.value)), _sets_sorted(str(te.value))
    assert got == want, f"symgrad: {got!r}\ntorch:   {want!r}"


def copy_weights(src: torch.nn.Module, dst: sg.nn.Module) -> None:
    """dst's parameters and buffers := src's (by state-dict key)."""
    dst.load_state_dict(OrderedDict((k, sg.tensor(v.detach().numpy().copy()))
                                    for k, v in src.state_dict().items()))


def twin(build, dtype, seed: int = 0):
    """The same module in both libraries, torch's weights (drawn from ``seed``, so a test
    sees the same weights whatever ran before it) copied into symgrad's."""
    torch.manual_seed(seed)
    tm, sm = build(torch), build(sg)
    if dtype == np.float64:
        tm, sm = tm.double(), sm.double()
    copy_weights(tm, sm)
    return tm, sm
