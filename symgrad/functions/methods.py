"""Attaches the operations to :class:`~symgrad.tensor.Tensor` as methods and operators
(``x.exp()``, ``x + y``, ``x += 1``, ``x[0] = 5``), so tensor.py stays about what a
tensor is. Each method delegates to the function of the same name."""
from __future__ import annotations

from ..graph import dtypes
from ..ops import lax
from . import elementwise as E
from . import indexing, inplace, linalg, reduction, shape
from .common import Tensor, is_scalar, to_tensor
from ..autograd import grad_mode
from ..device import check_device
from .composite import named
from ..graph.shapes import broadcast_shapes
from .random import generator as gen
from .creation import as_tensor

__all__ = ["install"]


def _binop(name, grad_name=None):
    return lambda self, other: E.binary(name, self, other, grad_name)


def _rbinop(name, grad_name=None):
    return lambda self, other: E.binary(name, other, self, grad_name)


def _rsub(self, other):
    return E.binary("sub", other, self, "RsubBackward1")


def _rtruediv(self, other):
    if is_scalar(other):            # PyTorch computes reciprocal(x) * other
        return E.binary("mul", E.unary("reciprocal", self), other)
    return E.binary("div", other, self)


def _inplace_op(fn):
    def method(self, *args, **kwargs):
        inplace.check_inplace(self)
        inplace.check_overlap(self, *args, *kwargs.values())
        return inplace.update(self, fn(inplace.original(self), *args, **kwargs))
    return method


def _overwrite(self, name, make, *srcs):
    """Replace self's value by ``make(*srcs)`` in place. When autograd records it, the old
    value of self gets a zero gradient (PyTorch's ZeroBackward0 / FillBackward2 / 3 /
    CopyBackwards): where(all-true, new, old)."""
    inplace.check_inplace(self)
    if not grad_mode.is_grad_enabled() or not (
            self.requires_grad or any(isinstance(s, Tensor) and s.requires_grad for s in srcs)):
        return inplace.update(self, make(*srcs))
    shape, dt = tuple(self.shape), self.dtype

    def f(old, *ss):
        return lax.where(lax.full(shape, True, dtypes.bool_), make(*ss), old)
    return inplace.update(self, named(name, f, inplace.original(self), *srcs))


def _fill_(self, value):
    shape, dt = tuple(self.shape), self.dtype
    if isinstance(value, Tensor):
        if value.dim():
            raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor "
                               f"with {value.dim()} dimensions.")
        return _overwrite(self, "FillBackward3",
                          lambda v: lax.expand(lax.cast(v, dt), shape), value)
    return _overwrite(self, "FillBackward2", lambda: lax.full(shape, value, dt))


def _zero_(self):
    shape, dt = tuple(self.shape), self.dtype
    return _overwrite(self, "ZeroBackward0", lambda: lax.full(shape, 0, dt))


def _copy_(self, src, non_blocking=False):
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


def _random_fill(kind):
    def method(self, a=0.0, b=1.0, *, generator=None):
        inplace.check_inplace(self)
        g = gen(generator)
        vals = g.normal(a, b, tuple(self.shape)) if kind == "normal" else g.uniform(a, b, tuple(self.shape))
        return inplace.update(self, as_tensor(vals.astype(self.dtype.np)))
    return method


def _nnf():
    from ..nn import functional      # imported late: nn.functional builds on this package
    return functional


def _type_conv(dt):
    return lambda self: lax.cast(self, dt)


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


def _to(self, *args, **kwargs):
    """``to(dtype)``, ``to(device)``, ``to(device, dtype)``, ``to(other)``, keywords too."""
    dt = to_target(args, kwargs)
    if dt is None or dt is self.dtype:
        return self
    return lax.cast(self, dtypes.as_dtype(dt))


def _type(self, dtype=None):
    if dtype is None:
        return self.dtype.tensor_type
    return lax.cast(self, dtypes.as_dtype(dtype))


