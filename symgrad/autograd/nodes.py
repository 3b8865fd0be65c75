"""The recorded backward graph: BackwardFunction objects (``grad_fn``), saved tensors with
their version check, AccumulateGrad for leaves, and the Error node (:func:`delayed_error`:
results whose differentiation raises). Every class here is a
``symgrad.autograd.graph.Node`` (as in PyTorch); user-defined ``autograd.Function``
backward nodes are in :mod:`symgrad.autograd.custom_function`.

A BackwardFunction records one primitive application: the primitive, its attributes, the avals
(shape, dtype) of its inputs, the inputs it saved for backward and the functions its
gradient flows to (``next_functions``). Its backward is the primitive's VJP rule —
never a closure — so the same record serves eager values and traced nodes. Each PyTorch
name (``MulBackward0``) is its own class, so ``type(fn).__name__`` reads as in PyTorch.
"""
from __future__ import annotations

import itertools
import re
import weakref

import numpy as np

from . import anomaly_mode, grad_mode, saved_hooks
from .anomaly_mode import _state as _anomaly
from .node_type import Node
from .hooks import HookMixin, NodeHooks
from ..errors import type_name
from ..graph import dtypes
from ..tensor import Tensor

__all__ = ["BackwardFunction", "AccumulateGrad", "function_class", "SavedTensor",
           "FREED_MESSAGE", "short_name", "next_seq", "save_order", "no_accumulator",
           "delayed_error"]

_CLASSES: dict[str, type] = {}
FREED_MESSAGE = _FREED = ("Trying to backward through the graph a second time (or directly access saved "
          "tensors after they have already been freed). Saved intermediate values of the "
          "graph are freed when you call .backward() or autograd.grad(). Specify "
          "retain_graph=True if you need to backward through the graph a second time or if "
          "you need to access saved tensors after calling backward.")
_next_seq = itertools.count(1).__next__    # creation order of backward nodes (atomic)
next_seq = _next_seq


def short_name(fn) -> str:
    """The node name PyTorch's saved-tensor error shows: ClampBackward0 -> Clamp,
    ClampBackward1 -> Clamp1, a custom Function's ExpBackward -> Exp, other names
    (torch::autograd::CopySlices) as they are."""
    m = re.fullmatch(r"(.*)Backward(\d*)", fn.name())
    if m is None:
        return fn.name()
    return m.group(1) + ("" if m.group(2) in ("0", "") else m.group(2))


