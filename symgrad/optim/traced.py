"""numpy's array protocol on traced tensors, so an optimizer's update runs inside
``symgrad.compile``.

The optimizers update parameters with numpy on their storage (``buf *= momentum``,
``np.sqrt(v, out=d)``, ...): the fastest eager step. Inside a trace there is no storage:
:func:`as_array` then hands the same code a :class:`TracedArray`, which performs each of
those operations as tensor operations -- an in-place one (``*=``, ``out=``, ``[...] =``)
as an in-place update of the tensor, which the tracer records as state the compiled call
writes. One update rule, run eagerly on arrays and traced on tensors.
"""
from __future__ import annotations

import numpy as np

from .. import dispatch
from ..autograd import grad_mode
from ..functions import elementwise as E
from ..functions.inplace import update
from ..tensor import Tensor

__all__ = ["TracedArray", "as_array", "unwrap", "select"]


def unwrap(v):
    return v.t if isinstance(v, TracedArray) else v


def _binary(fn):
    def op(self, other):
        return TracedArray(fn(self.t, unwrap(other)))

    def rop(self, other):
        return TracedArray(fn(unwrap(other), self.t))

    def iop(self, other):
        self.assign(fn(self.t, unwrap(other)))
        return self
    return op, rop, iop


def _add(a, b):
    return a + b if isinstance(a, Tensor) else b.__radd__(a)


def _sub(a, b):
    return a - b if isinstance(a, Tensor) else b.__rsub__(a)


def _mul(a, b):
    return a * b if isinstance(a, Tensor) else b.__rmul__(a)


def _div(a, b):
    return a / b if isinstance(a, Tensor) else b.__rtruediv__(a)


def _pow(a, b):
    return a ** b if isinstance(a, Tensor) else b.__rpow__(a)


_UFUNCS = {np.add: _add, np.subtract: _sub, np.multiply: _mul, np.true_divide: _div,
           np.power: _pow, np.sqrt: lambda a: E.unary("sqrt", a), np.negative: lambda a: -a,
           np.maximum: lambda a, b: E.binary("maximum", a, b),
           np.minimum: lambda a, b: E.binary("minimum", a, b),
           np.absolute: lambda a: E.unary("abs", a), np.sign: lambda a: E.unary("sign", a),
           np.greater: lambda a, b: E.binary("gt", a, b), np.less: lambda a, b: E.binary("lt", a, b),
           np.equal: lambda a, b: E.binary("eq", a, b),
           np.not_equal: lambda a, b: E.binary("ne", a, b)}


class TracedArray:
    """A traced tensor behaving as the numpy array an optimizer updates: arithmetic
    gives new TracedArrays, in-place operations update the tensor (``t``; None for a
    scratch array whose value is only ever assigned)."""

    __slots__ = ("t",)

    def __init__(self, t: Tensor | None):
        self.t = t

    def assign(self, value) -> None:
        """``self[...] = value``: an update of the tensor (the tracer records it when the
        tensor is state), or the value of a scratch array."""
        if self.t is None:
            self.t = value
            return
        with grad_mode.no_grad():
            update(self.t, value)

    def __setitem__(self, index, value) -> None:
        if index is not Ellipsis:
            raise TypeError("a traced optimizer state is assigned whole ([...] =)")
        self.assign(unwrap(value))

    __add__, __radd__, __iadd__ = _binary(_add)
    __sub__, __rsub__, __isub__ = _binary(_sub)
    __mul__, __rmul__, __imul__ = _binary(_mul)
    __truediv__, __rtruediv__, __itruediv__ = _binary(_div)
    __pow__, __rpow__ = _binary(_pow)[:2]

    def __neg__(self) -> "TracedArray":
        return TracedArray(-self.t)

    def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kwargs):
        fn = _UFUNCS.get(ufunc)
        if fn is None or method != "__call__" or kwargs:
            return NotImplemented
        result = fn(*[unwrap(a) for a in inputs])
        if out is None:
            return TracedArray(result)
        out[0].assign(result)
        return out[0]

    def __float__(self):
        raise TypeError("an optimizer's traced value has no Python number inside "
                        "symgrad.compile")

    @property
    def shape(self):
        return tuple(self.t.shape)

    @property
    def dtype(self):
        return self.t.dtype


def as_array(t: Tensor):
    """What an optimizer updates: the numpy storage of an eager tensor, or -- inside
    symgrad.compile -- a TracedArray of it."""
    if dispatch.tracing():
        return TracedArray(t)
    if t._node is not None:
        raise RuntimeError("an optimizer step needs eager tensors")
    return t._data


def select(condition, a, b):
    """``np.where(condition, a, b)`` of arrays or, inside a trace, of TracedArrays / tensors
    (an update's per-element choice: Rprop's signs, RAdam's rectification)."""
    if not any(isinstance(v, TracedArray) for v in (condition, a, b)):
        return np.where(condition, a, b)
    return TracedArray(E.where(unwrap(condition), unwrap(a), unwrap(b)))
