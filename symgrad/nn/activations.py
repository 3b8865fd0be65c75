"""More activations of ``nn.functional``: ``logsigmoid``, ``selu``, ``celu``, ``mish``,
``hardswish``, ``hardsigmoid``, ``softsign``, ``tanhshrink``, ``softshrink``,
``hardshrink``, ``threshold``, ``glu``, ``softmin`` -- ATen's formulas (their values at
the branch points and their gradients there), as formulas of primitives recorded under
PyTorch's backward names."""
from __future__ import annotations

import numpy as np

from ..dispatch import bind
from ..functions import elementwise as E
from ..functions.common import Tensor, to_tensor, wrap_dim
from ..functions.composite import named
from ..graph import dtypes
from ..graph.primitives import PRIMITIVES as P
from ..ops import lax

__all__ = ["logsigmoid", "selu", "celu", "mish", "hardswish", "hardsigmoid", "softsign",
           "tanhshrink", "softshrink", "hardshrink", "threshold", "glu", "softmin"]

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def logsigmoid(input: Tensor) -> Tensor:
    """``min(x, 0) - log1p(exp(-|x|))``, stable everywhere (``LogSigmoidBackward0``)."""
    return named("LogSigmoidBackward0",
                 lambda v: lax.neg(lax.unary("log1pexp", lax.neg(v))), to_tensor(input))


def _elu(v, alpha, scale, input_scale):
    """ATen's elu: ``scale x`` where x > 0, else ``scale alpha (exp(x input_scale) - 1)``."""
    pos = bind(P["gt"], v, 0.0)
    inner = lax.where(pos, 0.0, v)
    neg = lax.mul(lax.unary("expm1", inner if input_scale == 1 else lax.mul(inner, input_scale)),
                  alpha * scale)
    return lax.where(pos, v if scale == 1 else lax.mul(v, scale), neg)


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """``scale * elu(x, alpha)`` with SELU's constants (``EluBackward0``)."""
    return named("EluBackward0", lambda v: _elu(v, _SELU_ALPHA, _SELU_SCALE, 1.0),
                 to_tensor(input))


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``x`` where x > 0, else ``alpha (exp(x / alpha) - 1)`` (``CeluBackward0``)."""
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError")
    a = float(alpha)
    slow = 1.0 / float(np.float32(a))      # ATen's CeluBackward0 reads 1 / alpha.toFloat()

    def fn(v):
        exact = _elu(v, a, 1.0, 1.0 / a)
        return lax.add(exact.detach(), lax.sub(_elu(v, a, 1.0, slow),
                                               _elu(v, a, 1.0, slow).detach()))
    return named("CeluBackward0", fn, to_tensor(input))


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x tanh(log(1 + e^x))`` (``MishBackward0``)."""
    return named("MishBackward0", lambda v: lax.mul(v, lax.unary("tanh", lax.unary(
        "log1pexp", v))), to_tensor(input))


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x min(max(x + 3, 0), 6) / 6``; its gradient ``x / 3 + 1/2`` on (-3, 3), 0 below
    (-3 included), 1 above (3 included), as ATen's hardswish_backward
    (``HardswishBackward0``)."""
    def fn(v):
        mid = lax.div(lax.mul(v, lax.add(v, 3.0)), 6.0)
        return lax.where(bind(P["le"], v, -3.0), 0.0, lax.where(bind(P["lt"], v, 3.0), mid, v))
    return named("HardswishBackward0", fn, to_tensor(input))


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """``min(max(x + 3, 0), 6) / 6``; gradient 1/6 strictly inside (-3, 3)
    (``HardsigmoidBackward0``)."""
    def fn(v):
        # ATen's backward multiplies by the float 1/6 (1.0f / 6.0f) in double too
        mid = _value_with_slope(lax.div(lax.add(v, 3.0), 6.0), v, _F32_SIXTH)
        return lax.where(bind(P["le"], v, -3.0), 0.0, lax.where(bind(P["ge"], v, 3.0), 1.0, mid))
    return named("HardsigmoidBackward0", fn, to_tensor(input))


_F32_SIXTH = float(np.float32(1.0) / np.float32(6.0))


def _value_with_slope(value, v, slope):
    """``value`` whose derivative in ``v`` is ``slope`` (ATen's backward constant)."""
    return lax.add(value.detach(), lax.sub(lax.mul(v, slope), lax.mul(v, slope).detach()))


def softsign(input: Tensor) -> Tensor:
    """``x / (1 + |x|)`` (``DivBackward0``)."""
    x = to_tensor(input)
    return E.binary("div", x, E.binary("add", E.unary("abs", x), 1))


def tanhshrink(input: Tensor) -> Tensor:
    """``x - tanh(x)`` (``SubBackward0``)."""
    x = to_tensor(input)
    return E.binary("sub", x, E.unary("tanh", x))


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``x - lambd`` above lambd, ``x + lambd`` below -lambd, else 0
    (``SoftshrinkBackward0``)."""
    x = to_tensor(input)
    if lambd < 0:
        dt = x.dtype if x.dtype.is_floating_point else dtypes.float32
        raise RuntimeError(f"lambda must be in range [0, {np.finfo(dt.np).max:g}] for input "
                           f"dtype {dt.c_name.capitalize()}, but found {lambd:g}")
    lam = float(lambd)

    def fn(v):
        return lax.where(bind(P["gt"], v, lam), lax.sub(v, lam),
                         lax.where(bind(P["lt"], v, -lam), lax.add(v, lam), lax.mul(v, 0.0)))
    return named("SoftshrinkBackward0", fn, x)


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``x`` where ``|x| > lambd``, else 0 (``HardshrinkBackward0``)."""
    lam = float(lambd)

    def fn(v):
        keep = lax.apply("logical_or", bind(P["gt"], v, lam), bind(P["lt"], v, -lam))
        return lax.where(keep, v, lax.mul(v, 0.0))
    return named("HardshrinkBackward0", fn, to_tensor(input))


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """``x`` where ``x > threshold``, else ``value`` (``ThresholdBackward0``)."""
    t, val = float(threshold), float(value)
    return named("ThresholdBackward0", lambda v: lax.where(bind(P["gt"], v, t), v, val),
                 to_tensor(input))


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """The first half along ``dim`` gated by the sigmoid of the second (``GluBackward0``)."""
    x = to_tensor(input)
    if x.dim() == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    d = wrap_dim(dim, x.dim())
    n = x.shape[d]
    if n % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {d} is size {n}")
    h = n // 2

    def fn(v):
        starts = (0,) * v.dim()
        mid = tuple(h if k == d else s for k, s in enumerate(v.shape))
        a = lax.slice_(v, starts, mid, (1,) * v.dim())
        b = lax.slice_(v, tuple(h if k == d else 0 for k in range(v.dim())), tuple(v.shape),
                       (1,) * v.dim())
        return lax.mul(a, lax.unary("sigmoid", b))
    return named("GluBackward0", fn, x)


def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3,
            dtype: object = None) -> Tensor:
    """``softmax(-input, dim)``."""
    from .functional import softmax          # late: functional re-exports this module
    return softmax(-to_tensor(input), dim, dtype=dtype)
