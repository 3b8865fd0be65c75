"""Statistics and running totals as PyTorch names them: ``var``, ``std`` (with
``correction`` / ``unbiased``) and ``std_mean`` / ``var_mean``, ``nansum`` / ``nanmean``,
``aminmax``, ``cumsum``, ``cumprod``, ``logcumsumexp``, ``cummax`` / ``cummin``; each
recorded under PyTorch's backward name."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..dispatch import bind
from ..graph import dtypes
from ..graph.primitives import PRIMITIVES as P
from ..ops import lax
from .common import Tensor, dims_arg, to_tensor, wrap_dim
from .composite import named
from .reduction import return_types

if TYPE_CHECKING:
    from ..types import DTypeLike

__all__ = ["var", "std", "cumsum", "cumprod", "logcumsumexp", "cummax", "cummin", "std_mean",
           "var_mean", "nansum", "nanmean", "aminmax"]


def _correction(unbiased, correction) -> float:
    if isinstance(unbiased, (int, float)) and not isinstance(unbiased, bool) and correction is None:
        raise TypeError("var(): argument 'unbiased' must be bool")
    if correction is None:
        return 1.0 if unbiased is None or unbiased else 0.0
    return float(correction)


def _var_prims(x: Tensor, axes: tuple[int, ...], keepdim: bool, corr: float) -> Tensor:
    n = int(np.prod([x.shape[a] for a in axes])) if axes else 1
    mean = bind(P["mean"], x, axes=axes, keepdim=True)
    d = lax.sub(x, mean)
    ss = bind(P["sum"], lax.mul(d, d), axes=axes, keepdim=keepdim)
    return lax.div(ss, lax.full((), max(n - corr, 0), x.dtype))


def _prepare(name, x, dim, unbiased, correction, keepdim):
    x = to_tensor(x)
    if isinstance(dim, bool):                    # var(x, unbiased) in the positional form
        unbiased, dim = dim, None
    if not x.dtype.is_floating_point:
        raise RuntimeError("std and var only support floating point and complex dtypes")
    axes = dims_arg(dim, x.dim()) if dim is not None else tuple(range(x.dim()))
    return x, axes, _correction(unbiased, correction), bool(keepdim)


def var(input: Tensor, dim: int | tuple[int, ...] | list[int] | None = None,
        unbiased: bool | None = None, keepdim: bool = False, *,
        correction: float | None = None) -> Tensor:
    """The variance over ``dim`` (all dimensions by default), divided by N - correction
    (``correction=1``, Bessel's, unless ``unbiased=False`` or ``correction`` says
    otherwise); a non-positive divisor gives inf / nan as in PyTorch."""
    x, axes, corr, keepdim = _prepare("var", input, dim, unbiased, correction, keepdim)
    return named("VarBackward0", lambda v: _var_prims(v, axes, keepdim, corr), x, saves=(0,))


def _masked_sqrt(v):
    """sqrt(v) with a zero derivative where v == 0 (no NaN from the untaken branch)."""
    zero = lax.eq(v, 0.0)
    return lax.where(zero, 0.0, lax.unary("sqrt", lax.where(zero, 1.0, v)))


def std(input: Tensor, dim: int | tuple[int, ...] | list[int] | None = None,
        unbiased: bool | None = None, keepdim: bool = False, *,
        correction: float | None = None) -> Tensor:
    """The standard deviation: ``sqrt(var(...))`` with the same arguments; where it is 0
    (a constant slice) its gradient is 0, as PyTorch's std_backward masks it (not NaN)."""
    x, axes, corr, keepdim = _prepare("std", input, dim, unbiased, correction, keepdim)
    return named("StdBackward0",
                 lambda v: _masked_sqrt(_var_prims(v, axes, keepdim, corr)), x,
                 saves=(0,), saves_output=True)


def _scan(prim: str, input, dim: int, dtype) -> Tensor:
    """A running total along ``dim``; integer and bool inputs accumulate in int64 as in
    PyTorch."""
    x = to_tensor(input)
    if dtype is not None:
        x = lax.cast(x, dtypes.as_dtype(dtype))
    elif not x.dtype.is_floating_point:
        x = lax.cast(x, dtypes.int64)
    if x.dim() == 0:
        wrap_dim(dim, 1)
        return bind(P[prim], x.reshape(1), axis=0).reshape(())
    return bind(P[prim], x, axis=wrap_dim(dim, x.dim()))


def cumsum(input: Tensor, dim: int, *, dtype: DTypeLike | None = None) -> Tensor:
    """Running sums along ``dim`` (``CumsumBackward0``)."""
    return _scan("cumsum", input, dim, dtype)


def cumprod(input: Tensor, dim: int, *, dtype: DTypeLike | None = None) -> Tensor:
    """Running products along ``dim`` (``CumprodBackward0``); the gradient is exact where
    the input has zeros."""
    return _scan("cumprod", input, dim, dtype)


