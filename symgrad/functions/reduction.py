"""Reductions with PyTorch's signatures, dtypes and names: sum, mean, prod, max / min
(full, along a dim with indices), amax / amin, argmax / argmin, logsumexp, norm."""
from __future__ import annotations

from collections import namedtuple
from typing import TYPE_CHECKING, overload

import numpy as np

from ..graph import dtypes
from ..dispatch import _lifter, bind
from ..ops import lax
from ..graph.primitives import NUMPY_RULES, PRIMITIVES as P
from .common import Tensor, dims_arg, to_tensor, wrap_dim
from .composite import named
from .kernels import gather_kernel
from .elementwise import binary

if TYPE_CHECKING:
    from ..types import DTypeLike, Dims, ValuesIndices

__all__ = ["sum", "mean", "prod", "max", "min", "amax", "amin", "argmax", "argmin",
           "logsumexp", "norm", "return_types"]


def _ret_type(name, fields=("values", "indices")):
    base = namedtuple(name, fields)

    def __repr__(self):
        parts = ",\n".join(f"{f}={v!r}" for f, v in zip(fields, self))
        return f"torch.return_types.{name}(\n{parts})"
    return type(name, (base,), {"__repr__": __repr__, "__slots__": ()})


class return_types:
    max = _ret_type("max")
    min = _ret_type("min")
    sort = _ret_type("sort")
    topk = _ret_type("topk")
    median = _ret_type("median")
    nanmedian = _ret_type("nanmedian")
    kthvalue = _ret_type("kthvalue")
    mode = _ret_type("mode")
    cummax = _ret_type("cummax")
    cummin = _ret_type("cummin")
    aminmax = _ret_type("aminmax", ("min", "max"))
    triangular_solve = _ret_type("triangular_solve", ("solution", "cloned_coefficient"))
    linalg_eigh = _ret_type("linalg_eigh", ("eigenvalues", "eigenvectors"))
    linalg_qr = _ret_type("linalg_qr", ("Q", "R"))
    linalg_lstsq = _ret_type("linalg_lstsq", ("solution", "residuals", "rank",
                                              "singular_values"))
    slogdet = _ret_type("slogdet", ("sign", "logabsdet"))
    linalg_slogdet = _ret_type("linalg_slogdet", ("sign", "logabsdet"))
    svd = _ret_type("svd", ("U", "S", "V"))
    linalg_svd = _ret_type("linalg_svd", ("U", "S", "Vh"))


def _acc_dtype(x, dtype):
    if dtype is not None:
        return dtypes.as_dtype(dtype)
    return dtypes.int64 if x.dtype.category in ("int", "bool") else x.dtype


def _accumulating(prim: str, x, dim, keepdim, dtype):
    """sum / prod: integers and bools accumulate in int64; names ...Backward0 for a full
    reduction, ...Backward1 along dims (as PyTorch)."""
    x = to_tensor(x)
    if dtype is not None or x._dtype.category != "float":
        x = lax.cast(x, _acc_dtype(x, dtype))
    axes = dims_arg(dim, x.dim())
    name = _ACC_NAMES[prim, dim is None]
    return bind(P[prim], x, axes=axes, keepdim=bool(keepdim), grad_name=name)


_ACC_NAMES = {(p, full): f"{p.capitalize()}Backward{0 if full else 1}"
              for p in ("sum", "prod") for full in (True, False)}


def sum(x: Tensor, dim: Dims | None = None, keepdim: bool = False, *,
        dtype: DTypeLike | None = None) -> Tensor:
    return _accumulating("sum", x, dim, keepdim, dtype)


def mean(x: Tensor, dim: Dims | None = None, keepdim: bool = False, *,
         dtype: DTypeLike | None = None) -> Tensor:
    x = to_tensor(x)
    if dtype is not None:
        x = lax.cast(x, dtypes.as_dtype(dtype))
    if x._dtype.category != "float":
        raise RuntimeError("mean(): could not infer output dtype. Input dtype must be either a "
                           f"floating point or complex dtype. Got: {x.dtype.c_name.capitalize()}")
    axes = dims_arg(dim, x.dim())
    name = "MeanBackward0" if dim is None else "MeanBackward1"
    return bind(P["mean"], x, axes=axes, keepdim=bool(keepdim), grad_name=name)


