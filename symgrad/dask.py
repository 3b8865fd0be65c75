"""Data beyond one process: the value and gradient of a loss summed over rows, computed
chunk by chunk on Dask (``pip install symgrad[distributed]``).

:func:`value_and_grad` returns a function taking the loss's arguments where the data
arguments are ``dask.array`` arrays or ``dask.dataframe`` frames partitioned by rows: each
row chunk becomes one task calling the compiled ``symgrad.value_and_grad(loss)`` (the
compiled function travels to each worker once, as one piece of data every task uses,
and compiles there from its disk cache), and the chunks' results are added in a binary
tree of tasks.  The loss must be a sum over rows (a mean: divide by the total row count
yourself), so the total equals the single-process result.  Other arguments (the
parameters) are sent once and shared by every task.  Runs on the current Dask scheduler
(a ``distributed.Client`` if one is active).

Compiled functions are ordinary picklable callables, so ``client.submit(f, x)``,
``dask.array.map_blocks(f, X)`` and ``dask.delayed(f)(x)`` work unchanged too.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from .compiler import value_and_grad as _compiled_value_and_grad
from .graph import pytree

__all__ = ["value_and_grad"]


def _dask():
    try:
        import dask
        import dask.array
    except ImportError:
        raise ImportError("symgrad.dask needs Dask: pip install 'symgrad[distributed]'") from None
    return dask


def _is_frame(v) -> bool:
    return hasattr(v, "to_dask_array") and hasattr(v, "npartitions")


def _is_dask(v) -> bool:
    return _is_frame(v) or type(v).__module__.startswith("dask.array")


def value_and_grad(loss: Callable, argnums: int | Sequence[int] = 0, *,
                   backend: str | None = None) -> Callable:
    """``(value, gradients)`` of ``loss`` (a sum over the rows of its Dask arguments),
    computed per row chunk and summed; gradients w.r.t. ``argnums`` as in
    :func:`symgrad.value_and_grad`.

    >>> import dask.array as da, numpy as np, symgrad.dask
    >>> X = da.from_array(np.arange(8.0).reshape(4, 2), chunks=(1, 2))
    >>> v, g = symgrad.dask.value_and_grad(lambda w, x: ((x @ w) ** 2).sum())(np.ones(2), X)
    >>> float(v), g.tolist()
    (276.0, [248.0, 304.0])
    """
    compiled = _compiled_value_and_grad(loss, argnums=argnums, backend=backend)

    def run(*args):
        dask = _dask()
        data = [i for i, a in enumerate(args) if _is_dask(a)]
        if not data:
            raise TypeError("symgrad.dask.value_and_grad: no argument is a dask array or "
                            "dataframe (call symgrad.value_and_grad for in-memory data)")
        blocks = _row_blocks([args[i] for i in data])
        shared = {i: dask.delayed(args[i], traverse=False) for i in range(len(args))
                  if i not in data}
        fn = dask.delayed(compiled, traverse=False)       # one key: sent once per worker
        parts = []
        for k in range(len(blocks[0])):
            row = dict(zip(data, (b[k] for b in blocks)))
            call = [row[i] if i in row else shared[i] for i in range(len(args))]
            parts.append(dask.delayed(_call, pure=True)(fn, *call))
        return dask.compute(_tree_sum(dask, parts))[0]
    run.__name__ = f"dask_value_and_grad_{getattr(loss, '__name__', 'loss')}"
    return run


def _row_blocks(values) -> list[list]:
    """Per argument, its row chunks as delayed numpy arrays, aligned across arguments."""
    arrays = []
    for v in values:
        if _is_frame(v):
            v = v.to_dask_array(lengths=True)
        if v.ndim > 1:                          # chunked along rows only
            v = v.rechunk({i: -1 for i in range(1, v.ndim)})
        arrays.append(v)
    rows = arrays[0].chunks[0]
    if any(np.isnan(r) for r in rows):
        raise ValueError("symgrad.dask: row chunk sizes are unknown (compute them first, "
                         "e.g. to_dask_array(lengths=True))")
    out = []
    for v in arrays:
        if v.shape[0] != arrays[0].shape[0]:
            raise ValueError(f"symgrad.dask: data arguments have {arrays[0].shape[0]} and "
                             f"{v.shape[0]} rows; they must have the same rows")
        if v.chunks[0] != rows:
            v = v.rechunk({0: rows})
        out.append(list(v.to_delayed().reshape(-1)))
    return out


def _call(fn, *args):
    value, grads = fn(*args)
    return np.asarray(value), pytree.unflatten(pytree.flatten(grads)[1],
                                               [np.asarray(g) for g in pytree.flatten(grads)[0]])


def _add(a, b):
    la, sa = pytree.flatten(a)
    lb, _ = pytree.flatten(b)
    return pytree.unflatten(sa, [x + y for x, y in zip(la, lb)])


def _tree_sum(dask, parts: list) -> Any:
    while len(parts) > 1:
        nxt = [dask.delayed(_add, pure=True)(parts[i], parts[i + 1])
               for i in range(0, len(parts) - 1, 2)]
        if len(parts) % 2:
            nxt.append(parts[-1])
        parts = nxt
    return parts[0]
