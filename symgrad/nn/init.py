"""``nn.init``: in-place initialisers with PyTorch's fan and gain rules. Each fills the
tensor under ``no_grad`` and returns it. Random draws come from symgrad's generator
(``symgrad.manual_seed``), PyTorch's CPU generator: after one seed, ``uniform_`` and the
initialisers built on it (``xavier_uniform_``, ``kaiming_uniform_``, every layer's default)
give PyTorch's values, ``normal_`` PyTorch's up to the last bit or so."""
from __future__ import annotations

import math
import warnings

import numpy as np

from ..autograd import grad_mode
from ..functions.random import generator as _default_generator
from ..tensor import Tensor

__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_",
           "zeros_", "eye_", "dirac_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_",
           "kaiming_normal_", "orthogonal_", "sparse_"]


def calculate_gain(nonlinearity: str, param=None) -> float:
    """The recommended gain for ``nonlinearity`` (PyTorch's table).

    >>> calculate_gain("tanh"), calculate_gain("leaky_relu", 0.2)
    (1.6666666666666667, 1.3867504905630728)
    """
    linear = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d")
    if nonlinearity in linear or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _rng(generator):
    return generator._rng if generator is not None and hasattr(generator, "_rng") \
        else _default_generator()


def _fill(tensor: Tensor, values: np.ndarray) -> Tensor:
    with grad_mode.no_grad():
        tensor.copy_(Tensor._from_array(np.asarray(values, dtype=tensor.dtype.np)))
    return tensor


def _fans(tensor: Tensor) -> tuple[int, int]:
    if tensor.dim() < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 "
                         "dimensions")
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _fan(tensor: Tensor, mode: str) -> int:
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _fans(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator=None) -> Tensor:
    return _fill(tensor, _rng(generator).uniform(a, b, tuple(tensor.shape), tensor.dtype.np))


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator=None) -> Tensor:
    return _fill(tensor, _rng(generator).normal(mean, std, tuple(tensor.shape), tensor.dtype.np))


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0,
                  b: float = 2.0, generator=None) -> Tensor:
    """Normal(mean, std) restricted to [a, b], drawn as PyTorch 2.13 draws it (so one seed
    gives its values): when the interval holds more than 30% of the mass, normals with the
    out-of-range ones redrawn (whole-tensor draws) until none is left; otherwise uniforms
    on [a, b] accepted with probability pdf / pdf's peak (rejection), redrawn likewise."""
    def cdf(x):
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. "
                      "The distribution of values may be incorrect.", stacklevel=2)
    rng, shape, dt = _rng(generator), tuple(tensor.shape), tensor.dtype.np
    if cdf((b - mean) / std) - cdf((a - mean) / std) > 0.3:
        lo, hi = float(np.asarray(a, dt)), float(np.asarray(b, dt))
        result = rng.normal(mean, std, shape, dt)
        while True:
            mask = (result < lo) | (result > hi)
            if not mask.any():
                break
            result = np.where(mask, rng.normal(mean, std, shape, dt), result)
        return _fill(tensor, result)
    mode = max(a, min(mean, b))
    log_peak = -0.5 * ((mode - mean) / std) ** 2

    def log_pdf(v):                               # in the tensor's dtype, as PyTorch's ops
        return ((v - mean) / std) ** 2 * -0.5 - log_peak

    def accepted_not(v):
        return np.log(rng.uniform(0.0, 1.0, shape, dt)) > log_pdf(v)
    result = rng.uniform(a, b, shape, dt)
    pending = accepted_not(result)
    while pending.any():
        candidates = rng.uniform(a, b, shape, dt)
        result = np.where(pending, candidates, result)
        pending = np.where(pending, accepted_not(candidates), pending)
    return _fill(tensor, result)


def constant_(tensor: Tensor, val: float) -> Tensor:
    return _fill(tensor, np.full(tuple(tensor.shape), val))


def ones_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 1.0)


def zeros_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 0.0)


def eye_(tensor: Tensor) -> Tensor:
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return _fill(tensor, np.eye(*tensor.shape))


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    d = tensor.dim()
    if d not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    shape = tuple(tensor.shape)
    if shape[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    out_per = shape[0] // groups
    n = min(out_per, shape[1])
    values = np.zeros(shape)
    centre = tuple(s // 2 for s in shape[2:])
    for g in range(groups):
        for k in range(n):
            values[(g * out_per + k, k) + centre] = 1
    return _fill(tensor, values)


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    fan_in, fan_out = _fans(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    bound = math.sqrt(3.0) * std                  # (PyTorch's order of operations)
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    fan_in, fan_out = _fans(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def kaiming_uniform_(tensor: Tensor, a: float = 0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu", generator=None) -> Tensor:
    if 0 in tuple(tensor.shape):
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor: Tensor, a: float = 0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu", generator=None) -> Tensor:
    if 0 in tuple(tensor.shape):
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))
    return normal_(tensor, 0.0, std, generator)


def orthogonal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """A (semi-)orthogonal matrix from the QR decomposition of a normal one, signs fixed
    by R's diagonal (as PyTorch)."""
    if tensor.dim() < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flat = _rng(generator).normal(0.0, 1.0, (rows, cols), tensor.dtype.np)
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _fill(tensor, (gain * q).reshape(tuple(tensor.shape)))


def sparse_(tensor: Tensor, sparsity: float, std: float = 0.01, generator=None) -> Tensor:
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    rng = _rng(generator)
    values = rng.normal(0.0, std, (rows, cols), tensor.dtype.np)
    zeros = int(math.ceil(sparsity * rows))
    for c in range(cols):
        values[rng.permutation(rows)[:zeros], c] = 0
    return _fill(tensor, values)
