"""The indices PyTorch's selecting CPU kernels pick, ties and NaN included (the values are
gathered at them by :mod:`symgrad.functions.order`): ``order_index``, which element of
each row along ``axis`` is the median, NaN-ignoring median, k-th smallest or mode; and
``running_index``, where the running maximum / minimum (``cummax`` / ``cummin``) of each
prefix is; ``searchsorted``, where values would be inserted into sorted rows.

PyTorch's choices, reproduced here:

* ``median``: the ``(n - 1) // 2``-th element of the stable order (``std::nth_element``
  ordered by (value, index)); a row holding NaN gives its first NaN.
* ``nanmedian``: the same over the row's ``c`` non-NaN elements, position ``(c - 1) // 2``
  (a row of NaN only: its first element).
* ``kth``: the ``k``-th element of the quickselect of ATen's ``quick_select_template``
  (median-of-three pivot, NaN larger than every number), replayed on rows where the k-th
  value is tied; elsewhere the index of that value is unique.
* ``mode``: the most frequent value (the smallest of equally frequent ones) and the index
  that ends its run after libstdc++'s ``std::sort`` of (value, index) pairs compared by
  value (introsort: unstable past 16 elements), replayed on rows with repeated values.

* ``running_index``: the latest index whose element is >= (cummax; <= for cummin) the
  running extreme, or is NaN (a NaN stays the running value until the next NaN).

Not differentiable (their results are indices); compiled code runs these numpy rules.
"""
from __future__ import annotations

import math

import numpy as np

from ..graph import dtypes
from .define import primitive
from .tie_order import std_sort

KINDS = ("median", "nanmedian", "kth", "mode")


def _shape(av, *, axis, kind, k):
    shape = list(av[0][0])
    shape[axis] = 1
    return tuple(shape), dtypes.int64


def _numpy(x, *, axis, kind, k):
    rows = np.moveaxis(np.asarray(x), axis, -1)
    flat = rows.reshape(-1, rows.shape[-1])
    out = _ROWS[kind](flat, k)
    return np.moveaxis(out.reshape(rows.shape[:-1] + (1,)), -1, axis).astype(np.int64)


def _isnan(a):
    return np.isnan(a) if a.dtype.kind == "f" else np.zeros(a.shape, bool)


