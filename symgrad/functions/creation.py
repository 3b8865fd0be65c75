"""Creating tensors: tensor, as_tensor, from_numpy, ones / zeros / full / empty, eye,
arange, linspace, logspace, the *_like variants, with PyTorch's dtype inference."""
from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING

import numpy as np

from ..graph import dtypes
from ..tensor import Tensor
from ..ops import lax
from ..device import check_device
from ..tracing import numpy_read

if TYPE_CHECKING:
    from collections.abc import Sequence
    from ..types import DeviceLike, DTypeLike, TensorLike

__all__ = ["tensor", "as_tensor", "shape_arg", "from_numpy", "ones", "zeros", "full", "empty", "eye",
           "arange", "linspace", "logspace", "ones_like", "zeros_like", "full_like", "empty_like",
           "scalar_tensor"]

_COPY_WARNING = ("To copy construct from a tensor, it is recommended to use "
                 "sourceTensor.clone().detach() or sourceTensor.clone().detach()."
                 "requires_grad_(True), rather than torch.tensor(sourceTensor).")


def shape_arg(size) -> tuple[int, ...]:
    """Accept f(2, 3), f((2, 3)), f([2, 3]) and f(torch.Size([2, 3]))."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = size[0]
    out = []
    for s in size:
        if isinstance(s, Tensor):
            s = int(s)
        if not isinstance(s, (int, np.integer)) or isinstance(s, bool):
            raise TypeError(f"expected a sequence of integers for the size, got "
                            f"{type(s).__name__}")
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: "
                               f"{list(size)}")
        out.append(int(s))
    return tuple(out)


def _infer_dtype(data) -> dtypes.DType:
    """PyTorch's inference: Python floats are the default float, ints int64, bools bool;
    numpy scalars / arrays and tensors keep their dtype; the elements' types promote."""
    out = None
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, (list, tuple)):
            stack.extend(item)
            continue
        if isinstance(item, Tensor):
            dt = item.dtype
        elif isinstance(item, (np.ndarray, np.generic)):
            dt = dtypes.from_numpy_dtype(item.dtype)
        elif isinstance(item, bool):
            dt = dtypes.bool_
        elif isinstance(item, int):
            dt = dtypes.int64
        elif isinstance(item, float):
            dt = dtypes.get_default_dtype()
        elif isinstance(item, complex):
            raise TypeError("symgrad does not support complex tensors")
        else:
            raise TypeError(f"Could not infer dtype of {type(item).__name__}")
        out = dt if out is None else dtypes._promote_two(out, dt)
    return dtypes.get_default_dtype() if out is None else out


def _finish(arr: np.ndarray, dtype: dtypes.DType, requires_grad: bool) -> Tensor:
    t = Tensor._from_array(arr, dtype)
    if requires_grad:
        if not dtype.is_floating_point:
            raise RuntimeError("Only Tensors of floating point and complex dtype can require "
                               "gradients")
        t._requires_grad = True
    return t


def tensor(data: TensorLike, dtype: DTypeLike | None = None, device: DeviceLike | None = None,
           requires_grad: bool = False, pin_memory: bool = False) -> Tensor:
    """A new tensor holding a copy of `data` (nested lists, scalars, arrays, tensors).

    >>> tensor([1.0, 2.0])
    tensor([1., 2.])
    """
    check_device(device)
    if isinstance(data, Tensor):
        warnings.warn(_COPY_WARNING, UserWarning, stacklevel=2)
        arr = np.array(data._eager_data("torch.tensor()"), copy=True)
        dt = dtypes.as_dtype(dtype) if dtype is not None else data.dtype
    elif isinstance(data, np.ndarray):
        dt = dtypes.as_dtype(dtype) if dtype is not None else dtypes.from_numpy_dtype(data.dtype)
        read = None if requires_grad else numpy_read(data)
        if read is not None:            # (a compiled function's global array: an input)
            return read if read.dtype is dt else lax.cast(read, dt)
        arr = np.array(data, copy=True)
    else:
        dt = dtypes.as_dtype(dtype) if dtype is not None else _infer_dtype(data)
        arr = _from_nested(data)
    arr = np.require(arr.astype(dt.np, copy=False), requirements="C")  # keeps 0-d as 0-d
    return _finish(arr, dt, requires_grad)


