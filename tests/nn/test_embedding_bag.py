"""``nn.EmbeddingBag`` / ``F.embedding_bag`` and ``Embedding(max_norm=...)`` against
PyTorch: initialisation from the same seed, reprs, every mode with 2-D input or 1-D
input and offsets (``include_last_offset``, empty bags, ``padding_idx``, per-sample
weights), values and weight gradients in both dtypes, the in-place renormalisation of
looked-up rows, errors, and a compiled training step."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import symgrad as sg

from .helpers import DTYPES, close, same_error

rng = np.random.default_rng(19)
TDT = {np.float32: torch.float32, np.float64: torch.float64}
SDT = {np.float32: sg.float32, np.float64: sg.float64}


def _both(dtype, *args, **kw):
    torch.manual_seed(6)
    tm = torch.nn.EmbeddingBag(*args, dtype=TDT[dtype], **kw)
    sg.manual_seed(6)
    sm = sg.nn.EmbeddingBag(*args, dtype=SDT[dtype], **kw)
    return tm, sm


def _same_init(s, t, dtype):
    """PyTorch's N(0, 1) draws: bit for bit in float64; in float32 within 1 ulp (torch's
    vectorised Box-Muller uses SLEEF's log / cos, numpy its own)."""
    if dtype == np.float64:
        np.testing.assert_array_equal(s.detach().numpy(), t.detach().numpy())
    else:
        np.testing.assert_allclose(s.detach().numpy(), t.detach().numpy(), rtol=2.4e-7,
                                   atol=1.2e-7)


INPUTS = {
    "2d": (np.array([[1, 2, 4], [4, 3, 9], [0, 0, 5]]), None),
    "offsets": (np.array([1, 2, 4, 5, 4, 3, 2, 9]), np.array([0, 3, 3, 6])),
    "last_offset": (np.array([1, 2, 4, 5, 4, 3, 2, 9]), np.array([0, 2, 2, 5, 8])),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("layout", list(INPUTS))
@pytest.mark.parametrize("padding_idx", [None, 4])
def test_embedding_bag(mode, layout, dtype, padding_idx):
    kw = dict(mode=mode, padding_idx=padding_idx,
              include_last_offset=layout == "last_offset")
    tm, sm = _both(dtype, 10, 3, **kw)
    assert repr(sm) == repr(tm)
    _same_init(sm.weight, tm.weight, dtype)
    idx, off = INPUTS[layout]
    args_t = [torch.tensor(idx)] + ([] if off is None else [torch.tensor(off)])
    args_s = [sg.tensor(idx)] + ([] if off is None else [sg.tensor(off)])
    t, s = tm(*args_t), sm(*args_s)
    close(s, t, dtype)
    c = rng.normal(size=tuple(t.shape)).astype(dtype)
    (t * torch.tensor(c)).sum().backward()
    (s * sg.tensor(c)).sum().backward()
    close(sm.weight.grad, tm.weight.grad, dtype)
    assert type(s.grad_fn).__name__ == type(t.grad_fn).__name__


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["2d", "offsets"])
def test_per_sample_weights(layout, dtype):
    w = rng.normal(size=(10, 3)).astype(dtype)
    idx, off = INPUTS[layout]
    psw = rng.normal(size=idx.shape).astype(dtype)
    tw, tp = torch.tensor(w, requires_grad=True), torch.tensor(psw, requires_grad=True)
    sw, sp = sg.tensor(w, requires_grad=True), sg.tensor(psw, requires_grad=True)
    t = torch.nn.functional.embedding_bag(torch.tensor(idx), tw,
                                          None if off is None else torch.tensor(off),
                                          mode="sum", per_sample_weights=tp)
    s = sg.nn.functional.embedding_bag(sg.tensor(idx), sw,
                                       None if off is None else sg.tensor(off),
                                       mode="sum", per_sample_weights=sp)
    close(s, t, dtype)
    t.sum().backward()
    s.sum().backward()
    close(sw.grad, tw.grad, dtype)
    close(sp.grad, tp.grad, dtype)


