"""Elementwise operations with PyTorch's type promotion, broadcasting and grad_fn names:
arithmetic, comparisons, transcendental functions, clamp, where."""
from __future__ import annotations

import warnings

from typing import TYPE_CHECKING

import numpy as np

from ..graph import dtypes
from ..dispatch import bind, bind_binary, bind_unary
from ..ops import lax
from ..graph.primitives import PRIMITIVES as P
from .common import Tensor, is_scalar, to_tensor
from .composite import named
from ..autograd.grad_mode import no_grad

if TYPE_CHECKING:
    from collections.abc import Callable
    from ..types import TensorOrScalar

__all__ = ["binary", "binary_method", "unary", "where", "clamp", "pow", "UNARY_NAMES"]

# PyTorch's grad_fn names where they are not "<Pascal>Backward0"
_NAMES = {"log1p": "Log1PBackward0", "copy": "CloneBackward0"}


def _operand(x):
    if isinstance(x, Tensor) or is_scalar(x):
        return x
    if isinstance(x, np.ndarray):
        return to_tensor(x)
    raise TypeError(f"unsupported operand type: '{type(x).__name__}'")


def promote(operands) -> dtypes.DType:
    """PyTorch's result dtype of tensors and Python scalars. A compiled function's
    Python-number argument (a "wrapped number" tensor) counts as a Python scalar when
    it meets a tensor (``int_tensor + 2.5``: the default dtype, not float64)."""
    dims, zero, scal, wrapped = [], [], [], []
    for o in operands:
        if isinstance(o, Tensor):
            if o._wrapped_number:
                wrapped.append(o)
            else:
                (dims if o.dim() else zero).append(o.dtype)
        else:
            scal.append(o)
    if wrapped:
        if dims or zero:
            scal += [_WRAPPED_AS[w._dtype.category] for w in wrapped]
        else:
            zero += [w._dtype for w in wrapped]
    return dtypes.result_type(dims, zero, scal)


# a Python number of each dtype category: a wrapped number promotes as one of these
_WRAPPED_AS = {"bool": False, "int": 0, "float": 0.0}


def _cast_all(operands, dt):
    return [lax.cast(o, dt) if isinstance(o, Tensor) else o for o in operands]


def _common(prim, operands):
    """Promote operands for `prim`; integer inputs of float-only ops become float."""
    first = operands[0]
    if all(isinstance(o, Tensor) and o._dtype is first._dtype for o in operands):
        dt = first._dtype
    elif (isinstance(first, Tensor) and first._dtype.category == "float"
          and all(not isinstance(o, Tensor) or o._dtype is first._dtype for o in operands)):
        dt = first._dtype
    else:
        dt = promote(operands)
    if prim.out_dtype == "float" and dt.category != "float":
        dt = dtypes.get_default_dtype()
    return _cast_all(operands, dt), dt


_FAST_BINARY = frozenset({"add", "sub", "mul", "div", "pow", "maximum", "minimum", "lt", "le",
                          "gt", "ge", "eq", "ne"})


def binary_method(name: str, reflected: bool = False
                  ) -> Callable[[Tensor, TensorOrScalar], Tensor]:
    """The Tensor method ``self <op> other`` (``other <op> self`` when `reflected`) of
    binary primitive `name`: :func:`binary`, with its common float case inline (one
    call less per operator)."""
    if name not in _FAST_BINARY:
        def plain(self: Tensor, other: TensorOrScalar) -> Tensor:
            return binary(name, other, self) if reflected else binary(name, self, other)
        return plain

    def method(self: Tensor, other: TensorOrScalar) -> Tensor:
        to = type(other)
        if type(self) is Tensor and self._dtype.category == "float":
            if to is Tensor:
                if self._dtype is other._dtype:
                    return (bind_binary(P[name], other, self) if reflected
                            else bind_binary(P[name], self, other))
            elif to is float or to is int:
                other = float_scalar(other)
                return (bind_binary(P[name], other, self) if reflected
                        else bind_binary(P[name], self, other))
        return binary(name, other, self) if reflected else binary(name, self, other)
    return method