def _from_nested(data):
    if isinstance(data, (list, tuple)):
        conv = [(_from_nested(d) if isinstance(d, (list, tuple, Tensor)) else d) for d in data]
        try:
            return np.array(conv)
        except ValueError:
            raise ValueError(f"expected sequence of length {len(data[0])} at dim 1 "
                             f"(got {len(data[1]) if len(data) > 1 else 0})") from None
    if isinstance(data, Tensor):
        return data._eager_data("conversion")
    return np.array(data)


def as_tensor(data: TensorLike, dtype: DTypeLike | None = None,
              device: DeviceLike | None = None) -> Tensor:
    """Like tensor(), but shares memory with a numpy array or tensor when it can."""
    check_device(device)
    if isinstance(data, Tensor):
        if dtype is None or dtypes.as_dtype(dtype) is data.dtype:
            return data
        return lax.cast(data, dtypes.as_dtype(dtype))
    if isinstance(data, np.ndarray):
        dt = dtypes.as_dtype(dtype) if dtype is not None else dtypes.from_numpy_dtype(data.dtype)
        read = numpy_read(data)
        if read is not None:            # (a compiled function's global array: an input)
            return read if read.dtype is dt else lax.cast(read, dt)
        arr = data if data.dtype == dt.np else data.astype(dt.np)
        return Tensor._from_array(arr, dt)
    return tensor(data, dtype=dtype)


def from_numpy(arr: np.ndarray) -> Tensor:
    """A tensor sharing memory with the numpy array `arr`."""
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(arr).__name__})")
    read = numpy_read(arr)              # (a compiled function's global array: an input)
    return read if read is not None else Tensor._from_array(arr,
                                                            dtypes.from_numpy_dtype(arr.dtype))


def scalar_tensor(value: int | float | bool, dtype: DTypeLike | None = None) -> Tensor:
    dt = dtypes.as_dtype(dtype) if dtype is not None else dtypes.get_default_dtype()
    return Tensor._from_array(np.array(value, dtype=dt.np), dt)


def _dt(dtype, default=None):
    return dtypes.as_dtype(dtype) if dtype is not None else (default or dtypes.get_default_dtype())


def full(size: int | Sequence[int], fill_value: int | float | bool, *,
         dtype: DTypeLike | None = None, device: DeviceLike | None = None,
         requires_grad: bool = False) -> Tensor:
    check_device(device)
    size = shape_arg((size,) if isinstance(size, int) else tuple(size))
    if dtype is None:
        dtype = dtypes.result_type([], [], [fill_value])
    dt = _dt(dtype)
    return _finish(np.full(size, fill_value, dtype=dt.np), dt, requires_grad)


def ones(*size: int | Sequence[int], dtype: DTypeLike | None = None,
         device: DeviceLike | None = None, requires_grad: bool = False) -> Tensor:
    check_device(device)
    dt = _dt(dtype)
    return _finish(np.ones(shape_arg(size), dtype=dt.np), dt, requires_grad)


def zeros(*size: int | Sequence[int], dtype: DTypeLike | None = None,
          device: DeviceLike | None = None, requires_grad: bool = False) -> Tensor:
    check_device(device)
    dt = _dt(dtype)
    return _finish(np.zeros(shape_arg(size), dtype=dt.np), dt, requires_grad)


def empty(*size: int | Sequence[int], dtype: DTypeLike | None = None,
          device: DeviceLike | None = None, requires_grad: bool = False) -> Tensor:
    check_device(device)
    dt = _dt(dtype)
    return _finish(np.empty(shape_arg(size), dtype=dt.np), dt, requires_grad)


def eye(n: int, m: int | None = None, *, dtype: DTypeLike | None = None,
        device: DeviceLike | None = None, requires_grad: bool = False) -> Tensor:
    check_device(device)
    dt = _dt(dtype)
    return _finish(np.eye(n, m, dtype=dt.np), dt, requires_grad)


