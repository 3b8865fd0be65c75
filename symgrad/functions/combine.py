"""Combining and rearranging tensors as PyTorch names it: ``atleast_1d/2d/3d``,
``hstack`` / ``vstack`` / ``row_stack`` / ``dstack`` / ``column_stack``, ``tensor_split``,
``diff``, ``rot90``, ``tensordot``, ``kron``, ``cross`` / ``linalg.cross``, ``cdist``,
``Tensor.unfold``, ``sum_to_size``, ``block_diag`` and ``cartesian_prod`` --
built from the shape ops and primitives, under PyTorch's backward names, checks and error
texts."""
from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np

from ..dispatch import bind
from ..graph import dtypes
from ..graph.primitives import PRIMITIVES as P
from ..graph.shapes import broadcast_shapes
from ..ops import lax
from . import elementwise as E
from . import shape
from .common import Tensor, to_tensor, wrap_dim
from .composite import named
from .compat import meshgrid
from .linalg import matmul
from .reduction import sum as _sum
from .selection import narrow

__all__ = ["atleast_1d", "atleast_2d", "atleast_3d", "hstack", "vstack", "row_stack", "dstack",
           "column_stack", "tensor_split", "diff", "rot90", "tensordot", "kron", "cross",
           "linalg_cross", "cdist", "unfold", "sum_to_size", "block_diag", "cartesian_prod"]


def _each(fn, tensors):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return tuple(fn(to_tensor(t)) for t in tensors[0])
    if len(tensors) == 1:
        return fn(to_tensor(tensors[0]))
    return tuple(fn(to_tensor(t)) for t in tensors)


def _at_least(x: Tensor, n: int) -> Tensor:
    if x.dim() == 0:
        return shape.reshape(x, (1,) * n)
    if x.dim() == 1 and n >= 2:
        x = shape.unsqueeze(x, 0)
        return shape.unsqueeze(x, -1) if n == 3 else x
    if x.dim() == 2 and n == 3:
        return shape.unsqueeze(x, -1)
    return x


def atleast_1d(*tensors: Tensor | Sequence[Tensor]) -> Tensor | tuple[Tensor, ...]:
    """Each tensor with at least 1 dim (a 0-d one as shape (1,))."""
    return _each(lambda t: _at_least(t, 1), tensors)


def atleast_2d(*tensors: Tensor | Sequence[Tensor]) -> Tensor | tuple[Tensor, ...]:
    """Each tensor with at least 2 dims (a 1-d one as a row)."""
    return _each(lambda t: _at_least(t, 2), tensors)


def atleast_3d(*tensors: Tensor | Sequence[Tensor]) -> Tensor | tuple[Tensor, ...]:
    """Each tensor with at least 3 dims ((n,) -> (1, n, 1); (m, n) -> (m, n, 1))."""
    return _each(lambda t: _at_least(t, 3), tensors)


def hstack(tensors: Sequence[Tensor]) -> Tensor:
    """Concatenated along dim 1 (dim 0 for 1-d tensors)."""
    ts = [_at_least(to_tensor(t), 1) for t in tensors]
    return shape.cat(ts, 0 if ts and ts[0].dim() == 1 else 1)


def vstack(tensors: Sequence[Tensor]) -> Tensor:
    """Concatenated along dim 0, 1-d tensors as rows."""
    return shape.cat([_at_least(to_tensor(t), 2) for t in tensors], 0)


row_stack = vstack


def dstack(tensors: Sequence[Tensor]) -> Tensor:
    """Concatenated along dim 2 (after :func:`atleast_3d`)."""
    return shape.cat([_at_least(to_tensor(t), 3) for t in tensors], 2)


def column_stack(tensors: Sequence[Tensor]) -> Tensor:
    """0-d and 1-d tensors as columns, concatenated along dim 1."""
    ts = [to_tensor(t) for t in tensors]
    ts = [shape.reshape(t, (t.numel(), 1)) if t.dim() <= 1 else t for t in ts]
    return shape.cat(ts, 1)


