"""Channel-wise and self-normalising dropout of ``nn.functional``: ``dropout1d``,
``dropout2d``, ``dropout3d``, ``alpha_dropout`` and ``feature_alpha_dropout``, as ATen's
``_dropout_impl``: a keep-mask drawn as ``bernoulli_(1 - p)`` from the generator (the same
numbers as PyTorch's for the same seed) -- of the input's shape, or one value per
(sample, channel) for the feature forms --, the kept values scaled by ``1 / (1 - p)``, or
for the alpha forms ``a x + b`` with SELU's constants so that mean and variance are kept.
Inside ``symgrad.compile`` the mask is an input of the program drawn at each call."""
from __future__ import annotations

import math
import warnings


from .. import dispatch
from ..functions.common import Tensor, to_tensor
from ..functions.random import generator, per_shape

__all__ = ["keep_mask", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
           "feature_alpha_dropout"]

_ALPHA = 1.7580993408473766          # ATen's alpha of alpha dropout (SELU's scale * alpha)


def keep_mask(shape: tuple, keep: float, dt, scaled: bool = False) -> Tensor:
    """1 where a draw ``u < keep`` (torch's ``bernoulli_(keep)``), else 0, as a tensor of
    ``dt`` (``scaled``: divided by ``keep`` in ``dt``, as torch's ``noise.div_(1 - p)``);
    an input drawn per call inside ``symgrad.compile``."""
    def draw(s):
        mask = (generator().random(s) < keep).astype(dt.np)
        return mask / dt.np.type(keep) if scaled else mask
    per_call = getattr(dispatch._lifter[0], "runtime_value", None)
    if per_call is not None:
        return per_call(per_shape(draw, tuple(shape)), dt, "dropout_mask")
    return Tensor._from_array(draw(tuple(shape)), dt)


def _check_p(p: float) -> None:
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _dropout_impl(x: Tensor, p: float, train: bool, feature: bool, alpha: bool,
                  inplace: bool) -> Tensor:
    """ATen's _dropout_impl."""
    if p == 0 or not train or x.numel() == 0:
        return x
    if p == 1:
        out = x * x.new_zeros(())
        return x.copy_(out) if inplace else out
    if feature and x.dim() < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    shape = tuple(x.shape[:2]) + (1,) * (x.dim() - 2) if feature else tuple(x.shape)
    if alpha:
        a = 1.0 / math.sqrt((_ALPHA * _ALPHA * p + 1) * (1 - p))
        noise = keep_mask(shape, 1 - p, x.dtype)
        b = (noise - 1) * (_ALPHA * a) + _ALPHA * a * p
        out = x * (noise * a) + b
    else:
        out = x * keep_mask(shape, 1 - p, x.dtype, scaled=True)
    return x.copy_(out) if inplace else out


def _feature_dropout(x, p, training, batched_dims):
    """Feature dropout of a batched input, or of an unbatched one as a batch of one."""
    unbatched = x.dim() != batched_dims
    if unbatched:
        x = x.unsqueeze(0)
    out = _dropout_impl(x, p, training, True, False, False)
    if unbatched:
        out = out.squeeze(0)
    return out


def _deprecated_dims(name: str, nd: int, spatial: int) -> None:
    """PyTorch's warning for an input of another rank than ``spatial + 1`` or ``+ 2``."""
    if nd not in (spatial + 1, spatial + 2):
        warnings.warn(f"{name}: Received a {nd}-D input to {name}, which is deprecated and will "
                      "result in an error in a future release. To retain the behavior and "
                      f"silence this warning, please use dropout instead. Note that {name} "
                      f"exists to provide channel-wise dropout on inputs with {spatial} spatial "
                      "dimensions, a channel dimension, and an optional batch dimension (i.e. "
                      f"{spatial + 1}D or {spatial + 2}D inputs).", stacklevel=3)


def dropout1d(input, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zeroes whole channels of an (N, C, L) or (C, L) input."""
    _check_p(p)
    x = to_tensor(input)
    if x.dim() not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {x.dim()}D "
                           "input. Note that dropout1d exists to provide channel-wise dropout "
                           "on inputs with 1 spatial dimension, a channel dimension, and an "
                           "optional batch dimension (i.e. 2D or 3D inputs).")
    out = _feature_dropout(x, p, training, 3)
    return x.copy_(out) if inplace and out is not x else out


def dropout2d(input, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zeroes whole channels of an (N, C, H, W) input (a 3-D input: as (N, C, L), with
    PyTorch's warning)."""
    _check_p(p)
    x = to_tensor(input)
    nd = x.dim()
    _deprecated_dims("dropout2d", nd, 2)
    if nd == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that "
                      "channel-wise 1D dropout behavior is desired - input is interpreted as "
                      "shape (N, C, L), where C is the channel dim. This behavior will change in "
                      "a future release to interpret the input as one without a batch "
                      "dimension, i.e. shape (C, H, W). To maintain the 1D channel-wise dropout "
                      "behavior, please switch to using dropout1d instead.", stacklevel=2)
    return _dropout_impl(x, p, training, True, False, inplace)


def dropout3d(input, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zeroes whole channels of an (N, C, D, H, W) or (C, D, H, W) input."""
    _check_p(p)
    x = to_tensor(input)
    nd = x.dim()
    _deprecated_dims("dropout3d", nd, 3)
    out = _feature_dropout(x, p, training, 5)
    return x.copy_(out) if inplace and out is not x else out


def alpha_dropout(input, p: float = 0.5, training: bool = False,
                  inplace: bool = False) -> Tensor:
    """Dropout that keeps a SELU network's mean and variance: dropped values become
    ``-alpha * a + b``-shifted (``AlphaDropout``)."""
    _check_p(p)
    return _dropout_impl(to_tensor(input), p, training, False, True, inplace)


def feature_alpha_dropout(input, p: float = 0.5, training: bool = False,
                          inplace: bool = False) -> Tensor:
    """:func:`alpha_dropout` of whole channels."""
    _check_p(p)
    return _dropout_impl(to_tensor(input), p, training, True, True, inplace)


