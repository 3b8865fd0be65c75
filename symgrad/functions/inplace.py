"""In-place updates with PyTorch's rules: the leaf checks, the version counter bump, and
history rewriting — the updated tensor takes the history of its new value, and an update
through a view rewrites its base's history too (recorded as CopySlices)."""
from __future__ import annotations

import numpy as np

from ..graph import dtypes
from ..autograd import grad_mode
from .. import dispatch
from ..dispatch import bind
from ..ops import lax
from ..graph.primitives import NUMPY_RULES, PRIMITIVES as P
from ..graph.shapes import broadcast_shapes
from .common import Tensor, is_scalar, to_tensor
from .composite import named
from .elementwise import float_scalar
from ..graph.fpstate import enter as fp_enter, leave as fp_leave
from ..autograd.nodes import SavedTensor, short_name
from ..graph.node import make_node, stop_gradient_node
from ..ops.custom import CUSTOM_VJP

__all__ = ["check_inplace", "check_view_update", "update", "assign_positions", "view_positions", "original",
           "set_history", "rewrite_base", "LEAF_ERRORS"]

_INFERENCE_VIEW = (
    "A view was created in inference mode and is being modified inplace in normal mode. "
    "Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify "
    "your code by moving both the view and the inplace either both inside the inference_mode "
    "block (if you don't want the inplace to be tracked) or both outside (if you want the "
    "inplace to be tracked).")
_MULTI_OUTPUT = (" This view is the output of a function that returns multiple views. Such "
                 "functions do not allow the output views to be modified inplace. You should "
                 "replace the inplace operation by an out-of-place one.")
_NO_GRAD_VIEW = (" Given that this use case is ambiguous and error-prone, it is forbidden. You "
                 "can clarify your code by moving both the view and the inplace either both "
                 "inside the no_grad block (if you don't want the inplace to be tracked) or both "
                 "outside (if you want the inplace to be tracked).")
_LEAF = "a leaf Variable that requires grad is being used in an in-place operation."
_VIEW_OF_LEAF = "a view of a leaf Variable that requires grad is being used in an in-place operation."
LEAF_ERRORS = (_LEAF, _VIEW_OF_LEAF)


def check_inplace(x: Tensor, through_view: bool = False) -> None:
    """Raise PyTorch's error for in-place updates of leaves that require grad, and of
    inference tensors outside inference mode."""
    if x._inference and not grad_mode._state.inference:
        raise RuntimeError(
            "Inplace update to inference tensor outside InferenceMode is not allowed."
            "You can make a clone to get a normal tensor before doing inplace update."
            "See https://github.com/pytorch/rfcs/pull/17 for more details.")
    if not grad_mode._state.enabled:
        return
    if x.requires_grad and x.__dict__.get("_inference_view"):
        raise RuntimeError(_INFERENCE_VIEW)
    if x.requires_grad and "_view_meta" in x.__dict__ and not through_view:
        check_view_update(x)
    base = x._base
    if base is not None and base.grad_fn is None and base._requires_grad:
        raise RuntimeError(_VIEW_OF_LEAF)
    if x.grad_fn is None and x._requires_grad:
        raise RuntimeError(_VIEW_OF_LEAF if through_view else _LEAF)


_OVERLAP_SELF = ("unsupported operation: more than one element of the written-to tensor refers "
                 "to a single memory location. Please clone() the tensor before performing "
                 "the operation.")
_OVERLAP_INPUT = ("unsupported operation: some elements of the input tensor and the written-to "
                  "tensor refer to a single memory location. Please clone() the tensor before "
                  "performing the operation.")


_byte_bounds = getattr(getattr(np.lib, "array_utils", None), "byte_bounds", None) or \
    getattr(np, "byte_bounds")          # numpy 2 moved it


def _dense(a: np.ndarray) -> bool:
    """Non-overlapping and dense: the strides are a permutation of contiguous ones."""
    expected = a.itemsize
    for stride, size in sorted((abs(st), n) for st, n in zip(a.strides, a.shape) if n != 1):
        if stride != expected:
            return False
        expected *= size
    return True