def arange(start: int | float, end: int | float | None = None, step: int | float = 1, *,
           dtype: DTypeLike | None = None, device: DeviceLike | None = None,
           requires_grad: bool = False) -> Tensor:
    check_device(device)
    if end is None:
        start, end = 0, start
    vals = [start, end, step]
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if not ((step > 0 and end >= start) or (step < 0 and end <= start)):
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    if dtype is None:
        dtype = dtypes.result_type([], [], vals)
        if dtype.category == "bool":
            dtype = dtypes.int64
    dt = _dt(dtype)
    n = max(int(np.ceil((float(end) - float(start)) / float(step))), 0)
    arr = _arange_float(float(start), float(step), n, dt.np) if dt.is_floating_point else \
        np.arange(start, end, step)
    return _finish(arr.astype(dt.np), dt, requires_grad)


_GRAIN = 32768          # at::internal::GRAIN_SIZE: at::parallel_for's least work per thread
_VEC_BYTES = 32         # the Vectorized<T> width PyTorch's x86 arange kernel runs with


def _arange_float(start: float, step: float, n: int, np_dt) -> np.ndarray:
    """PyTorch's CPU arange for a floating dtype, bit for bit (its arange_kernel, on x86):
    in double, ``fma(step, i, start)`` per element, except in whole pairs of vectors
    (``Vectorized<T>``: 32 bytes) from each thread's first element, where a vector's
    first element ``base = T(fma(step, i, start))`` and the others ``fma(k, step, base)``
    (k = 1 .. lanes - 1); each rounded to the dtype once. The threads' ranges are
    at::parallel_for's for symgrad's thread count (PyTorch's values depend on its own
    when it splits: more than 32768 elements)."""
    lanes = _VEC_BYTES // np.dtype(np_dt).itemsize
    i = np.arange(n, dtype=np.int64)
    threads = 1
    if n >= _GRAIN:
        from ..parallelism import get_num_threads      # (imports the compiler's backends)
        threads = min(get_num_threads(), -(-n // _GRAIN))
    chunk = -(-n // threads) if n else 1
    begin = (i // chunk) * chunk
    length = np.minimum(begin + chunk, n) - begin
    rel = i - begin
    in_vec = rel < (length // (2 * lanes)) * (2 * lanes)
    first = (begin + (rel // lanes) * lanes).astype(np.float64)
    base = _fma(np.float64(step), first, np.float64(start)).astype(np_dt).astype(np.float64)
    vec = _fma((rel % lanes).astype(np.float64), np.float64(step), base)
    scalar = _fma(np.float64(step), i.astype(np.float64), np.float64(start))
    return np.where(in_vec, vec, scalar).astype(np_dt)


def linspace(start: int | float, end: int | float, steps: int, *,
             dtype: DTypeLike | None = None, device: DeviceLike | None = None,
             requires_grad: bool = False) -> Tensor:
    check_device(device)
    dt = _dt(dtype)
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    _check_endpoints("linspace", start, end, dt)
    return _finish(_linspace(start, end, int(steps), dt), dt, requires_grad)


_C_INT_NAMES = {"int8": "int8_t", "uint8": "uint8_t", "int16": "int16_t", "int32": "int",
                "int64": "int64_t"}


def _check_endpoints(name: str, start, end, dt) -> None:
    """PyTorch's refusals: no bool kernel; integer endpoints must fit the dtype (NaN,
    infinities, out of range: its overflow error, not wrapped values)."""
    if dt is dtypes.bool_:
        raise NotImplementedError(f'"{name}_cpu" not implemented for \'Bool\'')
    if dt.is_floating_point:
        return
    info = np.iinfo(dt.np)
    for v in (start, end):
        if not (math.isfinite(v) and info.min <= v <= info.max):
            raise RuntimeError(f"value cannot be converted to type {_C_INT_NAMES[dt.name]} "
                               "without overflow")


def _linspace(start, end, steps: int, dt) -> np.ndarray:
    """PyTorch's CPU linspace, bit for bit: ``step = (end - start) / (steps - 1)`` in the
    output dtype (double for integers), then ``fma(step, i, start)`` for the first half
    and ``fma(-step, steps - 1 - i, end)`` for the rest, each rounded once."""
    if steps <= 1:
        return np.full(steps, start).astype(dt.np)
    work = np.float32 if dt.np in (np.float32, np.float16) else np.float64
    if dt.is_floating_point:
        start, end = dt.np.type(start), dt.np.type(end)        # (the Scalar's conversion)
    else:
        start, end = int(start), int(end)
    a, b = work(start), work(end)
    step = (b - a) / work(steps - 1)
    i = np.arange(steps, dtype=np.float64)
    half = steps // 2
    out = np.where(i < half, _fma(np.float64(step), i, np.float64(a)),
                   _fma(-np.float64(step), steps - 1 - i, np.float64(b)))
    if dt.is_floating_point:
        return out.astype(work).astype(dt.np)
    return np.trunc(out).astype(dt.np)          # (C's conversion: toward zero)


def _fma(a, b, c) -> np.ndarray:
    """``a * b + c`` rounded once, in float64 (Dekker's product and Knuth's sum; the
    float32 case is exact: its product fits a double)."""
    p = a * b
    split = 134217729.0                      # 2**27 + 1
    ah = a * split
    ah = ah - (ah - a)
    bh = b * split
    bh = bh - (bh - b)
    p_err = ((ah * bh - p) + ah * (b - bh) + (a - ah) * bh) + (a - ah) * (b - bh)
    s = p + c
    bb = s - p
    s_err = (p - (s - bb)) + (c - bb)
    out = s + (s_err + p_err)
    if not np.all(np.isfinite(out)):        # (the splitting overflows past ~1e300)
        out = np.where(np.isfinite(out), out, p + c)
    return out


def logspace(start: int | float, end: int | float, steps: int, base: float = 10.0, *,
             dtype: DTypeLike | None = None, device: DeviceLike | None = None,
             requires_grad: bool = False) -> Tensor:
    """PyTorch's CPU logspace, bit for bit: start and end in the output dtype, their
    difference over ``steps - 1`` in double, ``pow(base, start + step * i)`` (from the
    end for the second half) in double, converted to the output dtype."""
    check_device(device)
    dt = _dt(dtype)
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    _check_endpoints("logspace", start, end, dt)
    steps = int(steps)
    if steps == 1:                               # (PyTorch: base ** start, in double)
        a = b = float(start)
    elif dt.is_floating_point:
        a, b = dt.np.type(start), dt.np.type(end)
    else:
        a, b = int(start), int(end)
    diff = np.float64(b - a)
    step = diff / np.float64(steps - 1) if steps > 1 else np.float64(0.0)
    i = np.arange(steps, dtype=np.float64)
    exponents = np.where(i < steps // 2, np.float64(a) + step * i,
                         np.float64(b) - step * (steps - 1 - i))
    values = np.array([_pow(float(base), e) for e in exponents.tolist()], np.float64)
    if not dt.is_floating_point:
        values = np.trunc(values)
    return _finish(values.astype(dt.np), dt, requires_grad)


def _pow(x: float, y: float) -> float:
    """C's ``pow`` (the platform's libm, as PyTorch's ``std::pow``; numpy's vectorised
    power may round otherwise), inf on overflow."""
    try:
        return math.pow(x, y)
    except OverflowError:
        return math.inf
    except ValueError:       # a negative base to a non-integer power: C's pow is NaN
        return math.nan


def _like(x, dtype):
    return dtypes.as_dtype(dtype) if dtype is not None else x.dtype


def ones_like(x: Tensor, *, dtype: DTypeLike | None = None, device: DeviceLike | None = None,
              requires_grad: bool = False) -> Tensor:
    check_device(device)
    return ones(tuple(x.shape), dtype=_like(x, dtype), requires_grad=requires_grad)


def zeros_like(x: Tensor, *, dtype: DTypeLike | None = None, device: DeviceLike | None = None,
               requires_grad: bool = False) -> Tensor:
    check_device(device)
    return zeros(tuple(x.shape), dtype=_like(x, dtype), requires_grad=requires_grad)


def empty_like(x: Tensor, *, dtype: DTypeLike | None = None, device: DeviceLike | None = None,
               requires_grad: bool = False) -> Tensor:
    check_device(device)
    return empty(tuple(x.shape), dtype=_like(x, dtype), requires_grad=requires_grad)


def full_like(x: Tensor, fill_value: int | float | bool, *, dtype: DTypeLike | None = None,
              device: DeviceLike | None = None, requires_grad: bool = False) -> Tensor:
    check_device(device)
    return full(tuple(x.shape), fill_value, dtype=_like(x, dtype), requires_grad=requires_grad)


def _dtype_view(x, dtype):
    raise NotImplementedError("view(dtype) is not supported by symgrad")