def prod(x: Tensor, dim: Dims | None = None, keepdim: bool = False, *,
         dtype: DTypeLike | None = None) -> Tensor:
    return _accumulating("prod", x, dim, keepdim, dtype)


def _extremum(kind, x, dim, keepdim, other):
    x = to_tensor(x)
    if isinstance(dim, Tensor):          # torch.max(a, b) is maximum
        other, dim = dim, None
    if other is not None:
        return binary("maximum" if kind == "max" else "minimum", x, other)
    prim = P["amax" if kind == "max" else "amin"]
    if dim is None:
        _check_nonempty(kind, x, (), ())
        if x._data is not None and x.dtype.is_floating_point and np.isnan(x._data).any():
            # PyTorch: a NaN result sends the gradient evenly to the NaN elements
            pos = Tensor._from_array(np.flatnonzero(np.isnan(x._data)), dtypes.int64)
            return named(f"{kind.capitalize()}Backward1", lambda v: bind(
                P["mean"], bind(P["take"], lax.reshape(v, (v.numel(),)), pos, axis=0),
                axes=(0,), keepdim=False), x)
        if x._data is None and x.dtype.is_floating_point:    # (traced: NaN known per call)
            return named(f"{kind.capitalize()}Backward1",
                         lambda v: _nan_shared_extremum(prim, kind, v), x)
        return bind(prim, x, axes=tuple(range(x.dim())), keepdim=False,
                    grad_name=f"{kind.capitalize()}Backward1")
    xs = x._data.shape if x._data is not None else tuple(x.shape)
    axis = wrap_dim(dim, len(xs))
    if xs and xs[axis] == 0:
        raise IndexError(f"{kind}(): Expected reduction dim {axis} to have non-zero size.")
    arg = "argmax" if kind == "max" else "argmin"
    if not xs:
        value = named(f"{kind.capitalize()}Backward0", lambda v: bind(P["copy"], v), x)
        return getattr(return_types, kind)(value, lax.full((), 0, dtypes.int64))
    shape = xs[:axis] + ((1,) if keepdim else ()) + xs[axis + 1:]
    if x._data is not None and _lifter[0] is None:
        # eager: the indices straight from the primitive's numpy rule (two binds cost
        # more than the whole op on small tensors); a fresh tensor, as PyTorch's
        at = NUMPY_RULES[arg](x._data, axis=axis, keepdim=True).astype(np.int64, copy=False)
        idx = Tensor._from_array(at, dtypes.int64)
        indices = idx if keepdim else Tensor._from_array(at.reshape(shape), dtypes.int64)
    else:
        idx = bind(P[arg], x, axis=axis, keepdim=True)
        indices = idx if keepdim else lax.reshape(idx, shape)
    # the backward reads ``idx``, which the returned indices view: saved and
    # version-checked as PyTorch saves its indices (an in-place update of them raises)
    values = named(f"{kind.capitalize()}Backward0",
                   lambda v: lax.reshape(bind(P["gather"], v, idx, axis=axis), shape), x,
                   kernel=None if idx._data is None else gather_kernel(idx._data, axis, shape),
                   keeps=(indices,))
    return getattr(return_types, kind)(values, indices)


def _nan_shared_extremum(prim, kind: str, v):
    """The full max() / min() of traced v with PyTorch's gradient when v holds NaN: the
    result is NaN and the NaN elements share the gradient evenly, the others get 0 (amax's
    own rule would give NaN everywhere); without NaN, amax's rule (ties share)."""
    axes = tuple(range(v.dim()))
    isnan = lax.unary("isnan", v)
    clean = lax.where(isnan, float("-inf") if kind == "max" else float("inf"), v)
    extreme = bind(prim, clean, axes=axes, keepdim=False)
    count = lax.sum(lax.cast(isnan, v.dtype), axes)
    nan_mean = lax.div(lax.sum(lax.where(isnan, v, 0.0), axes),
                       bind(P["maximum"], count, lax.full((), 1, v.dtype)))
    return lax.where(lax.apply("gt", count, 0.0), nan_mean, extreme)


