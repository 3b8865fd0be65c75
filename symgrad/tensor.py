"""The Tensor class: storage (a numpy array when eager, a graph node when traced), the
autograd state PyTorch users rely on (requires_grad, grad, grad_fn, is_leaf, version
counter, views), conversions and printing.

Operations (math, shapes, indexing, reductions, in-place updates) are defined in
:mod:`symgrad.functions` and attached as methods by :mod:`symgrad.functions.methods`,
so this module holds only what a tensor *is*.
"""
from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any, overload
import warnings
import weakref

import numpy as np

from .graph import dtypes
from .autograd.grad_mode import _state as _grad_state
from .printing import tensor_repr
from .graph.shapes import wrap_dim
from .graph.node import stop_gradient_node
from .device import CPU
from .errors import traced_value_error
from .tracing import grad_access, python_effect

if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import SupportsIndex
    from .device import device as Device
    from .graph.node import Node
    # the operations functions/methods.py attaches as methods, declared for type checkers
    from .functions.method_types import TensorMethods as _Methods
else:
    _Methods = object

__all__ = ["Tensor", "Size", "next_birth"]

# creation order of tensors: symgrad.compile lifts tensors born before tracing began
next_birth = itertools.count(1).__next__

_NON_LEAF_GRAD = (
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad "
    "attribute won't be populated during autograd.backward(). If you indeed want the .grad "
    "field to be populated for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor. "
    "If you access the non-leaf Tensor by mistake, make sure you access the leaf Tensor "
    "instead. See github.com/pytorch/pytorch/pull/30531 for more information. (Triggered "
    "internally at /__w/pytorch/pytorch/build/aten/src/ATen/core/TensorBody.h:493.)")
_FLOAT_OF_GRAD = (
    "Converting a tensor with requires_grad=True to a scalar may lead to unexpected behavior.\n"
    "Consider using tensor.detach() first. (Triggered internally at /__w/pytorch/pytorch/torch/"
    "csrc/autograd/generated/python_variable_methods.cpp:822.)")
_FLOAT_WARNED: list = []
_REQ_GRAD_NONLEAF = (
    "you can only change requires_grad flags of leaf variables. If you want to use a "
    "computed variable in a subgraph that doesn't require differentiation use "
    "var_no_grad = var.detach().")


class Size(tuple):
    """A tensor shape; prints as ``torch.Size([2, 3])``."""

    def __repr__(self) -> str:
        return f"torch.Size({list(self)})"

    __str__ = __repr__

    # slices, concatenations and repeats of a Size are Sizes, as torch.Size's
    def __getitem__(self, i):
        out = tuple.__getitem__(self, i)
        return Size(out) if isinstance(i, slice) else out

    def __add__(self, other):
        if not isinstance(other, tuple):
            raise TypeError(f"can only concatenate tuple (not {type(other).__name__}) to "
                            "torch.Size")
        return Size(tuple.__add__(self, other))

    def __radd__(self, other):
        if not isinstance(other, tuple):
            return NotImplemented
        return Size(tuple.__add__(other, self))

    def __mul__(self, n):
        if not hasattr(n, "__index__"):
            raise TypeError(f"can't multiply sequence by non-int of type '{type(n).__name__}'")
        return Size(tuple.__mul__(self, n))

    __rmul__ = __mul__

    def numel(self) -> int:
        n = 1
        for s in self:
            n *= s
        return n


def register_view(base: "Tensor", view: "Tensor") -> None:
    """Add `view` to the live views of `base`'s storage (weakly held: those an in-place
    update of the storage refreshes, see functions/inplace.py)."""
    views = base.__dict__.get("_views")
    if views is None:
        views = base.__dict__["_views"] = weakref.WeakSet()
    views.data.add(weakref.ref(view, views._remove))     # (WeakSet.add without its frame)