def tensor_split(input: Tensor, indices_or_sections: int | Sequence[int] | Tensor,
                 dim: int = 0) -> tuple[Tensor, ...]:
    """Views of ``input`` along ``dim``: ``n`` sections (the first ``size % n`` one element
    longer), or the pieces between the given indices."""
    x = to_tensor(input)
    d = wrap_dim(dim, max(x.dim(), 1))
    size = x.shape[d]
    spec = indices_or_sections
    if isinstance(spec, Tensor):
        if spec.dtype is not dtypes.int64 or spec.dim() > 1:
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to have a long "
                               "dtype and to be a 0-D or 1-D tensor")
        spec = int(spec.item()) if spec.dim() == 0 else [int(i) for i in spec.tolist()]
    if isinstance(spec, int):
        if spec <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {spec}")
        base, extra = divmod(size, spec)
        bounds, start = [], 0
        for k in range(spec):
            start += base + (k < extra)
            bounds.append(start)
        bounds = bounds[:-1]
    else:
        bounds = [int(i) for i in spec]
    pieces, start = [], 0
    for stop in bounds + [size]:
        lo, hi = min(max(start, 0), size), min(max(stop, 0), size)
        pieces.append(narrow(x, d, lo, max(hi - lo, 0)))
        start = stop
    return tuple(pieces)


def diff(input: Tensor, n: int = 1, dim: int = -1, prepend: Tensor | None = None,
         append: Tensor | None = None) -> Tensor:
    """The ``n``-th forward difference along ``dim`` (``prepend`` / ``append`` joined
    first): ``x[1:] - x[:-1]`` (``SubBackward0``; bools: ``ne``)."""
    x = to_tensor(input)
    if x.dim() == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    d = wrap_dim(dim, x.dim())
    parts = [to_tensor(p) for p in (prepend,) if p is not None] + [x] + \
        [to_tensor(a) for a in (append,) if a is not None]
    if len(parts) > 1:
        x = shape.cat(parts, d)
    for _ in range(n):
        m = x.shape[d]
        if m == 0:
            break
        hi, lo = narrow(x, d, 1, m - 1), narrow(x, d, 0, m - 1)
        x = E.binary("ne", hi, lo) if x.dtype is dtypes.bool_ else E.binary("sub", hi, lo)
    return x


def rot90(input: Tensor, k: int = 1, dims: Sequence[int] = (0, 1)) -> Tensor:
    """Rotated by 90 degrees ``k`` times in the plane of ``dims``, from the first dim
    towards the second (``Rot90Backward0``)."""
    x = to_tensor(input)
    dims = list(dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if x.dim() < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {x.dim()}")
    a, b = wrap_dim(dims[0], x.dim()), wrap_dim(dims[1], x.dim())
    if a == b:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {a} and "
                           f"dim1 = {b}")
    k = k % 4

    def fn(v):
        if k == 1:
            return lax.permute(lax.apply("flip", v, axes=(b,)), _swap(v.dim(), a, b))
        if k == 2:
            return lax.apply("flip", v, axes=tuple(sorted((a, b))))
        if k == 3:
            return lax.permute(lax.apply("flip", v, axes=(a,)), _swap(v.dim(), a, b))
        return bind(P["copy"], v)
    return named("Rot90Backward0", fn, x)


def _swap(n, a, b):
    perm = list(range(n))
    perm[a], perm[b] = perm[b], perm[a]
    return tuple(perm)


def tensordot(a: Tensor, b: Tensor, dims: int | Sequence = 2) -> Tensor:
    """The sum over the last ``dims`` dims of ``a`` and the first of ``b`` (or over the
    listed pairs of dims): a matrix product of the flattened operands."""
    x, y = to_tensor(a), to_tensor(b)
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        given_a, given_b = list(range(-dims, 0)), list(range(dims))
    else:
        given_a, given_b = ([d] if isinstance(d, int) else list(d) for d in dims)
    da = [wrap_dim(d, x.dim()) for d in given_a]
    db = [wrap_dim(d, y.dim()) for d in given_b]
    for i, j, gi, gj in zip(da, db, given_a, given_b):
        if x.shape[i] != y.shape[j]:
            raise RuntimeError(f"contracted dimensions need to match, but first has size "
                               f"{x.shape[i]} in dim {gi} and second has size {y.shape[j]} in "
                               f"dim {gj}")
    free_a = [i for i in range(x.dim()) if i not in da]
    free_b = [j for j in range(y.dim()) if j not in db]
    k = int(np.prod([x.shape[i] for i in da])) if da else 1
    m = int(np.prod([x.shape[i] for i in free_a])) if free_a else 1
    n = int(np.prod([y.shape[j] for j in free_b])) if free_b else 1
    left = shape.reshape(shape.permute(x, free_a + da), (m, k))
    right = shape.reshape(shape.permute(y, db + free_b), (k, n))
    out_shape = tuple(x.shape[i] for i in free_a) + tuple(y.shape[j] for j in free_b)
    return shape.reshape(matmul(left, right), out_shape)


