"""The statuses a native kernel returns and the Python errors they become.

A fallible step writes an ``i64[4]`` error record and returns its status:

* ``INDEX`` (1) -- an index kernel (take, gather, scatter, ...) read an index outside
  ``[-n, n)``; record ``(step, value, axis, n)``: numpy's ``IndexError`` text;
* ``MEMORY`` (2) -- the arena of temporaries could not be allocated;
* ``CHECK`` (3) -- an ``index_check`` step (PyTorch's bounds check, no wrapping of
  negative indices) found an index outside ``[0, n)``; record ``(step, value, 0, 0)``.
  The error is the step node's own numpy rule run on that one value, so compiled code
  raises the type and text eager code does (one source of truth for PyTorch's words).

A kernel that fails has touched no memory out of range: every index is checked before
it is used.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from symgrad.graph.interpret import run_node

__all__ = ["INDEX", "MEMORY", "CHECK", "raise_for"]

INDEX, MEMORY, CHECK = 1, 2, 3


def raise_for(status: int, err, name: str, step_node: Callable[[int], object],
              memory: str = "could not allocate its temporaries") -> None:
    """Raise the error of a non-zero ``status`` with error record ``err`` (nothing for
    0). ``step_node(i)``: the node step ``i`` computes (needed for ``CHECK`` only);
    ``memory``: what failed to allocate, for ``MEMORY``."""
    if not status:
        return
    if status == INDEX:
        _, value, axis, size = err
        raise IndexError(f"index {value} is out of bounds for dimension {axis} with size {size}")
    if status == MEMORY:
        raise MemoryError(f"{name}: {memory}")
    if status == CHECK:
        node = step_node(int(err[0]))
        run_node(node, [np.array([err[1]], node.dtype.np)])
        raise AssertionError(f"{name}: index {err[1]} reported out of range by native code "
                             f"passes {node.op}'s own check")
    raise RuntimeError(f"{name}: native code failed with status {status}")