@pytest.mark.parametrize("call", [
    lambda F, t, w: F.embedding_bag(t.tensor([1, 2, 3]), w, t.tensor([1, 2])),
    lambda F, t, w: F.embedding_bag(t.tensor([1, 2, 3]), w, t.tensor([0, 5])),
    lambda F, t, w: F.embedding_bag(t.tensor([1, 2, 13]), w, t.tensor([0, 2])),
    lambda F, t, w: F.embedding_bag(t.tensor([1.0, 2, 3]), w, t.tensor([0, 3])),
    lambda F, t, w: F.embedding_bag(t.tensor([1, 2]), w),
    lambda F, t, w: F.embedding_bag(t.tensor([1, 2]), w, t.tensor([[0]])),
    lambda F, t, w: F.embedding_bag(t.tensor([[[1]]]), w),
    lambda F, t, w: F.embedding_bag(t.tensor([[1, 2]]), w, mode="median"),
    lambda F, t, w: F.embedding_bag(t.tensor([[1, 2]]), w[0]),
    lambda F, t, w: F.embedding_bag(t.tensor([[1, 2]]), w, per_sample_weights=t.ones(2)),
    lambda F, t, w: F.embedding_bag(t.tensor([[1, 2]]), w, per_sample_weights=t.ones(1, 2)),
    lambda F, t, w: F.embedding_bag(t.tensor([[1, 2]]), w, mode="max",
                                    scale_grad_by_freq=True),
])
def test_errors(call):
    same_error(lambda lib: call(lib.nn.functional, lib, lib.ones(10, 3)))


def test_offsets_with_2d_input():
    """PyTorch's text, naming the offsets' own type."""
    with pytest.raises(ValueError, match="if input is 2D, then offsets has to be None, as "
                                         "input is treated is a mini-batch of fixed length "
                                         "sequences. However, found offsets of type <class "
                                         "'symgrad.tensor.Tensor'>"):
        sg.nn.functional.embedding_bag(sg.tensor([[1, 2]]), sg.ones(10, 3), sg.tensor([0]))


def test_constructor_errors_and_from_pretrained():
    same_error(lambda lib: lib.nn.EmbeddingBag(10, 3, padding_idx=10))
    same_error(lambda lib: lib.nn.EmbeddingBag(10, 3, _weight=lib.ones(3, 3)))
    w = rng.normal(size=(4, 2))
    t = torch.nn.EmbeddingBag.from_pretrained(torch.tensor(w), mode="max")
    s = sg.nn.EmbeddingBag.from_pretrained(sg.tensor(w), mode="max")
    assert repr(s) == repr(t) and s.weight.requires_grad is False
    close(s(sg.tensor([[0, 3], [2, 1]])), t(torch.tensor([[0, 3], [2, 1]])), np.float64)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.5])
def test_embedding_max_norm_renormalises_looked_up_rows(dtype, norm_type):
    torch.manual_seed(7)
    te = torch.nn.Embedding(10, 4, max_norm=1.5, norm_type=norm_type, dtype=TDT[dtype])
    sg.manual_seed(7)
    se = sg.nn.Embedding(10, 4, max_norm=1.5, norm_type=norm_type, dtype=SDT[dtype])
    assert repr(se) == repr(te)
    idx = [[1, 3, 3], [7, 0, 1]]
    t, s = te(torch.tensor(idx)), se(sg.tensor(idx))
    close(s, t, dtype)
    close(se.weight, te.weight, dtype, "renormalised weight")
    t.pow(2).sum().backward()
    s.pow(2).sum().backward()
    close(se.weight.grad, te.weight.grad, dtype)
    tb, sb = _both(dtype, 10, 4, max_norm=0.5, mode="sum")
    close(sb(sg.tensor(idx)), tb(torch.tensor(idx)), dtype)
    close(sb.weight, tb.weight, dtype, "renormalised bag weight")


@pytest.mark.parametrize("dtype", DTYPES)
def test_compiled_training_step(dtype):
    """The text-classification tutorial's model: EmbeddingBag(mean) + Linear, SGD."""
    def build(lib):
        lib.manual_seed(8)

        class Net(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.bag = lib.nn.EmbeddingBag(20, 6, dtype=SDT[dtype] if lib is sg
                                               else TDT[dtype])
                self.fc = lib.nn.Linear(6, 3, dtype=SDT[dtype] if lib is sg else TDT[dtype])

            def forward(self, text, offsets):
                return self.fc(self.bag(text, offsets))
        return Net()
    tm, sm = build(torch), build(sg)
    topt = torch.optim.SGD(tm.parameters(), lr=0.5)
    sopt = sg.optim.SGD(sm.parameters(), lr=0.5)
    text, offsets = np.array([3, 4, 5, 19, 2, 2, 7, 1]), np.array([0, 3, 5])
    label = np.array([0, 2, 1])

    @sg.compile(fullgraph=True)
    def step(x, y):
        sopt.zero_grad()
        loss = sg.nn.functional.cross_entropy(sm(x, sg.tensor(offsets)), y)
        loss.backward()
        sopt.step()
        return loss
    for _ in range(3):
        topt.zero_grad()
        t_loss = torch.nn.functional.cross_entropy(
            tm(torch.tensor(text), torch.tensor(offsets)), torch.tensor(label))
        t_loss.backward()
        topt.step()
        s_loss = step(sg.tensor(text), sg.tensor(label))
        close(s_loss.detach(), t_loss.detach(), dtype, "loss", factor=10)
    close(sm.bag.weight, tm.bag.weight, dtype, factor=10)
