"""``adaptive_avg_pool1d`` / ``adaptive_avg_pool2d`` / ``adaptive_max_pool1d`` /
``adaptive_max_pool2d`` of ``nn.functional``: PyTorch's output sizes (``None`` keeps the
input's), its checks in its order and its error texts, recorded as
``AdaptiveAvgPool2DBackward0`` / ``AdaptiveMaxPool2DBackward0`` (a 1x1 average as
``MeanBackward1``, a mean, as PyTorch's).

Output cell ``i`` of an axis of ``n`` inputs pools inputs ``floor(i*n/out)`` up to
``ceil((i+1)*n/out)`` (PyTorch's start and end index).  Where ``out`` divides ``n`` on
both axes those windows tile the input: a plain pooling (the window view).  Otherwise
the average is separable -- a constant (out x n) matrix of 1/length per axis, two matrix
products -- and the maximum gathers each window (``take`` with a fixed index array, a
window shorter than the longest repeating its last element) and takes its first maximal
element in row-major order, as PyTorch's kernel, so the gradient reaches that element."""
from __future__ import annotations

import numpy as np

from ..functions.common import to_tensor
from ..functions.composite import named
from ..ops import lax
from .pooling import avg_windows, first_max, window_indices

__all__ = ["adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool1d",
           "adaptive_max_pool2d", "adaptive_bounds"]


def adaptive_bounds(n: int, out: int) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) of each of the ``out`` windows over ``n`` inputs (PyTorch's
    ``start_index`` / ``end_index``).

    >>> [a.tolist() for a in adaptive_bounds(5, 3)]
    [[0, 1, 3], [2, 4, 5]]
    """
    i = np.arange(out)
    return (i * n) // out, -((-(i + 1) * n) // out)


def _with_default(output_size, shape) -> tuple:
    """``output_size`` with ``None`` read as the input's size (``_list_with_default``)."""
    if isinstance(output_size, (int, np.integer)) and not isinstance(output_size, bool):
        return (int(output_size),) * 2
    if len(shape) <= len(output_size):
        raise ValueError(f"Input dimension should be at least {len(output_size) + 1}")
    tail = shape[len(shape) - len(output_size):]
    return tuple(d if v is None else int(v) for v, d in zip(output_size, tail))


def _uniform(shape, out) -> bool:
    return all(o > 0 and n % o == 0 for n, o in zip(shape, out))


def _avg_matrix(n: int, out: int, dtype) -> np.ndarray:
    """(out, n): 1/length over each window."""
    start, end = adaptive_bounds(n, out)
    k = np.arange(n)
    inside = (k[None, :] >= start[:, None]) & (k[None, :] < end[:, None])
    return (inside / (end - start)[:, None]).astype(dtype.np)