def kron(input: Tensor, other: Tensor) -> Tensor:
    """The Kronecker product: block (i, j) is ``input[i, j] * other``."""
    x, y = to_tensor(input), to_tensor(other)
    nd = max(x.dim(), y.dim())
    xs = (1,) * (nd - x.dim()) + tuple(x.shape)
    ys = (1,) * (nd - y.dim()) + tuple(y.shape)
    inter_x = tuple(v for s in xs for v in (s, 1))
    inter_y = tuple(v for s in ys for v in (1, s))
    out = tuple(p * q for p, q in zip(xs, ys))

    def fn(u, v):
        return lax.reshape(E.binary("mul", lax.reshape(u, inter_x), lax.reshape(v, inter_y)),
                           out)
    return named("UnsafeViewBackward0", fn, x, y)


def _cross(a, b, d):
    """a × b along dim d: a₁b₂ - a₂b₁, a₂b₀ - a₀b₂, a₀b₁ - a₁b₀."""
    def rolled(v, order):
        return bind(P["take"], v, Tensor._from_array(np.array(order, np.int64), dtypes.int64),
                    axis=d)
    return lax.sub(lax.mul(rolled(a, (1, 2, 0)), rolled(b, (2, 0, 1))),
                   lax.mul(rolled(a, (2, 0, 1)), rolled(b, (1, 2, 0))))


def linalg_cross(input: Tensor, other: Tensor, *, dim: int = -1) -> Tensor:
    """The cross product of 3-vectors along ``dim``, broadcast (``LinalgCrossBackward0``)."""
    x, y = to_tensor(input), to_tensor(other)
    if x.dim() != y.dim():
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    d = wrap_dim(dim, x.dim())
    if x.shape[d] != 3 or y.shape[d] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got "
                           f"{x.shape[d]} and {y.shape[d]}")
    target = broadcast_shapes(tuple(x.shape), tuple(y.shape))
    x, y = (shape.expand(t, target) if tuple(t.shape) != target else t for t in (x, y))
    return named("LinalgCrossBackward0", lambda u, v: _cross(u, v, d), x, y)


def cross(input: Tensor, other: Tensor, dim: int | None = None) -> Tensor:
    """``torch.cross``: :func:`linalg_cross`; without ``dim``, the first dim of size 3
    (with PyTorch's deprecation warning)."""
    x = to_tensor(input)
    if dim is None:
        warnings.warn("Using torch.cross without specifying the dim arg is deprecated.\n"
                      "Please either pass the dim explicitly or simply use torch.linalg.cross.\n"
                      "The default value of dim will change to agree with that of linalg.cross "
                      "in a future release. (Triggered internally at /__w/pytorch/pytorch/aten/"
                      "src/ATen/native/Cross.cpp:63.)", UserWarning, stacklevel=2)
        dim = next((i for i, s in enumerate(x.shape) if s == 3), -1)
    return linalg_cross(x, other, dim=dim)


def cdist(x1: Tensor, x2: Tensor, p: float = 2.0,
          compute_mode: str = "use_mm_for_euclid_dist_if_necessary") -> Tensor:
    """The ``p``-norm distance between each row of ``x1`` and each row of ``x2`` (batched);
    its gradient is 0 where a distance is 0, as PyTorch's (``CdistBackward0``)."""
    a, b = to_tensor(x1), to_tensor(x2)
    if a.dim() < 2 or b.dim() < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X{1 if a.dim() < 2 else 2}"
                           f" got: {min(a.dim(), b.dim())}D")
    if a.shape[-1] != b.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: "
                           f"{a.shape[-1]} X2: {b.shape[-1]}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    p = float(p)

    def fn(u, v):
        diff_ = lax.sub(lax.reshape(u, tuple(u.shape[:-1]) + (1, u.shape[-1])),
                        lax.reshape(v, tuple(v.shape[:-2]) + (1,) + tuple(v.shape[-2:])))
        mag = E.unary("abs", diff_)
        axis = (len(mag.shape) - 1,)
        if p == float("inf"):
            return bind(P["amax"], mag, axes=axis, keepdim=False)
        if p == 0:
            return lax.sum(lax.cast(E.binary("ne", mag, 0), u.dtype), axis)
        if p == 1:
            return lax.sum(mag, axis)
        total = lax.sum(E.binary("pow", mag, p) if p != 2 else lax.mul(diff_, diff_), axis)
        zero = E.binary("eq", total, 0)
        safe = lax.where(zero, 1.0, total)
        root = E.unary("sqrt", safe) if p == 2 else E.binary("pow", safe, 1.0 / p)
        return lax.where(zero, 0.0, root)
    return named("CdistBackward0", fn, a, b)