@overload
def max(x: Tensor, dim: None = None, keepdim: bool = False, *, out: None = None,
        other: Tensor | None = None) -> Tensor: ...
@overload
def max(x: Tensor, dim: Tensor, keepdim: bool = False, *, out: None = None,
        other: None = None) -> Tensor: ...
@overload
def max(x: Tensor, dim: int, keepdim: bool = False, *, out: None = None,
        other: None = None) -> ValuesIndices: ...


def max(x: Tensor, dim: int | Tensor | None = None, keepdim: bool = False, *, out: None = None,
        other: Tensor | None = None) -> Tensor | ValuesIndices:
    return _extremum("max", x, dim, keepdim, other)


@overload
def min(x: Tensor, dim: None = None, keepdim: bool = False, *, out: None = None,
        other: Tensor | None = None) -> Tensor: ...
@overload
def min(x: Tensor, dim: Tensor, keepdim: bool = False, *, out: None = None,
        other: None = None) -> Tensor: ...
@overload
def min(x: Tensor, dim: int, keepdim: bool = False, *, out: None = None,
        other: None = None) -> ValuesIndices: ...


def min(x: Tensor, dim: int | Tensor | None = None, keepdim: bool = False, *, out: None = None,
        other: Tensor | None = None) -> Tensor | ValuesIndices:
    return _extremum("min", x, dim, keepdim, other)


def _check_nonempty(name, x, dims, axes):
    """PyTorch's errors for a max / min over no elements (it has no identity)."""
    if x.numel():
        return
    if not axes:
        raise RuntimeError(f"{name}(): Expected reduction dim to be specified for "
                           "input.numel() == 0. Specify the reduction dim with the 'dim' "
                           "argument.")
    for d in dims:                       # in the order given, as PyTorch reports them
        if x.shape[wrap_dim(d, x.dim())] == 0:
            raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")


def amax(x: Tensor, dim: Dims = (), keepdim: bool = False) -> Tensor:
    x = to_tensor(x)
    every = isinstance(dim, tuple) and not dim       # (a numpy int is not compared to ())
    axes = dims_arg(None if every else dim, x.dim())
    dims = () if every else tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)
    _check_nonempty("amax", x, dims, axes if dims else ())
    return bind(P["amax"], x, axes=axes, keepdim=bool(keepdim))


def _truth(kind: str, x, dim, keepdim):
    x = to_tensor(x)
    b = x if x.dtype is dtypes.bool_ else bind(P["ne"], x, 0)
    out = bind(P["amin" if kind == "all" else "amax"], b, axes=dims_arg(dim, x.dim()),
               keepdim=bool(keepdim))
    return out if x.dtype is not dtypes.uint8 else bind(P["cast"], out, dtype=dtypes.uint8)


def all(x: Tensor, dim: Dims | None = None, keepdim: bool = False) -> Tensor:   # noqa: A001  (torch.all)
    """Whether every element (along ``dim``) is nonzero, as a bool tensor.

    >>> import symgrad as torch
    >>> torch.tensor([[1.0, 0.0], [2.0, 3.0]]).all(dim=1)
    tensor([False,  True])
    """
    return _truth("all", x, dim, keepdim)


def any(x: Tensor, dim: Dims | None = None, keepdim: bool = False) -> Tensor:   # noqa: A001  (torch.any)
    """Whether some element (along ``dim``) is nonzero, as a bool tensor."""
    return _truth("any", x, dim, keepdim)


def amin(x: Tensor, dim: Dims = (), keepdim: bool = False) -> Tensor:
    x = to_tensor(x)
    every = isinstance(dim, tuple) and not dim       # (a numpy int is not compared to ())
    axes = dims_arg(None if every else dim, x.dim())
    dims = () if every else tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)
    _check_nonempty("amin", x, dims, axes if dims else ())
    return bind(P["amin"], x, axes=axes, keepdim=bool(keepdim))