class SavedTensor:
    """A tensor saved for backward with the version it had when saved. An output is
    saved without its history (the node it is saved on gives it back). Under
    ``autograd.graph.saved_tensors_hooks`` the tensor goes through the pack hook instead
    (see :class:`_Packed`); eager tensors only."""

    __slots__ = ("tensor", "version", "is_output", "output_nr", "packed")

    def __init__(self, tensor, is_output: bool = False, output_nr: int = 0):
        if tensor._inference:
            raise RuntimeError(
                "Inference tensors cannot be saved for backward. Please do not use Tensors "
                "created in inference mode in computation tracked by autograd. To work around "
                "this, you can make a clone to get a normal tensor and use it in autograd, or "
                "use `torch.no_grad()` instead of `torch.inference_mode()`.")
        self.is_output = is_output
        self.output_nr = output_nr
        hooks = (saved_hooks.current() if saved_hooks.used and tensor._data is not None
                 else None)     # (no hooks were ever set: no per-save lookup)
        if hooks is not None:
            self.tensor = None
            self.version = 0
            self.packed = _Packed(hooks, tensor, is_output)
            return
        vc = tensor._vc
        # an output is kept as its storage, not as a tensor (no cycle output -> grad_fn ->
        # output; a tensor is made only when a backward reads it)
        self.tensor = (tensor._data, tensor._dtype, tensor._node, vc, tensor._birth) \
            if is_output else tensor
        self.version = vc[0]
        self.packed = None

    @property
    def saved_node(self):
        """The saved tensor's graph node (None when eager)."""
        t = self.tensor
        return t[2] if self.is_output else t._node

    @property
    def saved_vc(self):
        """The saved tensor's version counter (a one-item list shared by its storage)."""
        t = self.tensor
        return t[3] if self.is_output else t._vc

    def unpack(self, owner):
        if self.packed is not None:
            return self.packed.unpack(owner, self.is_output, self.output_nr)
        t = self.tensor
        if self.is_output:
            data, dtype, node, vc, birth = t
            if vc[0] != self.version:
                self._modified(owner, dtype, data.shape if node is None else node.shape,
                               vc[0], owner, self.output_nr)
            out = Tensor._from_array(data, dtype)
            out._node, out._vc, out._birth, out.grad_fn = node, vc, birth, owner
            if self.output_nr:
                out._output_nr = self.output_nr
            return out
        if t._vc[0] != self.version:
            self._modified(owner, t._dtype, t.shape, t._vc[0], t.grad_fn, t._output_nr)
        return t

    def unpack_data(self, owner):
        """The saved tensor's array, version-checked as :meth:`unpack` does (no Tensor
        made for a saved output: eager kernels read arrays)."""
        t = self.tensor
        if self.packed is None and self.is_output:
            data, dtype, node, vc, _ = t
            if vc[0] != self.version:
                self._modified(owner, dtype, data.shape if node is None else node.shape,
                               vc[0], owner, self.output_nr)
            return data
        return self.unpack(owner)._data

    def _modified(self, owner, dtype, shape, version, fn, nr):
        which = f", which is output {nr} of {short_name(fn)}," if fn is not None else ""
        raise RuntimeError(
            "one of the variables needed for gradient computation has been modified by an "
            f"inplace operation: [{dtype.tensor_type} {list(shape)}]{which} is at version "
            f"{version}; expected version {self.version} instead. Hint: enable anomaly "
            "detection to find the operation that failed to compute its gradient, with "
            "torch.autograd.set_detect_anomaly(True, check_nan=False).")


_PACK_IN_PLACE = (
    "A saved tensor pack hook is modifying its input in place. Tensors provided as input to "
    "pack hook cannot be modified by in-place operations as this can lead to unexpected "
    "side-effects. Please open an issue if you need to perform in-place operations on the "
    "input to a pack hook.")


class _Packed:
    """What a saved tensor keeps under saved-tensor hooks, as PyTorch's SavedVariable:
    the pack hook's result and its unpack hook, and the tensor's autograd metadata (its
    grad_fn, or a leaf's requires_grad and AccumulateGrad) -- the unpack hook's tensor
    gets them back, so gradients flow to the saved tensor's history. The pack hook runs
    under no_grad and may not update its input in place; no version check on unpack
    (the hooks own the data)."""

    __slots__ = ("unpack_hook", "data", "grad_fn", "output_nr", "requires_grad", "acc", "shape",
                 "dtype")

    def __init__(self, hooks, tensor, is_output):
        pack_hook, self.unpack_hook = hooks
        fn = tensor.grad_fn
        self.grad_fn = None if is_output else fn     # (an output's is the owner)
        self.output_nr = tensor._output_nr
        self.shape, self.dtype = tuple(tensor.shape), tensor._dtype
        self.requires_grad = fn is None and tensor._requires_grad
        self.acc = None
        if self.requires_grad:
            accumulator(tensor)
            self.acc = tensor._acc          # a weak reference, as PyTorch keeps it
        version = tensor._vc[0]
        with grad_mode.no_grad():
            self.data = pack_hook(tensor)
        if tensor._vc[0] != version:
            raise RuntimeError(_PACK_IN_PLACE)

    def unpack(self, owner, is_output, output_nr):
        data = self.unpack_hook(self.data)
        if not isinstance(data, Tensor):
            raise TypeError("Output of saved tensor unpack_hook expected to be a Tensor but "
                            f"got result of type {type_name(data)}")
        fn, nr = (owner, output_nr) if is_output else (self.grad_fn, self.output_nr)
        if fn is None and not self.requires_grad:
            return data if not data.requires_grad else data.detach()
        t = data._shallow()
        if fn is not None:
            t.grad_fn = fn
            if nr:
                t._output_nr = nr
        else:
            if not t._dtype.is_floating_point:
                raise RuntimeError("Only Tensors of floating point and complex dtype can "
                                   "require gradients")
            t._requires_grad = True
            t._acc = self.acc
        return t


