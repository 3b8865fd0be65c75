"""Structured loops with JAX's semantics: :func:`scan`, :func:`fori_loop`,
:func:`while_loop` (pytree carries).

Eagerly they run as Python loops over tensors (so the autograd tape records every step,
as a hand-written loop would).  Inside a trace (``symgrad.compile``, ``grad``, ...) the
body is traced once into a sub-program and the loop becomes one node
(:mod:`symgrad.ops.loops`): tracing, differentiating and compiling cost the same for 10
steps or 10,000, and reverse mode is a reverse loop.  Values the body uses from outside
(weights, other traced values) become operands of the loop node.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .. import dispatch
from ..graph import pytree
from ..ops import loops as L
from ..tensor import Tensor
from .creation import arange, as_tensor, empty
from .shape import stack
from .subtrace import finish_body, node_of, trace_body

if TYPE_CHECKING:
    from collections.abc import Callable
    from ..types import PyTree

__all__ = ["scan", "fori_loop", "while_loop"]


# ---- shared helpers -------------------------------------------------------------------------
def _leaf_tensor(v, what: str) -> Tensor:
    if isinstance(v, Tensor):
        return v
    if isinstance(v, (bool, int, float, np.number, np.ndarray, np.bool_)):
        return as_tensor(v)
    raise TypeError(f"{what}: expected tensors, numbers or numpy arrays as leaves, got "
                    f"{type(v).__name__}")


def _aval(t: Tensor):
    return tuple(t.shape), t.dtype


def _type(aval) -> str:
    shape, dt = aval
    return f"{dt.name}[{','.join(map(str, shape))}]"


def _check_carry(fname: str, in_struct, in_avals, out_struct, out_leaves) -> list[Tensor]:
    """The body's new carry as tensors, or JAX's error when its structure or types differ
    from the carry it was given."""
    if out_struct != in_struct:
        raise TypeError(f"{fname} carry input and carry output must have the same pytree "
                        f"structure, but they differ: the input carry is "
                        f"{_describe(in_struct)} and the output carry is "
                        f"{_describe(out_struct)}")
    out = [_leaf_tensor(v, f"{fname} carry output") for v in out_leaves]
    paths = pytree.leaf_paths(in_struct, "carry")
    for path, a, t in zip(paths, in_avals, out):
        b = _aval(t)
        if tuple(a[0]) != tuple(b[0]) or a[1] is not b[1]:
            what = "shapes" if tuple(a[0]) != tuple(b[0]) else "dtypes"
            raise TypeError(
                f"{fname} carry input and carry output must have equal types, but they "
                f"differ:\n\nThe input carry {path} has type {_type(a)} but the "
                f"corresponding output carry component has type {_type(b)}, so the {what} "
                "do not match.\n\nRevise the function so that all output types match the "
                "corresponding input types.")
    return out


def _describe(struct) -> str:
    return repr(pytree.unflatten(struct, ["*"] * pytree.num_leaves(struct)))


def _tracing(leaves) -> bool:
    """Whether the loop is inside a trace (then it becomes a node)."""
    if dispatch._lifter[0] is not None:
        return True
    return any(isinstance(v, Tensor) and v._data is None for v in leaves)


# ---- scan -------------------------------------------------------------------------------------
def scan(f: Callable[[PyTree, PyTree], tuple[PyTree, PyTree]], init: PyTree, xs: PyTree = None,
         length: int | None = None, reverse: bool = False,
         unroll: int = 1) -> tuple[PyTree, PyTree]:
    """Scan ``f`` over the leading axis of ``xs`` while carrying state (``jax.lax.scan``):

    ``f(carry, x) -> (carry, y)``; returns ``(final carry, ys)`` with the ``y`` of every
    step stacked along a new leading axis.  ``xs`` is a pytree of tensors (or None with
    ``length``); ``reverse=True`` scans from the end (``ys`` keep the order of ``xs``).
    The carry's structure, shapes and dtypes must stay the same from step to step.

    >>> import symgrad
    >>> c, ys = symgrad.scan(lambda c, x: (c + x, c * x), symgrad.tensor(0.0),
    ...                      symgrad.tensor([1.0, 2.0, 3.0]))
    >>> c, ys
    (tensor(6.), tensor([0., 2., 9.]))
    """
    if not callable(f):
        raise TypeError(f"scan: f must be callable, got {type(f).__name__}")
    init_leaves, init_struct = pytree.flatten(init)
    init_t = [_leaf_tensor(v, "scan init") for v in init_leaves]
    xs_leaves, xs_struct = pytree.flatten(xs)
    xs_t = [_leaf_tensor(v, "scan xs") for v in xs_leaves]
    T = _scan_length(xs_t, length)
    carry_avals = [_aval(t) for t in init_t]
    x_avals = [(tuple(t.shape[1:]), t.dtype) for t in xs_t]
    if _tracing(init_t + xs_t) or T == 0:
        return _scan_traced(f, init_struct, init_t, xs_struct, xs_t, T, reverse,
                            carry_avals, x_avals, eager=not _tracing(init_t + xs_t))
    carry = init_t
    ys_steps: list = [None] * T
    y_struct = None
    for t in (range(T - 1, -1, -1) if reverse else range(T)):
        x_t = pytree.unflatten(xs_struct, [x[t] for x in xs_t])
        out = f(pytree.unflatten(init_struct, carry), x_t)
        new_struct, y_leaves, y_st = _split_pair(out)
        carry = _check_carry("scan body function", init_struct, carry_avals, new_struct[0],
                             new_struct[1])
        if y_struct is None:
            y_struct = y_st
        elif y_st != y_struct:
            raise TypeError("scan body function must return ys of the same structure at "
                            "every step")
        ys_steps[t] = [_leaf_tensor(v, "scan y") for v in y_leaves]
    ys = [stack([step[j] for step in ys_steps]) for j in range(len(ys_steps[0]))]
    return pytree.unflatten(init_struct, carry), pytree.unflatten(y_struct, ys)


def _split_pair(out):
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        raise TypeError(f"scan body output must be a pair, got {type(out).__name__}")
    c_leaves, c_struct = pytree.flatten(out[0])
    y_leaves, y_struct = pytree.flatten(out[1])
    return (c_struct, c_leaves), y_leaves, y_struct


def _scan_length(xs_t, length) -> int:
    sizes = []
    for t in xs_t:
        if t.dim() == 0:
            raise ValueError("scan got value with no leading axis to scan over: "
                             f"ShapedArray({t.dtype.name}[])")
        sizes.append(t.shape[0])
    if length is not None:
        if not isinstance(length, (int, np.integer)) or isinstance(length, bool) or length < 0:
            raise ValueError(f"scan: length must be a non-negative int, got {length!r}")
        if any(s != length for s in sizes):
            raise ValueError(f"scan got `length` argument of {length} which disagrees with "
                             f"leading axis sizes {sizes}.")
        return int(length)
    if not sizes:
        raise ValueError("scan got no values to scan over and `length` not provided.")
    if len(set(sizes)) > 1:
        raise ValueError("scan got values with different leading axis sizes: "
                         + ", ".join(map(str, sizes)) + ".")
    return sizes[0]


def _scan_traced(f, init_struct, init_t, xs_struct, xs_t, T, reverse, carry_avals,
                 x_avals, eager: bool):
    inputs, out, cap = trace_body(f, [init_struct, xs_struct], [carry_avals, x_avals],
                                   ["c", "x"])
    new_struct, y_leaves, y_struct = _split_pair(out)
    carry_out = _check_carry("scan body function", init_struct, carry_avals, new_struct[0],
                             new_struct[1])
    out_nodes = [node_of(v, cap) for v in carry_out] + [node_of(v, cap) for v in y_leaves]
    body, closures = finish_body(inputs, out_nodes, cap)
    m = len(init_t)
    if eager and T == 0:
        # nothing to run: the carry as given, empty stacks of the body's result types
        ys = [empty((0,) + tuple(n.shape), dtype=n.dtype) for n in out_nodes[m:]]
        return pytree.unflatten(init_struct, init_t), pytree.unflatten(y_struct, ys)
    res = L.loop_outputs(init_t + xs_t + closures, body=body, length=T, reverse=bool(reverse),
                         n_carry=m, n_xs=len(xs_t))
    return pytree.unflatten(init_struct, res[:m]), pytree.unflatten(y_struct, res[m:])


# ---- fori_loop -----------------------------------------------------------------------------
def _static_int(v):
    if isinstance(v, (bool, np.bool_)):
        return None
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, Tensor) and v._data is not None and v.dim() == 0 \
            and not v.dtype.is_floating_point and dispatch._lifter[0] is None:
        return int(v._data)
    return None


def fori_loop(lower: int | Tensor, upper: int | Tensor,
              body_fun: Callable[[Tensor, PyTree], PyTree], init_val: PyTree, *,
              unroll: int | None = None) -> PyTree:
    """``for i in range(lower, upper): val = body_fun(i, val)`` (``jax.lax.fori_loop``);
    ``i`` is a 0-d int64 tensor.  With Python-int bounds it is a :func:`scan` (reverse
    mode works); with traced bounds a :func:`while_loop` (forward only, as in JAX).

    >>> import symgrad
    >>> symgrad.fori_loop(0, 4, lambda i, v: v * 2 + i, symgrad.tensor(1.0))
    tensor(27.)
    """
    lo, hi = _static_int(lower), _static_int(upper)
    if lo is not None and hi is not None:
        n = max(hi - lo, 0)
        leaves, struct = pytree.flatten(init_val)
        if n == 0:
            return pytree.unflatten(struct, [_leaf_tensor(v, "fori_loop init_val")
                                             for v in leaves])
        idx = arange(lo, hi)

        def step(val, i):
            return body_fun(i, val), None
        carry, _ = scan(step, init_val, idx)
        return carry
    lo_t = _leaf_tensor(lower, "fori_loop lower")
    hi_t = _leaf_tensor(upper, "fori_loop upper")
    for name, b in (("lower", lo_t), ("upper", hi_t)):
        if b.dim() != 0 or b.dtype.is_floating_point or b.dtype.name == "bool":
            raise TypeError(f"fori_loop {name} must be an integer scalar, got "
                            f"{_type(_aval(b))}")
    i0 = lo_t.to(hi_t.dtype) if lo_t.dtype is not hi_t.dtype else lo_t

    def cond(c):
        return c[0] < hi_t

    def body(c):
        return (c[0] + 1, body_fun(c[0], c[1]))
    return while_loop(cond, body, (i0, init_val))[1]


# ---- while_loop ----------------------------------------------------------------------------
def while_loop(cond_fun: Callable[[PyTree], Tensor | bool],
               body_fun: Callable[[PyTree], PyTree], init_val: PyTree) -> PyTree:
    """``while cond_fun(val): val = body_fun(val)`` (``jax.lax.while_loop``).  Compiled, it
    is one node evaluated in a native-code call; reverse-mode differentiation through it
    raises JAX's error (use :func:`scan` or a static-bound :func:`fori_loop`).

    >>> import symgrad
    >>> symgrad.while_loop(lambda v: v < 10, lambda v: v * 3, symgrad.tensor(1))
    tensor(27)
    """
    leaves, struct = pytree.flatten(init_val)
    init_t = [_leaf_tensor(v, "while_loop init_val") for v in leaves]
    avals = [_aval(t) for t in init_t]
    if _tracing(init_t):
        return _while_traced(cond_fun, body_fun, struct, init_t, avals)
    carry = init_t
    while _truth(cond_fun(pytree.unflatten(struct, carry))):
        out = body_fun(pytree.unflatten(struct, carry))
        o_leaves, o_struct = pytree.flatten(out)
        carry = _check_carry("while_loop body function", struct, avals, o_struct, o_leaves)
    return pytree.unflatten(struct, carry)


def _truth(c) -> bool:
    t = _leaf_tensor(c, "while_loop cond_fun output") if not isinstance(c, Tensor) else c
    _check_cond(t)
    return bool(t._data)


def _check_cond(t) -> None:
    if tuple(t.shape) != () or t.dtype.name != "bool":
        raise TypeError("cond_fun must return a boolean scalar, but got output type(s) "
                        f"[{_type(_aval(t))}].")


def _while_traced(cond_fun, body_fun, struct, init_t, avals):
    c_inputs, c_out, c_cap = trace_body(cond_fun, [struct], [avals], ["c"])
    c_leaves, c_struct = pytree.flatten(c_out)
    if c_struct != pytree.LEAF:
        raise TypeError("cond_fun must return a boolean scalar, but got a "
                        f"{type(c_out).__name__}")
    pred = _leaf_tensor(c_leaves[0], "cond_fun output")
    _check_cond(pred)
    cond, c_closures = finish_body(c_inputs, [node_of(pred, c_cap)], c_cap)
    b_inputs, b_out, b_cap = trace_body(body_fun, [struct], [avals], ["c"])
    o_leaves, o_struct = pytree.flatten(b_out)
    carry_out = _check_carry("while_loop body function", struct, avals, o_struct, o_leaves)
    body, b_closures = finish_body(b_inputs, [node_of(v, b_cap) for v in carry_out], b_cap)
    res = L.while_outputs(init_t + c_closures + b_closures, cond=cond, body=body,
                          n_carry=len(init_t), n_cond=len(c_closures))
    return pytree.unflatten(struct, res)
