"""Non-finite values and closeness, as PyTorch's: ``isinf``, ``isposinf``, ``isneginf``,
``isfinite``, ``nan_to_num`` (and ``nan_to_num_``), ``isclose``; and ``roll``.

Each is a composite of existing primitives (comparisons, ``where``, slices and ``cat``),
so it runs eagerly, traces into compiled code and differentiates symbolically like any
other; ``nan_to_num`` and ``roll`` record PyTorch's node names (``NanToNumBackward0``,
``RollBackward0``).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..dispatch import bind
from ..graph import dtypes
from ..graph.primitives import PRIMITIVES as P
from . import elementwise as E
from . import inplace
from .common import Tensor, to_tensor
from .composite import named
from .shape import cat, flatten

__all__ = ["isinf", "isposinf", "isneginf", "isfinite", "nan_to_num", "nan_to_num_", "isclose",
           "roll"]


def isinf(input: Tensor) -> Tensor:
    """True where ``input`` is +inf or -inf (never for integers)."""
    x = to_tensor(input)
    if not x.dtype.is_floating_point:
        return E.binary("ne", x, x)          # (all False, the input's shape)
    return E.binary("eq", E.unary("abs", x), float("inf"))


def isposinf(input: Tensor) -> Tensor:
    x = to_tensor(input)
    if not x.dtype.is_floating_point:
        return E.binary("ne", x, x)
    return E.binary("eq", x, float("inf"))


def isneginf(input: Tensor) -> Tensor:
    x = to_tensor(input)
    if not x.dtype.is_floating_point:
        return E.binary("ne", x, x)
    return E.binary("eq", x, float("-inf"))


def isfinite(input: Tensor) -> Tensor:
    """True where ``input`` is neither inf nor NaN (always for integers)."""
    x = to_tensor(input)
    if not x.dtype.is_floating_point:
        return E.binary("eq", x, x)
    return E.binary("lt", E.unary("abs", x), float("inf"))     # (NaN compares False)


def nan_to_num(input: Tensor, nan: float = 0.0, posinf: float | None = None,
               neginf: float | None = None) -> Tensor:
    """NaN, +inf and -inf replaced by ``nan``, ``posinf`` and ``neginf`` (default: the
    dtype's largest and lowest finite values); the gradient flows where the input is
    finite."""
    x = to_tensor(input)
    if not x.dtype.is_floating_point:
        return x.clone()
    info = np.finfo(x.dtype.np)
    hi = float(info.max) if posinf is None else float(posinf)
    lo = float(info.min) if neginf is None else float(neginf)
    nan = float(nan)

    def f(v):
        v = E.where(E.unary("isnan", v), nan, v)
        v = E.where(E.binary("eq", v, float("inf")), hi, v)
        return E.where(E.binary("eq", v, float("-inf")), lo, v)
    return named("NanToNumBackward0", f, x)


def nan_to_num_(input: Tensor, nan: float = 0.0, posinf: float | None = None,
                neginf: float | None = None) -> Tensor:
    """:func:`nan_to_num` in place."""
    inplace.check_inplace(input)
    return inplace.update(input, nan_to_num(inplace.original(input), nan, posinf, neginf))


def isclose(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08,
            equal_nan: bool = False, *, _position: int = 2, _name: str = "isclose") -> Tensor:
    """``|input - other| <= atol + rtol * |other|`` where that error is finite (computed in
    the default float dtype for integers and bool, as PyTorch: no wrap-around), equal
    values (infinities of one sign included) everywhere, NaNs equal with ``equal_nan``."""
    for pos, arg, v in ((_position - 1, "input", input), (_position, "other", other)):
        if pos and not isinstance(v, Tensor):
            raise TypeError(f"{_name}(): argument '{arg}' (position {pos}) must be Tensor, not "
                            f"{type(v).__name__}")
    a, b = to_tensor(input), to_tensor(other)
    if a.dtype is not b.dtype:
        raise RuntimeError(f"{a.dtype.c_name} did not match {b.dtype.c_name}")
    if rtol < 0:
        raise RuntimeError(f"rtol must be greater than or equal to zero, but got {rtol:g}")
    if atol < 0:
        raise RuntimeError(f"atol must be greater than or equal to zero, but got {atol:g}")
    a, b = a.detach(), b.detach()
    same = E.binary("eq", a, b)
    if equal_nan and a.dtype.is_floating_point:
        same = E.binary("logical_or", same, E.binary("logical_and", E.unary("isnan", a),
                                                      E.unary("isnan", b)))
    if not a.dtype.is_floating_point:     # as PyTorch: the error in the default float
        a, b = a.to(dtypes.get_default_dtype()), b.to(dtypes.get_default_dtype())   # dtype
    diff = E.unary("abs", E.binary("sub", a, b))
    bound = E.binary("add", float(atol), E.binary("mul", float(rtol), E.unary("abs", b)))
    # (a finite error: an overflowing difference is not close, whatever atol)
    close = E.binary("logical_and", E.binary("le", diff, bound), isfinite(diff))
    return E.binary("logical_or", same, close)


def roll(input: Tensor, shifts: int | Sequence[int], dims: int | Sequence[int] | None = None
         ) -> Tensor:
    """The elements shifted by ``shifts`` along ``dims`` (the flattened tensor when
    ``dims`` is None), wrapping around."""
    x = to_tensor(input)
    if not isinstance(shifts, (int, np.integer, list, tuple)):
        raise TypeError(f"roll(): argument 'shifts' (position 2) must be tuple of ints, not "
                        f"{type(shifts).__name__}")
    shifts = (shifts,) if isinstance(shifts, (int, np.integer)) else tuple(shifts)
    if not shifts:
        raise RuntimeError("`shifts` required")
    if dims is None:
        if len(shifts) != 1:
            raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, "
                               "dims:0")
        return named("RollBackward0", lambda v: _roll(flatten(v), shifts, (0,))
                     .reshape(tuple(v.shape)), x)
    dims = (dims,) if isinstance(dims, (int, np.integer)) else tuple(dims)
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:"
                           f"{len(dims)}")
    n = x.dim()
    for d in dims:
        if n == 0:
            raise IndexError(f"Dimension specified as {d} but tensor has no dimensions")
        if not -max(n, 1) <= d < max(n, 1):
            raise IndexError(f"Dimension out of range (expected to be in range of "
                             f"[{-max(n, 1)}, {max(n, 1) - 1}], but got {d})")
    return named("RollBackward0", lambda v: _roll(v, shifts, tuple(d % n for d in dims)), x)


def _roll(v: Tensor, shifts: tuple, dims: tuple) -> Tensor:
    original = v
    for s, d in zip(shifts, dims):
        size = v.shape[d]
        if size == 0:
            continue
        s = int(s) % size
        if s == 0:
            continue
        lead = (slice(None),) * d
        v = cat([v[lead + (slice(size - s, size),)], v[lead + (slice(0, size - s),)]], d)
    # (no shift: a copy, as PyTorch's -- never the input's own memory)
    return bind(P["copy"], v) if v is original else v
