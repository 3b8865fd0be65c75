"""Order statistics as PyTorch names them: ``median``, ``nanmedian``, ``kthvalue``,
``mode``, ``quantile``, ``nanquantile`` -- PyTorch's values, indices (its CPU kernels'
choice among ties, :mod:`symgrad.ops.order`), result types, errors and backward names.

Gradients are formulas on primitives (so compiled code and double backward see them):
a value picked along a dim routes its gradient to the picked index (a gather); the full
``median()`` / ``nanmedian()`` share it evenly among the elements equal to the result
(the NaN elements when the result is NaN), as PyTorch's ``evenly_distribute_backward``;
``quantile`` is sort, gather and PyTorch's ``lerp`` between neighbours.
"""
from __future__ import annotations

from ..dispatch import bind
from ..graph import dtypes
from ..graph.primitives import PRIMITIVES as P
from ..ops import lax
from .arithmetic import lerp_formula
from .common import Tensor, to_tensor, wrap_dim
from .composite import named
from .reduction import return_types

__all__ = ["median", "nanmedian", "kthvalue", "mode", "quantile", "nanquantile"]


def _index(x, axis, kind, k=0):
    return bind(P["order_index"], x, axis=axis, kind=kind, k=k)


def _shown(name):
    """The name PyTorch's errors give: nanmedian's are median's kernel's."""
    return "median" if name == "nanmedian" else name


def _check_dtype(name, x, kernel="cpu"):
    if x.dtype is dtypes.bool_ and name != "mode":        # (mode counts bools too)
        raise NotImplementedError(f'"{_shown(name)}_{kernel}" not implemented for \'Bool\'')


def _shared(flat, m):
    """A formula equal to ``m`` (an element of 1-D ``flat``) whose gradient is shared
    evenly by the elements equal to it -- by the NaN elements when ``m`` is NaN."""
    isnan = lax.unary("isnan", flat)
    count = lax.sum(lax.cast(isnan, flat.dtype), (0,))
    nan_mean = lax.div(lax.sum(lax.where(isnan, flat, 0.0), (0,)),
                       bind(P["maximum"], count, lax.full((), 1, flat.dtype)))
    equal = lax.where(lax.eq(flat, m), flat, float("-inf"))
    tied = bind(P["amax"], equal, axes=(0,), keepdim=False)
    return lax.where(lax.unary("isnan", lax.reshape(m, ())), nan_mean, tied)


def _full(name, kind, x):
    """median() / nanmedian() of all elements (``<Name>Backward0``)."""
    x = to_tensor(x)
    _check_dtype(name, x)
    if x.numel() == 0:
        return lax.full((), float("nan"), x.dtype)

    def fn(v):
        flat = lax.reshape(v, (v.numel(),))
        m = bind(P["gather"], flat, _index(flat, 0, kind), axis=0)
        if not v.dtype.is_floating_point:
            return lax.reshape(m, ())
        return _shared(flat, m)
    return named(f"{name.capitalize()}Backward0", fn, x)


def _along(name, kind, ret, grad_name, x, dim, keepdim, k=0):
    """(values, indices) of the element `kind` picks along `dim`; the values' gradient
    goes to the picked index."""
    x = to_tensor(x)
    _check_dtype(name, x, "out" if _shown(name) == "median" else "cpu")
    axis = wrap_dim(dim, max(x.dim(), 1))
    n = x.shape[axis] if x.dim() else 1
    if x.dim() and n == 0:
        raise IndexError(f"{_shown(name)}(): Expected reduction dim {axis} to have non-zero "
                         "size.")
    if kind == "kth" and not 0 <= k < n:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {axis}")
    if x.dim() == 0:
        return ret(named(grad_name, lambda v: bind(P["copy"], v), x),
                   lax.full((), 0, dtypes.int64))
    idx = _index(x, axis, kind, k)
    shape = x.shape[:axis] + ((1,) if keepdim else ()) + x.shape[axis + 1:]
    indices = idx if keepdim else lax.reshape(idx, shape)
    values = named(grad_name, lambda v: lax.reshape(bind(P["gather"], v, idx, axis=axis), shape),
                   x, keeps=(indices,))
    return ret(values, indices)


def median(input: Tensor, dim: int | None = None,
           keepdim: bool = False) -> Tensor | return_types.median:
    """The lower median of all elements (NaN if any is NaN), or ``(values, indices)``
    along ``dim`` (``MedianBackward0`` / ``MedianBackward1``)."""
    if dim is None:
        return _full("median", "median", input)
    return _along("median", "median", return_types.median, "MedianBackward1", input, dim,
                  keepdim)


def nanmedian(input: Tensor, dim: int | None = None,
              keepdim: bool = False) -> Tensor | return_types.nanmedian:
    """:func:`median` ignoring NaN (NaN only where every element is NaN)."""
    if dim is None:
        return _full("nanmedian", "nanmedian", input)
    return _along("nanmedian", "nanmedian", return_types.nanmedian, "NanmedianBackward1", input,
                  dim, keepdim)


def kthvalue(input: Tensor, k: int, dim: int = -1,
             keepdim: bool = False) -> return_types.kthvalue:
    """``(values, indices)`` of the ``k``-th smallest element along ``dim``
    (``KthvalueBackward0``)."""
    return _along("kthvalue", "kth", return_types.kthvalue, "KthvalueBackward0", input, dim,
                  keepdim, int(k) - 1)