def _arg(kind, x, dim, keepdim):
    x = to_tensor(x)
    prim = P["argmax" if kind == "max" else "argmin"]
    if x.dtype is dtypes.bool_:
        raise RuntimeError(f"arg{kind}(): does not support bool input")
    if dim is None:
        flat = lax.reshape(x, (x.numel(),))
        if x.numel() == 0:
            raise IndexError(f"arg{kind}(): Expected reduction dim to be specified for "
                             "input.numel() == 0.")
        out = bind(prim, flat, axis=0, keepdim=False)
        return lax.reshape(out, (1,) * x.dim()) if keepdim else out
    axis = wrap_dim(dim, x.dim())
    if x.dim() == 0:
        return lax.full((), 0, dtypes.int64)
    if x.shape[axis] == 0:
        raise IndexError(f"arg{kind}(): Expected reduction dim {axis} to have non-zero size.")
    return bind(prim, x, axis=axis, keepdim=bool(keepdim))


def argmax(x: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    return _arg("max", x, dim, keepdim)


def argmin(x: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    return _arg("min", x, dim, keepdim)


def _logsumexp_prims(x, axes, keepdim):
    # the shift is a constant for autograd (the result does not depend on it): no amax in
    # the backward graph, which would keep x saved and see later in-place updates of it
    finite = lax.finite_max(x.detach(), axes)
    s = lax.sum(lax.unary("exp", lax.sub(x, lax.expand(finite, x.shape))), axes, keepdim=True)
    out = lax.add(lax.unary("log", s), finite)
    return out if keepdim else lax.reshape(out, tuple(
        d for i, d in enumerate(x.shape) if i not in axes))


def logsumexp(x: Tensor, dim: Dims, keepdim: bool = False) -> Tensor:
    """log(sum(exp(x))) along `dim`, shifted by the max so it cannot overflow."""
    x = to_tensor(x)
    if not x.dtype.is_floating_point:
        x = lax.cast(x, dtypes.get_default_dtype())
    axes = dims_arg(dim, x.dim())
    return named("LogsumexpBackward0", lambda v: _logsumexp_prims(v, axes, keepdim), x,
                 saves=(0,), saves_output=True)


def norm(x: Tensor, p: float | str | None = "fro", dim: Dims | None = None, keepdim: bool = False,
         dtype: DTypeLike | None = None) -> Tensor:
    """Vector p-norm (p = 2 / 'fro' by default, 1, inf, -inf, or any p > 0)."""
    x = to_tensor(x)
    if isinstance(p, Tensor):       # (traced: the error naming static_argnums)
        p = float(p)
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor "
                           f"as input. Got {x.dtype.c_name.capitalize()}")
    if dtype is not None:
        want = dtypes.as_dtype(dtype)
        if not want.is_floating_point:
            raise RuntimeError(f"linalg.vector_norm: dtype should be floating point or "
                               f"complex, but got {want.c_name.capitalize()}")
        if dtypes._promote_two(x.dtype, want) is not want:
            raise RuntimeError(f"linalg.vector_norm: the dtype of the input "
                               f"({x.dtype.c_name.capitalize()}) should be convertible without "
                               f"narrowing to the specified dtype ({want.c_name.capitalize()})")
        x = lax.cast(x, want)
    if p in ("fro", "nuc") and isinstance(dim, (tuple, list)) and len(dim) > 2:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got "
                           f"{' '.join(str(d) for d in dim)}")
    if p == "nuc":          # the nuclear norm of the matrices in two dims (all: a matrix)
        dims = tuple(range(x.dim())) if dim is None else tuple(dim) if isinstance(
            dim, (tuple, list)) else (dim,)
        if len(dims) != 2:
            raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got "
                               f"{' '.join(str(d) for d in dims)}")
        from .solvers import matrix_norm      # (solvers builds on this module)
        return matrix_norm(x, "nuc", dims, keepdim)
    axes = dims_arg(dim, x.dim())
    if p == "fro" or p is None:
        p = 2
    if (p < 0 or p == float("inf")) and x.numel() == 0:      # (no identity)
        name = format(float(p), ".6g")      # (C++'s default stream format)
        if dim is None:
            raise RuntimeError(f"linalg.vector_norm cannot compute the {name} norm on an empty "
                               "tensor because the operation does not have an identity")
        dims = tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)
        for d in dims:
            if x.shape[d] == 0:
                raise RuntimeError(f"linalg.vector_norm cannot compute the {name} norm on the "
                                   f"dimension {d}because this dimension is empty and the "
                                   "operation does not have an identity")
    if p == 0:      # the count of non-zeros: PyTorch's backward gives it no gradient
        return named("LinalgVectorNormBackward0", lambda v: lax.sum(
            lax.cast(lax.apply("ne", v, 0.0), v.dtype), axes, keepdim), x)
    return named("LinalgVectorNormBackward0", lambda v: _norm_prims(v, p, axes, keepdim), x,
                 saves=(0,), saves_output=True)


