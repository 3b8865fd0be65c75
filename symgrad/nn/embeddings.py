"""Bags of embeddings and the ``max_norm`` renormalisation of looked-up rows, as
PyTorch's ``F.embedding_bag`` and ``embedding_renorm_``.

A bag is a row of a 2-D index tensor, or a run of a 1-D one between ``offsets``; its
vectors are summed (optionally weighted per sample), averaged or maxed, ``padding_idx``
entries left out, an empty bag giving zeros.  Bags are laid out as a padded (bags,
longest) block with a validity mask, so every mode is a few tensor ops with their own
gradients (``max`` sends the gradient to the maximal row, as PyTorch).  ``offsets``
decide shapes: they must be known when tracing.
"""
from __future__ import annotations

import warnings

import numpy as np

from ..autograd import grad_mode
from ..functions.composite import named
from ..functions.creation import as_tensor, zeros
from ..functions.elementwise import where
from ..graph import dtypes
from ..tensor import Tensor

__all__ = ["embedding_bag", "embedding_renorm_"]


def embedding_renorm_(weight: Tensor, input: Tensor, max_norm: float,
                      norm_type: float = 2.0) -> Tensor:
    """Rows of ``weight`` that ``input`` looks up and whose ``norm_type``-norm exceeds
    ``max_norm`` are scaled in place to norm ``max_norm`` (PyTorch's factor
    ``max_norm / (norm + 1e-7)``, computed in double)."""
    with grad_mode.no_grad():
        idx = input.reshape(-1).to(dtypes.int64)
        rows = weight[idx]
        norms = rows.norm(norm_type, dim=1, keepdim=True).to(dtypes.float64)
        scale = where(norms > max_norm, max_norm / (norms + 1e-7), 1.0).to(weight.dtype)
        weight[idx] = rows * scale
    return weight


def _check_indices(t: Tensor, what: str) -> None:
    if t.dtype.category != "int":
        raise RuntimeError(f"Expected tensor for argument #1 '{what}' to have one of the "
                           "following scalar types: Long, Int; but got "
                           f"{t.dtype.tensor_type} instead (while checking arguments for "
                           "embedding_bag)")


def _bag_layout(n: int, offsets: list[int], include_last_offset: bool):
    """(positions (bags, longest) into the flat input, valid mask) for 1-D ``offsets``."""
    if offsets and offsets[0] != 0:
        raise RuntimeError("offsets[0] has to be 0, i.e., the first sequence in the "
                           "mini-batch has to start from position 0. However, got "
                           f"{offsets[0]}\n[ torch.LongTensor{{}} ]")
    if offsets and offsets[-1] > n:
        raise RuntimeError(f"offsets[-1] can not be greater than input's length {n} but got "
                           f"offsets[-1] of {offsets[-1]}")
    ends = offsets[1:] if include_last_offset else offsets[1:] + [n]
    starts = offsets[:-1] if include_last_offset else offsets
    if any(b < a for a, b in zip(starts, ends)):
        raise RuntimeError("Expected i < index_size to be true, but got false.  (Could this "
                           "error message be improved?  If so, please report an "
                           "enhancement request to PyTorch.)")
    longest = max([b - a for a, b in zip(starts, ends)] + [1])
    pos = np.array([[min(a + j, max(n - 1, 0)) for j in range(longest)]
                    for a in starts], dtype=np.int64).reshape(len(starts), longest)
    valid = np.array([[a + j < b for j in range(longest)] for a, b in zip(starts, ends)],
                     dtype=bool).reshape(len(starts), longest)
    return pos, valid