def binary(name: str, a: TensorOrScalar | np.ndarray, b: TensorOrScalar | np.ndarray,
           grad_name: str | None = None) -> Tensor:
    """Apply the binary primitive `name` with promotion; scalars stay scalars."""
    if name in _FAST_BINARY:             # the common float cases: no promotion to do
        ta, tb = type(a) is Tensor, type(b) is Tensor
        if ta and tb:
            if a._dtype is b._dtype and a._dtype.category == "float":
                return bind_binary(P[name], a, b, grad_name)
        elif ta and a._dtype.category == "float" and type(b) in _PY_NUMBERS:
            return bind_binary(P[name], a, float_scalar(b), grad_name)
        elif tb and b._dtype.category == "float" and type(a) in _PY_NUMBERS:
            return bind_binary(P[name], float_scalar(a), b, grad_name)
    a, b = _operand(a), _operand(b)
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        a = to_tensor(a)
    prim = P[name]
    _check_bool_sub(name, a, b)
    grad_name = grad_name or _binary_grad_name(name, a, b)
    (a, b), dt = _common(prim, [a, b])
    b = _check_integer_division(name, b, dt)
    if not isinstance(a, Tensor):
        a = _scalar_as(a, dt)
    if not isinstance(b, Tensor):
        b = _scalar_as(b, dt)
    out = bind(prim, a, b, grad_name=grad_name or _NAMES.get(name))
    if grad_name == NOT_IMPLEMENTED and out.grad_fn is not None:
        out.grad_fn._inner = NotImplementedBackward(name)
    return out


def _is_bool(o) -> bool:
    return o.dtype is dtypes.bool_ if isinstance(o, Tensor) else isinstance(o, (bool, np.bool_))


def _check_bool_sub(name, a, b):
    if name != "sub" or not (_is_bool(a) or _is_bool(b)):
        return
    if _is_bool(a) and _is_bool(b):
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not "
                           "supported. Use the `^` or `logical_xor()` operator instead.")
    raise RuntimeError("Subtraction, the `-` operator, with a bool tensor is not supported. "
                       "If you are trying to invert a mask, use the `~` or `logical_not()` "
                       "operator instead.")


def _check_integer_division(name, b, dt):
    """PyTorch refuses integer division by zero (numpy returns 0) and bool // and **;
    returns the divisor (a traced integer one through a check compiled code runs)."""
    if dt.category == "bool" and name in ("floor_divide", "pow", "remainder", "fmod") and \
            (name != "pow" or isinstance(b, Tensor)):
        kernel = {"floor_divide": "div_floor_cpu", "remainder": "remainder_cpu",
                  "fmod": "fmod_cpu"}.get(name, name)
        raise NotImplementedError(f'"{kernel}" not implemented for \'Bool\'')
    if dt.category == "float" or name not in ("floor_divide", "remainder", "fmod"):
        return b
    zero = (not b._data.all()) if isinstance(b, Tensor) and b._data is not None else \
        (not isinstance(b, Tensor) and b == 0)
    if zero:
        raise RuntimeError("ZeroDivisionError")
    if isinstance(b, Tensor) and b._data is None:     # traced: checked at every call
        zeros = lax.in_bounds(lax.cast(lax.eq(b, 0), dtypes.int64), 1, "ZeroDivisionError")
        return lax.add(b, lax.cast(zeros, b.dtype))    # (+ 0: the divisor waits for it)
    return b


def _binary_grad_name(name, a, b):
    """PyTorch's backward names that depend on which operands are tensors."""
    if name == "floor_divide":
        return NOT_IMPLEMENTED          # no derivative in PyTorch: backward raises
    if name == "fmod":
        return "FmodBackward1" if isinstance(b, Tensor) else "FmodBackward0"
    if name == "remainder":
        if not isinstance(a, Tensor):
            return NOT_IMPLEMENTED
        return "RemainderBackward1" if isinstance(b, Tensor) else "RemainderBackward0"
    return None


NOT_IMPLEMENTED = "torch::autograd::NotImplemented"     # grad_fn=<NotImplemented>