def check_view_update(x: Tensor, name: str | None = None, nr: int = 0) -> None:
    """A recorded in-place update of view x: PyTorch refuses it when x was made in no_grad
    mode, or by a function returning several views (split, chunk, unbind), or is a view
    of such a view (its CreationMeta; ``x._view_meta``: the kind and x's output number).
    `name` / `nr`: the node (and output) the error names, when the update goes through a
    view made for it (``x[0] = v``: Select), else x's own."""
    meta = x.__dict__.get("_view_meta")
    if meta is None or x._base is None:
        return
    kind, own_nr = meta
    fn = x.grad_fn
    if name is None:
        name, nr = (None if fn is None else short_name(fn)), own_nr
    if kind == "no_grad" or name is None:
        head = (f"Output {nr} of {name} is a view of a view which was created in" if name
                else "A view was created in")
        msg = f"{head} no_grad mode and is being modified inplace with grad mode enabled."
    else:
        msg = f"Output {nr} of {name} is a view and is being modified inplace."
    raise RuntimeError(msg + (_MULTI_OUTPUT if kind == "multi" else _NO_GRAD_VIEW))


def check_overlap(x: Tensor, *others) -> None:
    """PyTorch's memory-overlap refusals for an in-place write into x: x must not repeat
    memory (an expanded view), and an operand may share x's memory only exactly."""
    a = x._data
    if a is None or a.size == 0:
        return
    if not _dense(a) and any(st == 0 and n > 1 for st, n in zip(a.strides, a.shape)):
        raise RuntimeError(_OVERLAP_SELF)
    for o in others:
        b = o._data if isinstance(o, Tensor) else None
        if b is None or b.size == 0 or o is x or not np.may_share_memory(a, b) \
                or not (_dense(a) and _dense(b)):    # (may_share_memory: bounds, in C)
            continue
        (a0, a1), (b0, b1) = _byte_bounds(a), _byte_bounds(b)
        if (a0, a1) == (b0, b1):
            if a.strides != b.strides:
                raise RuntimeError(_OVERLAP_INPUT)
        elif a0 < b1 and b0 < a1:
            raise RuntimeError(_OVERLAP_INPUT)


def original(x: Tensor, *others) -> Tensor:
    """The operand an in-place op computes from: x itself, or — when the op will be
    recorded (x or one of the op's ``others`` requires grad) — a snapshot of its current
    value with its history, so that a backward rule saving the operand sees the value
    before the update (as PyTorch does: ``x.mul_(y)``, y requiring grad, saves x's old
    value for y's gradient)."""
    if not grad_mode.is_grad_enabled():
        return x
    if x._data is None:         # traced: its node is its value now (a new version counter,
        if x.grad_fn is None:   # so the update does not fail the saved operand's check)
            return x
        snap = Tensor._from_node(x._node)
        set_history(snap, x.grad_fn, x._output_nr)
        snap._requires_grad = x._requires_grad
        return snap
    if not x.requires_grad:
        if not any(isinstance(o, Tensor) and o.requires_grad for o in others):
            return x
        lift = dispatch._lifter[0]
        return Tensor._from_node(lift(x)) if lift is not None else \
            Tensor._from_array(np.array(x._data, copy=True), x.dtype)
    lift = dispatch._lifter[0]
    if lift is not None:        # in a trace: its value now (a copy made here would be a
        snap = Tensor._from_node(lift(x))     # constant of the program, frozen)
    else:
        snap = Tensor._from_array(np.array(x._data, copy=True), x.dtype)
    set_history(snap, x.grad_fn, x._output_nr)
    snap._requires_grad = x._requires_grad
    if x.grad_fn is None:
        return x
    return snap


def _cast_for(x: Tensor, new: Tensor) -> Tensor:
    if new.dtype is x.dtype:
        return new
    if not dtypes.can_cast(new.dtype, x.dtype):
        raise RuntimeError(f"result type {new.dtype.c_name} can't be cast to the desired "
                           f"output type {x.dtype.c_name}")
    return lax.cast(new, x.dtype)


