"""The order PyTorch's CPU ``sort`` (not stable) and ``topk`` give equal values: theirs
is libstdc++'s ``std::sort`` (introsort, insertion sort for 16 elements or fewer: stable
there only) and ``std::nth_element`` / ``std::partial_sort`` on (value, index) pairs, so
among ties the indices come out in an order only those algorithms give. This module
replays them, step for step, on a row's ranks (NaN as PyTorch orders it; -0.0 equal to
0.0), for the rows where a tie can show; every other row keeps numpy's stable order,
which is then the same.

Replayed in Python, so only for rows of up to :data:`SORT_REPLAYED` elements (sort) and
:data:`TOPK_REPLAYED` (topk, linear time): a longer row with ties keeps the stable order
(equal values by index) -- the same values, other indices among equal ones than PyTorch's.

Entry points: :func:`sort_order` and :func:`topk_order` (index arrays along an axis)."""
from __future__ import annotations

import numpy as np

__all__ = ["sort_order", "topk_order", "SORT_REPLAYED", "TOPK_REPLAYED"]

SORT_REPLAYED = 2048        # (a row of 2048 tied elements: ~10 ms)
TOPK_REPLAYED = 16384


def _lg(n: int) -> int:
    return n.bit_length() - 1


# ---- libstdc++ (bits/stl_algo.h, bits/stl_heap.h), on a list of (rank, index) ------------
def std_sort(a: list, lo: int, hi: int) -> None:
    """libstdc++'s ``std::sort`` of ``a[lo:hi]`` in place, by each item's ``[0]`` with ``<``
    (PyTorch's CPU sorts: ties land where its introsort puts them)."""
    if lo != hi:
        _introsort(a, lo, hi, 2 * _lg(hi - lo))
        _final_insertion(a, lo, hi)


def _introsort(a, lo, hi, depth):
    while hi - lo > 16:
        if depth == 0:
            _heap_select(a, lo, hi, hi)
            _sort_heap(a, lo, hi)
            return
        depth -= 1
        cut = _partition_pivot(a, lo, hi)
        _introsort(a, cut, hi, depth)
        hi = cut


def _move_median_to_first(a, result, x, y, z):
    ax, ay, az = a[x][0], a[y][0], a[z][0]
    if ax < ay:
        pick = y if ay < az else (z if ax < az else x)
    else:
        pick = x if ax < az else (z if ay < az else y)
    a[result], a[pick] = a[pick], a[result]