class Tensor(_Methods):
    """An n-dimensional array with PyTorch's autograd semantics.

    >>> import symgrad as torch
    >>> x = torch.ones(2, 2, requires_grad=True)
    >>> out = (3 * (x + 2) ** 2).mean(); out.backward(); x.grad
    tensor([[4.5000, 4.5000],
            [4.5000, 4.5000]])
    """

    # set on every tensor: slots; set on few (views, leaves with grads): class defaults,
    # overridden in the instance dict (a new tensor stores 6 attributes, not 12)
    __slots__ = ("_data", "_node", "_dtype", "_requires_grad", "grad_fn", "_vc", "_birth",
                 "__weakref__", "__dict__")
    __array_priority__ = 1000
    _grad = None                # .grad
    _base = None                # the tensor a view was made from
    _view_chain = None          # the layout primitives (name, attrs) from _base to a view
    _retains_grad = False       # retain_grad() was called
    _acc = None                 # a weak reference to a leaf's AccumulateGrad
    _inference = False          # set on tensors made in inference_mode()
    _wrapped_number = False     # a compiled function's Python-number argument (promotes
                                # as a Python scalar, PyTorch's "wrapped number")
    _output_nr = 0              # which output of grad_fn (a custom Function's can have several)
    _backward_hooks = None      # register_hook's hooks, by handle id (PyTorch's attribute)
    _post_accumulate_grad_hooks = None

    # ---- construction (internal) ------------------------------------------------------
    @classmethod
    def _from_array(cls, data: np.ndarray, dtype: dtypes.DType | None = None) -> "Tensor":
        t = object.__new__(cls)
        t._data = data
        t._node = None
        t._dtype = dtype or dtypes.from_numpy_dtype(data.dtype)
        t._requires_grad = False
        t.grad_fn = None
        t._vc = [0]
        t._birth = next_birth()
        if _grad_state.inference:
            t._inference = True
        return t

    @classmethod
    def _from_node(cls, node) -> "Tensor":
        t = cls._from_array.__func__(cls, None, node.dtype)
        t._node = node
        return t

    def _shallow(self) -> "Tensor":
        """A new tensor object on the same storage and version counter, no history (as
        old as the storage: symgrad.compile lifts an alias of an outer tensor too)."""
        t = Tensor._from_array(self._data, self._dtype)
        t._birth = self._birth
        # (a lifted tensor in a trace: no gradient through it, as a traced detach())
        t._node = None if self._node is None else stop_gradient_node(self._node)
        if self._inference:
            t._inference = True
        t._vc = self._vc
        return t

    def _with_grad_fn(self, fn) -> "Tensor":
        t = self._shallow()
        t.grad_fn = fn
        return t

    def __new__(cls, *args: Any, **kwargs: Any) -> "Tensor":
        # (replaced by PyTorch's legacy constructor: symgrad.functions.legacy)
        raise TypeError("create tensors with symgrad.tensor(...), symgrad.zeros(...), ...")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """(Construction happens in ``__new__``.)"""

    # ---- metadata -------------------------------------------------------------------
    @property
    def shape(self) -> Size:
        return Size(self._data.shape if self._node is None else self._node.shape)

    @overload
    def size(self, dim: None = None) -> Size: ...
    @overload
    def size(self, dim: int) -> int: ...

    def size(self, dim: int | None = None) -> Size | int:
        if dim is None:
            return self.shape
        return self.shape[wrap_dim(dim, self.dim())]

    @property
    def dtype(self) -> dtypes.DType:
        return self._dtype

    @property
    def device(self) -> Device:
        return CPU

    @property
    def is_cuda(self) -> bool:
        return False

    def dim(self) -> int:
        return self._data.ndim if self._node is None else len(self._node.shape)

    ndimension = dim

    @property
    def ndim(self) -> int:
        return self.dim()

    def numel(self) -> int:
        return self._data.size if self._node is None else self.shape.numel()

    nelement = numel

    def element_size(self) -> int:
        return self._dtype.itemsize

    def is_floating_point(self) -> bool:
        return self._dtype.is_floating_point

    def is_contiguous(self) -> bool:
        return self._node is not None or bool(self._data.flags.c_contiguous)

    @property
    def is_traced(self) -> bool:
        """True for symbolic tensors inside :func:`symgrad.compile` tracing."""
        return self._node is not None

    @property
    def node(self) -> Node | None:
        """The graph node of a traced tensor (None for eager tensors)."""
        return self._node

    def __len__(self) -> int:
        if self.dim() == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    # ---- autograd state -------------------------------------------------------------
    @property
    def requires_grad(self) -> bool:
        return self._requires_grad or self.grad_fn is not None

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        if self.grad_fn is not None:
            if not requires_grad:
                raise RuntimeError(_REQ_GRAD_NONLEAF)
            return self
        if requires_grad and not self._dtype.is_floating_point:
            raise RuntimeError("only Tensors of floating point dtype can require gradients")
        if requires_grad and self._inference and not _grad_state.inference:
            raise RuntimeError("Setting requires_grad=True on inference tensor outside "
                               "InferenceMode is not allowed.")
        self._requires_grad = bool(requires_grad)
        return self

    def is_inference(self) -> bool:
        """True for a tensor made in ``inference_mode()`` (see there)."""
        return self._inference

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    @property
    def grad(self) -> Tensor | None:
        if self._data is None:
            grad_access(self)
        if self.grad_fn is not None and not self._retains_grad:
            warnings.warn(_NON_LEAF_GRAD, UserWarning, stacklevel=2)
        return self._grad

    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        if self._data is None:
            grad_access(self)
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"assigned grad expected to be a Tensor or None but got grad "
                                f"of type {type(value).__name__}")
            if tuple(value.shape) != tuple(self.shape):
                raise RuntimeError(
                    f"attempting to assign a gradient of size '{list(value.shape)}' to a tensor "
                    f"of size '{list(self.shape)}'. Please ensure that the gradient and the "
                    "tensor are the same size")
            if value.dtype is not self.dtype:
                raise RuntimeError(
                    f"attempting to assign a gradient with dtype '{value.dtype.cpp_name}'"
                    f" to a tensor with grad_dtype '{self.dtype.c_name}'. The gradient must "
                    "match the tensor's grad_dtype (defaults to the tensor's dtype). You can "
                    "set the tensor's grad_dtype attribute with a specific dtype, or None to "
                    "allow any dtype. Set grad_dtype with caution. Diverging the dtypes of a "
                    "tensor and its gradient may break downstream systems that assume they "
                    "match.")
        self._grad = value

    @property
    def retains_grad(self) -> bool:
        return self._retains_grad

    @property
    def _version(self) -> int:
        if self._inference:
            raise RuntimeError("Inference tensors do not track version counter.")
        return self._vc[0]

    def detach(self) -> "Tensor":
        """A tensor on the same storage (and version counter) with no history; in a
        trace, a stop-gradient node (compiled gradients treat it as eager backward does)."""
        if self._data is None:      # a view all the same: a write through it reaches self
            out = Tensor._from_node(stop_gradient_node(self._node))
            out._base = self._base if self._base is not None else self
            out._view_chain = self._view_chain or ()
            out._vc = self._vc
            out._detached_view = True     # (the write keeps the base's history: inplace.py)
            register_view(out._base, out)     # (an update of the base reaches it)
            return out
        return self._shallow()

    def detach_(self) -> "Tensor":
        if self._base is not None:
            raise RuntimeError(
                "Can't detach views in-place. Use detach() instead. If you are using "
                "DistributedDataParallel (DDP) for training, and gradient_as_bucket_view is "
                "set as True, gradients are views of DDP buckets, and hence detach_() cannot "
                "be called on these gradients. To fix this error, please refer to the "
                "Optimizer.zero_grad() function in torch/optim/optimizer.py as the solution.")
        self.grad_fn = None
        self._requires_grad = False
        return self

    @property
    def data(self) -> "Tensor":
        """The same storage without history; edits through it are not version-tracked.
        Traced: a detached view (:meth:`detach`), so a write through it reaches ``self``."""
        if self._data is None:
            return self.detach()
        t = Tensor._from_array(self._data, self._dtype)
        t._birth = self._birth
        # (a lifted tensor in a trace: no gradient through it, as a traced detach())
        t._node = None if self._node is None else stop_gradient_node(self._node)
        if self._inference:
            t._inference = True
        return t

    @data.setter
    def data(self, value: "Tensor") -> None:
        if not isinstance(value, Tensor):
            raise TypeError(f"data must be a Tensor, got {type(value).__name__}")
        if value._data is None and self._data is not None:
            # (traced: an eager tensor's storage takes a traced value -- a state write of
            # the compiled program, as ``w.data -= ...`` is; another shape or dtype cannot
            # be one: the call runs uncompiled)
            if tuple(value.shape) == tuple(self.shape) and value._dtype == self._dtype:
                self.data.copy_(value)
                return
            python_effect("a tensor's .data rebound to a traced tensor of another shape "
                          "or dtype")
        self._data, self._node, self._dtype = value._data, value._node, value._dtype

    # ---- conversion -----------------------------------------------------------------
    def _eager_data(self, what: str) -> np.ndarray:
        if self._node is not None:
            raise traced_value_error(what)
        return self._data

    def numpy(self, *, force: bool = False) -> np.ndarray:
        if self.requires_grad and not force and _grad_state.grad:   # (no_grad allows it)
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use "
                               "tensor.detach().numpy() instead.")
        return self._eager_data("numpy()")

    def __array__(self, dtype: np.dtype | None = None, copy: bool | None = None) -> np.ndarray:
        a = self._eager_data("conversion to a numpy array")
        return a.astype(dtype) if dtype is not None else a

    def item(self) -> int | float | bool:
        a = self._eager_data("item()")
        if a.size != 1:
            raise RuntimeError(f"a Tensor with {a.size} elements cannot be converted to Scalar")
        return a.reshape(()).item()

    def tolist(self) -> Any:
        return self._eager_data("tolist()").tolist()

    def __float__(self) -> float:
        value = float(self._scalar("float()"))
        if self.requires_grad and not _FLOAT_WARNED:      # PyTorch warns once per process
            _FLOAT_WARNED.append(True)
            warnings.warn(_FLOAT_OF_GRAD, UserWarning, stacklevel=2)
        return value

    def __int__(self) -> int:
        return int(self._scalar("int()"))

    def __index__(self) -> int:
        if self._dtype.category == "float":
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self._scalar("index"))

    def __bool__(self) -> bool:
        a = self._eager_data("bool()")
        if a.size != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(a.reshape(()))

    def _scalar(self, what):
        a = self._eager_data(what)
        if a.size != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return a.reshape(()).item()

    def __iter__(self) -> Iterator[Tensor]:
        if self.dim() == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        fn = self.grad_fn
        if self._node is not None:
            suffix = f", grad_fn=<{fn.name()}>" if fn is not None else ""
            return (f"Tensor(traced {self._node.op}, shape={list(self.shape)}, "
                    f"dtype={self._dtype!r}{suffix})")
        return tensor_repr(self._data, dtype=self._dtype.name,
                           requires_grad=self.requires_grad,
                           grad_fn_name=type(fn).__name__ if fn is not None else None,
                           default_dtype=dtypes.get_default_dtype().name)

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        if self.dim() == 0 and self._node is None:
            return format(self.item(), spec)
        return format(repr(self), spec)

    def __reduce_ex__(self, protocol: SupportsIndex) -> tuple[Any, ...]:
        return (_rebuild, (self._eager_data("pickling").copy(), self.requires_grad))

    def __deepcopy__(self, memo: dict[int, Any]) -> Tensor:
        if not self.is_leaf:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) "
                               "support the deepcopy protocol at the moment.  If you were "
                               "attempting to deepcopy a module, this may be because of a "
                               "torch.nn.utils.weight_norm usage, see "
                               "https://github.com/pytorch/pytorch/pull/103001")
        t = Tensor._from_array(self._eager_data("deepcopy").copy(), self._dtype)
        t._requires_grad = self._requires_grad
        if self._grad is not None:
            t._grad = self._grad.__deepcopy__(memo)
        return t


def _rebuild(data, requires_grad):
    t = Tensor._from_array(data)
    t._requires_grad = requires_grad
    return t