class BackwardFunction(HookMixin):
    """A node of the backward graph (what ``tensor.grad_fn`` returns)."""

    __slots__ = ("prim", "attrs", "in_avals", "out_aval", "next_functions", "needs_input_grad",
                 "_saved", "_saved_out", "_freed", "_hooks", "_seq", "__weakref__",
                 "_inner", "_stack", "_unpacked")

    _name = "BackwardFunction"    # name(): "MulBackward0", "torch::autograd::CopySlices"
    _nout = 1                     # outputs of the forward operation

    def name(self) -> str:
        return type(self)._name

    def __repr__(self) -> str:
        return f"<{type(self).__name__} object at {hex(id(self))}>"

    # --- the interface VJP rules see (shared with graph.grad_graph's NodeContext) ---
    def input(self, i: int):
        """Saved input i (a Tensor, or the Python scalar it was)."""
        u = self._unpacked
        if u is not None and i in u:
            return u[i]
        s = self._saved[i]
        if s is None:
            if self._freed:
                raise RuntimeError(_FREED)
            raise RuntimeError(f"internal error: input {i} of {self.name()} was not saved")
        return s.unpack(self) if isinstance(s, SavedTensor) else s

    def input_structure(self, i: int):
        """Saved input i for a rule that reads only its shape and history, never its
        values (the SVD parts' rules read the saved factorisation; PyTorch saves U, S, Vᵀ
        there, not A): no version check unless the backward is recorded (create_graph:
        the history it extends must be the one the forward saw)."""
        s = self._saved[i] if self._unpacked is None else None
        if type(s) is SavedTensor and s.packed is None and not s.is_output \
                and not grad_mode.is_grad_enabled():
            return s.tensor
        return self.input(i)

    @property
    def out(self):
        u = self._unpacked
        if u is not None and -1 in u:
            return u[-1]
        if self._saved_out is None:
            if self._freed:
                raise RuntimeError(_FREED)
            raise RuntimeError(f"internal error: output of {self.name()} was not saved")
        return self._saved_out.unpack(self)

    @property
    def kwargs(self) -> dict:
        return dict(self.attrs)

    def has_packed(self) -> bool:
        """Whether a saved tensor went through saved-tensor hooks."""
        out = self._saved_out
        return (out is not None and out.packed is not None) or \
            any(type(s) is SavedTensor and s.packed is not None for s in self._saved)

    def unpack_saved(self) -> dict | None:
        """When some saved tensor went through saved-tensor hooks: every saved tensor
        unpacked once, in PyTorch's order (inputs by saved name, then the output), as
        ``{input position: tensor, -1: output}``, which input() / out then read while
        the backward runs. None otherwise."""
        if not self.has_packed():
            return None
        saved, out = self._saved, self._saved_out
        if self._freed:
            raise RuntimeError(_FREED)
        got = {}
        for i in save_order(self._name, [i for i, s in enumerate(saved)
                                         if type(s) is SavedTensor]):
            got[i] = saved[i].unpack(self)
        if out is not None:
            got[-1] = out.unpack(self)
        return got

    def release(self) -> None:
        """Free saved tensors (after a backward without retain_graph)."""
        if self._inner is not None:       # a named composite: what its primitives saved,
            self._inner.release()         # and what it shows as its own saved tensors
            self._freed = True
        # a saved Python scalar (x * 2) is a saved wrapped-number tensor in PyTorch: freed too
        saved = self._saved
        if self._saved_out is not None or saved.count(None) != len(saved):
            self._saved = (None,) * len(self._saved)
            self._saved_out = None
            self._freed = True

    # PyTorch-style introspection of saved values: _saved_self, _saved_other,
    # _saved_exponent, _saved_result, ...
    def __getattr__(self, item):
        names = _SAVED_NAMES.get(self._name, ("self", "other"))
        key = item[len("_saved_"):] if item.startswith("_saved_") else None
        if key in names and (names.index(key) < len(self._saved) or (
                not self._saved and self._name in _SAVED_NAMES)):   # (a named node saving none)
            i = names.index(key)
            if (i >= len(self._saved) or self._saved[i] is None) and not self._freed:
                return None                  # not needed by this backward: undefined
            v = self.input(i)
            if hasattr(v, "grad_fn") or self._name in _SCALAR_OVERLOADS:
                return v
            return _wrapped_number(v)
        if key == "result" and (self._saved_out is not None or self._freed):
            return self.out
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{item}'")

    def __dir__(self):
        names = ["name", "next_functions", "metadata"]
        saved = _SAVED_NAMES.get(self._name, ("self", "other"))
        names += [f"_saved_{n}" for n, s in zip(saved, self._saved) if s is not None]
        if self._saved_out is not None:
            names.append("_saved_result")
        return sorted(names)

    @property
    def metadata(self) -> dict:
        return {}