def _adaptive_avg(v, out):
    h, w = v.shape[-2:]
    if _uniform((h, w), out):
        kernel = (h // out[0], w // out[1])
        return avg_windows(v, kernel, kernel, (0, 0), (0, 0), kernel[0] * kernel[1])
    rows = to_tensor(_avg_matrix(h, out[0], v.dtype))
    cols = to_tensor(_avg_matrix(w, out[1], v.dtype))
    return lax.matmul(rows, lax.matmul(v, lax.transpose_last(cols)))


def _gather_index(n: int, out: int) -> np.ndarray:
    """(out, longest window): the inputs each window reads, the last one repeated."""
    start, end = adaptive_bounds(n, out)
    longest = int((end - start).max()) if out else 1
    return np.minimum(start[:, None] + np.arange(longest)[None, :], end[:, None] - 1)


def _max_windows(v, out):
    """(each window's first maximal element, its position in the window): windows
    (.., KH, KW, OH, OW) as :func:`symgrad.nn.pooling.first_max` takes them."""
    n, (h, w) = len(v.shape), v.shape[-2:]
    if _uniform((h, w), out):
        kernel = (h // out[0], w // out[1])
        return first_max(lax.windows(v, (n - 2, n - 1), kernel, kernel, (1, 1)), n)
    rows, cols = _gather_index(h, out[0]), _gather_index(w, out[1])
    g = lax.take(lax.take(v, to_tensor(rows.reshape(-1)), n - 2), to_tensor(cols.reshape(-1)),
                 n - 1)
    g = lax.reshape(g, tuple(v.shape[:-2]) + rows.shape + cols.shape)     # .. OH KH OW KW
    lead = tuple(range(n - 2))
    return first_max(lax.permute(g, lead + (n - 1, n + 1, n - 2, n)), n)


def _index_table(h: int, w: int, out) -> np.ndarray:
    """[KH*KW, OH, OW]: the flat input position each window element reads."""
    if _uniform((h, w), out):
        kh, kw = h // out[0], w // out[1]
        rows = np.arange(out[0])[:, None] * kh + np.arange(kh)[None, :]
        cols = np.arange(out[1])[:, None] * kw + np.arange(kw)[None, :]
    else:
        rows, cols = _gather_index(h, out[0]), _gather_index(w, out[1])
    table = rows.T[:, None, :, None] * w + cols.T[None, :, None, :]    # KH KW OH OW
    return table.reshape((-1,) + tuple(out))


def _not_implemented(x, name: str) -> None:
    if not x.dtype.is_floating_point:
        raise NotImplementedError(f"\"{name}\" not implemented for '{x.dtype.c_name}'")


def adaptive_avg_pool2d(input, output_size):
    """2-D adaptive average pooling over (N, C, H, W) or (C, H, W) inputs, as PyTorch's.

    >>> import symgrad as torch
    >>> torch.nn.functional.adaptive_avg_pool2d(torch.arange(6.).reshape(1, 2, 3), (1, 2))
    tensor([[[2., 3.]]])
    """
    x = to_tensor(input)
    out = _with_default(output_size, tuple(x.shape))
    if len(out) != 2:
        raise RuntimeError("adaptive_avg_pool2d: output_size must be 2")
    if min(out) < 0:
        raise RuntimeError(f"adaptive_avg_pool2d: elements of output_size must be greater than "
                           f"or equal to 0 but received {{{out[0]}, {out[1]}}}")
    if out == (1, 1):
        return x.mean((-1, -2), keepdim=True)
    if x.dim() not in (3, 4):
        raise RuntimeError(f"adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got "
                           f"{list(x.shape)}")
    for i in (-2, -1):
        if x.shape[i] == 0:
            raise RuntimeError(f"adaptive_avg_pool2d(): Expected input to have non-zero size "
                               f"for non-batch dimensions, but input has sizes "
                               f"{list(x.shape)} with dimension {i + x.dim()} being empty")
    _not_implemented(x, "adaptive_avg_pool2d")
    return named("AdaptiveAvgPool2DBackward0", lambda v: _adaptive_avg(v, out), x)


def adaptive_max_pool2d(input, output_size, return_indices: bool = False):
    """2-D adaptive max pooling over (N, C, H, W) or (C, H, W) inputs, as PyTorch's; with
    ``return_indices`` also each maximum's flat position in its (H, W) plane."""
    x = to_tensor(input)
    out = _with_default(output_size, tuple(x.shape))
    if x.dim() not in (3, 4):
        raise RuntimeError(f"adaptive_max_pool2d(): Expected 3D or 4D tensor, but got: "
                           f"{list(x.shape)}")
    for i in range(1, x.dim()):
        if x.shape[i] == 0:
            raise RuntimeError(f"adaptive_max_pool2d(): Expected input to have non-zero size "
                               f"for non-batch dimensions, but input has sizes "
                               f"{list(x.shape)} with dimension {i} being empty")
    if len(out) != 2:
        raise RuntimeError("adaptive_max_pool2d(): internal error: output_size.size() must be 2")
    for o in out:
        if o < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {o}: "
                               f"{list(x.shape[:-2]) + list(out)}")
    _not_implemented(x, "adaptive_max_pool2d")
    res = named("AdaptiveMaxPool2DBackward0", lambda v: _max_windows(v, out)[0], x)
    if not return_indices:
        return res
    at = _max_windows(x.detach(), out)[1]
    table = _index_table(x.shape[-2], x.shape[-1], out)
    return res, window_indices(at, table, tuple(res.shape))


def _one(x, output_size, name: str) -> int:
    """A 1-D adaptive pooling's checks (``checkDimRange``, ``check_1d``) and its size."""
    if output_size is None or isinstance(output_size, float):
        raise TypeError(f"{name}(): argument 'output_size' (position 2) must be tuple of "
                        f"ints, not {type(output_size).__name__}")
    if x.dim() not in (2, 3):
        raise RuntimeError(f"Expected 2 to 3 dimensions, but got {x.dim()}-dimensional tensor "
                           f"for argument #1 'self' (while checking arguments for {name})")
    sizes = tuple(output_size) if isinstance(output_size, (tuple, list)) else (output_size,)
    if len(sizes) != 1:
        raise RuntimeError(f"{name}() argument 'output_size' should contain one int "
                           f"(got {len(sizes)})")
    return int(sizes[0])


def adaptive_avg_pool1d(input, output_size):
    """1-D adaptive average pooling over (N, C, L) or (C, L) inputs, as PyTorch's (2-D
    pooling of a unit height)."""
    x = to_tensor(input)
    size = _one(x, output_size, "adaptive_avg_pool1d")
    return adaptive_avg_pool2d(x.unsqueeze(-2), (1, size)).squeeze(-2)


def adaptive_max_pool1d(input, output_size, return_indices: bool = False):
    """1-D adaptive max pooling over (N, C, L) or (C, L) inputs, as PyTorch's (2-D
    pooling of a unit height)."""
    x = to_tensor(input)
    size = _one(x, output_size, "adaptive_max_pool1d")
    res = adaptive_max_pool2d(x.unsqueeze(-2), (1, size), return_indices)
    if return_indices:
        return res[0].squeeze(-2), res[1].squeeze(-2)
    return res.squeeze(-2)
