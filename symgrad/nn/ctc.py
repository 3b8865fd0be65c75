"""``nn.functional.ctc_loss``: the connectionist temporal classification loss, as ATen's
``ctc_loss_cpu`` computes it.

The forward is ATen's alpha recursion in log space over the blank-extended targets
``l'`` (length ``2 L + 1``): ``alpha[t, s] = lse(alpha[t-1, s], alpha[t-1, s-1],
alpha[t-1, s-2] if l'[s] != l'[s-2]) + log_probs[t, l'[s]]`` (each log-sum-exp shifted by
its maximum, 0 when that is -inf), ``nll = -lse(alpha[T-1, 2L], alpha[T-1, 2L-1])``. All
samples run together as tensor operations (one step per time step), a sample's state frozen
once its own input length is reached, so the same code runs eager and under
``symgrad.compile``; the gradient is reverse mode through that recursion (alpha-beta in
effect), a dead state (all its predecessors -inf) passing none.

ATen's backward adds ``exp(log_probs)`` to the gradient of every time step within a
sample's input length (its formula is the gradient of the loss through a ``log_softmax``
written as a gradient with respect to ``log_probs``); this adds the same term, so the
gradients equal PyTorch's. Not the same: for an impossible alignment (infinite loss)
without ``zero_infinity`` PyTorch's gradient is NaN, this one finite."""
from __future__ import annotations

import numpy as np

from ..functions import elementwise as E
from ..functions.common import Tensor, to_tensor
from ..functions.shape import cat, stack
from ..graph import dtypes

__all__ = ["ctc_loss"]

_NEG_INF = float("-inf")


def _lengths(value, name: str):
    """(tensor of int64 lengths, their values when known) of a lengths argument."""
    if isinstance(value, Tensor):
        if value.dtype.category not in ("int", "uint"):
            raise RuntimeError(f"{name} must be integral")
        t = value.reshape(-1).long()
        return t, (None if t._data is None else [int(v) for v in t._data])
    vals = [int(v) for v in (value if isinstance(value, (list, tuple)) else [value])]
    return Tensor._from_array(np.asarray(vals, dtype=np.int64), dtypes.int64), vals


def _lse(terms, dead_value):
    """log(sum(exp(terms))) of tensors of one shape, shifted by their (detached) maximum as
    ATen's (0 where that is -inf); -inf, with no gradient, where every term is -inf."""
    m = terms[0].detach()
    for t in terms[1:]:
        m = E.binary("maximum", m, t.detach())
    dead = m == _NEG_INF
    m = E.where(dead, 0.0, m)
    total = None
    for t in terms:
        e = (t - m).exp()
        total = e if total is None else total + e
    return E.where(dead, dead_value, E.where(dead, 1.0, total).log() + m)


def _checks(lp, targets, il_vals, tl_vals, blank, batched):
    """ATen's argument checks of ctc_loss (eager lengths)."""
    t_max, n, c = lp.shape
    if not 0 <= blank < c:
        raise RuntimeError("blank must be in label range")
    if il_vals is not None and len(il_vals) != n:
        raise RuntimeError("input_lengths must be of size batch_size")
    if tl_vals is not None and len(tl_vals) != n:
        raise RuntimeError("target_lengths must be of size batch_size")
    if tl_vals is not None:
        if targets.dim() == 1 and batched:
            if targets.shape[0] != sum(tl_vals):
                raise RuntimeError(
                    f"Expected tensor to have size {sum(tl_vals)} at dimension 0, but got size "
                    f"{targets.shape[0]} for argument #2 'targets' (while checking arguments "
                    f"for ctc_loss_allocate_outputs)")
        else:
            if targets.shape[0] != n:
                raise RuntimeError(
                    f"Expected tensor to have size {n} at dimension 0, but got size "
                    f"{targets.shape[0]} for argument #2 'targets' (while checking arguments "
                    f"for ctc_loss_allocate_outputs)")
            most = max(tl_vals) if tl_vals else 0
            if targets.shape[1] < most:
                raise RuntimeError(
                    f"Expected tensor to have size at least {most} at dimension 1, but got size "
                    f"{targets.shape[1]} for argument #2 'targets' (while checking arguments "
                    f"for ctc_loss_allocate_outputs)")
    if il_vals is not None:
        for v in il_vals:
            if v > t_max:
                raise RuntimeError(
                    f"Expected input_lengths to have value at most {t_max}, but got value {v} "
                    f"(while checking arguments for ctc_loss_allocate_outputs)")