def unfold(input: Tensor, dimension: int, size: int, step: int) -> Tensor:
    """``Tensor.unfold``: the windows of ``size`` elements every ``step`` along
    ``dimension``, that dim becoming the window count and a last dim of ``size``
    (``UnfoldBackward0``)."""
    x = to_tensor(input)
    d = wrap_dim(dimension, max(x.dim(), 1))
    n = x.shape[d] if x.dim() else 1
    if size > n:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {n} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    count = (n - size) // step + 1
    index = (np.arange(count)[:, None] * step + np.arange(size)[None, :]).astype(np.int64)

    def fn(v):
        if v.dim() == 0:
            return lax.reshape(v, (1,))
        windows = bind(P["take"], v, Tensor._from_array(index, dtypes.int64), axis=d)
        perm = tuple(k for k in range(v.dim() + 1) if k != d + 1) + (d + 1,)
        return lax.permute(windows, perm)
    return named("UnfoldBackward0", fn, x)


def sum_to_size(input: Tensor, *size: int | Sequence[int]) -> Tensor:
    """``input`` summed down to ``size`` (which it must be expandable from)."""
    x = to_tensor(input)
    target = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (list, tuple)) else \
        tuple(size)
    lead_n = x.dim() - len(target)
    if lead_n < 0 or any(t not in (1, s) for t, s in zip(target, tuple(x.shape)[lead_n:])):
        raise RuntimeError(f"size {{{list(target)}}} is not expandable to size "
                           f"{{{list(x.shape)}}}.")
    lead = x.dim() - len(target)
    dims = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(target)
                                      if s == 1 and x.shape[lead + i] != 1)
    if not dims:
        return x
    return shape.reshape(_sum(x, dims, keepdim=True), target) if lead else \
        _sum(x, dims, keepdim=True)


def block_diag(*tensors: Tensor) -> Tensor:
    """The tensors (0-d, 1-d as a row, or 2-d) as blocks on the diagonal of a zero matrix
    (``BlockDiagBackward0``)."""
    ts = [to_tensor(t) for t in tensors]
    for i, t in enumerate(ts):
        if t.dim() > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer "
                               f"dimensions. Input {i} has {t.dim()} dimensions")
    shapes = [(1, 1) if t.dim() == 0 else (1, t.shape[0]) if t.dim() == 1 else tuple(t.shape)
              for t in ts]
    rows, cols = sum(s[0] for s in shapes), sum(s[1] for s in shapes)
    dt = E.promote(ts) if ts else dtypes.get_default_dtype()
    if not ts:
        return lax.zeros((0, 0), dt)

    def fn(*vs):
        out = lax.zeros((rows, cols), dt)
        r = c = 0
        for v, (h, w) in zip(vs, shapes):
            block = lax.cast(lax.reshape(v, (h, w)), dt)
            padded = lax.pad_slice(block, (rows, cols), (r, c), (r + h, c + w), (1, 1))
            out = lax.add(out, padded)
            r, c = r + h, c + w
        return out
    return named("BlockDiagBackward0", fn, *ts)


def cartesian_prod(*tensors: Tensor) -> Tensor:
    """The rows of every combination of the 1-d tensors' elements (a 1-d tensor for one
    input)."""
    ts = [to_tensor(t) for t in tensors]
    if len(ts) == 1:
        return ts[0]
    grids = meshgrid(*ts, indexing="ij")
    return shape.stack([g.reshape(-1) for g in grids], 1)
