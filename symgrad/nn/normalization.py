"""``batch_norm`` of ``nn.functional``: PyTorch's checks and texts, recorded as
``NativeBatchNormBackward0``.

Training normalises by the batch's mean and biased variance over every dim but the
channels (dim 1) -- a composite of primitives, so its gradient (and double backward)
is theirs -- and, when running statistics are given, updates them in place as PyTorch's
CPU kernel does: ``(1 - momentum) * running + momentum * batch``, the variance unbiased
(``n / (n - 1)``).  Evaluation normalises by the running statistics.  Inside
``symgrad.compile`` running statistics cannot be updated (a compiled function returns
values, it mutates nothing): training with them there raises."""
from __future__ import annotations

import math

import numpy as np

from ..autograd import grad_mode
from ..autograd.nodes import SavedTensor
from ..dispatch import bind
from ..functions.common import Tensor, floating_kernel, to_tensor
from ..functions.composite import named
from ..functions.kernels import batch_norm_kernel
from ..graph.primitives import PRIMITIVES as P
from ..graph.shapes import wrap_dim
from ..ops import lax

__all__ = ["batch_norm"]



def _verify_batch_size(shape) -> None:
    """``shape``: a torch.Size (printed as such)."""
    if math.prod(tuple(shape[:1]) + tuple(shape[2:])) == 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input "
                         f"size {shape}")


def _check(x, running_mean, running_var, weight, bias, training):
    c = x.shape[wrap_dim(1, x.dim())]
    if not training:
        for name, t in (("running_mean", running_mean), ("running_var", running_var)):
            if t is None:
                raise RuntimeError(f"{name} must be defined in evaluation mode")
    if (running_mean is None) != (running_var is None):
        raise ValueError("running_mean and running_var must either both be None or neither "
                         "be None")
    given = (("running_mean", running_mean), ("running_var", running_var),
             ("weight", weight), ("bias", bias))
    for name, t in given:
        if t is not None and t.numel() != c:
            raise RuntimeError(f"{name} should contain {c} elements not {t.numel()}")
    floating_kernel(x, "batch_norm")
    for _, t in given:
        if t is not None and t.dtype is not x.dtype:
            if x.dtype.name == "float32":
                raise RuntimeError("mixed dtype (CPU): expect parameter to have scalar type "
                                   "of Float")
            raise RuntimeError("mixed dtype (CPU): all inputs must share same datatype.")


def _normalize(v, mean, var, weight, bias, eps, axes):
    """(v - mean) / sqrt(var + eps) * weight + bias, the statistics kept as reduced dims."""
    shape = tuple(v.shape)
    y = lax.mul(lax.sub(v, lax.expand(mean, shape)),
                lax.expand(lax.unary("rsqrt", lax.add(var, float(eps))), shape))
    per_channel = tuple(1 if i in axes else n for i, n in enumerate(shape))
    if weight is not None:
        y = lax.mul(y, lax.expand(lax.reshape(weight, per_channel), shape))
    if bias is not None:
        y = lax.add(y, lax.expand(lax.reshape(bias, per_channel), shape))
    return y


def _batch_stats(v, axes):
    """(mean, biased variance) over ``axes``, kept as size-1 dims."""
    mean = bind(P["mean"], v, axes=axes, keepdim=True)
    c = lax.sub(v, lax.expand(mean, tuple(v.shape)))
    return mean, bind(P["mean"], lax.mul(c, c), axes=axes, keepdim=True)


def _update(running, batch, momentum: float) -> None:
    """running := (1 - momentum) * running + momentum * batch, in place (no history).
    Eagerly its storage is written as PyTorch's kernel writes it: the version counter is
    not bumped (an evaluation-mode output's backward then reads the updated statistics,
    as torch's does, and raises nothing)."""
    with grad_mode.no_grad():
        batch = lax.reshape(batch, tuple(running.shape))
        m = momentum if isinstance(momentum, Tensor) else float(momentum)  # (traced: a count)
        new = lax.add(lax.mul(batch, m), lax.mul(running, 1.0 - m))
        if running._data is not None and new._data is not None and \
                running._data.flags.writeable:
            np.copyto(running._data, new._data, casting="unsafe")
        else:
            running.copy_(new)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """Batch normalisation over dim 1 of an (N, C, ...) input, as PyTorch's.

    >>> import symgrad as torch
    >>> x = torch.tensor([[1.0, 2.0], [3.0, 6.0]])
    >>> torch.nn.functional.batch_norm(x, None, None, training=True, eps=0.5)
    tensor([[-0.8165, -0.9428],
            [ 0.8165,  0.9428]])
    """
    x = to_tensor(input)
    if training:
        _verify_batch_size(x.shape)
    if training and eps <= 0.0:
        raise ValueError(f"batch_norm eps must be positive during training, but got {eps}")
    if eps < 0.0:
        raise ValueError(f"batch_norm eps must be non-negative, but got {eps}")
    if momentum is None:
        raise TypeError("batch_norm(): argument 'momentum' (position 7) must be float, not "
                        "NoneType")
    rm, rv, w, b = (None if t is None else to_tensor(t)
                    for t in (running_mean, running_var, weight, bias))
    _check(x, rm, rv, w, b, training)
    if grad_mode.is_grad_enabled():       # PyTorch's derivatives.yaml: not differentiable
        for name, t in (("running_mean", rm), ("running_var", rv)):
            if t is not None and t.requires_grad:
                raise RuntimeError(f"The function 'native_batch_norm' is not differentiable "
                                   f"with respect to argument '{name}'. This input cannot "
                                   f"have requires_grad True.")
    axes = (0,) + tuple(range(2, x.dim()))
    affine = [t for t in (w, b) if t is not None]

    def f(v, *wb):
        it = iter(wb)
        wv = next(it) if w is not None else None
        bv = next(it) if b is not None else None
        if training:
            mean, var = _batch_stats(v, axes)
        else:
            keep = tuple(1 if i in axes else n for i, n in enumerate(v.shape))
            mean, var = lax.reshape(rm, keep), lax.reshape(rv, keep)
        return _normalize(v, mean, var, wv, bv, eps, axes)
    eager, stats = batch_norm_kernel(axes, eps, (w is not None, b is not None),
                                     None if training else (rm, rv))
    # PyTorch's NativeBatchNormBackward0 saves the running statistics (version-checked;
    # in evaluation the backward reads them); training updates them inside the op, so
    # they are saved at their updated version (below)
    keeps = tuple(t for t in (rm, rv) if t is not None)
    out = named("NativeBatchNormBackward0", f, x, *affine,
                saves=(0, 1) if w is not None else (0,), kernel=eager, keeps=keeps)
    if training and rm is not None:        # (in a compiled call: state it updates)
        with grad_mode.no_grad():
            if stats:                      # (the kernel's, else the primitives')
                mean, var = (Tensor._from_array(s, x.dtype) for s in stats)
            else:
                mean, var = _batch_stats(x.detach(), axes)
            n = x.numel() // x.shape[1]
            _update(rm, mean, momentum)
            _update(rv, lax.mul(var, n / (n - 1)), momentum)
        _saved_at_current_version(out.grad_fn, keeps)
    return out


def _saved_at_current_version(fn, tensors) -> None:
    """The saved copies of ``tensors`` in ``fn`` expect their present version (the op
    itself updated them after saving)."""
    for s in getattr(fn, "_saved", None) or ():
        if isinstance(s, SavedTensor) and s.packed is None and not s.is_output \
                and any(s.tensor is t for t in tensors):
            s.version = s.tensor._vc[0]