def _bags(rows, valid, mode: str, psw):
    """Reduce (bags, longest, dim) ``rows`` over the valid entries."""
    mask = valid.unsqueeze(-1)
    zero = zeros((), dtype=rows.dtype)
    if mode == "max":
        out = where(mask, rows, float("-inf")).amax(1) if rows.shape[1] else \
            zeros((rows.shape[0], rows.shape[2]), dtype=rows.dtype)
        return where(valid.any(1, keepdim=True), out, zero)
    if psw is not None:
        rows = rows * psw.unsqueeze(-1)
    total = where(mask, rows, zero).sum(1)
    if mode == "sum":
        return total
    count = valid.sum(1, keepdim=True).clamp(min=1).to(rows.dtype)
    return total / count


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2,
                  scale_grad_by_freq=False, mode="mean", sparse=False,
                  per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """Sums, means or maxima of bags of embedding rows (PyTorch's
    ``F.embedding_bag``): (bags, embedding_dim)."""
    if weight.dtype == dtypes.int64 and input.dtype.is_floating_point:
        warnings.warn("Argument order of nn.functional.embedding_bag was changed. Usage "
                      "`embedding_bag(weight, input, ...)` is deprecated, and should now be "
                      "`embedding_bag(input, weight, ...)`.", stacklevel=2)
        weight, input = input, weight
    psw = per_sample_weights
    if psw is not None and tuple(input.shape) != tuple(psw.shape):
        raise ValueError(f"embedding_bag: If per_sample_weights ({psw.shape}) is not None, then "
                         f"it must have the same shape as the input ({input.shape})")
    if weight.dim() != 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension "
                         f"{weight.dim()}")
    if input.dim() == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated "
                             "is a mini-batch of fixed length sequences. However, found "
                             f"offsets of type {type(offsets)}")
    elif input.dim() == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        if offsets.dim() != 1:
            raise ValueError("offsets has to be a 1D Tensor")
    else:
        raise ValueError("input has to be 1D or 2D Tensor, but got Tensor of dimension "
                         f"{input.dim()}")
    if mode not in ("sum", "mean", "max"):
        raise ValueError("mode has to be one of sum, mean or max")
    if mode == "max" and scale_grad_by_freq:
        raise ValueError("max mode does not support scaling the gradient by the frequency")
    if mode == "max" and sparse:
        raise ValueError("max mode does not support sparse weights")
    if scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding_bag: scale_grad_by_freq and sparse gradients are "
                                  "not supported (symgrad has dense gradients only)")
    _check_indices(input, "indices")
    if offsets is not None:
        _check_indices(offsets, "offsets")
    if max_norm is not None:
        embedding_renorm_(weight, input, max_norm, norm_type)
    if psw is not None and mode != "sum":
        raise NotImplementedError("embedding_bag: per_sample_weights was not None. "
                                  "per_sample_weights is only supported for mode='sum' (got "
                                  f"mode='{mode}'). Please open a feature request on GitHub.")
    n_rows = int(weight.shape[0])
    if padding_idx is not None and padding_idx < 0:
        padding_idx += n_rows
    if input.dim() == 2:
        idx = input.to(dtypes.int64)
        w_psw = psw
    else:
        pos, valid_np = _bag_layout(int(input.shape[0]),
                                    [int(v) for v in offsets.tolist()], include_last_offset)
        flat = input.to(dtypes.int64)
        idx = flat[as_tensor(pos)] if flat.shape[0] else zeros(pos.shape, dtype=dtypes.int64)
        w_psw = None if psw is None else psw[as_tensor(pos)]
    if bool(((idx < 0) | (idx >= n_rows)).any()) if idx._data is not None else False:
        raise RuntimeError("Expected i < index_size to be true, but got false.  (Could this "
                           "error message be improved?  If so, please report an enhancement "
                           "request to PyTorch.)")
    valid = idx != padding_idx if padding_idx is not None else idx >= 0
    if input.dim() == 1:
        valid = valid & as_tensor(valid_np)
    extra = () if w_psw is None else (w_psw,)
    return named("EmbeddingBagBackward0",
                 lambda w, *p: _bags(w[idx], valid, mode, p[0] if p else None), weight, *extra)