def update(x: Tensor, new: Tensor) -> Tensor:
    """Make `new` (same shape as x) the value and history of x, in place."""
    new = _cast_for(x, new)
    if tuple(new.shape) != tuple(x.shape):
        new = lax.expand(new, x.shape) if broadcast_shapes(new.shape, x.shape) == tuple(x.shape) \
            else _shape_error(new, x)
    recorded = new.grad_fn is not None
    if recorded and x.__dict__.get("_inference_view"):
        raise RuntimeError(_INFERENCE_VIEW)
    if "_view_meta" in x.__dict__ and grad_mode.is_grad_enabled() and new.requires_grad:
        check_view_update(x)
    producer = new.grad_fn
    traced_write = x._data is not None and new._data is None
    if traced_write:
        _traced_write(x, new)           # (the compiled call bumps the version)
    elif x._data is not None:
        if not x._data.flags.writeable:   # an expanded view (fill_ / zero_ may write it)
            x._data.flags.writeable = True
        np.copyto(x._data, new._data, casting="unsafe")
    if not traced_write:
        x._vc[0] += 1
    base = x._base
    if base is not None and (recorded or base.requires_grad) and grad_mode.is_grad_enabled() \
            and not x.__dict__.get("_detached_view"):
        rewrite_base(x, base, new)
    else:
        if x._data is None:     # (a constant new value of a traced tensor: zero_, fill_)
            x._node = new._node if new._data is None else dispatch._as_node(new, new.dtype)
        if base is not None and (new._data is None or x._data is None):
            _view_write(x, base, new)
        if recorded:
            set_history(x, new.grad_fn, new._output_nr)
    if recorded:
        _resave_output(producer, x)
    _refresh_other_views(x)
    return x


def arith_in_place(x: Tensor, ufunc, other) -> bool:
    """``x op= other`` (`ufunc` add / subtract / multiply) computed straight into x's
    array when nothing can tell it from :func:`update` of the out-of-place result (the
    same ufunc, so the same bits): x an eager float tensor that is no view, `other` a
    Python number or an eager tensor of x's dtype and shape not partly overlapping x,
    nothing recorded (grad mode off, or nothing requires grad), no inference tensors.
    Bumps x's version. False: not done, the general path runs (and raises what it
    must)."""
    a = x._data
    st = grad_mode._state
    if (a is None or x._base is not None or x._inference or st.inference
            or dispatch._lifter[0] is not None or x._dtype.category != "float"
            or not a.flags.writeable or x.__dict__.get("_views")):
        return False            # (live views of x: the update may make them stale)
    kind = type(other)
    if kind is Tensor:
        b = other._data
        if (b is None or other._dtype is not x._dtype or b.shape != a.shape
                or other._inference or (st.enabled and (x.requires_grad or other.requires_grad))
                or (b is not a and np.may_share_memory(a, b))):
            return False
    elif kind is float or kind is int:
        if st.enabled and x.requires_grad:
            return False
        b = float_scalar(other)
    else:
        return False
    token = fp_enter()
    try:
        ufunc(a, b, out=a)
    finally:
        fp_leave(token)
    x._vc[0] += 1
    return True


def _traced_write(x: Tensor, new: Tensor) -> None:
    """An eager tensor updated with a traced value: symgrad.compile's tracer records the
    update (a parameter, a buffer, optimizer state: the compiled call performs it)."""
    tracer = dispatch._lifter[0]
    write = getattr(tracer, "write", None)
    if write is None:           # (a loop body: its updates would not be the loop's)
        raise TypeError("an eager tensor cannot be updated in place with a traced value "
                        "inside a loop body; compute a new tensor instead")
    write(x, new._node)


def _view_write(x: Tensor, base: Tensor, new: Tensor) -> None:
    """A traced value written through view x (``w[0].mul_(a)`` in a trace): the
    elements of its base that x holds take it (a traced base's node, or an eager base's
    update the tracer records)."""
    pos = Tensor._from_array(view_positions(x).reshape(-1), dtypes.int64)
    if base._data is None:      # a traced base: its gradient flows through the write
        if x.__dict__.get("_detached_view"):     # (through detach(): the new value, the
            base._node = _keep_history(_put_into(base, pos, new), base)   # old history)
        else:
            base._node = _put_into(base, pos, new)._node
        return
    with grad_mode.no_grad():
        b_new = _put_into(base, pos, new)
    _traced_write(base, b_new)


