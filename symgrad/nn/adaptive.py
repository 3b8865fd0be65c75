"""``adaptive_avg_pool1d/2d/3d`` / ``adaptive_max_pool1d/2d/3d`` of ``nn.functional``:
PyTorch's output sizes (``None`` keeps the input's), its checks in its order and its
error texts, recorded as ``AdaptiveAvgPool2DBackward0`` / ``AdaptiveMaxPool2DBackward0``
(3-D: ``...3DBackward0``; a 1x1(x1) average as ``MeanBackward1``, a mean, as PyTorch's).

Output cell ``i`` of an axis of ``n`` inputs pools inputs ``floor(i*n/out)`` up to
``ceil((i+1)*n/out)`` (PyTorch's start and end index).  Where ``out`` divides ``n`` on
every pooled axis those windows tile the input: a plain pooling (the window view).
Otherwise the average is separable -- a constant (out x n) matrix of 1/length per axis,
one matrix product per axis -- and the maximum gathers each window (``take`` with a fixed
index array, a window shorter than the longest repeating its last element) and takes its
first maximal element in row-major order, as PyTorch's kernel, so the gradient reaches
that element."""
from __future__ import annotations

import numpy as np

from ..functions.common import floating_kernel, to_tensor
from ..graph import dtypes
from ..functions.composite import named
from ..ops import lax
from .pooling import avg_windows, first_max, window_indices
from .windowing import empty_dim

__all__ = ["adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d",
           "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d", "adaptive_bounds"]


def adaptive_bounds(n: int, out: int) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) of each of the ``out`` windows over ``n`` inputs (PyTorch's
    ``start_index`` / ``end_index``).

    >>> [a.tolist() for a in adaptive_bounds(5, 3)]
    [[0, 1, 3], [2, 4, 5]]
    """
    i = np.arange(out)
    return (i * n) // out, -((-(i + 1) * n) // out)


def _with_default(output_size, shape, d: int = 2) -> tuple:
    """``output_size`` with ``None`` read as the input's size (``_list_with_default``)."""
    if isinstance(output_size, (int, np.integer)) and not isinstance(output_size, bool):
        return (int(output_size),) * d
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