def _padded_targets(targets, tl, tl_vals, n):
    """(n, L) padded targets of the 1-D concatenated form (L: the longest target)."""
    flat = targets.reshape(-1).long()
    if tl_vals is not None:
        longest = max(tl_vals) if tl_vals else 0
        offsets = np.concatenate([[0], np.cumsum(tl_vals)[:-1]]).astype(np.int64) if n else \
            np.zeros(0, np.int64)
        idx = offsets[:, None] + np.arange(longest, dtype=np.int64)[None, :]
        idx = np.minimum(idx, max(flat.shape[0] - 1, 0))
        if flat.shape[0] == 0:
            return Tensor._from_array(np.zeros((n, longest), np.int64), dtypes.int64)
        return flat[Tensor._from_array(idx, dtypes.int64)]
    longest = flat.shape[0]
    offsets = tl.cumsum(0) - tl
    span = Tensor._from_array(np.arange(longest, dtype=np.int64), dtypes.int64)
    idx = (offsets.unsqueeze(1) + span.unsqueeze(0)).clamp_max(max(longest - 1, 0))
    return flat[idx]


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank: int = 0,
             reduction: str = "mean", zero_infinity: bool = False) -> Tensor:
    """The CTC loss of ``log_probs`` (T, N, C) -- or (T, C) unbatched -- against
    ``targets`` (N, S) padded or 1-D concatenated; ``'mean'`` divides each sample's loss by
    its target length (at least 1), then averages over the batch, as PyTorch."""
    lp = to_tensor(log_probs)
    tg = to_tensor(targets)
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    batched = lp.dim() == 3
    if not batched:
        if lp.dim() != 2:
            raise RuntimeError(f"ctc_loss expects log_probs to be a 2-D or 3-D tensor, got "
                               f"{lp.dim()}-D")
        lp = lp.unsqueeze(1)
        tg = tg.unsqueeze(0)
    il, il_vals = _lengths(input_lengths, "input_lengths")
    tl, tl_vals = _lengths(target_lengths, "target_lengths")
    _checks(lp, tg, il_vals, tl_vals, blank, batched)
    t_max, n, c = lp.shape
    padded = _padded_targets(tg, tl, tl_vals, n) if tg.dim() == 1 else tg.long()
    if tl_vals is not None and padded.shape[1] > (max(tl_vals) if tl_vals else 0):
        padded = padded[:, :max(tl_vals) if tl_vals else 0]
    lmax = padded.shape[1]
    s_len = 2 * lmax + 1
    # the blank-extended labels l' (n, 2 L + 1): blank at even positions
    ext = _interleave(padded, blank, n, lmax)
    s_idx = Tensor._from_array(np.arange(s_len, dtype=np.int64), dtypes.int64)
    valid = s_idx.unsqueeze(0) < (2 * tl + 1).unsqueeze(1)              # (n, S')
    # the skip transition s-2 -> s: s odd, s >= 3 and l'[s] != l'[s-2]
    skip = (_odd(s_len) & (s_idx >= 3)).unsqueeze(0)
    if s_len >= 3:
        differ = cat([ext.new_zeros((n, 2)).bool(), ext[:, 2:] != ext[:, :-2]], 1)
        skip = skip & differ
    emit = lp.gather(2, ext.unsqueeze(0).expand(t_max, n, s_len))    # (T, n, S')
    neg = lp.new_full((n, 1), _NEG_INF)
    first = (s_idx < 2).unsqueeze(0) & valid
    alpha = E.where(first, emit[0], _NEG_INF) if t_max else None
    for t in range(1, t_max):
        a2 = cat([neg, alpha[:, :-1]], 1)
        a3 = E.where(skip, cat([neg, neg, alpha[:, :-2]], 1), _NEG_INF) if s_len >= 3 else None
        step = _lse([alpha, a2] + ([a3] if a3 is not None else []), _NEG_INF) + emit[t]
        step = E.where(valid, step, _NEG_INF)
        alpha = E.where((il > t).unsqueeze(1), step, alpha)
    if t_max == 0:
        nll = lp.new_full((n,), float("inf"))
    else:
        end = (2 * tl).unsqueeze(1)
        last = alpha.gather(1, end).reshape(n)
        before = alpha.gather(1, (end - 1).clamp_min(0)).reshape(n)
        before = E.where(tl > 0, before, _NEG_INF)
        nll = -_lse([last, before], _NEG_INF)
    time_mask = (Tensor._from_array(np.arange(t_max, dtype=np.int64), dtypes.int64)
                 .unsqueeze(1) < il.unsqueeze(0)).to(lp.dtype)          # (T, n)
    extra = (lp.exp() * time_mask.unsqueeze(2)).sum((0, 2))             # ATen's exp(lp) term
    inf = nll == float("inf")
    if zero_infinity:
        nll = E.where(inf, 0.0, nll)
        extra = E.where(inf, 0.0, extra)
    res = nll + (extra - extra.detach())
    if reduction == "mean":
        return (res / tl.to(lp.dtype).clamp_min(1)).mean()
    if reduction == "sum":
        return res.sum()
    return res if batched else res.squeeze(0)


def _odd(s_len: int) -> Tensor:
    return Tensor._from_array(np.arange(s_len) % 2 == 1, dtypes.bool_)


def _interleave(padded: Tensor, blank: int, n: int, lmax: int) -> Tensor:
    """(n, 2 L + 1): the targets at odd positions, ``blank`` at even ones."""
    blanks = padded.new_full((n, lmax), blank)
    pairs = stack([blanks, padded], 2).reshape(n, 2 * lmax)
    return cat([pairs, padded.new_full((n, 1), blank)], 1)