class _KeepHistoryRule:
    """The custom_vjp rule of :func:`_keep_history`: the cotangent passes unchanged to the
    old value (one object: programs holding it compare equal)."""

    def __call__(self, needs, g, node):
        return (g,)

    def __repr__(self):
        return "keep_history"


_KEEP_HISTORY = _KeepHistoryRule()


def _keep_history(new: Tensor, old: Tensor):
    """The node with `new`'s value and `old`'s gradient path (identity), none into `new`:
    a traced tensor written through ``detach()`` keeps its history, as in PyTorch."""
    n, o = new._node, old._node
    return make_node(CUSTOM_VJP.name, (n, o), (("rule", _KEEP_HISTORY),), n.shape, n.dtype)


def set_history(t: Tensor, fn, output_nr: int = 0) -> None:
    """t's gradient now flows into output `output_nr` of `fn`."""
    t.grad_fn = fn
    if output_nr or t._output_nr:
        t._output_nr = output_nr


def _resave_output(fn, x: Tensor) -> None:
    """An in-place op whose backward saves its result (exp_, relu_, ...) saves x itself, at
    its new version, so later updates of x are caught as PyTorch catches them."""
    saved = getattr(fn, "_saved_out", None)
    if saved is not None and saved.packed is None and saved.saved_vc is not x._vc:
        fn._saved_out = SavedTensor(x, is_output=True)


def _refresh_other_views(x: Tensor) -> None:
    """The other live views of x's storage see the update. With history (the base
    requires grad), each takes it from the updated base (as PyTorch regenerates a view
    whose base changed version: AsStridedBackward0) -- but a view PyTorch cannot
    regenerate (a piece of split / chunk / unbind, a view made in no_grad mode: x itself
    too, updated in no_grad mode) becomes stale (:func:`_mark_stale`). In a trace, a
    traced view's value is a node computed when it was made: it is recomputed from the
    base's new value -- eager views share the memory, traced ones alias it this way."""
    base = x._base if x._base is not None else x
    views = base.__dict__.get("_views")
    if not views:
        return
    tracked = base.requires_grad
    history = tracked and grad_mode.is_grad_enabled()
    if not tracked and dispatch._lifter[0] is None:
        return
    for v in list(views):
        if v._vc is not base._vc:
            continue
        meta = v.__dict__.get("_view_meta")
        if meta is not None and (tracked or v.grad_fn is not None):
            _mark_stale(v, meta)
            if v._data is None:
                v._node = _replay_chain(base, v._view_chain)._node
            continue
        if v is x:
            continue
        if v.__dict__.get("_detached_view"):
            if v._data is None:
                v._node = stop_gradient_node(_replay_chain(base, v._view_chain)._node)
        elif history:
            _regenerate_view(v, base)
        elif v._data is None:       # (nothing is recorded: the base has no history)
            v._node = _replay_chain(base, v._view_chain)._node


class _StaleView(Tensor):
    """A view whose storage changed after it was made, which PyTorch cannot give a new
    history (its CreationMeta: a piece of a multi-output view function, or made in
    no_grad mode): autograd reading where its gradient goes (its output number, its
    AccumulateGrad) raises PyTorch's error -- a recorded op using it, a backward reading
    it saved. Its values stay readable, as PyTorch's."""

    __slots__ = ()

    @property
    def _output_nr(self):
        raise RuntimeError(self.__dict__["_stale"])

    @_output_nr.setter
    def _output_nr(self, value):
        self.__dict__["_stale_nr"] = value

    @property
    def _acc(self):
        raise RuntimeError(self.__dict__["_stale"])

    @_acc.setter
    def _acc(self, value):
        self.__dict__["_stale_acc"] = value


def _mark_stale(v: Tensor, meta: tuple) -> None:
    """View `v` (CreationMeta ``meta``) no longer has a valid history: PyTorch's error
    for its base or a sibling modified in place, raised when autograd uses it."""
    if type(v) is not Tensor:
        return
    kind, nr = meta
    fn = v.grad_fn
    name = None if fn is None else short_name(fn)
    if kind == "multi" and name is not None:
        msg = (f"Output {nr} of {name} is a view and its base or another view of its base "
               f"has been modified inplace." + _MULTI_OUTPUT)
    else:
        head = (f"Output {nr} of {name} is a view of a view which was created in" if name
                else "A view was created in")
        msg = (f"{head} no_grad mode and its base or another view of its base has been "
               f"modified inplace with grad mode enabled." + _NO_GRAD_VIEW)
    v.__dict__["_stale"] = msg
    v.__class__ = _StaleView


