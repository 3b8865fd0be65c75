"""``nn.utils.rnn`` against PyTorch: padding, packing and unpacking (values, gradients,
reprs, errors), and every recurrent layer run over a ``PackedSequence`` (sorted or not,
with or without a given state, bidirectional, several layers) in both dtypes."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.nn.utils import rnn as TR

import symgrad as sg
from symgrad.nn.utils import rnn as SR

from .helpers import DTYPES, close, outputs_and_grads_match, same_error

rng = np.random.default_rng(17)


def _seqs(lengths, dtype, tail=(3,)):
    return [rng.normal(size=(n,) + tail).astype(dtype) for n in lengths]


def _pairs(arrays):
    return ([sg.tensor(a, requires_grad=True) for a in arrays],
            [torch.tensor(a, requires_grad=True) for a in arrays])


def _backward_same(s_out, t_out, s_in, t_in, dtype):
    c = rng.normal(size=tuple(t_out.shape)).astype(dtype)
    (s_out * sg.tensor(c)).sum().backward()
    (t_out * torch.tensor(c)).sum().backward()
    for k, (s, t) in enumerate(zip(s_in, t_in)):
        close(s.grad, t.grad, dtype, f"grad {k}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("tail", [(), (3,), (2, 2)])
def test_pad_sequence(dtype, batch_first, side, tail):
    arrays = _seqs([3, 5, 1], dtype, tail)
    s_in, t_in = _pairs(arrays)
    s = SR.pad_sequence(s_in, batch_first, -1.5, side)
    t = TR.pad_sequence(t_in, batch_first, -1.5, side)
    close(s, t, dtype)
    _backward_same(s, t, s_in, t_in, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("lengths,enforce_sorted", [([5, 3, 3, 1], True),
                                                    ([2, 5, 1, 4], False),
                                                    ([4, 4], True)])
def test_pack_and_pad_round_trip(dtype, batch_first, lengths, enforce_sorted):
    T, B = max(lengths) + 1, len(lengths)
    x = rng.normal(size=((B, T) if batch_first else (T, B)) + (3,)).astype(dtype)
    (sx,), (tx,) = _pairs([x])
    lens_t = torch.tensor(lengths)
    sp = SR.pack_padded_sequence(sx, sg.tensor(lengths), batch_first, enforce_sorted)
    tp = TR.pack_padded_sequence(tx, lens_t, batch_first, enforce_sorted)
    close(sp.data, tp.data, dtype)
    for field in ("batch_sizes", "sorted_indices", "unsorted_indices"):
        a, b = getattr(sp, field), getattr(tp, field)
        assert (a is None) == (b is None), field
        if b is not None:
            assert a.tolist() == b.tolist(), field
    assert repr(sp) == repr(tp)
    for total in (None, T + 2):
        s_out, s_len = SR.pad_packed_sequence(sp, batch_first, 0.5, total)
        t_out, t_len = TR.pad_packed_sequence(tp, batch_first, 0.5, total)
        close(s_out, t_out, dtype)
        assert s_len.tolist() == t_len.tolist() and s_len.dtype == sg.int64
    _backward_same(s_out, t_out, [sx], [tx], dtype)


def test_pad_sequence_broadcasts_as_torch_copies():
    """A sequence whose trailing shape broadcasts to the first one's is copied broadcast
    (PyTorch copies each sequence into its slot)."""
    arrays = [rng.normal(size=(2, 4)), rng.normal(size=(3, 1))]
    s_in, t_in = _pairs(arrays)
    s, t = SR.pad_sequence(s_in), TR.pad_sequence(t_in)
    close(s, t, np.float64)
    _backward_same(s, t, s_in, t_in, np.float64)


@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_pack_sequence_and_unpack(enforce_sorted):
    lengths = [4, 3, 1] if enforce_sorted else [2, 4, 1]
    arrays = _seqs(lengths, np.float64)
    s_in, t_in = _pairs(arrays)
    sp = SR.pack_sequence(s_in, enforce_sorted)
    tp = TR.pack_sequence(t_in, enforce_sorted)
    assert repr(sp) == repr(tp)
    s_back, t_back = SR.unpack_sequence(sp), TR.unpack_sequence(tp)
    assert len(s_back) == len(t_back)
    for s, t in zip(s_back, t_back):
        close(s, t, np.float64)
    padded_s, lens_s = SR.pad_packed_sequence(sp, batch_first=True)
    padded_t, lens_t = TR.pad_packed_sequence(tp, batch_first=True)
    for s, t in zip(SR.unpad_sequence(padded_s, lens_s, batch_first=True),
                    TR.unpad_sequence(padded_t, lens_t, batch_first=True)):
        close(s, t, np.float64)


def test_invert_permutation_and_packed_methods():
    p = [2, 0, 3, 1]
    assert SR.invert_permutation(sg.tensor(p)).tolist() == \
        TR.invert_permutation(torch.tensor(p)).tolist()
    assert SR.invert_permutation(None) is None
    sp = SR.pack_sequence([sg.ones(2), sg.ones(3)], enforce_sorted=False)
    tp = TR.pack_sequence([torch.ones(2), torch.ones(3)], enforce_sorted=False)
    for conv in ("double", "float", "long", "int"):
        assert repr(getattr(sp, conv)()) == repr(getattr(tp, conv)())
    assert repr(sp.to(sg.float64)) == repr(tp.to(torch.float64))
    assert sp.to(sg.float32) is sp and sp.cpu() is sp
    assert sp.is_cuda is False and sp.is_pinned() is False
    assert repr(SR.PackedSequence((sg.ones(3), sg.tensor([2, 1])))) == \
        repr(TR.PackedSequence((torch.ones(3), torch.tensor([2, 1]))))
    data, bs, si, ui = sp
    assert bs.tolist() == [2, 2, 1] and si.tolist() == [1, 0]


@pytest.mark.parametrize("build", [
    lambda R, t: R.pack_padded_sequence(t.zeros(4, 3, 2), [2, 3, 1]),
    lambda R, t: R.pack_padded_sequence(t.zeros(4, 3, 2), [2, 0, 1], enforce_sorted=False),
    lambda R, t: R.pack_padded_sequence(t.zeros(4, 3, 2), [3, 2, 0]),
    lambda R, t: R.pack_padded_sequence(t.zeros(4, 3, 2), [3, 2]),
    lambda R, t: R.pack_padded_sequence(t.zeros(4, 3, 2), t.tensor([[3, 2, 1]])),
    lambda R, t: R.pack_padded_sequence(t.zeros(0, 3), [0, 0, 0]),
    lambda R, t: R.pad_sequence([]),
    lambda R, t: R.pad_sequence([t.ones(2)], padding_side="mid"),
    lambda R, t: R.pad_sequence(3),
    lambda R, t: R.pad_sequence([t.ones(2, 3), t.ones(3, 2)]),
    lambda R, t: R.pad_sequence([t.tensor(1.0)]),
    lambda R, t: R.pad_sequence([t.ones(2, 3), t.ones(2, 3, 2)]),
    lambda R, t: R.pad_sequence([t.ones(2), t.ones(3, 1)]),
    lambda R, t: R.pad_sequence([t.ones(2, 1), t.ones(3, 4)]),
    lambda R, t: R.pack_sequence([t.ones(2), t.ones(3)]),
    lambda R, t: R.pad_packed_sequence(R.pack_sequence([t.ones(3), t.ones(2)]),
                                       total_length=2),
    lambda R, t: R.PackedSequence(t.ones(3)),
    lambda R, t: R.PackedSequence((t.ones(3), t.tensor([2, 1]))).cuda(),
])
def test_errors(build):
    same_error(lambda lib: build(TR if lib is torch else SR, lib))


LAYERS = [("RNN", {}), ("RNN", dict(nonlinearity="relu", bidirectional=True)),
          ("LSTM", dict(num_layers=2)), ("LSTM", dict(bidirectional=True, proj_size=2)),
          ("GRU", dict(num_layers=2, bidirectional=True)), ("GRU", dict(batch_first=True))]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,kw", LAYERS)
@pytest.mark.parametrize("enforce_sorted", [True, False])
@pytest.mark.parametrize("given_state", [False, True])
def test_layers_over_packed_sequences(name, kw, dtype, enforce_sorted, given_state):
    tdt = torch.float32 if dtype == np.float32 else torch.float64
    torch.manual_seed(1)
    tm = getattr(torch.nn, name)(3, 5, dtype=tdt, **kw)
    sg.manual_seed(1)
    sm = getattr(sg.nn, name)(3, 5, dtype=sg.float32 if dtype == np.float32 else sg.float64,
                              **kw)
    lengths = [5, 3, 3, 1] if enforce_sorted else [3, 5, 1, 3]
    bf = kw.get("batch_first", False)
    x = rng.normal(size=((4, 5) if bf else (5, 4)) + (3,)).astype(dtype)
    arrays = [x]
    if given_state:
        dirs = 2 if kw.get("bidirectional") else 1
        n = kw.get("num_layers", 1) * dirs
        arrays.append(rng.normal(size=(n, 4, kw.get("proj_size") or 5)).astype(dtype))
        if name == "LSTM":
            arrays.append(rng.normal(size=(n, 4, 5)).astype(dtype))
    s_in, t_in = _pairs(arrays)

    def run(R, m, ins):
        packed = R.pack_padded_sequence(ins[0], lengths, bf, enforce_sorted)
        state = None if len(ins) == 1 else (ins[1] if len(ins) == 2 else (ins[1], ins[2]))
        out, h = m(packed, state)
        assert type(out).__name__ == "PackedSequence"
        padded, _ = R.pad_packed_sequence(out, bf)
        hs = list(h) if isinstance(h, tuple) else [h]
        return [padded] + hs
    s_outs, t_outs = run(SR, sm, s_in), run(TR, tm, t_in)
    outputs_and_grads_match(s_outs, t_outs, s_in, t_in, dtype, rng, (tm, sm), factor=4)