def mode(input: Tensor, dim: int = -1, keepdim: bool = False) -> return_types.mode:
    """``(values, indices)`` of the most frequent value along ``dim`` (the smallest of
    equally frequent ones) and an index of it (``ModeBackward0``)."""
    return _along("mode", "mode", return_types.mode, "ModeBackward0", input, dim, keepdim)


# ---- quantile -------------------------------------------------------------------------------
_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _q_tensor(q, x):
    """`q` as a 1-D tensor of x's dtype (and whether it was a scalar), checked as PyTorch."""
    if isinstance(q, Tensor):
        if q.dim() > 1:
            raise RuntimeError("quantile() q must be a scalar or 1D tensor")
        if q.dtype is not x.dtype:
            raise RuntimeError("quantile() q tensor must be same dtype as the input tensor")
        if q._data is not None and not ((q._data >= 0) & (q._data <= 1)).all():
            raise RuntimeError("quantile() q values must be in the range [0, 1]")
        return lax.reshape(q, (q.numel(),)), q.dim() == 0
    q = float(q)
    if not 0 <= q <= 1:
        raise RuntimeError(f"quantile() q must be in the range [0, 1] but got {q:g}")
    return lax.full((1,), q, x.dtype), True


def _quantile(x, q, dim, keepdim, interpolation, ignore_nan):
    x = to_tensor(x)
    if x.dtype not in (dtypes.float32, dtypes.float64):
        raise RuntimeError("quantile() input tensor must be either float or double dtype")
    qs, scalar = _q_tensor(q, x)
    if interpolation not in _INTERPOLATIONS:
        raise RuntimeError("quantile() interpolation must be one of linear, lower, higher, "
                           f"midpoint or nearest, but got {interpolation}")
    axis = None if dim is None else wrap_dim(dim, max(x.dim(), 1))
    if x.numel() == 0:
        raise RuntimeError("quantile() input tensor must be non-empty")
    n = x.numel() if axis is None or not x.dim() else x.shape[axis]
    if n > 2 ** 24:                   # (ATen sorts the rows and limits their length)
        raise RuntimeError("quantile() input tensor is too large")
    if dim is None:
        out_shape = (1,) * x.dim() if keepdim else ()
    else:
        rest = list(x.shape)
        if x.dim():
            rest[axis] = 1
            if not keepdim:
                del rest[axis]
        out_shape = tuple(rest)
    nq = qs.shape[0]
    final = out_shape if scalar else (nq,) + out_shape

    def fn(v, qv):
        rows = _rows(v, axis)                        # (m, n): the reduced dim last
        return lax.reshape(_quantile_rows(rows, qv, interpolation, ignore_nan), final)
    return named("SqueezeBackward4", fn, x, qs)


def _rows(v, axis):
    if axis is None or v.dim() == 0:
        return lax.reshape(v, (1, v.numel()))
    perm = tuple(a for a in range(v.dim()) if a != axis) + (axis,)
    moved = lax.permute(v, perm) if perm != tuple(range(v.dim())) else v
    n = v.shape[axis]
    return lax.reshape(moved, (v.numel() // n, n))


def _quantile_rows(rows, qv, interpolation, ignore_nan):
    """(nq, m): the quantiles qv of each row of (m, n) `rows`, as ATen's quantile_compute."""
    m, n = rows.shape
    dt = rows.dtype
    srt = bind(P["gather"], rows, bind(P["argsort"], rows, axis=1, descending=False), axis=1)
    isnan = lax.unary("isnan", srt)
    q = lax.reshape(qv, (1, qv.shape[0]))
    if ignore_nan:
        valid = lax.sum(lax.cast(lax.unary("logical_not", isnan), dt), (1,), keepdim=True)
        ranks = lax.mul(q, lax.sub(valid, 1.0))
        ranks = lax.where(bind(P["lt"], ranks, 0.0), 0.0, ranks)
    else:
        last = float(n - 1)
        anynan = bind(P["amax"], isnan, axes=(1,), keepdim=True)
        ranks = lax.where(anynan, last, lax.mul(q, lax.full((), last, dt)))
    ranks = lax.expand(ranks, (m, qv.shape[0]))
    if interpolation in ("lower", "higher", "nearest"):
        ranks = lax.unary({"lower": "floor", "higher": "ceil", "nearest": "round"}[interpolation],
                          ranks)
    below = lax.cast(lax.unary("floor", ranks), dtypes.int64)
    vb = bind(P["gather"], srt, below, axis=1)
    if interpolation in ("linear", "midpoint"):
        above = lax.cast(lax.unary("ceil", ranks), dtypes.int64)
        va = bind(P["gather"], srt, above, axis=1)
        w = lax.full((m, qv.shape[0]), 0.5, dt) if interpolation == "midpoint" else \
            lax.sub(ranks, lax.cast(below, dt))
        vb = lerp_formula(vb, va, w)
    return lax.permute(vb, (1, 0))


def quantile(input: Tensor, q: float | Tensor, dim: int | None = None, keepdim: bool = False,
             *, interpolation: str = "linear") -> Tensor:
    """The ``q``-th quantiles of ``input`` (flattened, or along ``dim``); a 1-D ``q`` puts
    its dim first. NaN where a row holds NaN."""
    return _quantile(input, q, dim, keepdim, interpolation, False)


def nanquantile(input: Tensor, q: float | Tensor, dim: int | None = None, keepdim: bool = False,
                *, interpolation: str = "linear") -> Tensor:
    """:func:`quantile` ignoring NaN (NaN where a row has no other value)."""
    return _quantile(input, q, dim, keepdim, interpolation, True)