def logcumsumexp(input: Tensor, dim: int) -> Tensor:
    """``log(cumsum(exp(input), dim))`` computed stably (``LogcumsumexpBackward0``);
    floating-point input only."""
    x = to_tensor(input)
    if not x.dtype.is_floating_point:
        raise NotImplementedError(f'"logcumsumexp_out_cpu" not implemented for '
                                  f"'{x.dtype.c_name}'")
    return _scan("logcumsumexp", x, dim, None)


def _running(kind: str, input, dim: int):
    x = to_tensor(input)
    ret = getattr(return_types, f"cum{kind}")
    name = f"Cum{kind}Backward0"
    if x.dim() == 0:
        wrap_dim(dim, 1)
        return ret(named(name, lambda v: bind(P["copy"], v), x), lax.full((), 0, dtypes.int64))
    axis = wrap_dim(dim, x.dim())
    idx = bind(P["running_index"], x, axis=axis, kind=kind)
    values = named(name, lambda v: bind(P["gather"], v, idx, axis=axis), x, keeps=(idx,))
    return ret(values, idx)


def cummax(input: Tensor, dim: int) -> return_types.cummax:
    """``(values, indices)``: the running maximum along ``dim`` and where it is (the latest
    of equal elements; NaN stays until the next NaN), as PyTorch (``CummaxBackward0``)."""
    return _running("max", input, dim)


def cummin(input: Tensor, dim: int) -> return_types.cummin:
    """:func:`cummax` for the running minimum (``CumminBackward0``)."""
    return _running("min", input, dim)


def _with_mean(name, spread, input, dim, unbiased, keepdim, correction):
    x, axes, corr, keepdim = _prepare(name, input, dim, unbiased, correction, keepdim)
    grad = f"{name.replace('_', ' ').title().replace(' ', '')}Backward0"
    first = named(grad, lambda v: spread(_var_prims(v, axes, keepdim, corr)), x)
    mean = named(grad, lambda v: bind(P["mean"], v, axes=axes, keepdim=keepdim), x)
    return first, mean


def std_mean(input: Tensor, dim: int | tuple[int, ...] | list[int] | None = None,
             unbiased: bool | None = None, keepdim: bool = False, *,
             correction: float | None = None) -> tuple[Tensor, Tensor]:
    """``(std, mean)`` with :func:`std`'s arguments (``StdMeanBackward0``)."""
    return _with_mean("std_mean", _masked_sqrt, input, dim, unbiased, keepdim, correction)


def var_mean(input: Tensor, dim: int | tuple[int, ...] | list[int] | None = None,
             unbiased: bool | None = None, keepdim: bool = False, *,
             correction: float | None = None) -> tuple[Tensor, Tensor]:
    """``(var, mean)`` with :func:`var`'s arguments (``VarMeanBackward0``)."""
    return _with_mean("var_mean", lambda v: v, input, dim, unbiased, keepdim, correction)


def _nan_zeroed(v):
    return lax.where(lax.unary("isnan", v), 0.0, v)


def nansum(input: Tensor, dim: int | tuple[int, ...] | list[int] | None = None,
           keepdim: bool = False, *, dtype: DTypeLike | None = None) -> Tensor:
    """The sum treating NaN as zero (``NansumBackward0``; NaN elements get no gradient);
    integers sum in int64."""
    x = to_tensor(input)
    if dtype is not None:
        x = lax.cast(x, dtypes.as_dtype(dtype))
    axes = dims_arg(dim, x.dim())
    if not x.dtype.is_floating_point:
        return bind(P["sum"], lax.cast(x, dtypes.int64), axes=axes, keepdim=bool(keepdim))
    return named("NansumBackward0", lambda v: bind(P["sum"], _nan_zeroed(v), axes=axes,
                                                   keepdim=bool(keepdim)), x)


def nanmean(input: Tensor, dim: int | tuple[int, ...] | list[int] | None = None,
            keepdim: bool = False, *, dtype: DTypeLike | None = None) -> Tensor:
    """The mean of the non-NaN elements: ``nansum / count`` (``DivBackward0``)."""
    x = to_tensor(input)
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"nanmean(): expected input to have floating point or complex dtype "
                           f"but got {x.dtype.c_name.capitalize()}")
    count = lax.sum(lax.cast(lax.unary("logical_not", lax.unary("isnan", x)), x.dtype),
                    dims_arg(dim, x.dim()), keepdim=bool(keepdim))
    return nansum(x, dim, keepdim, dtype=dtype) / count


def aminmax(input: Tensor, *, dim: int | None = None,
            keepdim: bool = False) -> return_types.aminmax:
    """``(min, max)`` over all elements or along ``dim`` (``AminmaxBackward0``; ties share
    the gradient, as amin / amax)."""
    x = to_tensor(input)
    if x.numel() == 0 or (dim is not None and x.dim() and x.shape[wrap_dim(dim, x.dim())] == 0):
        raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as the "
                           "operation has no identity.")
    axes = dims_arg(dim, x.dim())
    return return_types.aminmax(*(
        named("AminmaxBackward0", lambda v, p=p: bind(P[p], v, axes=axes, keepdim=bool(keepdim)),
              x) for p in ("amin", "amax")))
