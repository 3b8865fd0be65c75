"""Which calls of a compiled function must run as written because their inputs alias.

A compiled program reads each input once, as it was when the call began; an input the
call writes in place (an argument, a closed-over tensor) that shares memory with another
input it reads would be read stale -- in torch the second read sees the write. Such a
call runs uncompiled (:func:`aliased`), as does a trace that mistook a non-leaf argument
for a leaf (:func:`non_leaf_written`). Owners' ids are kept per cache entry, so a
training step pays a few id lookups when nothing aliases.
"""
from __future__ import annotations

import operator

import numpy as np

from ..functions.inplace import LEAF_ERRORS
from ..tensor import Tensor
from .trace import foreign_array

__all__ = ["aliased", "non_leaf_written"]


def _array_of(v):
    """The memory an argument leaf reads (None: a Python number)."""
    if isinstance(v, Tensor):
        return v._data
    if isinstance(v, np.ndarray):
        return v
    if hasattr(v, "__dlpack__"):
        return foreign_array(v)
    return None


def _owner(a: np.ndarray):
    return a if a.base is None else a.base


def _closure_owners(entry) -> set:
    """The ids of the arrays owning the memory of the entry's closed-over tensors (kept
    while those tensors keep their arrays: a training step's call checks a few ids)."""
    datas = [t._data for t in entry.closure]
    kept = entry.alias_owners
    if kept is None or len(kept[0]) != len(datas) or not all(map(operator.is_, kept[0],
                                                                  datas)):
        kept = entry.alias_owners = (datas, {id(_owner(a)) for a in datas})
    return kept[1]


def aliased(entry, effects, leaves) -> bool:
    """Whether an input the call writes in place (an argument, a closed-over tensor)
    shares memory with another input it reads, an argument among the two (aliasing
    between closed-over tensors is traced: see Tracer._view_of_written): the same tensor
    passed twice, a view of another argument, an argument that is (a view of) a
    closed-over tensor."""
    args = [_array_of(v) for v in leaves]
    owners = [id(_owner(a)) for a in args if a is not None]
    if not owners:
        return False
    closure_owners = _closure_owners(entry)
    if len(set(owners)) == len(owners) and not any(o in closure_owners for o in owners):
        return False            # (no argument shares an owner with another input)
    written = {i for i in effects.arg_writes}
    pairs = [(a, i in written) for i, a in enumerate(args) if a is not None]
    state = [t._data for t in effects.writes]
    others = [t._data for t in entry.closure]
    by_owner: dict = {}
    for a, w in pairs:
        by_owner.setdefault(id(_owner(a)), []).append((a, w, True))
    for a in others:
        w = any(a is s for s in state)
        hit = by_owner.get(id(_owner(a)))
        if hit is not None:
            hit.append((a, w, False))
    for group in by_owner.values():
        for j, (a, wa, arg_a) in enumerate(group):
            for b, wb, arg_b in group[j + 1:]:
                if (wa or wb) and (arg_a or arg_b) and np.may_share_memory(a, b):
                    return True
    return False


def non_leaf_written(error: RuntimeError, leaves) -> bool:
    """Whether a trace's ``error`` is the leaf in-place error while an argument is a
    non-leaf requiring grad (which the trace's stand-in took for a leaf)."""
    return str(error) in LEAF_ERRORS and any(
        isinstance(v, Tensor) and v.grad_fn is not None for v in leaves)