def _masked_pow(a, p):
    """a ** p (a >= 0) with a zero derivative where a == 0 (PyTorch's norm backward masks
    there), without NaN from the untaken branch: where(a == 0, 0 ** p, pow(where(a == 0, 1,
    a), p)) -- 0 ** p is inf for a negative p (so a norm of negative order is 0 there)."""
    zero = lax.eq(a, 0.0)
    return lax.where(zero, 0.0 if p > 0 else float("inf"),
                     bind(P["pow"], lax.where(zero, 1.0, a), float(p)))


class _OneNormGrad:
    """The VJP of a norm of one element per norm (value |x|): PyTorch's
    ``linalg_vector_norm_backward`` with ``norm = |x|`` -- not abs's ``sign(x)``: NaN at
    NaN and ±inf, and where ``|x|^(p-1)`` under- or overflows (p=3 at 1e-200, p=-1 at
    1e200), as torch. (A ``custom_vjp`` node: it keeps a compiled program out of the disk
    cache.)"""

    def __init__(self, x, p):
        self.x, self.p = x, float(p)

    def __call__(self, needs, g, node=None):
        x = self.x if node is None else Tensor._from_node(node.args[1])
        g = lax.reshape(g, tuple(x.shape))
        p, a = self.p, lax.unary("abs", x)
        if p == 2:
            return (lax.where(lax.eq(a, 0.0), 0.0, lax.mul(g, lax.div(x, a))),)
        sgn = lax.unary("sign", x)
        if p < 1:
            scaled = lax.where(lax.eq(x, 0.0), 0.0, lax.mul(sgn, bind(P["pow"], a, p - 1)))
            return (lax.mul(lax.mul(scaled, g), bind(P["pow"], a, 1 - p)),)
        scaled = lax.mul(sgn, bind(P["pow"], a, p - 1)) if p < 2 else \
            lax.mul(x, bind(P["pow"], a, p - 2))
        scale = lax.where(lax.eq(a, 0.0), 0.0, lax.div(g, bind(P["pow"], a, p - 1)))
        return (lax.mul(scaled, scale),)

    def __repr__(self) -> str:
        return f"LinalgVectorNormBackward0[one element, p={self.p:g}]"


def _norm_prims(x, p, axes, keepdim):
    a = lax.unary("abs", x)
    if x.numel() and int(np.prod([x.shape[d] for d in axes])) == 1:
        # one element per norm: PyTorch's is |x| (no x² to underflow: 5e-324 stays)
        a = a if keepdim else lax.reshape(a, tuple(
            n for d, n in enumerate(x.shape) if d not in axes))
        if p in (1, float("inf"), float("-inf")):     # (torch's backward is abs's there)
            return a
        return bind(P["custom_vjp"], a, x, rule=_OneNormGrad(x, p))
    if p == float("inf"):
        return bind(P["amax"], a, axes=axes, keepdim=keepdim)
    if p == float("-inf"):
        return bind(P["amin"], a, axes=axes, keepdim=keepdim)
    if p == 1:
        return lax.sum(a, axes, keepdim)
    if p == 2:
        return _masked_pow(lax.sum(lax.mul(x, x), axes, keepdim), 0.5)
    s = lax.sum(_masked_pow(a, p), axes, keepdim)
    return _masked_pow(s, 1.0 / float(p))
