"""Shape and layout operations: view, reshape, flatten, squeeze / unsqueeze, transpose,
t, T, permute, expand, contiguous, clone, cat, stack, flip. Results that share storage with
their input are views: they share its version counter and remember how they were made
(for in-place updates through them)."""
from __future__ import annotations

import warnings
import weakref
from typing import TYPE_CHECKING

import numpy as np

from ..autograd.grad_mode import _state as _grad_state
from ..autograd.nodes import no_accumulator
from ..dispatch import bind, record, record_one
from ..graph.primitives import NUMPY_RULES
from ..tracing import _lifter
from ..ops import lax
from ..graph.primitives import PRIMITIVES as P
from ..graph.shapes import infer_reshape, wrap_dim
from .common import Tensor, to_tensor
from ..tensor import register_view
from .creation import _dtype_view
from .elementwise import promote
from .kernels import stack_kernel

if TYPE_CHECKING:
    from collections.abc import Sequence
    from ..types import DTypeLike

__all__ = ["view", "reshape", "flatten", "squeeze", "unsqueeze", "transpose", "t", "permute",
           "expand", "expand_as", "contiguous", "clone", "cat", "stack", "make_view", "layout_view",
           "multi_output_views", "INPUT_STRIDES", "strides_of",
           "movedim", "unflatten", "flip", "fliplr", "flipud", "expanded_shape"]


def make_view(src: Tensor, out: Tensor, prim_name: str, attrs: dict) -> Tensor:
    """Mark `out` (computed from `src` by one layout primitive) as a view of src's base
    when its numpy storage is shared. A view of an inference tensor is one; a view of a
    normal tensor made in inference mode is not (see :func:`inference_view`)."""
    if out._data is not None and out._data.base is None:
        return out                      # numpy had to copy: not a view
    if src._inference:
        out._inference = True
    elif _grad_state.inference:
        inference_view(src, out)
    return _mark_view(src, out, prim_name, attrs)


def _mark_view(src: Tensor, out: Tensor, prim_name: str, attrs: dict) -> Tensor:
    """`out` a view of src's base: its version counter, the chain of layout primitives
    from the base, and a place among the base's live views (re-derived after in-place
    updates)."""
    base = src._base
    if base is None:
        base = src
    out._base = base
    out._vc = src._vc
    meta = src.__dict__.get("_view_meta")
    if src.__dict__.get("_detached_view"):
        out._detached_view = True
    elif not _grad_state.enabled and not _grad_state.inference:
        out._view_meta = ("no_grad", 0)     # PyTorch's CreationMeta (see inplace.py)
        if src._requires_grad or src.grad_fn is not None:
            out._requires_grad = True       # as PyTorch's: no history, no AccumulateGrad
            out._acc = no_accumulator
    elif meta is not None:
        out._view_meta = (meta[0], 0)
    chain = src._view_chain      # (attrs: the call's own dict, read with dict(attrs))
    out._view_chain = ((prim_name, attrs),) if chain is None else chain + ((prim_name, attrs),)
    register_view(base, out)
    if base._data is not None and out._data is None:    # traced view of an eager tensor
        note = getattr(_lifter[0], "note_view", None)
        if note is not None:
            note(base, out)
    return out


def multi_output_views(views: tuple) -> tuple:
    """Mark the pieces ``split`` / ``chunk`` / ``unbind`` return (views of one base, made
    by one function): PyTorch refuses recorded in-place updates of them (made in grad mode;
    in no_grad mode they already carry that mark)."""
    if _grad_state.enabled and not _grad_state.inference:
        for i, v in enumerate(views):
            if v._base is not None and not v.__dict__.get("_detached_view"):
                v._view_meta = ("multi", i)
    return views


def inference_view(src: Tensor, out: Tensor) -> None:
    """`out`, a view of normal tensor `src` made in inference mode, is a normal tensor as
    in PyTorch: it requires grad when src does, without a history or an AccumulateGrad
    (no gradient flows through it), and cannot be updated in place where autograd
    would record it."""
    out.__dict__.pop("_inference", None)
    out._inference_view = True
    if src.requires_grad:
        out._requires_grad = True
        out._acc = no_accumulator


def _layout(prim_name, x, name=None, **attrs):
    return layout_view(prim_name, x, name, attrs)