class NotImplementedBackward:
    """The backward of an op PyTorch cannot differentiate (``grad_fn=<NotImplemented>``):
    raises PyTorch's error when reached."""

    __slots__ = ("op",)

    def __init__(self, op):
        self.op = op

    def __call__(self, owner, g):
        raise RuntimeError(f"derivative for aten::{self.op} is not implemented")

    def release(self):
        pass


_PY_NUMBERS = (float, int)


def float_scalar(value):
    """A Python number as an operand of a float operation (see _scalar_as)."""
    return value if type(value) is float or -2 ** 53 < value < 2 ** 53 else float(value)


def _scalar_as(value, dt):
    """A Python scalar converted to the operation's dtype (bool/int/float). A Python int
    stays an int for float operations (numpy computes in the tensor's dtype either way),
    so a saved scalar reads back as PyTorch's wrapped number: ``(x * 2).grad_fn.
    _saved_other`` is ``tensor(2)``."""
    if dt.category == "float":
        if type(value) is int and -2 ** 53 < value < 2 ** 53:
            return value
        return float(value)
    if dt.category == "int":
        return np.array(int(value)).astype(dt.np)[()]   # wraps like PyTorch (uint8 - 1)
    return bool(value)


def unary(name: str, x: TensorOrScalar | np.ndarray, grad_name: str | None = None) -> Tensor:
    if type(x) is Tensor and x._dtype.category == "float":     # (the common case)
        return bind_unary(P[name], x, grad_name or _NAMES.get(name))
    x = to_tensor(_operand(x))
    prim = P[name]
    if x.dtype is dtypes.bool_ and name in _BOOL_REFUSED:
        err, msg = _BOOL_REFUSED[name]
        raise err(msg)
    if prim.out_dtype == "float" and x.dtype.category != "float":
        x = lax.cast(x, dtypes.get_default_dtype())
    return bind(prim, x, grad_name=grad_name or _NAMES.get(name))


_BOOL_REFUSED = {
    "neg": (RuntimeError, "Negation, the `-` operator, on a bool tensor is not supported. If you "
                          "are trying to invert a mask, use the `~` or `logical_not()` operator "
                          "instead."),
    "relu": (RuntimeError, "Boolean inputs not supported for relu"),
    "abs": (NotImplementedError, '"abs_cpu" not implemented for \'Bool\''),
    "floor": (NotImplementedError, '"floor_vml_cpu" not implemented for \'Bool\''),
    "ceil": (NotImplementedError, '"ceil_vml_cpu" not implemented for \'Bool\''),
    "round": (NotImplementedError, '"round_vml_cpu" not implemented for \'Bool\''),
}


def pow(a: TensorOrScalar, b: TensorOrScalar) -> Tensor:
    """``a ** b`` with PyTorch's names: PowBackward0 (tensor ** scalar), PowBackward1
    (tensor ** tensor), PowBackward2 (scalar ** tensor)."""
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        return binary("pow", a, b, "PowBackward1")
    if isinstance(a, Tensor):
        if (a._dtype.category != "float" and is_scalar(b) and not isinstance(b, bool)
                and float(b) == int(b) and b < 0 and not isinstance(b, float)):
            raise RuntimeError("Integers to negative integer powers are not allowed.")
        return binary("pow", a, b, "PowBackward0")
    return binary("pow", a, b, "PowBackward2")


_UINT8_WHERE = ("where received a uint8 condition tensor. This behavior is deprecated and "
                "will be removed in a future version of PyTorch. Use a boolean condition "
                "instead. (Triggered internally at /__w/pytorch/pytorch/aten/src/ATen/native/"
                "TensorCompare.cpp:621.)")
_warned_where: list = []