def _median(flat, k):
    n = flat.shape[-1]
    order = np.argsort(flat, axis=-1, kind="stable")          # NaN last
    out = order[:, (n - 1) // 2]
    nan = _isnan(flat)
    has = nan.any(-1)
    return np.where(has, nan.argmax(-1), out)


def _nanmedian(flat, k):
    order = np.argsort(flat, axis=-1, kind="stable")
    count = flat.shape[-1] - _isnan(flat).sum(-1)
    pos = np.maximum((count - 1) // 2, 0)
    return np.take_along_axis(order, pos[:, None], -1)[:, 0]


def _kth(flat, k):
    order = np.argsort(flat, axis=-1, kind="stable")
    out = order[:, k].copy()
    value = np.take_along_axis(flat, out[:, None], -1)
    same = (flat == value) | (_isnan(flat) & _isnan(value))
    for r in np.flatnonzero(same.sum(-1) > 1):       # a tied k-th value: replay the select
        out[r] = _quick_select(list(flat[r]), k)
    return out


def _gt_or_nan(a, b):
    return (math.isnan(a) and not math.isnan(b)) or a > b


def _quick_select(vals, k):
    """ATen's quick_select_template on one row; the original index of element k."""
    vals = [float(v) for v in vals]
    idx = list(range(len(vals)))

    def swap(i, j):
        vals[i], vals[j] = vals[j], vals[i]
        idx[i], idx[j] = idx[j], idx[i]
    lo, hi = 0, len(vals) - 1
    while True:
        if hi <= lo:
            return idx[k]
        if hi == lo + 1:
            if _gt_or_nan(vals[lo], vals[hi]):
                swap(lo, hi)
            return idx[k]
        p = lo + (hi - lo) // 2
        swap(p, lo + 1)
        if _gt_or_nan(vals[lo + 1], vals[hi]):
            swap(lo + 1, hi)
        if _gt_or_nan(vals[lo], vals[hi]):
            swap(lo, hi)
        if _gt_or_nan(vals[lo + 1], vals[lo]):
            swap(lo + 1, lo)
        i, j, piv = lo + 1, hi, vals[lo]
        while True:
            i += 1
            while _gt_or_nan(piv, vals[i]):
                i += 1
            j -= 1
            while _gt_or_nan(vals[j], piv):
                j -= 1
            if j < i:
                break
            swap(i, j)
        swap(lo, j)
        if j <= k:
            lo = i
        if j >= k:
            hi = j - 1


def _mode(flat, k):
    out = np.empty(flat.shape[0], np.int64)
    for r, row in enumerate(flat):
        if row.size and np.unique(row).size == row.size and not _isnan(row).any():
            out[r] = int(np.argmin(row))         # all distinct: the smallest, once
        else:
            out[r] = _mode_row(row)
    return out


def _mode_row(row):
    """ATen's CPU mode on one row: std::sort of (value, index) by value, then the longest
    run (the first of equally long ones); the index that ends it."""
    pairs = [(float(v) if row.dtype.kind == "f" else int(v), i) for i, v in enumerate(row)]
    std_sort(pairs, 0, len(pairs))        # (by value: a[0] < b[0], as ATen's comparator)
    best, best_i, run = 0, 0, 0
    for i, (v, j) in enumerate(pairs):
        run += 1
        if i == len(pairs) - 1 or v != pairs[i + 1][0]:
            if run > best:
                best, best_i = run, j
            run = 0
    return best_i


_ROWS = {"median": _median, "nanmedian": _nanmedian, "kth": _kth, "mode": _mode}

primitive("order_index", 1, _shape, _numpy, differentiable=False, family="other")


def _running_shape(av, *, axis, kind):
    return av[0][0], dtypes.int64


def _running_numpy(x, *, axis, kind):
    """ATen's cummax_cummin_helper: element i takes over when it is NaN, or the running
    value is not NaN and ``x_i >= run`` (cummin: ``<=``); the index of the last
    take-over."""
    rows = np.moveaxis(np.asarray(x), axis, 0)
    n = rows.shape[0]
    if n == 0:
        return np.zeros(np.shape(x), np.int64)
    acc = np.maximum if kind == "max" else np.minimum
    run = acc.accumulate(rows, axis=0)             # NaN propagates, as the running value
    prev = np.concatenate([rows[:1], run[:-1]], axis=0)
    nan_x, nan_prev = _isnan(rows), _isnan(prev)
    better = rows >= prev if kind == "max" else rows <= prev
    takes = nan_x | (~nan_prev & better)
    pos = np.arange(n).reshape((n,) + (1,) * (rows.ndim - 1))
    idx = np.maximum.accumulate(np.where(takes, pos, 0), axis=0)
    return np.moveaxis(idx, 0, axis).astype(np.int64)


primitive("running_index", 1, _running_shape, _running_numpy, differentiable=False,
          family="other")


def _searchsorted_shape(av, *, right, out_int32):
    return av[1][0], dtypes.int32 if out_int32 else dtypes.int64


def _searchsorted_numpy(seq, values, *, right, out_int32):
    """For each value, the index in its row of ``seq`` (sorted along the last dim; a 1-D
    ``seq`` serves every value) where it would be inserted: before equal elements, or
    after them with ``right``."""
    side = "right" if right else "left"
    values = np.asarray(values)
    if np.ndim(seq) == 1:
        out = np.searchsorted(seq, values, side=side)
    else:
        rows = np.reshape(seq, (-1, np.shape(seq)[-1]))
        vals = values.reshape(rows.shape[0], -1)
        out = np.stack([np.searchsorted(r, v, side=side) for r, v in zip(rows, vals)])
        out = out.reshape(values.shape)
    return np.asarray(out, np.int32 if out_int32 else np.int64)


primitive("searchsorted", 2, _searchsorted_shape, _searchsorted_numpy, differentiable=False,
          family="other")