def layout_view(prim_name: str, x: Tensor, name: str | None, attrs: dict,
                res: np.ndarray | None = None) -> Tensor:
    """``x`` through the layout primitive `prim_name` with `attrs` (already checked by
    the caller), recorded as `name`, marked as a view of x's base. Eager tensors
    outside inference mode take one short path (the numpy view, the node, the view
    marks; ``res``: the numpy view when the caller has it), the rest ``bind``."""
    data = x._data
    if data is None or _lifter[0] is not None or x._inference or _grad_state.inference:
        return make_view(x, bind(P[prim_name], x, grad_name=name, **attrs), prim_name, attrs)
    if res is None:
        res = NUMPY_RULES[prim_name](data, **attrs)
    out = Tensor._from_array(res, x._dtype)
    if (x._requires_grad or x.grad_fn is not None) and _grad_state.enabled:
        record_one(P[prim_name], x, attrs, out, name)
    if res.base is None:
        return out                      # numpy had to copy: not a view
    return _mark_view(x, out, prim_name, attrs)


def _is_viewable(x: Tensor) -> bool:
    return x._data is None or x._data.flags.c_contiguous


def view(x: Tensor, *shape: int | Sequence[int] | DTypeLike) -> Tensor:
    if len(shape) == 1 and not isinstance(shape[0], (tuple, list, int)) and shape[0] is not None \
            and not hasattr(shape[0], "__index__"):
        return _dtype_view(x, shape[0])
    shape = infer_reshape(_shape_ints(shape), x.numel())
    if x._data is not None and not x._data.flags.c_contiguous and not _view_compatible(x, shape) \
            or x._data is None and x._node is not None and not _traced_viewable(x._node, shape):
        raise RuntimeError("view size is not compatible with input tensor's size and stride (at "
                           "least one dimension spans across two contiguous subspaces). Use "
                           ".reshape(...) instead.")
    return _layout("reshape", x, "ViewBackward0", shape=shape)


def _view_compatible(x, shape):
    return _reshapes_in_place(x._data, shape)


def _reshapes_in_place(a: np.ndarray, shape) -> bool:
    try:
        v = a.view()
        v.shape = shape
        return True
    except (AttributeError, ValueError):
        return False


_LAYOUT_PRIMS = ("permute", "slice", "select", "expand")


def _layout_proxy(node) -> np.ndarray:
    """An array with the strides the eager tensor of traced `node` would have (itemsize
    1, over one byte: only its layout is ever read): the layout primitives from the last
    computed value, which is C-contiguous (as eagerly: elementwise results of strided
    operands aside)."""
    from numpy.lib.stride_tricks import as_strided
    chain = []
    while node.op in _LAYOUT_PRIMS or node.op == "reshape":
        chain.append(node)
        node = node.args[0]
    shape = tuple(node.shape)
    strides = INPUT_STRIDES.get(node) or \
        tuple(int(np.prod(shape[k + 1:])) for k in range(len(shape)))
    a = as_strided(np.zeros(1, np.int8), shape, strides, writeable=False)
    for n in reversed(chain):
        attrs = dict(n.attrs)
        if n.op == "reshape":       # a view where numpy can, else a (contiguous) copy
            v = a.view()
            try:
                v.shape = attrs["shape"]
            except (AttributeError, ValueError):
                v = _layout_proxy_of_shape(attrs["shape"])
            a = v
        else:
            a = NUMPY_RULES[n.op](a, **attrs)
    return a