def _replay_chain(b: Tensor, chain) -> Tensor:
    """A view's layout primitives (its ``_view_chain``) applied to base `b`."""
    for prim_name, attrs in chain:
        b = bind(P[prim_name], b, **dict(attrs))
    return b


def _shape_error(new, x):
    raise RuntimeError(f"output with shape {list(x.shape)} doesn't match the broadcast shape "
                       f"{list(broadcast_shapes(new.shape, x.shape))}")


def view_positions(view: Tensor) -> np.ndarray:
    """Flat positions, in its base, of each element of `view` (from its view chain)."""
    base = view._base
    grid = np.arange(base.numel(), dtype=np.int64).reshape(tuple(base.shape))
    for prim_name, attrs in view._view_chain:
        grid = NUMPY_RULES[prim_name](grid, **dict(attrs))
    return np.ascontiguousarray(grid)


def rewrite_base(x: Tensor, base: Tensor, new: Tensor) -> None:
    """View x of `base` now holds `new` (value and history): base's history becomes
    CopySlices of it, x's is regenerated from base (AsStridedBackward0)."""
    pos = Tensor._from_array(view_positions(x).reshape(-1), dtypes.int64)
    old_base = base._shallow()
    set_history(old_base, base.grad_fn, base._output_nr)
    old_base._requires_grad = base._requires_grad
    b_new = named("torch::autograd::CopySlices", lambda b, v: _put_into(b, pos, v), old_base, new)
    if base._data is None:
        base._node = b_new._node
    set_history(base, b_new.grad_fn)
    _regenerate_view(x, b_new)


def _regenerate_view(x: Tensor, base: Tensor) -> None:
    """After an update through view x, x's history (and node) recomputed from its updated
    base — one Function, AsStridedBackward0, as PyTorch records it."""
    chain = x._view_chain
    x_new = named("AsStridedBackward0", lambda b: _replay_chain(b, chain), base)
    if x._data is None:
        x._node = x_new._node
    set_history(x, x_new.grad_fn)


def assign_positions(x: Tensor, pos: np.ndarray, value,
                     name: str = "torch::autograd::CopySlices") -> None:
    """``x.flat[pos] = value`` as an in-place update (the core of ``x[key] = value``),
    recorded as `name`: CopySlices (copy into a view) or IndexPutBackward0 (index_put_)."""
    check_inplace(x, through_view=True)
    value = to_tensor(value, dtype=x.dtype) if not is_scalar(value) else value
    if is_scalar(value):
        value = lax.full(pos.shape, value, x.dtype)
    value = _cast_for(x, value)
    try:
        bshape = broadcast_shapes(tuple(value.shape), pos.shape)
    except RuntimeError:
        bshape = None
    if bshape != pos.shape:
        raise RuntimeError(f"shape mismatch: value tensor of shape {list(value.shape)} cannot be "
                           f"broadcast to indexing result of shape {list(pos.shape)}")
    base = x._base
    if base is not None and grad_mode.is_grad_enabled() and (base.requires_grad
                                                            or value.requires_grad):
        # x[key] = v on a view writes v into the base (CopySlices there: the old view
        # values are not inputs of the write), then the view is regenerated from it
        assign_positions(base, view_positions(x).reshape(-1)[pos], value)
        _regenerate_view(x, base)
        return
    pos_t = Tensor._from_array(pos.reshape(-1), dtypes.int64)
    # the broadcast of `value` happens inside the recorded op, as in PyTorch
    new = named(name, lambda b, v: _put_into(b, pos_t, lax.expand(v, pos.shape)), x, value)
    update(x, new)


def _put_into(b, pos, v):
    flat = lax.reshape(b, (b.numel(),))
    out = bind(P["index_put"], flat, pos, lax.reshape(v, (v.numel(),)))
    return lax.reshape(out, tuple(b.shape))
