"""The arithmetic of recurrent layers: one step of the Elman (tanh / relu), LSTM (with
an optional projection) and GRU cells, and a whole layer run over time, padded
(``symgrad.scan``: one rolled loop under ``symgrad.compile``, differentiated as a scan)
or packed (a Python loop over the shrinking batch of a ``PackedSequence``).

Everything is written with tensor ops (``linear``, ``sigmoid``, ``tanh``, ...), so the
gradients are the symbolic ones of those ops.  The step formulas follow ATen's CPU cells
(``aten/src/ATen/native/RNN.cpp``): the input projection of a whole layer is computed
once for every time step; the GRU's new state is ``n + z * (h - n)``.
"""
from __future__ import annotations

from typing import Callable, Sequence

from ..functions.control_flow import scan
from ..functions.shape import cat, stack
from . import functional as F

__all__ = ["gate_count", "cell_step", "run_layer", "run_packed_layer"]

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def gate_count(mode: str) -> int:
    """How many gate blocks a cell of ``mode`` stacks in its weight matrices."""
    return _GATES[mode]


def cell_step(mode: str, xg, state, w_hh, b_hh, w_hr=None):
    """One step of a cell of ``mode`` given the input's projection ``xg``
    (``x W_ihᵀ + b_ih``): returns the new state (``(h, c)`` for an LSTM, ``h`` else)."""
    if mode == "LSTM":
        h, c = state
        gates = F.linear(h, w_hh, b_hh) + xg
        i, f, g, o = gates.chunk(4, 1)
        c = F.sigmoid(f) * c + F.sigmoid(i) * F.tanh(g)
        h = F.sigmoid(o) * F.tanh(c)
        if w_hr is not None:
            h = F.linear(h, w_hr)
        return h, c
    hg = F.linear(state, w_hh, b_hh)
    if mode == "GRU":
        xr, xz, xn = xg.chunk(3, 1)
        hr, hz, hn = hg.chunk(3, 1)
        r = F.sigmoid(xr + hr)
        z = F.sigmoid(xz + hz)
        n = F.tanh(xn + r * hn)
        return n + z * (state - n)
    pre = xg + hg
    return F.tanh(pre) if mode == "RNN_TANH" else F.relu(pre)


def _output(mode: str, state):
    return state[0] if mode == "LSTM" else state


def run_layer(mode: str, x, state, weights: Sequence, reverse: bool = False):
    """One direction of one layer over the time-major ``x`` (T, B, F): returns the
    outputs (T, B, H) and the final state.  ``weights`` are ``(w_ih, w_hh, b_ih, b_hh,
    w_hr)`` with None for the absent ones."""
    w_ih, w_hh, b_ih, b_hh, w_hr = weights
    xg = F.linear(x, w_ih, b_ih)

    def body(carry, xg_t):
        new = cell_step(mode, xg_t, carry, w_hh, b_hh, w_hr)
        return new, _output(mode, new)
    return _swap(scan(body, state, xg, reverse=reverse))


def _swap(pair):
    final, ys = pair
    return ys, final


def _rows(state, lo: int, hi: int):
    return tuple(s[lo:hi] for s in state) if isinstance(state, tuple) else state[lo:hi]


def _join(parts: list):
    if isinstance(parts[0], tuple):
        return tuple(cat([p[k] for p in parts], 0) for k in range(len(parts[0])))
    return cat(parts, 0)


def run_packed_layer(mode: str, data, batch_sizes: Sequence[int], state, weights: Sequence,
                     reverse: bool = False):
    """One direction of one layer over packed ``data`` (sum(batch_sizes), F), time step
    ``t`` holding the first ``batch_sizes[t]`` sequences: returns the packed outputs and
    the final state of every sequence (at its own last step; at its first step when
    ``reverse``)."""
    w_ih, w_hh, b_ih, b_hh, w_hr = weights
    xg = F.linear(data, w_ih, b_ih)
    starts = [0]
    for b in batch_sizes:
        starts.append(starts[-1] + b)
    step: Callable = lambda t, s: cell_step(mode, xg[starts[t]:starts[t + 1]], s, w_hh,
                                            b_hh, w_hr)
    outs: list = [None] * len(batch_sizes)
    if not reverse:
        cur, ended = state, []
        for t, b in enumerate(batch_sizes):
            have = _output(mode, cur).shape[0]
            if b < have:                       # sequences b.. ended at the previous step
                ended.append(_rows(cur, b, have))
                cur = _rows(cur, 0, b)
            cur = step(t, cur)
            outs[t] = _output(mode, cur)
        final = _join([cur] + ended[::-1])
    else:
        full = state
        cur = _rows(full, 0, batch_sizes[-1])
        for t in range(len(batch_sizes) - 1, -1, -1):
            b, have = batch_sizes[t], _output(mode, cur).shape[0]
            if b > have:                       # sequences have.. start (from the end) here
                cur = _join([cur, _rows(full, have, b)])
            cur = step(t, cur)
            outs[t] = _output(mode, cur)
        final = cur
    return cat(outs, 0), final


def stack_states(states: list, lstm: bool):
    """The per-layer-and-direction final states stacked as PyTorch's ``h_n`` (and
    ``c_n``)."""
    if lstm:
        return stack([s[0] for s in states], 0), stack([s[1] for s in states], 0)
    return stack(states, 0)