# PyTorch's names of saved inputs where they are not (self, other); in the Scalar
# overloads a saved Python number reads back as itself, not as a wrapped-number tensor
_SAVED_NAMES = {"PowBackward0": ("self", "exponent"), "PowBackward1": ("self", "exponent"),
                "PowBackward2": ("self", "exponent"), "ClampBackward1": ("self", "min", "max"),
                "ClampBackward0": ("self", "min", "max"),
                "WhereBackward0": ("condition", "self", "other"),
                "DotBackward0": ("self", "tensor"), "MvBackward0": ("self", "vec"),
                "MmBackward0": ("self", "mat2"), "BmmBackward0": ("self", "mat2"),
                "AddmmBackward0": ("self", "mat1", "mat2"),
                "MseLossBackward0": ("self", "target"),
                "BinaryCrossEntropyBackward0": ("self", "target", "weight"),
                "BinaryCrossEntropyWithLogitsBackward0": ("self", "target"),
                # (named composites that keep the indices they return, not their input)
                "MaxBackward0": (None, "indices"), "MinBackward0": (None, "indices"),
                "MaxUnpool2DBackward0": (None, "indices"),
                "SortBackward0": (None, "indices"), "TopkBackward0": (None, "indices"),
                "ConvolutionBackward0": ("input", "weight"),
                "NativeBatchNormBackward0": ("input", "weight"),
                "NativeLayerNormBackward0": ("input", "weight", "bias"),
                "MaxPool2DWithIndicesBackward0": ("self", "result1"),
                "MaxPool3DWithIndicesBackward0": ("self", "result1")}
_SCALAR_OVERLOADS = {"PowBackward0", "PowBackward2", "ClampBackward1"}


def save_order(name: str, indices) -> tuple:
    """Input positions `indices` in the order PyTorch's node `name` saves them: by the
    saved names (``other`` before ``self``), as its generated code does."""
    names = _SAVED_NAMES.get(name, ("self", "other"))
    return tuple(sorted(indices, key=lambda i: (names[i] if i < len(names) else "~", i)))


def _wrapped_number(v):
    """A saved Python scalar as PyTorch shows it: a 0-d int64 / float64 / bool tensor."""
    dt = (dtypes.bool_ if isinstance(v, bool) else dtypes.int64 if isinstance(v, int)
          else dtypes.float64)
    return Tensor._from_array(np.asarray(v, dtype=dt.np), dt)


def function_class(name: str) -> type:
    """The BackwardFunction subclass for `name` (created once). Like PyTorch's, a C++-qualified
    name keeps only its last part as the class name: ``torch::autograd::CopySlices``
    prints as ``<CopySlices object at ...>`` and ``grad_fn=<CopySlices>``."""
    cls = _CLASSES.get(name)
    if cls is None:
        cls = type(name.rsplit("::", 1)[-1], (BackwardFunction,),
                   {"__slots__": (), "__module__": "builtins", "_name": name})
        _CLASSES[name] = cls
    return cls


