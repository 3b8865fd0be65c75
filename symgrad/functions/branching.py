"""Data-dependent branches: ``symgrad.cond`` (PyTorch's ``torch.cond``) and
``symgrad.lax.cond`` / ``switch`` (JAX's).

With a concrete predicate (a Python bool, an eager tensor) only the chosen branch runs,
as an ``if`` would.  With a traced one (inside ``symgrad.compile`` / ``grad`` / ``vmap``)
every branch is traced and each output is selected elementwise with ``where`` -- the
branches must return the same structure, shapes and dtypes.  Gradients are the taken
branch's, as JAX's and torch's: every value a traced branch reads from outside is gated
(:func:`_gated`: its cotangent zeroed where the branch is not taken), so an infinite
derivative inside the branch not taken cannot turn the zero cotangent into NaN.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from .. import dispatch
from ..graph import pytree
from ..tensor import Tensor, next_birth
from .creation import as_tensor
from .elementwise import where

__all__ = ["cond", "lax_cond", "switch"]


def _concrete(pred) -> bool:
    if not isinstance(pred, Tensor):
        return True
    lifter = dispatch._lifter[0]
    return pred._data is not None and not (lifter is not None and lifter.is_outer(pred))


def _type(t: Tensor) -> str:
    return f"{t.dtype.name}[{','.join(map(str, t.shape))}]"


def _merge(pred: Tensor, results: Sequence[Any], names: Sequence[str], what: str):
    """The outputs of every branch selected by ``pred`` (a traced bool per branch but the
    last), leaf by leaf; the branches must agree in structure, shapes and dtypes."""
    flat = [pytree.flatten(r) for r in results]
    s0 = flat[0][1]
    for (_, s), nm in zip(flat[1:], names[1:]):
        if s != s0:
            raise TypeError(f"{what}: {names[0]} and {nm} must return the same pytree "
                            f"structure, got {_show(s0)} and {_show(s)}")
    paths = pytree.leaf_paths(s0, "output")
    leaves = [[v if isinstance(v, Tensor) else as_tensor(v) for v in f[0]] for f in flat]
    for k, path in enumerate(paths):
        a = leaves[0][k]
        for other, nm in zip(leaves[1:], names[1:]):
            b = other[k]
            if tuple(a.shape) != tuple(b.shape) or a.dtype is not b.dtype:
                raise TypeError(f"{what}: {names[0]} and {nm} must return outputs of identical "
                                f"types, but {path} is {_type(a)} in {names[0]} and {_type(b)} "
                                f"in {nm}")
    out = []
    for k in range(len(paths)):
        v = leaves[-1][k]
        for sel, branch in zip(reversed(pred), reversed(leaves[:-1])):
            v = where(sel, branch[k], v)
        out.append(v)
    return pytree.unflatten(s0, out)


def _show(s) -> str:
    return repr(pytree.unflatten(s, ["*"] * pytree.num_leaves(s)))


def _pred(pred):
    if isinstance(pred, (bool, np.bool_, int, float, np.number)):
        return bool(pred)
    if not isinstance(pred, Tensor):
        pred = as_tensor(pred)
    if pred.numel() != 1:
        raise RuntimeError(f"Expected pred to be bool or single-element tensor, but got "
                           f"{pred}.")
    return pred


def cond(pred: bool | Tensor, true_fn: Callable, false_fn: Callable,
         operands: tuple | list = ()) -> Any:
    """``true_fn(*operands)`` if ``pred`` else ``false_fn(*operands)`` (``torch.cond``);
    ``pred`` a bool or a single-element tensor.

    >>> import symgrad
    >>> symgrad.cond(symgrad.tensor(False), lambda x: x + 1, lambda x: x * 10,
    ...              (symgrad.tensor([1.0, 2.0]),))
    tensor([10., 20.])
    """
    if not isinstance(operands, (tuple, list)):
        raise RuntimeError(f"Expect operands to be a tuple of possibly nested dict/list/tuple "
                           f"that only consists of tensor leaves, but got {operands}.")
    return _cond(pred, (false_fn, true_fn), tuple(operands), "cond",
                 ("false_fn", "true_fn"))


def _cond(pred, branches, operands, what, names):
    pred = _pred(pred)
    if _concrete(pred):
        return branches[int(bool(pred if not isinstance(pred, Tensor) else pred._data))](
            *operands)
    p = pred.reshape(()) if tuple(pred.shape) != () else pred
    if p.dtype.name != "bool":
        p = p != 0
    results = [_gated(sel, b, operands) for b, sel in ((branches[1], p), (branches[0], ~p))]
    return _merge([p], results, [names[1], names[0]], what)


def _gated(sel: Tensor | None, branch: Callable, operands: tuple):
    """``branch(*operands)`` traced as the branch selected by ``sel``: every value from
    outside it that it reads (operands and closed-over values) is seen as
    ``where(sel, x, x.detach())`` -- the same value, whose cotangent is zeroed where the
    branch is not taken. So the zero cotangent of a branch not taken that meets an
    infinite derivative inside it (``0 * inf``: sqrt at a negative, 1/x at 0) cannot
    reach the gradient as NaN: JAX's cond and torch.cond give the taken branch's
    gradient."""
    if sel is None:
        return branch(*operands)
    gate = _Gate(dispatch._lifter[0], sel)
    prev = dispatch.set_lifter(gate)
    try:
        return branch(*operands)
    finally:
        dispatch.set_lifter(prev)


class _Gate:
    """The lifter while a traced branch runs: the enclosing one (a tracer, a loop body's
    capture, an enclosing branch's gate), plus :meth:`gate`, which ``dispatch.bind``
    applies to the operands of every primitive."""

    gates = True

    def __init__(self, parent, sel: Tensor):
        self.parent = parent
        self.sel = sel
        self.start = next_birth()           # tensors born before: from outside the branch
        self.seen: dict[int, tuple[Tensor, Tensor]] = {}

    def __getattr__(self, name):            # the enclosing lifter's protocol
        return getattr(self.parent, name)

    @property
    def hooked(self) -> bool:
        return self.parent.hooked

    @hooked.setter
    def hooked(self, value: bool) -> None:
        self.parent.hooked = value

    def __call__(self, t: Tensor):
        return self.parent(t)

    def gate(self, operands: tuple) -> tuple:
        """``operands`` with each differentiable value from outside the branch gated."""
        out = None
        for i, o in enumerate(operands):
            if not (isinstance(o, Tensor) and o._birth < self.start
                    and o._dtype.category == "float"
                    and (o._data is None or o._requires_grad or o.grad_fn is not None)):
                continue
            hit = self.seen.get(id(o))
            if hit is None:
                prev = dispatch.set_lifter(self.parent)
                try:
                    hit = self.seen[id(o)] = (o, where(self.sel, o, o.detach()))
                finally:
                    dispatch.set_lifter(prev)
            if out is None:
                out = list(operands)
            out[i] = hit[1]
        return operands if out is None else tuple(out)


def lax_cond(pred, true_fun: Callable, false_fun: Callable, *operands) -> Any:
    """JAX's ``lax.cond(pred, true_fun, false_fun, *operands)``."""
    if isinstance(pred, Tensor) and tuple(pred.shape) != ():
        raise TypeError(f"Pred must be a scalar, got {pred} of shape {tuple(pred.shape)}.")
    return _cond(pred, (false_fun, true_fun), operands, "cond", ("false_fun", "true_fun"))


def switch(index, branches: Sequence[Callable], *operands) -> Any:
    """JAX's ``lax.switch``: ``branches[clamp(index, 0, len(branches) - 1)](*operands)``.

    >>> import symgrad
    >>> symgrad.lax.switch(5, [lambda x: x, lambda x: x * 2], symgrad.tensor(3.0))
    tensor(6.)
    """
    branches = list(branches)
    if not branches:
        raise ValueError("Empty branch sequence")
    if isinstance(index, Tensor) and index.dtype.is_floating_point:
        raise TypeError(f"Index must be scalar integer, got {index}.")
    if _concrete(index):
        k = int(index._data if isinstance(index, Tensor) else index)
        return branches[min(max(k, 0), len(branches) - 1)](*operands)
    if tuple(index.shape) != ():
        raise TypeError(f"Branch index must be scalar, got {index} of shape "
                        f"{tuple(index.shape)}.")
    last = len(branches) - 1
    sels = [index <= k if k == 0 else index == k for k in range(last)]
    taken = sels + [index >= last] if last else [None]     # (one branch: always taken)
    results = [_gated(t, b, operands) for b, t in zip(branches, taken)]
    return _merge(sels, results, [f"branches[{k}]" for k in range(len(branches))], "switch")