def where(condition: Tensor, input: TensorOrScalar, other: TensorOrScalar) -> Tensor:
    """Elementwise select (``torch.where``); condition must be bool (uint8: deprecated,
    PyTorch warns and reads it as nonzero)."""
    c = to_tensor(condition)
    if c.dtype is dtypes.uint8:
        if not _warned_where:           # (once per process, as PyTorch's TORCH_WARN_ONCE)
            _warned_where.append(True)
            warnings.warn(_UINT8_WHERE, UserWarning, stacklevel=2)
        c = lax.cast(c, dtypes.bool_)
    if c.dtype is not dtypes.bool_:
        raise RuntimeError(f"where expected condition to be a boolean tensor, but got a tensor "
                           f"with dtype {c.dtype.c_name}")
    input, other = _operand(input), _operand(other)
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        dt = dtypes.result_type([], [], [input, other])
    else:
        dt = promote([input, other])
    x, y = _cast_all([input, other], dt)
    x = x if isinstance(x, Tensor) else _scalar_as(x, dt)
    y = y if isinstance(y, Tensor) else _scalar_as(y, dt)
    if not isinstance(x, Tensor) and not isinstance(y, Tensor):
        x = lax.full((), x, dt)
    return bind(P["where"], c, x, y)


def clamp(x: Tensor, min: TensorOrScalar | None = None, max: TensorOrScalar | None = None, *,
          grad_name: str | None = None) -> Tensor:
    """Clamp into [min, max] (``ClampBackward1``); min/max may be scalars or tensors
    (``ClampBackward0``). The gradient reaches x where min <= x <= max (bounds included),
    as in PyTorch."""
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    x = to_tensor(x)
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        return _clamp_tensor(x, min, max, grad_name or "ClampBackward0")
    info = _bounds(x.dtype)
    lo = info[0] if min is None else min
    hi = info[1] if max is None else max
    if type(x) is Tensor and x._dtype.category == "float" and type(lo) in _PY_NUMBERS \
            and type(hi) in _PY_NUMBERS:
        dt = x._dtype                 # (a float tensor with Python numbers: its dtype)
    else:
        dt = promote([x, lo, hi])
        x = lax.cast(x, dt)
    return bind(P["clamp"], x, _scalar_as(lo, dt), _scalar_as(hi, dt), grad_name=grad_name)


def _clamp_tensor(x, lo, hi, name):
    """clamp with tensor bounds: PyTorch's gradient masks — x where lo <= x <= hi, lo where
    x < lo < hi, hi where x > hi or hi < lo — as nested where()s over the exact value."""
    bounds = [b for b in (lo, hi) if b is not None]
    dt = promote([x] + bounds)
    lo, hi = [lax.cast(to_tensor(b), dt) if isinstance(b, Tensor) else
              (None if b is None else _scalar_as(b, dt)) for b in (lo, hi)]

    def f(v, a, b):
        with _no_grad():
            exact = v.detach()
            exact = exact if a is None else binary("maximum", exact, _detached(a))
            exact = exact if b is None else binary("minimum", exact, _detached(b))
        out = exact
        if b is not None:
            gt = binary("gt", v, b)
            if a is not None:
                gt = binary("logical_or", gt, binary("lt", b, a))
            out = bind(P["where"], gt, *_same(b, out))
        if a is not None:
            lt = binary("lt", v, a)
            if b is not None:
                lt = binary("logical_and", lt, binary("lt", a, b))
            out = bind(P["where"], lt, *_same(a, out))
        inside = _and_opt(binary("ge", v, a) if a is not None else None,
                          binary("le", v, b) if b is not None else None)
        return bind(P["where"], inside, v, out)
    return named(name, f, lax.cast(x, dt), lo, hi, saves=(0, 1, 2))   # as PyTorch saves


def _no_grad():
    return no_grad()


def _detached(b):
    return b.detach() if isinstance(b, Tensor) else b


def _same(a, b):
    """Operands for where(): Python scalars become 0-d tensors of the other's dtype."""
    if not isinstance(a, Tensor):
        a = lax.full((), a, b.dtype)
    return a, b


def _and_opt(a, b):
    if a is None or b is None:
        return a if b is None else b
    return binary("logical_and", a, b)


def _bounds(dt):
    if dt.category == "float":
        return -np.inf, np.inf
    if dt.category == "bool":
        return False, True
    info = np.iinfo(dt.np)
    return int(info.min), int(info.max)


UNARY_NAMES = ("exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh",
               "sigmoid", "relu", "abs", "sign", "floor", "ceil", "round", "reciprocal",
               "softplus", "neg", "logical_not", "isnan", "erf", "erfinv", "sinh", "cosh",
               "asin", "acos", "atan")