def _average(v, out):
    n, d = len(v.shape), len(out)
    sizes = tuple(v.shape[n - d:])
    if _uniform(sizes, out):
        kernel = tuple(a // o for a, o in zip(sizes, out))
        return avg_windows(v, kernel, kernel, (0,) * d, (0,) * d, int(np.prod(kernel)))
    # one product per pooled axis: the last on the right, the others on the left of the
    # axes after them flattened (2-D: rows @ v @ colsᵀ)
    v = lax.matmul(v, lax.transpose_last(to_tensor(_avg_matrix(sizes[-1], out[-1], v.dtype))))
    for a in range(n - 2, n - d - 1, -1):
        shape = tuple(v.shape)
        rows = to_tensor(_avg_matrix(shape[a], out[a - n + d], v.dtype))
        flat = lax.reshape(v, shape[:a] + (shape[a], int(np.prod(shape[a + 1:]))))
        v = lax.reshape(lax.matmul(rows, flat), shape[:a] + (out[a - n + d],) + shape[a + 1:])
    return v


def _gather_index(n: int, out: int) -> np.ndarray:
    """(out, longest window): the inputs each window reads, the last one repeated."""
    start, end = adaptive_bounds(n, out)
    longest = int((end - start).max()) if out else 1
    return np.minimum(start[:, None] + np.arange(longest)[None, :], end[:, None] - 1)


def _max_windows(v, out):
    """(each window's first maximal element, its position in the window): windows
    (.., K1..Kd, O1..Od) as :func:`symgrad.nn.pooling.first_max` takes them."""
    n, d = len(v.shape), len(out)
    sizes = tuple(v.shape[n - d:])
    if _uniform(sizes, out):
        kernel = tuple(a // o for a, o in zip(sizes, out))
        return first_max(lax.windows(v, tuple(range(n - d, n)), kernel, kernel, (1,) * d), n, d)
    index = [_gather_index(a, o) for a, o in zip(sizes, out)]
    g = v
    for i, idx in enumerate(index):
        g = lax.take(g, to_tensor(idx.reshape(-1)), n - d + i)
    g = lax.reshape(g, tuple(v.shape[:n - d]) + sum((idx.shape for idx in index), ()))
    lead = tuple(range(n - d))                     # .. O1 K1 .. Od Kd -> .. K1..Kd O1..Od
    return first_max(lax.permute(g, lead + tuple(n - d + 2 * i + 1 for i in range(d))
                                 + tuple(n - d + 2 * i for i in range(d))), n, d)


def _index_table(sizes, out) -> np.ndarray:
    """[K1*..*Kd, O1..Od]: the flat input position each window element reads."""
    d = len(out)
    if _uniform(sizes, out):
        index = [np.arange(o)[:, None] * (a // o) + np.arange(a // o)[None, :]
                 for a, o in zip(sizes, out)]
    else:
        index = [_gather_index(a, o) for a, o in zip(sizes, out)]
    table = np.zeros((1,) * (2 * d), np.int64)
    for i, (a, idx) in enumerate(zip(sizes, index)):
        shape = [1] * (2 * d)
        shape[i], shape[d + i] = idx.shape[1], idx.shape[0]
        table = table * a + idx.T.reshape(shape)
    return table.reshape((-1,) + tuple(out))


def _adaptive_avg(x, output_size, d: int):
    """``d``-D adaptive average pooling with PyTorch's checks in their order (2-D checks
    the last two dims for emptiness, 3-D every non-batch dim)."""
    name = f"adaptive_avg_pool{d}d"
    out = _with_default(output_size, tuple(x.shape), d)
    if len(out) != d:
        raise RuntimeError(f"{name}: output_size must be {d}")
    if min(out) < 0:
        got = f"{out[0]}, {out[1]}" + (f",{out[2]}" if d == 3 else "")    # (sic)
        raise RuntimeError(f"{name}: elements of output_size must be greater than or equal to "
                           f"0 but received {{{got}}}")
    if out == (1,) * d:
        return x.mean(tuple(range(-1, -d - 1, -1)), keepdim=True)
    if x.dim() not in (d + 1, d + 2):
        raise RuntimeError(f"{name}(): Expected {d + 1}D or {d + 2}D tensor, but got "
                           f"{list(x.shape)}")
    for i in ((-2, -1) if d == 2 else range(1, x.dim())):
        if x.shape[i] == 0:
            raise RuntimeError(f"{name}(): Expected input to have non-zero size for non-batch "
                               f"dimensions, but input has sizes {list(x.shape)} with "
                               f"dimension {i % x.dim()} being empty")
    floating_kernel(x, name if d == 2 else f"{name}_cpu")
    return named(f"AdaptiveAvgPool{d}DBackward0",
                 lambda v: _no_empty_gradient(_average(v, out), f"adaptive_avg_pool{d}d"), x)


def adaptive_avg_pool2d(input, output_size):
    """2-D adaptive average pooling over (N, C, H, W) or (C, H, W) inputs, as PyTorch's.

    >>> import symgrad as torch
    >>> torch.nn.functional.adaptive_avg_pool2d(torch.arange(6.).reshape(1, 2, 3), (1, 2))
    tensor([[[2., 3.]]])
    """
    return _adaptive_avg(to_tensor(input), output_size, 2)


def _no_empty_gradient(res, name: str):
    """`res`, whose gradient raises PyTorch's backward check when a non-batch dimension
    is empty (an eager result: an ``Error`` node inside the named composite)."""
    empty = [i for i in range(1, res.dim()) if res.shape[i] == 0]
    if not empty or not res.requires_grad or res._data is None:
        return res
    from ..autograd.custom_function import delayed_error   # late: eager-core cycle
    return delayed_error((res,), f"{name}_backward(): Expected grad_output to have non-zero "
                                 f"size for non-batch dimensions, but grad_output has sizes "
                                 f"{list(res.shape)} with dimension {empty[0]} being empty",
                         link=True)[0]


def _adaptive_max(x, output_size, return_indices: bool, d: int):
    """``d``-D adaptive max pooling with PyTorch's checks in their order."""
    name = f"adaptive_max_pool{d}d"
    out = _with_default(output_size, tuple(x.shape), d)
    if x.dim() not in (d + 1, d + 2):
        raise RuntimeError(f"{name}(): Expected {d + 1}D or {d + 2}D tensor, but got: "
                           f"{list(x.shape)}")
    i = empty_dim(tuple(x.shape))
    if i is not None:
        raise RuntimeError(f"{name}(): Expected input to have non-zero size for non-batch "
                           f"dimensions, but input has sizes {list(x.shape)} with "
                           f"dimension {i} being empty")
    if len(out) != d:
        raise RuntimeError(f"{name}(): internal error: output_size.size() must be {d}")
    for o in out:
        if o < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {o}: "
                               f"{list(x.shape[:-d]) + list(out)}")
    floating_kernel(x, name if d == 2 else f"{name}_cpu")
    grad_name = f"AdaptiveMaxPool{d}DBackward0"
    fn = lambda v: _no_empty_gradient(_max_windows(v, out)[0], name)
    if not return_indices:
        return named(grad_name, fn, x)
    shape = tuple(x.shape[:-d]) + tuple(out)
    if 0 in shape:
        return named(grad_name, fn, x), lax.zeros(shape, dtypes.int64)
    at = _max_windows(x.detach(), out)[1]
    indices = window_indices(at, _index_table(tuple(x.shape[-d:]), out), shape)
    # saved and version-checked as PyTorch saves the indices it returns
    return named(grad_name, fn, x, keeps=(indices,)), indices


def adaptive_max_pool2d(input, output_size, return_indices: bool = False):
    """2-D adaptive max pooling over (N, C, H, W) or (C, H, W) inputs, as PyTorch's; with
    ``return_indices`` also each maximum's flat position in its (H, W) plane."""
    return _adaptive_max(to_tensor(input), output_size, return_indices, 2)


def adaptive_avg_pool3d(input, output_size):
    """3-D adaptive average pooling over (N, C, T, H, W) or (C, T, H, W) inputs, as
    PyTorch's."""
    return _adaptive_avg(to_tensor(input), output_size, 3)


def adaptive_max_pool3d(input, output_size, return_indices: bool = False):
    """3-D adaptive max pooling over (N, C, T, H, W) or (C, T, H, W) inputs, as PyTorch's;
    with ``return_indices`` also each maximum's flat position in its (T, H, W) volume."""
    return _adaptive_max(to_tensor(input), output_size, return_indices, 3)


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
