"""Attaches the operations to :class:`~symgrad.tensor.Tensor` as methods and operators
(``x.exp()``, ``x + y``, ``x += 1``, ``x[0] = 5``), so tensor.py stays about what a
tensor is. Each method delegates to the function of the same name."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np

from ..dispatch import bind
from ..graph import dtypes
from ..graph.primitives import PRIMITIVES as P
from ..ops import lax
from . import elementwise as E
from . import (indexed, indexing, inplace, linalg, matrix, reduction, repeat, rounding, scatter,
               selection, shape, solvers, statistics)
from .common import Tensor, is_scalar, to_tensor
from ..autograd import engine, grad_mode, hooks
from ..device import check_device
from .composite import named
from ..dispatch import bind_unary
from ..graph.primitives import PRIMITIVES as P
from ..graph.shapes import broadcast_shapes
from . import arithmetic, combine, compat, factorizations, search, finite, order, predicates, random
from .random import generator as gen

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from ..utils.hooks import RemovableHandle
    from .random import Generator
    from ..types import DTypeLike, TensorLike, TensorOrScalar

__all__ = ["install"]


def _binop(name: str) -> Callable[[Tensor, TensorOrScalar], Tensor]:
    return E.binary_method(name)


def _compare(name: str) -> Callable[[Tensor, TensorOrScalar], Tensor]:
    """A comparison operator (``x == y``, ``x < y``): an operand that is neither a tensor,
    an array nor a number gets ``NotImplemented``, so Python's fallback answers, as
    PyTorch's: ``x == None`` is False, ``x != 'a'`` True, ``x < None`` a TypeError."""
    compare = E.binary_method(name)

    def method(self: Tensor, other: TensorOrScalar) -> Tensor:
        to = type(other)
        if to is Tensor or to is float or to is int or isinstance(other, Tensor) \
                or is_scalar(other) or isinstance(other, np.ndarray):
            return compare(self, other)
        return NotImplemented
    method.__name__ = f"__{name}__"
    return method


def _rbinop(name: str) -> Callable[[Tensor, TensorOrScalar], Tensor]:
    return E.binary_method(name, reflected=True)


def _bitwise(op: str, reflected: bool = False) -> Callable[[Tensor, TensorOrScalar], Tensor]:
    """``&`` / ``|`` / ``^`` / ``<<`` / ``>>`` (``reflected``: the ``__r..__`` form): on
    bool operands ``&``, ``|``, ``^`` are the logical and / or / xor; integers go
    through the ``bitwise`` primitive (ATen's shift rules); PyTorch's error on floats."""
    kernel = {"lshift": "lshift", "rshift": "rshift"}.get(op, f"bitwise_{op}")

    def method(self: Tensor, other: TensorOrScalar) -> Tensor:
        a, b = (E._operand(other), self) if reflected else (self, E._operand(other))
        dt = E.promote([a, b])
        if dt.category == "float" or (dt is dtypes.bool_ and op in ("lshift", "rshift")):
            raise NotImplementedError(f'"{kernel}_cpu" not implemented for \'{dt.c_name}\'')
        if dt is dtypes.bool_:
            return E.binary("ne" if op == "xor" else f"logical_{op}", a, b)
        a, b = (lax.cast(to_tensor(v), dt) if not isinstance(v, Tensor) or v.dtype is not dt
                else v for v in (a, b))
        return bind(P["bitwise"], a, b, op=op)
    return method


def _bitwise_not(self: Tensor) -> Tensor:
    """``bitwise_not``: logical not on bool, ``x ^ -1`` on integers, PyTorch's error on
    floats."""
    if self.dtype is dtypes.bool_:
        return E.unary("logical_not", self)
    if self.dtype.category == "float":
        raise NotImplementedError(f'"bitwise_not_cpu" not implemented for '
                                  f"'{self.dtype.c_name}'")
    return bind(P["bitwise"], self, lax.cast(to_tensor(-1), self.dtype), op="xor")


def _invert(self: Tensor) -> Tensor:
    """``~``: :func:`_bitwise_not`, with Python's TypeError on floats (as PyTorch)."""
    if self.dtype.category == "float":
        raise TypeError("~ (operator.invert) is only implemented on integer and Boolean-type "
                        "tensors")
    return _bitwise_not(self)