_METHODS = {
    # arithmetic operators
    "__add__": _binop("add"), "__radd__": _rbinop("add"),
    "__sub__": _binop("sub"), "__rsub__": _rsub,
    "__mul__": _binop("mul"), "__rmul__": _rbinop("mul"),
    "__truediv__": _binop("div"), "__rtruediv__": _rtruediv,
    "__floordiv__": _binop("floor_divide"), "__rfloordiv__": _rbinop("floor_divide"),
    "__mod__": _binop("remainder"), "__rmod__": _rbinop("remainder"),
    "__pow__": lambda self, o: E.pow(self, o), "__rpow__": lambda self, o: E.pow(o, self),
    "__matmul__": lambda self, o: linalg.matmul(self, o),
    "__rmatmul__": lambda self, o: linalg.matmul(o, self),
    "__neg__": lambda self: E.unary("neg", self), "__pos__": lambda self: self,
    "__abs__": lambda self: E.unary("abs", self),
    "__invert__": lambda self: E.unary("logical_not", self),
    "__and__": _binop("logical_and"), "__or__": _binop("logical_or"),
    "__lt__": _binop("lt"), "__le__": _binop("le"), "__gt__": _binop("gt"),
    "__ge__": _binop("ge"), "__eq__": _binop("eq"), "__ne__": _binop("ne"),
    "__getitem__": indexing.getitem,
    "__setitem__": indexing.setitem,
    # named math
    "add": lambda self, o, alpha=1: E.binary("add", self, o if alpha == 1 else o * alpha),
    "sub": lambda self, o, alpha=1: E.binary("sub", self, o if alpha == 1 else o * alpha),
    "mul": _binop("mul"), "div": _binop("div"), "true_divide": _binop("div"),
    "floor_divide": _binop("floor_divide"), "remainder": _binop("remainder"),
    "pow": lambda self, o: E.pow(self, o),
    "maximum": _binop("maximum"), "minimum": _binop("minimum"),
    "lt": _binop("lt"), "le": _binop("le"), "gt": _binop("gt"), "ge": _binop("ge"),
    "eq": _binop("eq"), "ne": _binop("ne"),
    "logical_and": _binop("logical_and"), "logical_or": _binop("logical_or"),
    "clamp": lambda self, min=None, max=None: E.clamp(self, min, max),
    "clip": lambda self, min=None, max=None: E.clamp(self, min, max),
    "clamp_min": lambda self, m: E.clamp(
        self, m, None, grad_name=f"ClampMinBackward{int(isinstance(m, Tensor))}"),
    "clamp_max": lambda self, m: E.clamp(
        self, None, m, grad_name=f"ClampMaxBackward{int(isinstance(m, Tensor))}"),
    "square": lambda self: E.pow(self, 2),
    # reductions
    "sum": reduction.sum, "mean": reduction.mean, "prod": reduction.prod,
    "max": reduction.max, "min": reduction.min, "amax": reduction.amax,
    "amin": reduction.amin, "argmax": reduction.argmax, "all": reduction.all,
    "any": reduction.any, "argmin": reduction.argmin,
    "logsumexp": reduction.logsumexp, "norm": reduction.norm,
    "softmax": lambda self, dim, dtype=None: _nnf().softmax(self, dim, dtype=dtype),
    "log_softmax": lambda self, dim, dtype=None: _nnf().log_softmax(self, dim, dtype=dtype),
    # linear algebra
    "matmul": linalg.matmul, "mm": linalg.mm, "mv": linalg.mv, "dot": linalg.dot,
    "bmm": linalg.bmm,
    # layout
    "view": shape.view, "reshape": shape.reshape, "flatten": shape.flatten,
    "unflatten": shape.unflatten,
    "squeeze": shape.squeeze, "unsqueeze": shape.unsqueeze, "transpose": shape.transpose,
    "t": shape.t, "permute": shape.permute, "expand": shape.expand,
    "expand_as": shape.expand_as, "contiguous": shape.contiguous, "clone": shape.clone,
    "movedim": shape.movedim,
    "view_as": lambda self, other: shape.view(self, tuple(other.shape)),
    "reshape_as": lambda self, other: shape.reshape(self, tuple(other.shape)),
    # in-place
    "zero_": _zero_, "fill_": _fill_, "copy_": _copy_,
    "normal_": _random_fill("normal"), "uniform_": _random_fill("uniform"),
    # dtype conversion
    "float": _type_conv(dtypes.float32), "double": _type_conv(dtypes.float64),
    "half": _type_conv(dtypes.float16), "long": _type_conv(dtypes.int64),
    "int": _type_conv(dtypes.int32), "bool": _type_conv(dtypes.bool_),
    "to": _to, "type": _type, "cpu": lambda self: self,
    "cuda": lambda self, device=None, non_blocking=False: check_device("cuda"),
}

_INPLACE = {
    "add_": "add", "sub_": "sub", "mul_": "mul", "div_": "div", "pow_": "pow",
    "clamp_": "clamp", "clip_": "clamp", "exp_": "exp", "log_": "log", "sqrt_": "sqrt",
    "tanh_": "tanh", "sigmoid_": "sigmoid", "relu_": "relu", "abs_": "abs", "neg_": "neg",
    "__iadd__": "add", "__isub__": "sub", "__imul__": "mul", "__itruediv__": "div",
    "__ipow__": "pow",
}


def install() -> None:
    for name, fn in _METHODS.items():
        setattr(Tensor, name, fn)
    for uname in E.UNARY_NAMES:
        if uname not in _METHODS:
            setattr(Tensor, uname, (lambda n: lambda self: E.unary(n, self))(uname))
    setattr(Tensor, "T", property(shape.T))
    setattr(Tensor, "mT", property(lambda self: shape.transpose(self, -2, -1)))
    for iname, base in _INPLACE.items():
        fn = _METHODS.get(base) or getattr(Tensor, base)
        setattr(Tensor, iname, _inplace_op(fn))
    Tensor.__hash__ = lambda self: id(self)