def _partition_pivot(a, lo, hi):
    _move_median_to_first(a, lo, lo + 1, lo + (hi - lo) // 2, hi - 1)
    pivot = a[lo][0]
    first, last = lo + 1, hi
    while True:
        while a[first][0] < pivot:
            first += 1
        last -= 1
        while pivot < a[last][0]:
            last -= 1
        if not first < last:
            return first
        a[first], a[last] = a[last], a[first]
        first += 1


def _insertion(a, lo, hi):
    if lo == hi:
        return
    for i in range(lo + 1, hi):
        if a[i][0] < a[lo][0]:
            v = a[i]
            a[lo + 1:i + 1] = a[lo:i]
            a[lo] = v
        else:
            _linear_insert(a, i)


def _linear_insert(a, last):
    v = a[last]
    key = v[0]
    nxt = last - 1
    while key < a[nxt][0]:
        a[last] = a[nxt]
        last = nxt
        nxt -= 1
    a[last] = v


def _final_insertion(a, lo, hi):
    if hi - lo > 16:
        _insertion(a, lo, lo + 16)
        for i in range(lo + 16, hi):
            _linear_insert(a, i)
    else:
        _insertion(a, lo, hi)


def _adjust_heap(a, first, hole, n, v):
    top = child = hole
    while child < (n - 1) // 2:
        child = 2 * (child + 1)
        if a[first + child][0] < a[first + child - 1][0]:
            child -= 1
        a[first + hole] = a[first + child]
        hole = child
    if n % 2 == 0 and child == (n - 2) // 2:
        child = 2 * (child + 1)
        a[first + hole] = a[first + child - 1]
        hole = child - 1
    parent = (hole - 1) // 2
    while hole > top and a[first + parent][0] < v[0]:
        a[first + hole] = a[first + parent]
        hole = parent
        parent = (hole - 1) // 2
    a[first + hole] = v


def _make_heap(a, lo, hi):
    n = hi - lo
    if n < 2:
        return
    parent = (n - 2) // 2
    while True:
        _adjust_heap(a, lo, parent, n, a[lo + parent])
        if parent == 0:
            return
        parent -= 1


def _pop_heap(a, lo, hi, result):
    v = a[result]
    a[result] = a[lo]
    _adjust_heap(a, lo, 0, hi - lo, v)


def _heap_select(a, lo, mid, hi):
    _make_heap(a, lo, mid)
    for i in range(mid, hi):
        if a[i][0] < a[lo][0]:
            _pop_heap(a, lo, mid, i)


def _sort_heap(a, lo, hi):
    while hi - lo > 1:
        hi -= 1
        _pop_heap(a, lo, hi, hi)


def _nth_element(a, lo, nth, hi):
    if lo == hi or nth == hi:
        return
    depth = 2 * _lg(hi - lo)
    while hi - lo > 3:
        if depth == 0:
            _heap_select(a, lo, nth + 1, hi)
            a[lo], a[nth] = a[nth], a[lo]
            return
        depth -= 1
        cut = _partition_pivot(a, lo, hi)
        if cut <= nth:
            lo = cut
        else:
            hi = cut
    _insertion(a, lo, hi)


# ---- rows ----------------------------------------------------------------------------------
def _ranks(rows: np.ndarray, descending: bool) -> np.ndarray:
    """Integer keys ordered as PyTorch's comparator orders the values (ascending: NaN
    last; descending: NaN first), equal for equal values (NaN equal to NaN)."""
    flat = rows.reshape(-1)
    if flat.dtype.kind == "f":
        nan = np.isnan(flat)
        vals = np.where(nan, 0, flat)
        _, r = np.unique(vals, return_inverse=True)
        r = np.where(nan, r.max(initial=0) + 1, r)
    else:
        _, r = np.unique(flat, return_inverse=True)
    r = r.reshape(rows.shape).astype(np.int64)
    return -r if descending else r


def _rows(x: np.ndarray, axis: int) -> np.ndarray:
    return np.moveaxis(x, axis, -1).reshape(-1, x.shape[axis]) if x.ndim else x.reshape(1, 1)


def _back(rows: np.ndarray, x: np.ndarray, axis: int) -> np.ndarray:
    moved = np.moveaxis(np.empty(x.shape, np.int8), axis, -1).shape
    return np.moveaxis(rows.reshape(moved), -1, axis)


def sort_order(x: np.ndarray, order: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    """PyTorch's ``sort(stable=False)`` indices along `axis`, from `order`, numpy's stable
    order (the same where a row has no tie or 16 elements or fewer)."""
    n = x.shape[axis] if x.ndim else 1
    if n <= 16 or n > SORT_REPLAYED:
        return order
    keys = _ranks(_rows(x, axis), descending)
    idx = _rows(order, axis)
    ranked = np.take_along_axis(keys, idx, axis=1)
    tied = np.flatnonzero((ranked[:, 1:] == ranked[:, :-1]).any(axis=1))
    if not tied.size:
        return order
    idx = idx.copy()
    for r in tied:
        a = list(zip(keys[r].tolist(), range(n)))
        std_sort(a, 0, n)
        idx[r] = [i for _, i in a]
    return _back(idx, order, axis)


def topk_order(x: np.ndarray, order: np.ndarray, axis: int, k: int, largest: bool,
               sorted_: bool) -> np.ndarray:
    """An order whose first `k` along `axis` are PyTorch's ``topk`` indices (`order`:
    numpy's stable order by the same comparator, kept where that is the same):
    ``partial_sort`` when ``k * 64 <= n``, else
    ``nth_element`` then ``sort`` of the first ``k - 1`` when `sorted_`."""
    n = x.shape[axis] if x.ndim else 1
    if k == 0 or n <= 1 or n > TOPK_REPLAYED:
        return order
    keys = _ranks(_rows(x, axis), largest)
    idx = _rows(order, axis)
    ranked = np.take_along_axis(keys, idx[:, :min(k + 1, n)], axis=1)
    # (the first k and their indices are unique unless two of the first k + 1 tie)
    tied = np.flatnonzero((ranked[:, 1:] == ranked[:, :-1]).any(axis=1))
    if not tied.size and sorted_:
        return order
    rows = tied if sorted_ else range(idx.shape[0])
    idx = idx.copy()
    for r in rows:
        a = list(zip(keys[r].tolist(), range(n)))
        if k * 64 <= n:
            _heap_select(a, 0, k, n)
            _sort_heap(a, 0, k)
        else:
            _nth_element(a, 0, k - 1, n)
            if sorted_:
                std_sort(a, 0, k - 1)
        idx[r] = [i for _, i in a]
    return _back(idx, order, axis)