def _bitwise_(op: str) -> Callable[[Tensor, TensorOrScalar], Tensor]:
    """The in-place ``&=`` / ``|=`` / ``^=`` / ``<<=`` / ``>>=``: PyTorch checks that the
    result type casts to the tensor's before it looks at the kernel."""
    out_of_place = _bitwise(op)

    def method(self: Tensor, other: TensorOrScalar) -> Tensor:
        dt = E.promote([self, E._operand(other)])
        if not dtypes.can_cast(dt, self.dtype):
            raise RuntimeError(f"result type {dt.c_name} can't be cast to the desired output "
                               f"type {self.dtype.c_name}")
        return out_of_place(self, other)
    return method


def _rsub(self: Tensor, other: TensorOrScalar) -> Tensor:
    return E.binary("sub", other, self, "RsubBackward1")


def _rtruediv(self: Tensor, other: TensorOrScalar) -> Tensor:
    if is_scalar(other):            # PyTorch computes reciprocal(x) * other
        return E.binary("mul", E.unary("reciprocal", self), other)
    return E.binary("div", other, self)


def _inplace_op(fn: Callable[..., Tensor]) -> Callable[..., Tensor]:
    def method(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        inplace.check_inplace(self)
        inplace.check_overlap(self, *args, *kwargs.values())
        return inplace.update(self, fn(inplace.original(self, *args, *kwargs.values()),
                                       *args, **kwargs))
    return method


_ARITH_UFUNCS = {"add": np.add, "sub": np.subtract, "mul": np.multiply}


def _inplace_arith(fn: Callable[..., Tensor], ufunc) -> Callable[..., Tensor]:
    """``x += y`` / ``add_`` and co.: straight into x's array where nothing is recorded
    (:func:`inplace.arith_in_place`), else as every in-place op."""
    general = _inplace_op(fn)

    def method(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        if len(args) == 1 and not kwargs and inplace.arith_in_place(self, ufunc, args[0]):
            return self
        return general(self, *args, **kwargs)
    return method


def _overwrite(self, name, make, *srcs):
    """Replace self's value by ``make(*srcs)`` in place. When autograd records it, the old
    value of self gets a zero gradient (PyTorch's ZeroBackward0 / FillBackward2 / 3 /
    CopyBackwards): where(all-true, new, old)."""
    inplace.check_inplace(self)
    if not grad_mode.is_grad_enabled() or not (
            self.requires_grad or any(isinstance(s, Tensor) and s.requires_grad for s in srcs)):
        return inplace.update(self, make(*srcs))
    shape = tuple(self.shape)

    def f(old, *ss):
        return lax.where(lax.full(shape, True, dtypes.bool_), make(*ss), old)
    return inplace.update(self, named(name, f, inplace.original(self, *srcs), *srcs))


def _fill_(self: Tensor, value: TensorOrScalar) -> Tensor:
    shape, dt = tuple(self.shape), self.dtype
    if isinstance(value, Tensor):
        if value.dim():
            raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor "
                               f"with {value.dim()} dimensions.")
        return _overwrite(self, "FillBackward3",
                          lambda v: lax.expand(lax.cast(v, dt), shape), value)
    return _overwrite(self, "FillBackward2", lambda: lax.full(shape, value, dt))


def _zero_(self: Tensor) -> Tensor:
    shape, dt = tuple(self.shape), self.dtype
    return _overwrite(self, "ZeroBackward0", lambda: lax.full(shape, 0, dt))


def _copy_(self: Tensor, src: TensorLike, non_blocking: bool = False) -> Tensor:
    shape, dt = tuple(self.shape), self.dtype
    src = to_tensor(src)
    inplace.check_overlap(self, src)
    bshape = broadcast_shapes(shape, tuple(src.shape))     # torch's text, self as "a"
    if bshape != shape:
        raise RuntimeError(f"output with shape {list(shape)} doesn't match the broadcast shape "
                           f"{list(bshape)}")
    return _overwrite(self, "torch::autograd::CopyBackwards",
                      lambda s: lax.expand(lax.reshape(lax.cast(s, dt), (1,) * (
                          len(shape) - s.dim()) + tuple(s.shape)), shape), src)


def _exponential_(self: Tensor, lambd: float = 1.0, *,
                  generator: Generator | None = None) -> Tensor:
    """``exponential_``: ``-log1p(-u) / lambd`` per element (PyTorch's draws; float64
    values may differ from PyTorch's in the last bit or two, its ``log1p`` being its own)."""
    inplace.check_inplace(self)
    if not self.dtype.is_floating_point:
        raise RuntimeError("Exponential distribution is a continuous probability distribution. "
                           f"dtype must be a floating point but you specified {self.dtype.c_name}")
    if not lambd > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={float(lambd):g}")
    shape, np_dt, lambd = tuple(self.shape), self.dtype.np, float(lambd)
    vals = random._drawn(   # (drawn at each call of a compiled function, not when traced)
        lambda s: (gen(generator).exponential(s, np.float64) / lambd).astype(np_dt),
        shape, self.dtype, "exponential_", False)
    return inplace.update(self, vals)


def _random_fill(kind: str) -> Callable[..., Tensor]:
    def method(self: Tensor, a: float = 0.0, b: float = 1.0, *,
               generator: Generator | None = None) -> Tensor:
        inplace.check_inplace(self)
        shape, np_dt = tuple(self.shape), self.dtype.np

        def draw(s):      # (at each call of a compiled function, not when traced)
            g = gen(generator)
            return (g.normal if kind == "normal" else g.uniform)(a, b, s, np_dt).astype(np_dt)
        return inplace.update(self, random._drawn(draw, shape, self.dtype, f"{kind}_", False))
    return method


def _nnf():
    nnf = _NNF.get("f")
    if nnf is None:
        from ..nn import functional      # imported late: nn.functional builds on this package
        nnf = _NNF["f"] = functional
    return nnf


_NNF: dict = {}


def _type_conv(dt: dtypes.DType) -> Callable[[Tensor], Tensor]:
    def method(self: Tensor) -> Tensor:
        return lax.cast(self, dt)
    return method


def to_target(args, kwargs) -> "dtypes.DType | None":
    """The dtype ``to(...)`` asks for (None: unchanged) from its forms -- ``to(dtype)``,
    ``to(device)``, ``to(device, dtype)``, ``to(other)``, keywords -- after checking the
    device (PyTorch's error for one this build lacks)."""
    dt = kwargs.get("dtype")
    check_device(kwargs.get("device"))
    for a in args:
        if isinstance(a, dtypes.DType):
            dt = a
        elif isinstance(a, Tensor):
            dt = a.dtype
        elif a is not None:
            check_device(a)
    return None if dt is None else dtypes.as_dtype(dt)


def _to(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    """``to(dtype)``, ``to(device)``, ``to(device, dtype)``, ``to(other)``, keywords too."""
    dt = to_target(args, kwargs)
    if dt is None or dt is self.dtype:
        return self
    return lax.cast(self, dtypes.as_dtype(dt))


def _type(self: Tensor, dtype: DTypeLike | None = None) -> str | Tensor:
    if dtype is None:
        return self.dtype.tensor_type
    if isinstance(dtype, str) and dtype.endswith("Tensor"):     # x.type('torch.DoubleTensor')
        named = next((d for d in dtypes.ALL if d.tensor_type == dtype), None)
        if named is None:
            raise ValueError(f"invalid type: '{dtype}'")
        dtype = named
    return lax.cast(self, dtypes.as_dtype(dtype))


# the methods that are not a function of another module (each delegates to one)
def _pow(self: Tensor, o: TensorOrScalar) -> Tensor:
    return E.pow(self, o)


def _rpow(self: Tensor, o: TensorOrScalar) -> Tensor:
    return E.pow(o, self)


def _matmul(self: Tensor, o: Tensor) -> Tensor:
    return linalg.matmul(self, o)


def _rmatmul(self: Tensor, o: Tensor) -> Tensor:
    return linalg.matmul(o, self)


def _unary_method(name: str) -> Callable[[Tensor], Tensor]:
    grad_name = E._NAMES.get(name)

    def method(self: Tensor) -> Tensor:
        if type(self) is Tensor and self._dtype.category == "float":     # (the common case)
            return bind_unary(P[name], self, grad_name)
        return E.unary(name, self)
    return method


def _round(self: Tensor, *, decimals: int | None = None) -> Tensor:
    if decimals is None:
        return E.unary("round", self)
    return rounding.round(self, decimals=decimals)


def _equal(self: Tensor, other: Tensor) -> bool:
    return rounding.equal(self, other, _position=1)


def _isclose(self: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08,
             equal_nan: bool = False) -> Tensor:
    return finite.isclose(self, other, rtol, atol, equal_nan, _position=1)


def _heaviside(self: Tensor, values: Tensor) -> Tensor:
    return rounding.heaviside(self, values, _position=1)


def _heaviside_(self: Tensor, values: Tensor) -> Tensor:
    return rounding.heaviside(self, values, _position=1, _op="heaviside_")


def _pos(self: Tensor) -> Tensor:
    return self


def _add(self: Tensor, o: TensorOrScalar, alpha: TensorOrScalar = 1) -> Tensor:
    return E.binary("add", self, o if alpha == 1 else o * alpha)


def _sub(self: Tensor, o: TensorOrScalar, alpha: TensorOrScalar = 1) -> Tensor:
    return E.binary("sub", self, o if alpha == 1 else o * alpha)


def _square(self: Tensor) -> Tensor:
    return E.pow(self, 2)


def _softmax(self: Tensor, dim: int, dtype: DTypeLike | None = None) -> Tensor:
    return _nnf().softmax(self, dim, dtype=dtype)


def _log_softmax(self: Tensor, dim: int, dtype: DTypeLike | None = None) -> Tensor:
    return _nnf().log_softmax(self, dim, dtype=dtype)


def _scatter_reduce_method(name: str) -> Callable[..., Tensor]:
    def method(self: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *,
               include_self: bool = True) -> Tensor:
        return scatter.scatter_reduce(self, dim, index, src, reduce, include_self=include_self,
                                      _name=name, _src_position=3)
    return method


def _view_as(self: Tensor, other: Tensor) -> Tensor:
    return shape.view(self, tuple(other.shape))


def _reshape_as(self: Tensor, other: Tensor) -> Tensor:
    return shape.reshape(self, tuple(other.shape))


def _cpu(self: Tensor) -> Tensor:
    return self


def _cuda(self: Tensor, device: object = None, non_blocking: bool = False) -> NoReturn:
    check_device("cuda")        # raises PyTorch's CPU-build error
    raise AssertionError("unreachable")


def _mT(self: Tensor) -> Tensor:
    return shape.transpose(self, -2, -1)


def _hash(self: Tensor) -> int:
    return id(self)


# ---- autograd: the engine's and the hooks' entry points -----------------------------------
def _backward(self: Tensor, gradient: Tensor | None = None, retain_graph: bool | None = None,
              create_graph: bool = False,
              inputs: Tensor | Sequence[Tensor] | None = None) -> None:
    """Accumulate d(self)/d(leaf) into each leaf's ``.grad`` (see PyTorch)."""
    engine.backward([self], None if gradient is None else [gradient],
                    retain_graph=retain_graph, create_graph=create_graph, inputs=inputs)


def _retain_grad(self: Tensor) -> None:
    """Populate ``.grad`` of this non-leaf tensor during backward (after its hooks)."""
    hooks.retain_grad(self)


def _register_hook(self: Tensor, hook: Callable[[Tensor], Tensor | None]) -> RemovableHandle:
    """``hook(grad)`` runs when this tensor's gradient is computed; a non-None result
    replaces the gradient. Returns a handle whose ``remove()`` unregisters it."""
    return hooks.register_tensor_hook(self, hook)


def _register_post_accumulate_grad_hook(self: Tensor, hook: Callable[[Tensor], None]
                                        ) -> RemovableHandle:
    """``hook(tensor)`` runs after a leaf's ``.grad`` has been accumulated."""
    return hooks.register_post_accumulate_hook(self, hook)


_METHODS = {
    # autograd
    "backward": _backward, "retain_grad": _retain_grad, "register_hook": _register_hook,
    "register_post_accumulate_grad_hook": _register_post_accumulate_grad_hook,
    # arithmetic operators
    "__add__": _binop("add"), "__radd__": _rbinop("add"),
    "__sub__": _binop("sub"), "__rsub__": _rsub,
    "__mul__": _binop("mul"), "__rmul__": _rbinop("mul"),
    "__truediv__": _binop("div"), "__rtruediv__": _rtruediv,
    "__floordiv__": _binop("floor_divide"), "__rfloordiv__": _rbinop("floor_divide"),
    "__mod__": _binop("remainder"), "__rmod__": _rbinop("remainder"),
    "__pow__": _pow, "__rpow__": _rpow,
    "__matmul__": _matmul, "__rmatmul__": _rmatmul,
    "__neg__": _unary_method("neg"), "__pos__": _pos,
    "__abs__": _unary_method("abs"), "__invert__": _invert,
    "__and__": _bitwise("and"), "__or__": _bitwise("or"), "__xor__": _bitwise("xor"),
    "__lshift__": _bitwise("lshift"), "__rshift__": _bitwise("rshift"),
    "__rand__": _bitwise("and", True), "__ror__": _bitwise("or", True),
    "__rxor__": _bitwise("xor", True), "__rlshift__": _bitwise("lshift", True),
    "__rrshift__": _bitwise("rshift", True),
    "bitwise_and": _bitwise("and"), "bitwise_or": _bitwise("or"),
    "bitwise_xor": _bitwise("xor"), "bitwise_left_shift": _bitwise("lshift"),
    "bitwise_right_shift": _bitwise("rshift"), "bitwise_not": _bitwise_not,
    "__lt__": _compare("lt"), "__le__": _compare("le"), "__gt__": _compare("gt"),
    "__ge__": _compare("ge"), "__eq__": _compare("eq"), "__ne__": _compare("ne"),
    "__getitem__": indexing.getitem,
    "__setitem__": indexing.setitem,
    # named math
    "add": _add, "sub": _sub,
    "mul": _binop("mul"), "div": rounding.div, "true_divide": _binop("div"),
    "floor_divide": _binop("floor_divide"), "remainder": _binop("remainder"),
    "pow": _pow,
    "maximum": _binop("maximum"), "minimum": _binop("minimum"),
    "lt": _binop("lt"), "le": _binop("le"), "gt": _binop("gt"), "ge": _binop("ge"),
    "eq": _binop("eq"), "ne": _binop("ne"),
    "logical_and": _binop("logical_and"), "logical_or": _binop("logical_or"),
    "logical_xor": predicates.logical_xor_method, "signbit": predicates.signbit,
    "clamp": compat.clip, "clip": compat.clip, "clamp_min": compat.clamp_min,
    "clamp_max": compat.clamp_max,
    "square": _square, "round": _round, "trunc": rounding.trunc, "fix": rounding.fix,
    "frac": rounding.frac, "sgn": rounding.sgn, "equal": _equal, "heaviside": _heaviside,
    "fmod": rounding.fmod, "take": indexed.take, "take_along_dim": indexed.take_along_dim,
    "index_fill": indexed.index_fill, "index_copy": indexed.index_copy,
    "index_put": indexed.index_put,
    # reductions
    "sum": reduction.sum, "mean": reduction.mean, "prod": reduction.prod,
    "max": reduction.max, "min": reduction.min, "amax": reduction.amax,
    "amin": reduction.amin, "argmax": reduction.argmax, "all": reduction.all,
    "any": reduction.any, "argmin": reduction.argmin,
    "logsumexp": reduction.logsumexp, "norm": reduction.norm,
    "var": statistics.var, "std": statistics.std, "cumsum": statistics.cumsum,
    "isinf": finite.isinf, "isposinf": finite.isposinf, "isneginf": finite.isneginf,
    "isfinite": finite.isfinite, "nan_to_num": finite.nan_to_num,
    "nan_to_num_": finite.nan_to_num_, "isclose": _isclose, "roll": finite.roll,
    "cumprod": statistics.cumprod, "logcumsumexp": statistics.logcumsumexp,
    "cummax": statistics.cummax, "cummin": statistics.cummin,
    "masked_select": selection.masked_select,
    "median": order.median, "nanmedian": order.nanmedian, "kthvalue": order.kthvalue,
    "mode": order.mode, "quantile": order.quantile, "nanquantile": order.nanquantile,
    # selection
    "masked_fill": selection.masked_fill, "tril": selection.tril, "triu": selection.triu,
    "gather": selection.gather, "index_select": selection.index_select,
    "split": selection.split, "chunk": selection.chunk,
    "unbind": selection.unbind, "narrow": selection.narrow, "atan2": _binop("atan2"),
    "sort": selection.sort, "argsort": selection.argsort, "topk": selection.topk,
    "arctan2": _binop("atan2"),
    "softmax": _softmax, "log_softmax": _log_softmax,
    # linear algebra
    "matmul": linalg.matmul, "mm": linalg.mm, "mv": linalg.mv, "dot": linalg.dot,
    "bmm": linalg.bmm,
    "diagonal": matrix.diagonal, "diag": matrix.diag, "diag_embed": matrix.diag_embed,
    "trace": matrix.trace,
    "det": solvers.det, "inverse": solvers.inverse, "logdet": solvers.logdet,
    "slogdet": solvers._torch_slogdet, "svd": solvers._torch_svd,
    "cholesky": solvers._torch_cholesky, "matrix_power": factorizations.matrix_power,
    "pinverse": factorizations.pinverse,
    "lerp": arithmetic.lerp, "addmm": arithmetic.addmm, "addcmul": arithmetic.addcmul,
    "addcdiv": arithmetic.addcdiv, "logaddexp": arithmetic.logaddexp,
    "logaddexp2": arithmetic.logaddexp2, "log2": arithmetic.log2, "log10": arithmetic.log10,
    "exp2": arithmetic.exp2, "hypot": arithmetic.hypot, "xlogy": arithmetic.xlogy,
    "nonzero": search.nonzero, "argwhere": search.argwhere, "unique": search.unique,
    "unique_consecutive": search.unique_consecutive, "count_nonzero": search.count_nonzero,
    "nansum": statistics.nansum, "nanmean": statistics.nanmean, "aminmax": statistics.aminmax,
    "tensor_split": combine.tensor_split, "diff": combine.diff, "rot90": combine.rot90,
    "kron": combine.kron, "cross": combine.cross, "unfold": combine.unfold,
    "sum_to_size": combine.sum_to_size, "logit": arithmetic.logit, "sinc": arithmetic.sinc,
    "deg2rad": arithmetic.deg2rad, "rad2deg": arithmetic.rad2deg,
    "copysign": arithmetic.copysign, "fmax": arithmetic.fmax, "fmin": arithmetic.fmin,
    "positive": arithmetic.positive, "float_power": arithmetic.float_power,
    "bincount": search.bincount, "triangular_solve": factorizations.triangular_solve,
    # other spellings and helpers
    "absolute": compat.absolute, "negative": compat.negative, "subtract": compat.subtract,
    "multiply": compat.multiply, "divide": compat.divide, "greater": compat.greater,
    "greater_equal": compat.greater_equal, "less": compat.less, "less_equal": compat.less_equal,
    "not_equal": compat.not_equal, "moveaxis": compat.moveaxis, "swapaxes": compat.swapaxes,
    "swapdims": compat.swapdims, "ravel": compat.ravel, "broadcast_to": compat.broadcast_to,
    "new_zeros": compat.new_zeros, "new_ones": compat.new_ones, "new_full": compat.new_full,
    "new_empty": compat.new_empty, "new_tensor": compat.new_tensor, "type_as": compat.type_as,
    "where": compat.where_method,
    "repeat": repeat.repeat, "tile": repeat.tile, "repeat_interleave": repeat.repeat_interleave,
    "scatter": scatter.scatter, "scatter_add": scatter.scatter_add,
    "scatter_reduce": _scatter_reduce_method("scatter_reduce"), "index_add": scatter.index_add,
    # layout
    "view": shape.view, "reshape": shape.reshape, "flatten": shape.flatten,
    "unflatten": shape.unflatten,
    "squeeze": shape.squeeze, "unsqueeze": shape.unsqueeze, "transpose": shape.transpose,
    "t": shape.t, "permute": shape.permute, "expand": shape.expand,
    "expand_as": shape.expand_as, "contiguous": shape.contiguous, "clone": shape.clone,
    "movedim": shape.movedim, "flip": shape.flip_method, "fliplr": shape.fliplr,
    "flipud": shape.flipud,
    "view_as": _view_as, "reshape_as": _reshape_as,
    # in-place
    "zero_": _zero_, "fill_": _fill_, "copy_": _copy_,
    "normal_": _random_fill("normal"), "uniform_": _random_fill("uniform"),
    "exponential_": _exponential_, "multinomial": random.multinomial,
    # dtype conversion
    "float": _type_conv(dtypes.float32), "double": _type_conv(dtypes.float64),
    "half": _type_conv(dtypes.float16), "long": _type_conv(dtypes.int64),
    "int": _type_conv(dtypes.int32), "bool": _type_conv(dtypes.bool_),
    "to": _to, "type": _type, "cpu": _cpu, "cuda": _cuda,
}

_INPLACE = {
    "add_": "add", "sub_": "sub", "mul_": "mul", "div_": "div", "pow_": "pow",
    "clamp_": "clamp", "clip_": "clamp", "exp_": "exp", "log_": "log", "sqrt_": "sqrt",
    "tanh_": "tanh", "sigmoid_": "sigmoid", "relu_": "relu", "abs_": "abs", "neg_": "neg",
    "__iadd__": "add", "__isub__": "sub", "__imul__": "mul", "__itruediv__": "true_divide",
    "__ipow__": "pow", "__imod__": "remainder", "__ifloordiv__": "floor_divide",
    "__iand__": _bitwise_("and"), "__ior__": _bitwise_("or"), "__ixor__": _bitwise_("xor"),
    "__ilshift__": _bitwise_("lshift"), "__irshift__": _bitwise_("rshift"),
    "bitwise_and_": _bitwise_("and"), "bitwise_or_": _bitwise_("or"),
    "bitwise_xor_": _bitwise_("xor"), "bitwise_left_shift_": _bitwise_("lshift"),
    "bitwise_right_shift_": _bitwise_("rshift"), "bitwise_not_": _bitwise_not,
    "true_divide_": "true_divide",
    "remainder_": "remainder", "floor_divide_": "floor_divide", "masked_fill_": "masked_fill", "tril_": "tril", "triu_": "triu",
    "atan2_": "atan2", "scatter_": "scatter", "scatter_add_": "scatter_add",
    "scatter_reduce_": _scatter_reduce_method("scatter_reduce_"), "index_add_": "index_add",
    "trunc_": "trunc", "fix_": "fix", "frac_": "frac", "sgn_": "sgn", "heaviside_": _heaviside_,
    "fmod_": "fmod", "index_fill_": "index_fill", "index_copy_": "index_copy",
    "index_put_": "index_put", "absolute_": "absolute", "negative_": "negative",
    "subtract_": "subtract", "multiply_": "multiply", "divide_": "divide", "lerp_": "lerp",
    "addmm_": "addmm", "addcmul_": "addcmul", "addcdiv_": "addcdiv", "log2_": "log2",
    "log10_": "log10", "exp2_": "exp2", "hypot_": "hypot", "xlogy_": "xlogy",
    "logit_": "logit", "sinc_": "sinc", "deg2rad_": "deg2rad", "rad2deg_": "rad2deg",
    "copysign_": "copysign",
}
_INPLACE.update({f"{n}_": n for n in E.UNARY_NAMES
                 if n not in ("isnan", "logical_not") and f"{n}_" not in _INPLACE})


def install() -> None:
    for name, fn in _METHODS.items():
        setattr(Tensor, name, fn)
    for uname in E.UNARY_NAMES:
        if uname not in _METHODS:
            setattr(Tensor, uname, _unary_method(uname))
    setattr(Tensor, "T", property(shape.T))
    setattr(Tensor, "mT", property(_mT))
    for iname, base in _INPLACE.items():
        fn = base if callable(base) else _METHODS.get(base) or getattr(Tensor, base)
        ufunc = _ARITH_UFUNCS.get(base) if iname.startswith("__i") or iname == f"{base}_" \
            else None
        setattr(Tensor, iname, _inplace_op(fn) if ufunc is None else _inplace_arith(fn, ufunc))
    Tensor.__hash__ = _hash  # type: ignore[method-assign,assignment]