def new_function(name: str, prim, attrs, in_avals, out_aval, next_functions,
                 needs_input_grad, saved, saved_out) -> BackwardFunction:
    fn = object.__new__(_CLASSES.get(name) or function_class(name))
    fn.prim, fn.attrs, fn.in_avals, fn.out_aval = prim, attrs, in_avals, out_aval
    fn.next_functions, fn.needs_input_grad = next_functions, needs_input_grad
    fn._saved, fn._saved_out, fn._freed, fn._hooks, fn._inner = saved, saved_out, False, None, None
    fn._unpacked = None
    fn._stack = _anomaly["enabled"] and anomaly_mode.forward_stack() or None
    fn._seq = _next_seq()
    return fn


class AccumulateGrad(HookMixin):
    """The backward node of a leaf tensor: adds the incoming gradient to ``.grad``. Its
    ``_hooks`` is set when the leaf or the node has hooks (the engine then runs them)."""

    __slots__ = ("variable", "next_functions", "_seq", "_hooks", "__weakref__")

    def __init__(self, variable):
        self.variable = variable
        self.next_functions = ()
        self._seq = _next_seq()
        self._hooks = None
        if variable._backward_hooks is not None or \
                variable._post_accumulate_grad_hooks is not None:
            self._hooks = NodeHooks()

    def name(self) -> str:
        return "torch::autograd::AccumulateGrad"

    @property
    def metadata(self) -> dict:
        return {}

    def __repr__(self) -> str:
        return f"<AccumulateGrad object at {hex(id(self))}>"


AccumulateGrad.__module__ = "builtins"
Node.register(BackwardFunction)
Node.register(AccumulateGrad)


def no_accumulator():
    """A leaf's ``_acc`` when it has no AccumulateGrad (a view of a tensor that requires
    grad, made in inference mode): gradients reaching it go nowhere, as in PyTorch."""
    return None


def accumulator(leaf) -> AccumulateGrad | None:
    """The (cached, weakly held) AccumulateGrad of a leaf that requires grad."""
    ref = leaf._acc
    acc = ref() if ref is not None else None
    if acc is None:
        if ref is no_accumulator:
            return None
        acc = AccumulateGrad(leaf)
        leaf._acc = weakref.ref(acc)
    return acc


# ---- the Error node ----------------------------------------------------------------------
class _DelayedError(HookMixin):
    """PyTorch's ``Error`` node: results hang from it when differentiating them must raise
    (a once_differentiable backward's graph, a derivative PyTorch does not have)."""

    __slots__ = ("next_functions", "_nout", "_hooks", "_seq", "_message", "__weakref__")
    _inner = None
    _stack = None

    def name(self) -> str:
        return "torch::autograd::Error"

    @property
    def metadata(self) -> dict:
        return {}

    def release(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"<Error object at {hex(id(self))}>"


def _raise_twice(node, g):
    raise RuntimeError(node._message)


_DelayedError._inner = staticmethod(_raise_twice)
_DelayedError.__name__ = _DelayedError.__qualname__ = "Error"
_DelayedError.__module__ = "builtins"
Node.register(_DelayedError)


def delayed_error(outputs: tuple, message: str, link: bool = False) -> tuple:
    """``outputs`` hanging from an ``Error`` node (PyTorch's ``DelayedError``): using them
    is fine, differentiating through them raises RuntimeError(message). ``link``: the
    node's next functions are the outputs' own history (the inputs they were computed
    from count as used), else detached stand-ins."""
    node = object.__new__(_DelayedError)
    node._message = message
    fakes = [None if v is None else v.detach().requires_grad_() for v in outputs]
    node.next_functions = tuple(
        (None, 0) if f is None else (v.grad_fn, v._output_nr) if link and v.grad_fn is not None
        else (accumulator(f), 0) for v, f in zip(outputs, fakes))
    node._nout, node._hooks, node._seq = len(outputs), NodeHooks(), next_seq()
    res = []
    for k, f in enumerate(fakes):
        if f is None:
            res.append(None)
            continue
        t = Tensor._shallow(f)
        t.grad_fn = node
        if k:
            t._output_nr = k
        res.append(t)
    return tuple(res)
