"""Rounding-like elementwise functions built from the floor / ceil / round / sign
primitives, with PyTorch's names and integer rules: trunc (fix), frac, sgn (real
tensors), round with ``decimals``, fmod (the remainder of the division rounded toward
zero), the heaviside step, and Tensor.equal.

>>> import symgrad as torch
>>> torch.tensor([-2.5, 1.75]).trunc(), torch.tensor([1.25]).round(decimals=1)
(tensor([-2.,  1.]), tensor([1.2000]))
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..graph import dtypes
from ..ops import lax
from . import elementwise as E
from .common import Tensor, floating_kernel, to_tensor
from .composite import named
from .elementwise import NOT_IMPLEMENTED, NotImplementedBackward

if TYPE_CHECKING:
    from ..types import TensorOrScalar

__all__ = ["trunc", "fix", "frac", "sgn", "round", "fmod", "div", "heaviside", "equal"]


def _trunc_prims(v):
    return lax.where(lax.apply("lt", v, 0.0), lax.unary("ceil", v), lax.unary("floor", v))


def trunc(input: Tensor) -> Tensor:
    """Rounded toward zero (``TruncBackward0``, zero gradient); integers unchanged."""
    x = to_tensor(input)
    if x.dtype is dtypes.bool_:
        raise NotImplementedError("\"trunc_vml_cpu\" not implemented for 'Bool'")
    if not x.dtype.is_floating_point:
        return x.clone()
    return named("TruncBackward0", _trunc_prims, x)


fix = trunc


def frac(input: Tensor) -> Tensor:
    """``x - trunc(x)`` (``FracBackward0``, gradient 1); floating-point only."""
    x = to_tensor(input)
    floating_kernel(x, "frac_cpu")
    return named("FracBackward0", lambda v: lax.sub(v, _trunc_prims(v)), x)


def sgn(input: Tensor) -> Tensor:
    """The sign of a real tensor (``SgnBackward0``, zero gradient); bool unchanged."""
    x = to_tensor(input)
    if x.dtype is dtypes.bool_:
        return x.clone()
    return E.unary("sign", x, grad_name="SgnBackward0")


def round(input: Tensor, *, decimals: int = 0) -> Tensor:
    """Rounded half to even; with ``decimals``, PyTorch's ``nearbyint(x * 10^d) / 10^d``
    (``nearbyint(x / 10^-d) * 10^-d`` for negative d) in the input's dtype
    (``RoundBackward1``, zero gradient; floating-point only)."""
    x = to_tensor(input)
    if decimals is None or (not isinstance(decimals, int)) or isinstance(decimals, bool):
        raise TypeError(f"round() received an invalid combination of arguments - got "
                        f"(decimals={type(decimals).__name__})")
    if not x.dtype.is_floating_point:
        floating_kernel(x, "round_vml_cpu" if decimals == 0 and x.dtype is not dtypes.bool_
                        else "round_cpu")
    scale = 10.0 ** abs(decimals)

    def f(v):
        if decimals >= 0:
            return lax.div(lax.unary("round", lax.mul(v, scale)), scale)
        return lax.mul(lax.unary("round", lax.div(v, scale)), scale)
    return named("RoundBackward1", f, x)


def fmod(input: Tensor, other: TensorOrScalar) -> Tensor:
    """The remainder of ``input / other`` rounded toward zero (C's fmod: the sign of
    input), broadcast, with PyTorch's promotion; ``FmodBackward0`` (scalar divisor) /
    ``FmodBackward1`` (partials 1 and ``-trunc(input / other)``). Integers divided by
    zero raise PyTorch's ``RuntimeError: ZeroDivisionError``; bool is refused.

    >>> import symgrad as torch
    >>> torch.fmod(torch.tensor([-3.0, 5.5]), 2)
    tensor([-1.0000,  1.5000])
    """
    import numbers
    if not isinstance(input, Tensor) or not isinstance(other, (Tensor, numbers.Number)):
        got = ", ".join(type(v).__name__ for v in (input, other))
        raise TypeError(f"fmod() received an invalid combination of arguments - got ({got}), "
                        f"but expected one of:\n * (Tensor input, Tensor other, *, Tensor out "
                        f"= None)\n * (Tensor input, Number other, *, Tensor out = None)\n")
    return E.binary("fmod", input, other)


def div(input: TensorOrScalar, other: TensorOrScalar, *,
        rounding_mode: str | None = None) -> Tensor:
    """``input / other``; ``rounding_mode="floor"`` is floor_divide, ``"trunc"`` the
    quotient rounded toward zero (floats: trunc of the rounded quotient, as PyTorch's
    kernel; integers: exact, ``(input - fmod(input, other)) // other``). The rounded
    modes have zero gradient (``DivBackward2``).

    >>> import symgrad as torch
    >>> torch.div(torch.tensor([-7, 7]), 2, rounding_mode="trunc")
    tensor([-3,  3])
    """
    if rounding_mode is None:
        return E.binary("div", input, other)
    if rounding_mode == "floor":
        return E.binary("floor_divide", input, other, "DivBackward2")
    if rounding_mode != "trunc":
        raise RuntimeError("div expected rounding_mode to be one of None, 'trunc', or 'floor' "
                           f"but found '{rounding_mode}'")
    operands = [E._operand(input), E._operand(other)]
    if not isinstance(operands[0], Tensor) and not isinstance(operands[1], Tensor):
        operands[0] = to_tensor(operands[0])
    dt = E.promote(operands)
    if dt.category != "float":
        return E.binary("floor_divide", E.binary("sub", input, fmod(to_tensor(input), other)),
                        other)
    a, b = (o.to(dt) if isinstance(o, Tensor) else E._scalar_as(o, dt) for o in operands)
    return named("DivBackward2", lambda u, v: _trunc_prims(lax.div(u, v)), a, b)


def equal(input: Tensor, other: Tensor, *, _position: int = 2) -> bool:
    """Same shape and the same values (NaN differs from itself), as ``torch.equal``
    (`_position`: where ``other`` stands in the call, 1 for ``Tensor.equal``)."""
    import numpy as np
    if not isinstance(other, Tensor):
        raise TypeError(f"equal(): argument 'other' (position {_position}) must be Tensor, "
                        f"not {type(other).__name__}")
    x = to_tensor(input)
    return tuple(x.shape) == tuple(other.shape) and bool(
        np.array_equal(np.asarray(x.detach()), np.asarray(other.detach())))


def heaviside(input: Tensor, values: Tensor, *, _position: int = 2,
              _op: str = "heaviside") -> Tensor:
    """0 where input < 0 (or NaN), ``values`` where it is 0, 1 where > 0; not
    differentiable (``grad_fn=<NotImplemented>``, backward raises PyTorch's error naming
    `_op`)."""
    x = to_tensor(input)
    if not isinstance(values, Tensor):
        raise TypeError(f"heaviside(): argument 'values' (position {_position}) must be "
                        f"Tensor, not {type(values).__name__}")
    if values.dtype is not x.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different "
                           "dtypes.")

    def f(v, w):
        above = lax.cast(E.binary("gt", v, 0), v.dtype)
        return E.where(E.binary("eq", v, 0), w, above)
    out = named(NOT_IMPLEMENTED, f, x, values)
    if out.grad_fn is not None:
        out.grad_fn._inner = NotImplementedBackward(_op)
    return out