# the strides (in elements) of traced inputs that are not C-contiguous: an example of
# torch.func.vmap's argument mapped over a dim other than the first (its batch dim moved
# to the front, as torch's physical view, whose layout a view() must fit)
INPUT_STRIDES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def strides_of(t: Tensor) -> tuple:
    """The strides, in elements, of t's eager layout (traced: the layout it would have)."""
    a = t._data if t._data is not None else _layout_proxy(t._node)
    return tuple(st // a.itemsize for st in a.strides)


def _layout_proxy_of_shape(shape) -> np.ndarray:
    from numpy.lib.stride_tricks import as_strided
    shape = tuple(shape)
    strides = tuple(int(np.prod(shape[k + 1:])) for k in range(len(shape)))
    return as_strided(np.zeros(1, np.int8), shape, strides, writeable=False)


def _traced_viewable(node, shape) -> bool:
    """Whether ``view(shape)`` of the traced value `node` is a view eagerly too (else
    eager code raises PyTorch's error: compiled code must as well)."""
    a = _layout_proxy(node)
    return a.flags.c_contiguous or _reshapes_in_place(a, shape)


def _shape_ints(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    for s in shape:
        if type(s) is not int:
            return tuple(int(s) for s in shape)
    return tuple(shape)


def reshape(x: Tensor, *shape: int | Sequence[int]) -> Tensor:
    x = to_tensor(x)
    shape = infer_reshape(_shape_ints(shape), x.numel())
    if shape == tuple(x.shape):
        return _layout("reshape", x, "ViewBackward0", shape=shape)
    if _is_viewable(x) or _view_compatible(x, shape):
        return _layout("reshape", x, "ViewBackward0", shape=shape)
    return bind(P["reshape"], bind(P["copy"], x, grad_name="CloneBackward0"), shape=shape,
                grad_name="UnsafeViewBackward0")


def flatten(x: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    x = to_tensor(x)
    if x.dim() == 0:
        return reshape(x, 1)
    s, e = wrap_dim(start_dim, x.dim()), wrap_dim(end_dim, x.dim())
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if s == e:
        return x
    mid = 1
    for d in x.shape[s:e + 1]:
        mid *= d
    return reshape(x, tuple(x.shape[:s]) + (mid,) + tuple(x.shape[e + 1:]))


def unflatten(x: Tensor, dim: int, sizes: Sequence[int]) -> Tensor:
    d = wrap_dim(dim, x.dim())
    sizes = infer_reshape(tuple(sizes), x.shape[d])
    return view(x, tuple(x.shape[:d]) + sizes + tuple(x.shape[d + 1:]))


def squeeze(x: Tensor, dim: int | Sequence[int] | None = None) -> Tensor:
    x = to_tensor(x)
    if dim is None:
        shape = tuple(s for s in x.shape if s != 1)
        return _layout("reshape", x, "SqueezeBackward0", shape=shape)
    dims = dim if isinstance(dim, (tuple, list)) else (dim,)
    axes = {wrap_dim(d, x.dim()) for d in dims} if x.dim() else set()
    shape = tuple(s for i, s in enumerate(x.shape) if not (i in axes and s == 1))
    name = "SqueezeBackward1" if not isinstance(dim, (tuple, list)) else "SqueezeBackward2"
    return _layout("reshape", x, name, shape=shape)


def unsqueeze(x: Tensor, dim: int) -> Tensor:
    x = to_tensor(x)
    d = wrap_dim(dim, x.dim() + 1)
    shape = tuple(x.shape[:d]) + (1,) + tuple(x.shape[d:])
    return _layout("reshape", x, "UnsqueezeBackward0", shape=shape)


def permute(x: Tensor, *dims: int | Sequence[int]) -> Tensor:
    x = to_tensor(x)
    dims = _shape_ints(dims) if dims else ()
    if len(dims) != x.dim():
        raise RuntimeError(f"permute(sparse_coo): number of dimensions in the tensor input does "
                           f"not match the length of the desired ordering of dimensions i.e. "
                           f"input.dim() = {x.dim()} is not equal to len(dims) = {len(dims)}")
    perm = tuple(wrap_dim(d, x.dim()) for d in dims)
    if len(set(perm)) != len(perm):
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    return _layout("permute", x, "PermuteBackward0", perm=perm)


def transpose(x: Tensor, dim0: int, dim1: int) -> Tensor:
    x = to_tensor(x)
    n = x.dim()
    a, b = wrap_dim(dim0, n), wrap_dim(dim1, n)
    perm = list(range(n))
    perm[a], perm[b] = perm[b], perm[a]
    return _layout("permute", x, "TransposeBackward0", perm=tuple(perm))


def t(x: Tensor) -> Tensor:
    x = to_tensor(x)
    shape = x._data.shape if x._node is None else x._node.shape
    if len(shape) > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {x.dim()}D")
    if len(shape) < 2:
        return _layout("reshape", x, "TBackward0", shape=tuple(shape))
    return _layout("permute", x, "TBackward0", perm=(1, 0))


_T_WARNINGS = {
    0: "Tensor.T is deprecated on 0-D tensors. This function is the identity in these cases. "
       "(Triggered internally at /__w/pytorch/pytorch/aten/src/ATen/native/TensorShape.cpp:"
       "4321.)",
    1: "The use of `x.T` on tensors of dimension other than 2 to reverse their shape is "
       "deprecated and it will throw an error in a future release. Consider `x.mT` to "
       "transpose batches of matrices or `x.permute(*torch.arange(x.ndim - 1, -1, -1))` to "
       "reverse the dimensions of a tensor. (Triggered internally at "
       "/__w/pytorch/pytorch/aten/src/ATen/native/TensorShape.cpp:4314.)"}
_T_WARNED: set = set()


def T(x: Tensor) -> Tensor:
    n = x.dim()
    if n != 2:                  # PyTorch warns once per process (TORCH_WARN_ONCE)
        kind = 0 if n == 0 else 1
        if kind not in _T_WARNED:
            _T_WARNED.add(kind)
            warnings.warn(_T_WARNINGS[kind], UserWarning, stacklevel=2)
    return _layout("permute", x, "PermuteBackward0", perm=tuple(range(n - 1, -1, -1)))


def movedim(x: Tensor, source: int | Sequence[int], destination: int | Sequence[int]
            ) -> Tensor:
    """Dims ``source`` (an int or a sequence) moved to positions ``destination``, the
    others keeping their order (PyTorch's errors for mismatched or repeated dims)."""
    n = x.dim()
    many = isinstance(source, (tuple, list))
    src = [wrap_dim(s, n) for s in (source if many else (source,))]
    dst = [wrap_dim(d, n) for d in (destination if isinstance(destination, (tuple, list))
                                    else (destination,))]
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({src} dims) "
                           f"should contain the same number of dims as destination ({dst} dims)")
    for name, ds in (("source", src), ("destination", dst)):
        for k, d in enumerate(ds):
            if d in ds[:k]:
                raise RuntimeError(f"movedim: repeated dim in `{name}` ({list(ds)})")
    order = [None] * n
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(i for i in range(n) if i not in src)
    return permute(x, *[o if o is not None else next(rest) for o in order])


def _flip(x: Tensor, dims) -> Tensor:
    for d in dims:
        if not isinstance(d, (int, np.integer)) or isinstance(d, bool):
            raise TypeError(f"flip(): argument 'dims' (position 1) must be tuple of ints, "
                            f"not {type(d).__name__}")
    axes = tuple(wrap_dim(int(d), x.dim()) for d in dims)
    for a in axes:
        if axes.count(a) > 1:
            raise RuntimeError(f"dim {a} appears multiple times in the list of dims")
    axes = tuple(a for a in axes if x.dim())            # a 0-d tensor flips to itself
    out = bind(P["flip"], x, axes=axes)
    if out._data is not None and out._data.base is not None:
        out._data = out._data.copy()    # PyTorch's flip copies: it is not a view
    return out


def flip(x: Tensor, dims: Sequence[int]) -> Tensor:
    """torch.flip: the elements reversed along ``dims`` (a new tensor, not a view)."""
    if isinstance(dims, (int, np.integer)) and not isinstance(dims, bool):
        raise TypeError("flip(): argument 'dims' (position 2) must be tuple of ints, not int")
    return _flip(to_tensor(x), tuple(dims))


def flip_method(x: Tensor, *dims: int | Sequence[int]) -> Tensor:
    """Tensor.flip(*dims): ``x.flip(0, 1)`` or ``x.flip([0, 1])``."""
    if not dims:
        raise TypeError('flip() missing 1 required positional arguments: "dims"')
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = tuple(dims[0])
    return _flip(x, dims)


def fliplr(x: Tensor) -> Tensor:
    x = to_tensor(x)
    if x.dim() < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return _flip(x, (1,))


def flipud(x: Tensor) -> Tensor:
    x = to_tensor(x)
    if x.dim() < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return _flip(x, (0,))


def expand(x: Tensor, *sizes: int | Sequence[int]) -> Tensor:
    x = to_tensor(x)
    return _layout("expand", x, "ExpandBackward0", shape=expanded_shape(x, _shape_ints(sizes)))


def expanded_shape(x: Tensor, sizes: tuple[int, ...]) -> tuple[int, ...]:
    """The shape ``x.expand(*sizes)`` has (-1: the existing size), PyTorch's errors."""
    xs = x._data.shape if x._node is None else x._node.shape
    n = len(xs)
    if len(sizes) < n:
        raise RuntimeError(f"expand({x.dtype.tensor_type}{{{list(xs)}}}, size={list(sizes)}): "
                           f"the number of sizes provided ({len(sizes)}) must be greater or "
                           f"equal to the number of dimensions in the tensor ({n})")
    lead = len(sizes) - n
    if not lead and sizes == xs:
        return sizes                            # (nothing to infer or check)
    shape = []
    for i in range(len(sizes) - 1, -1, -1):      # PyTorch checks from the last dim
        s = sizes[i]
        cur = xs[i - lead] if i >= lead else 1
        if s == -1:
            if i < lead:
                raise RuntimeError(f"The expanded size of the tensor (-1) isn't allowed in a "
                                   f"leading, non-existing dimension {i}")
            s = cur
        elif cur != 1 and cur != s:
            raise RuntimeError(f"The expanded size of the tensor ({s}) must match the existing "
                               f"size ({cur}) at non-singleton dimension {i}.  Target sizes: "
                               f"{list(sizes)}.  Tensor sizes: {list(xs)}")
        shape.append(s)
    return tuple(reversed(shape))


def expand_as(x: Tensor, other: Tensor) -> Tensor:
    return expand(x, *other.shape)


def contiguous(x: Tensor) -> Tensor:
    if x._data is None and x._node is not None:     # traced: a copy where eagerly one
        if _layout_proxy(x._node).flags.c_contiguous:     # (a later view() sees it)
            return x
    elif x.is_contiguous():
        return x
    out = bind(P["copy"], x, grad_name="CloneBackward0")
    if out._data is not None and not out._data.flags.c_contiguous:
        out._data = np.ascontiguousarray(out._data)   # copy keeps strides (as clone does)
    return out


def clone(x: Tensor, *, memory_format: object = None) -> Tensor:
    return bind(P["copy"], to_tensor(x), grad_name="CloneBackward0")


def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    tensors = [to_tensor(t) for t in tensors]
    if not tensors:
        raise RuntimeError("torch.cat(): expected a non-empty list of Tensors")
    shapes = [t._data.shape if t._node is None else t._node.shape for t in tensors]
    legacy = [len(s) == 1 and s[0] == 0 for s in shapes]    # 1-D empty inputs
    if all(legacy):
        return tensors[0]
    ref = shapes[legacy.index(False)]
    nd = len(ref)
    if nd == 0:
        raise RuntimeError("zero-dimensional tensor (at position 0) cannot be concatenated")
    axis = wrap_dim(dim, nd)
    first = tensors[0]._dtype              # legacy empty inputs take part in promotion
    dt = first if all(t._dtype is first for t in tensors) else promote(tensors)
    parts = []
    for i, (tt, shp) in enumerate(zip(tensors, shapes)):
        if legacy[i]:
            if tt.requires_grad:   # a legacy empty input still gets its (empty) gradient
                parts.append(lax.reshape(tt, tuple(0 if d == axis else s
                                                   for d, s in enumerate(ref))))
            continue
        if len(shp) != nd:
            raise RuntimeError(f"Tensors must have same number of dimensions: got {nd} "
                               f"and {len(shp)}")
        if shp != ref:
            for d in range(nd):
                if d != axis and shp[d] != ref[d]:
                    raise RuntimeError(f"Sizes of tensors must match except in dimension "
                                       f"{axis}. Expected size {ref[d]} but got size {shp[d]} "
                                       f"for tensor number {i} in the list.")
        parts.append(tt)
    if _lifter[0] is None and all(t._data is not None and t._dtype is dt for t in parts):
        return _cat_eager(parts, axis, dt)
    return bind(P["cat"], *(lax.cast(t, dt) for t in parts), axis=axis)


def _cat_eager(parts, axis, dt):
    """``bind(cat)`` of eager tensors of dtype `dt` (checked), without its generic
    steps: the numpy rule, and the same recorded node."""
    out = Tensor._from_array(np.concatenate([t._data for t in parts], axis=axis), dt)
    if _grad_state.enabled and dt.category == "float" and \
            any(t._requires_grad or t.grad_fn is not None for t in parts):
        record(P["cat"], tuple(parts), {"axis": axis}, out, None)
    return out


def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    tensors = [to_tensor(t) for t in tensors]
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    shapes = [t_._data.shape if t_._node is None else t_._node.shape for t_ in tensors]
    ref = shapes[0]
    for i, s in enumerate(shapes):
        if s != ref:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got {list(ref)} "
                               f"at entry 0 and {list(s)} at entry {i}")
    d = wrap_dim(dim, len(ref) + 1)
    first = tensors[0]._dtype
    same = all(t_._dtype is first for t_ in tensors)
    dt = first if same else promote(tensors)
    unit = tuple(ref[:d]) + (1,) + tuple(ref[d:])

    def f(*ts):
        return bind(P["cat"], *(lax.cast(lax.reshape(t_, unit), dt) for t_ in ts), axis=d)
    from .composite import named        # late: composite imports this module's views
    return named("StackBackward0", f, *tensors,
                 kernel=stack_kernel(d, len(tensors)) if same and dt.is_floating_point else None)
