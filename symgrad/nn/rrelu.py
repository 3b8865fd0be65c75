"""``rrelu``: the randomized leaky ReLU, as PyTorch's ``rrelu_with_noise``.

Training: each element ``x <= 0`` is multiplied by a slope ``r ~ U(lower, upper)``
(others by 1), drawn in element order from PyTorch's generator as its CPU kernel draws
them (one 64-bit draw per such element, the bounds first rounded to the input's dtype
for float32) -- so after ``manual_seed`` the numbers are PyTorch's. Evaluation: leaky
ReLU with slope ``(lower + upper) / 2``. Recorded as ``RreluWithNoiseBackward0``
(``RreluWithNoiseBackward1`` in place); the gradient is the formula's: the noise
(training) or the leaky ReLU's slope (evaluation).

In compiled code the input's signs are unknown when the noise is drawn: a slope is drawn
for every element (PyTorch's distribution, not its numbers) and applied where ``x <= 0``.
When ``0 < upper - lower <= 1e-6`` in training PyTorch's backward uses the mean slope, not
the drawn one; here the drawn one (they differ by at most 1e-6).
"""
from __future__ import annotations

import numpy as np

from .. import dispatch
from ..dispatch import bind
from ..functions import inplace as _inplace
from ..functions.common import Tensor, to_tensor
from ..functions.composite import named
from ..functions.random import Generator, generator as _generator, per_shape
from ..graph.primitives import PRIMITIVES as P
from ..ops import lax

__all__ = ["rrelu", "rrelu_"]


def rrelu(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3,
          training: bool = False, inplace: bool = False,
          generator: Generator | None = None) -> Tensor:
    """Randomized leaky ReLU (see the module docstring).

    >>> import symgrad as torch
    >>> torch.nn.functional.rrelu(torch.tensor([-1.0, 2.0]))
    tensor([-0.2292,  2.0000])
    """
    x = to_tensor(input)
    lower, upper = float(lower), float(upper)
    if lower > upper:
        raise RuntimeError("Lower bound should be less than or equal to the upper bound")
    if not x.dtype.is_floating_point:
        kernel = "rrelu_with_noise_out_cpu" if training else "leaky_relu_cpu"
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{x.dtype.c_name}'")
    if inplace:
        _inplace.check_inplace(x)
        src = _inplace.original(x)
    else:
        src = x
    if training:
        f = _noisy(src, lower, upper, generator)
    else:
        slope = (lower + upper) / 2

        def f(v):
            return lax.where(bind(P["gt"], v, 0.0), v, lax.mul(v, slope))
    if inplace:
        return _inplace.update(x, named("RreluWithNoiseBackward1", f, src, saves_output=True))
    return named("RreluWithNoiseBackward0", f, src, saves=(0,))


def rrelu_(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3,
           training: bool = False, generator: Generator | None = None) -> Tensor:
    """In-place :func:`rrelu`."""
    return rrelu(input, lower, upper, training, True, generator)


def _noisy(x: Tensor, lower: float, upper: float, gen):
    """The training forward ``v -> v * noise`` with the noise drawn now."""
    dt = x.dtype
    if dt.np == np.float32:                 # (PyTorch's opmath bounds: float for float32)
        lower, upper = float(np.float32(lower)), float(np.float32(upper))
    shape = tuple(x.shape)
    per_call = getattr(dispatch._lifter[0], "runtime_value", None)
    if x._data is not None and per_call is None:
        neg = x._data <= 0
        noise = np.ones(shape, dt.np)
        # at::uniform_real_distribution<double>: x * (upper - lower) + lower, two roundings
        u = _generator(gen).unit(int(np.count_nonzero(neg)), np.float64)
        noise[neg] = (u * (upper - lower) + lower).astype(dt.np)
        noise_t = Tensor._from_array(noise, dt)
        return lambda v: lax.mul(v, noise_t)

    def draw(s):
        u = _generator(gen).unit(int(np.prod(s, dtype=np.int64)), np.float64)
        return (u * (upper - lower) + lower).reshape(s).astype(dt.np)
    slopes = per_call(per_shape(draw, shape), dt, "rrelu_noise") if per_call is not None else \
        Tensor._from_array(draw(shape), dt)
    return lambda v: lax.where(bind(P["le"], v, 0.0), lax.mul(v, slopes), v)
