"""User-defined differentiable operations, as PyTorch's ``torch.autograd.Function``:
subclasses with static ``forward(ctx, ...)`` (or ``forward(...)`` plus
``setup_context(ctx, inputs, output)``) and ``backward(ctx, *grads)``, applied with
``Cls.apply(...)``; the context (``save_for_backward``, ``saved_tensors``,
``needs_input_grad``, ``mark_dirty``, ``mark_non_differentiable``,
``set_materialize_grads``, any attribute) is the backward node itself, an instance of
``<Name>Backward`` (``grad_fn``); ``once_differentiable``. PyTorch's errors for what a
backward returns (count, types, shapes) and for in-place changes of saved tensors.

Inside ``symgrad.compile`` tracing the forward runs on symbolic tensors and each output
is wrapped in a ``custom_vjp`` node (:mod:`symgrad.ops.custom`) whose rule runs the
user's backward on symbolic tensors: compiled gradients use the user's backward, not the
derivative of the forward. A forward or backward that needs concrete values cannot be
traced: :func:`_untraceable` says why.

>>> import symgrad as torch
>>> class Exp(torch.autograd.Function):
...     @staticmethod
...     def forward(ctx, x):
...         y = x.exp(); ctx.save_for_backward(y); return y
...     @staticmethod
...     def backward(ctx, g):
...         y, = ctx.saved_tensors; return g * y
>>> x = torch.zeros(2, requires_grad=True)
>>> y = Exp.apply(x); y
tensor([1., 1.], grad_fn=<ExpBackward>)
>>> y.sum().backward(); x.grad
tensor([1., 1.])
"""
from __future__ import annotations

import functools
import inspect
import warnings

from .. import dispatch
from ..errors import TracerBoolError
from ..functions.inplace import rewrite_base, set_history
from ..functions.shape import view
from ..graph import node as gnode
from ..ops import lax
from ..ops.custom import CUSTOM_VJP
from . import anomaly_mode, grad_mode
from .node_type import Node
from .hooks import HookMixin, NodeHooks
from .nodes import FREED_MESSAGE, SavedTensor, accumulator, delayed_error, next_seq
from .validate import valid_gradient

__all__ = ["FunctionCtx", "BackwardCFunction", "FunctionMeta", "Function", "InplaceFunction",
           "once_differentiable"]

_DIRTY_NOT_INPUT = (
    "ctx.mark_dirty() received a tensor that was not an input. Only input Tensors that have "
    "been mutated should be passed to ctx.mark_dirty(). (Triggered internally at "
    "/__w/pytorch/pytorch/torch/csrc/autograd/custom_function.cpp:320.)")
_DIRTY_NOT_RETURNED = (
    "Some elements marked as dirty during the forward method were not returned as output. "
    "The inputs that are modified inplace must all be outputs of the Function.")
_DIRTY_VIEW_MULTI = (
    "If your Function modifies inplace an input that is a view of another Tensor, your "
    "Function cannot return more than one Tensor. This is not supported by the current "
    "autograd engine. You should either make sure the input is not a view (using .clone() "
    "for example) or make your Function only return one Tensor (potentially splitting it "
    "into two Functions: one doing the inplace that returns a single Tensor and a second "
    "one that does the other operations). You can ask on the forum "
    "https://discuss.pytorch.org/ if you need help to do this change.")
_TWICE = "trying to differentiate twice a function that was marked with @once_differentiable"


class FunctionCtx:
    """What ``forward`` / ``setup_context`` use to prepare the backward."""

    def save_for_backward(self, *tensors) -> None:
        """Save tensors (or None) for ``backward``, which reads them back, version
        checked, from ``ctx.saved_tensors``."""
        self.to_save = tensors

    def save_for_forward(self, *tensors) -> None:
        self.saved_for_forward = tensors

    def mark_dirty(self, *args) -> None:
        """Mark inputs the forward modified in place (they must be returned)."""
        self.dirty_tensors = args

    def mark_non_differentiable(self, *args) -> None:
        """Mark outputs that get no gradient (their grads reach backward as zeros)."""
        self.non_differentiable = args

    def set_materialize_grads(self, value: bool) -> None:
        """With False, backward receives None (not zeros) for outputs that got no
        gradient."""
        self.materialize_grads = value


class BackwardCFunction(FunctionCtx, HookMixin):
    """The backward node (and the ``ctx``) of one application of a custom Function; its
    class is ``<Name>Backward``, made for each Function subclass."""

    _forward_cls = None
    _inner = None              # set below: what the engine calls as this node's backward

    def name(self) -> str:
        return type(self).__name__

    @property
    def metadata(self) -> dict:
        md = self.__dict__.get("_metadata")
        if md is None:
            md = self._metadata = {}
        return md

    @property
    def saved_tensors(self) -> tuple:
        if self._freed:
            raise RuntimeError(FREED_MESSAGE)
        saved = self._saved
        if saved is None:
            return ()
        return tuple(None if s is None else s.unpack(self) for s in saved)

    saved_variables = saved_tensors

    def apply(self, *grads):
        """Run the user's backward on `grads` (as PyTorch's ``grad_fn.apply``)."""
        return _user_backward(type(self)._forward_cls)(self, *grads)

    def release(self) -> None:
        """Free the saved tensors (after a backward without retain_graph)."""
        self._saved = None
        self._freed = True

Node.register(BackwardCFunction)


class FunctionMeta(type):
    """Gives each Function subclass its backward-node class ``<Name>Backward`` (which
    prints as PyTorch's: ``<torch.autograd.function.ExpBackward object at ...>``)."""

    def __init__(cls, name, bases, attrs):
        cls._backward_cls = type(name + "Backward", (BackwardCFunction,),
                                 {"_forward_cls": cls, "__module__": "torch.autograd.function",
                                  "__qualname__": name + "Backward"})
        super().__init__(name, bases, attrs)


class Function(FunctionCtx, metaclass=FunctionMeta):
    """Base class of custom differentiable operations: subclass it with static
    ``forward`` and ``backward`` and call ``Cls.apply(*args)`` (see the module
    docstring)."""

    def __init__(self, *args, **kwargs):
        warnings.warn(f"{self.__class__} should not be instantiated. Methods on autograd "
                      "functions are all static, so you should invoke them on the class "
                      "itself. Instantiating an autograd function will raise an error in a "
                      "future version of PyTorch.", DeprecationWarning, stacklevel=2)

    def __call__(self, *args, **kwargs):
        raise RuntimeError(
            "Legacy autograd function with non-static forward method is deprecated. Please "
            "use new-style autograd function with static forward method. (Example: "
            "https://pytorch.org/docs/stable/autograd.html#torch.autograd.Function)")

    generate_vmap_rule = False
    boxed_grads_call = False

    @staticmethod
    def forward(*args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom "
                                  "autograd.Function.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for "
                                  "your custom autograd.Function to use it with backward "
                                  "mode AD.")

    vjp = backward

    @staticmethod
    def jvp(ctx, *grad_inputs):
        raise NotImplementedError("You must implement the jvp function for custom "
                                  "autograd.Function to use it with forward mode AD.")

    @classmethod
    def apply(cls, *args, **kwargs):
        """Run ``forward`` on the arguments and record the backward node."""
        setup = cls.setup_context is not Function.setup_context
        if setup:
            bound = inspect.signature(cls.forward).bind(*args, **kwargs)
            bound.apply_defaults()
            args, kwargs = bound.args, bound.kwargs
        return _apply(cls, args, kwargs, setup)


class InplaceFunction(Function):
    """Kept for PyTorch's backward compatibility: a Function with an ``inplace`` flag."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace


def _user_backward(cls):
    if cls.backward is not Function.backward and cls.vjp is not Function.vjp:
        raise RuntimeError("Implementing both 'backward' and 'vjp' for a custom Function is "
                           "not allowed. You should only implement one of them.")
    return cls.vjp if cls.vjp is not Function.vjp else cls.backward


# ---- forward ---------------------------------------------------------------------------
def _new_ctx(cls, inputs):
    ctx = object.__new__(cls._backward_cls)
    d = ctx.__dict__
    d.update(to_save=None, dirty_tensors=None, non_differentiable=None,
             materialize_grads=True, _materialize_non_diff_grads=True, _saved=None,
             _freed=False, _hooks=NodeHooks(), _nout=1, _stack=None, _seq=0,
             next_functions=())
    tracing = dispatch._lifter[0] is not None
    ctx.needs_input_grad = tuple(      # in a trace, any float input may be differentiated
        isinstance(x, dispatch.Tensor)
        and (x.requires_grad or (tracing and x._dtype.is_floating_point)) for x in inputs)
    return ctx


def _edge(x):
    if not x.requires_grad:
        return (None, 0)
    if x.grad_fn is not None:
        return (x.grad_fn, x._output_nr)
    return (accumulator(x), 0)


def _apply(cls, args, kwargs, setup):
    Tensor = dispatch.Tensor
    inputs = tuple(args) + tuple(kwargs.values())
    ctx = _new_ctx(cls, inputs)
    tensor_pos = [i for i, x in enumerate(inputs) if isinstance(x, Tensor)]
    executable = grad_mode.is_grad_enabled() and any(inputs[i].requires_grad for i in tensor_pos)
    edges = tuple(_edge(inputs[i]) for i in tensor_pos) if executable else ()
    with grad_mode.no_grad():
        try:
            if setup:
                out = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, tuple(args), out)
            else:
                out = cls.forward(ctx, *args, **kwargs)
        except TracerBoolError as e:
            raise _untraceable(cls, "forward", e) from e
    is_tuple = isinstance(out, tuple)
    outs = list(out) if is_tuple else [out]
    ctx._nout = len(outs)
    ctx._tensor_pos = tensor_pos
    ctx._in_meta = tuple((tuple(inputs[i].shape), inputs[i]._dtype) for i in tensor_pos)
    if executable:
        ctx.next_functions = edges
        ctx._seq = next_seq()          # after its inputs' nodes: the engine's order
        if anomaly_mode.is_anomaly_enabled():
            ctx._stack = anomaly_mode.forward_stack()
    dirty = _take_tensors(ctx, "dirty_tensors", "mark_dirty can only accept variables, "
                          "but argument ")
    non_diff = _take_tensors(ctx, "non_differentiable", "mark_non_differentiable only "
                             "accepts variable arguments, but got ")
    for t in dirty:
        t._vc[0] += 1
    raw = list(outs)
    _wrap_traced(ctx, outs, inputs, tensor_pos, dirty, non_diff)
    meta = []
    for k, o in enumerate(outs):
        if not isinstance(o, Tensor):
            meta.append(None)
            continue
        is_input = any(o is inputs[i] for i in tensor_pos)
        is_dirty = any(o is t for t in dirty)
        diff = executable and not any(o is t for t in non_diff) and o._dtype.is_floating_point
        outs[k] = _set_history(ctx, o, k, is_input, is_dirty, diff, len(outs))
        meta.append((tuple(o.shape), o._dtype, diff))
    ctx._out_meta = tuple(meta)
    for t in dirty:
        if not any(t is o for o in raw):
            raise RuntimeError(_DIRTY_NOT_RETURNED)
    _save(ctx, raw, outs)
    return tuple(outs) if is_tuple else outs[0]


def _take_tensors(ctx, attr, message) -> tuple:
    got = ctx.__dict__.get(attr) or ()
    for t in got:
        if not isinstance(t, dispatch.Tensor):
            raise RuntimeError(message)
    setattr(ctx, attr, None)
    return tuple(got)


def _alias(x):
    """x.view_as(x): a new tensor object on x's storage (what PyTorch returns for an
    input a Function returned unchanged)."""
    with grad_mode.no_grad():
        return view(x, tuple(x.shape))


def _set_history(ctx, o, k, is_input, is_dirty, diff, nout):
    """The output PyTorch returns for `o` (output k) and its grad_fn (custom_function.cpp's
    set_history)."""
    if not diff:
        if not o.requires_grad:
            return _alias(o) if is_input and not is_dirty else o
        if is_input:
            return o.detach()
        if o._base is None:
            o.detach_()
        return o
    if is_dirty:
        if o.grad_fn is None and o._requires_grad:
            raise RuntimeError("a leaf Variable that requires grad has been used in an "
                               "in-place operation.")
        if not is_input:
            warnings.warn(_DIRTY_NOT_INPUT, UserWarning, stacklevel=4)
        if o._base is not None and nout > 1:
            raise RuntimeError(_DIRTY_VIEW_MULTI)
        o._grad = None
        o.__dict__.pop("_backward_hooks", None)
        if o._base is not None:
            new = o._shallow()
            set_history(new, ctx, k)
            rewrite_base(o, o._base, new)
        else:
            set_history(o, ctx, k)
        return o
    if is_input:
        o = _alias(o)
    set_history(o, ctx, k)
    return o


def _save(ctx, raw, outs) -> None:
    """ctx.to_save as SavedTensors (outputs saved as outputs: they read back with this
    node as their grad_fn), after the outputs got their history (PyTorch's order)."""
    to_save = ctx.to_save
    ctx.to_save = None
    if not to_save:
        ctx._saved = ()
        return
    saved = []
    for i, t in enumerate(to_save):
        if t is None:
            saved.append(None)
            continue
        if not isinstance(t, dispatch.Tensor):
            raise TypeError(f"save_for_backward can only save variables, but argument {i} is "
                            f"of type {type(t).__name__}")
        for r, o in zip(raw, outs):     # a traced output was replaced by its custom_vjp
            if t is r:
                t = o
                break
        if t.grad_fn is ctx:
            saved.append(SavedTensor(t, is_output=True, output_nr=t._output_nr))
        else:
            saved.append(SavedTensor(t))
    ctx._saved = tuple(saved)


# ---- tracing ---------------------------------------------------------------------------
class _TracedBackward:
    """The rule of the custom_vjp node of output `k`: the user's backward on symbolic
    tensors, the other outputs' gradients zero (or None without materialize_grads). When
    the node was rebuilt on other inputs (a loop body inlined), the saved tensors are
    rebuilt on them too."""

    __slots__ = ("ctx", "k", "inputs")

    def __init__(self, ctx, k, inputs):
        self.ctx, self.k, self.inputs = ctx, k, inputs

    def __call__(self, needs, g, node=None):
        ctx = self.ctx
        grads = [None] * ctx._nout
        grads[self.k] = g
        before, saved = ctx.needs_input_grad, ctx._saved
        wanted = list(before)
        for i, n in zip(ctx._tensor_pos, needs):
            wanted[i] = bool(n)
        ctx.needs_input_grad = tuple(wanted)
        if node is not None and saved and any(a is not b for a, b in zip(node.args[1:],
                                                                          self.inputs)):
            ctx._saved = _rebased(saved, dict(zip(map(id, self.inputs), node.args[1:])))
        try:
            return _backward(ctx, grads, list(needs))
        except TracerBoolError as e:
            raise _untraceable(type(ctx)._forward_cls, "backward", e) from e
        finally:
            ctx.needs_input_grad, ctx._saved = before, saved

    def __repr__(self) -> str:
        return f"{type(self.ctx)._forward_cls.__name__}.backward[{self.k}]"


def _rebased(saved, replace: dict) -> tuple:
    """The saved tensors with the graph under each rebuilt on the replacement nodes
    (hash-consing makes these the nodes the pass that replaced the inputs built)."""
    memo = dict(replace)

    def rebuild(node):
        for n in gnode.toposort([node]):
            if id(n) in memo:
                continue
            new = tuple(memo.get(id(a), a) for a in n.args)
            memo[id(n)] = n if all(a is b for a, b in zip(new, n.args)) else \
                gnode.make_node(n.op, new, n.attrs, n.shape, n.dtype)
        return memo[id(node)]
    out = []
    for s in saved:
        if s is None or s.packed is not None or s.saved_node is None:
            out.append(s)
            continue
        t = dispatch.Tensor._from_node(rebuild(s.saved_node))
        t._vc = s.saved_vc
        out.append(SavedTensor(t, s.is_output, s.output_nr))
    return tuple(out)


class _TracedError:
    """The rule of a once_differentiable backward's results: differentiating them again
    is PyTorch's error."""

    __slots__ = ()

    def __call__(self, needs, g, node=None):
        raise RuntimeError(_TWICE)

    def __repr__(self) -> str:
        return "once_differentiable"


def _custom_node(value_node, inputs, rule, ctx=None, k=0):
    """custom_vjp(value, inputs) with `rule` (or, given `ctx`, the user's backward for
    output k)."""
    nodes = tuple(dispatch._as_node(x, x._dtype) for x in inputs)
    if ctx is not None:
        rule = _TracedBackward(ctx, k, nodes)
    return gnode.make_node(CUSTOM_VJP.name, (value_node,) + nodes, (("rule", rule),),
                           value_node.shape, value_node.dtype)


def _wrap_traced(ctx, outs, inputs, tensor_pos, dirty, non_diff) -> None:
    """In a trace: each floating-point output becomes custom_vjp(output, inputs) with the
    user's backward as its rule (an input returned unchanged: a new tensor); one marked
    non-differentiable, stop_gradient(output)."""
    Tensor = dispatch.Tensor
    tensors = [inputs[i] for i in tensor_pos]
    for k, o in enumerate(outs):
        if not isinstance(o, Tensor) or o._node is None or not o._dtype.is_floating_point:
            continue
        if any(o is t for t in non_diff):
            node = dispatch.stop_gradient_node(o._node)
        else:
            node = _custom_node(o._node, tensors, None, ctx, k)
        if any(o is x for x in tensors) and not any(o is t for t in dirty):
            new = Tensor._from_node(node)
            new._requires_grad = o.requires_grad and o.grad_fn is None
            outs[k] = new
        else:
            o._node = node


def _untraceable(cls, what: str, e: Exception) -> TracerBoolError:
    return TracerBoolError(
        f"the custom autograd.Function {cls.__name__} cannot be traced by symgrad.compile: "
        f"its {what} needs concrete values. A custom Function is compiled by running its "
        f"forward (and, for gradients, its backward) on symbolic tensors, so both must be "
        f"written with symgrad operations -- numpy calls, .item(), .tolist() and Python "
        f"branches on tensor values cannot be traced. Call it outside symgrad.compile, or "
        f"write it with symgrad operations. ({e})")


# ---- backward --------------------------------------------------------------------------
def _zeros(shape, dtype, traced: bool):
    """Zeros for an output that got no gradient: in a trace, a ``full`` node (which the
    simplifier folds away), not a constant array."""
    if not traced:
        return lax.zeros(shape, dtype)
    node = gnode.make_node("full", (), (("dtype", dtype), ("shape", shape), ("value", 0)),
                           shape, dtype)
    return dispatch.Tensor._from_node(node)


def _materialized(ctx, grads: list) -> list:
    if not ctx.materialize_grads:
        return grads
    traced = any(g is not None and g._node is not None for g in grads)
    out = []
    for g, m in zip(grads, ctx._out_meta):
        if g is None and m is not None and (m[2] or ctx._materialize_non_diff_grads):
            g = _zeros(m[0], m[1], traced)
        out.append(g)
    return out


def _backward(ctx, grads: list, wanted: list) -> list:
    """The user's backward on the outputs' gradients, checked as PyTorch checks it; one
    gradient per tensor input (None where `wanted` is False)."""
    cls = type(ctx)._forward_cls
    fn = _user_backward(cls)
    grads = _materialized(ctx, grads)
    result = fn(ctx, list(grads)) if cls.boxed_grads_call else fn(ctx, *grads)
    if not isinstance(result, tuple):
        result = (result,)
    n_in = len(ctx.needs_input_grad)
    if len(result) > n_in and all(r is None for r in result[n_in:]):
        result = result[:n_in]
    name = ctx.name()
    if len(result) != n_in:
        raise RuntimeError(f"function {name} returned an incorrect number of gradients "
                           f"(expected {n_in}, got {len(result)})")
    tensor_pos = set(ctx._tensor_pos)
    for i, r in enumerate(result):
        if i in tensor_pos:
            if r is not None and not isinstance(r, dispatch.Tensor):
                raise RuntimeError(f"expected Variable or None (got {type(r).__name__})")
        elif r is not None:
            raise RuntimeError(f"function {name} returned a gradient different than None at "
                               f"position {i + 1}, but the corresponding forward input was "
                               "not a Variable")
    out = []
    for j, (i, (shape, dtype)) in enumerate(zip(ctx._tensor_pos, ctx._in_meta)):
        g = result[i]
        if g is None or not wanted[j]:
            out.append(None)
            continue
        out.append(valid_gradient(name, j, g, shape, dtype))
    return out


def _run_backward(node, g):
    """The engine's call of a custom node: g is the gradient of its only output, or the
    list of its outputs' gradients."""
    grads = g if type(g) is list else [g]
    return _backward(node, grads, [e[0] is not None for e in node.next_functions])


BackwardCFunction._inner = staticmethod(_run_backward)


# ---- once_differentiable ---------------------------------------------------------------
def once_differentiable(fn):
    """Decorate a backward that cannot itself be differentiated: it runs without
    recording, and differentiating its results raises PyTorch's error."""

    @functools.wraps(fn)
    def wrapper(ctx, *args, **kwargs):
        with grad_mode.no_grad():
            outputs = fn(ctx, *args, **kwargs)
        if grad_mode._state.deriving:          # a symbolic gradient (symgrad.compile)
            return _traced_once(outputs)
        if not grad_mode.is_grad_enabled():
            return outputs
        if not any(isinstance(a, dispatch.Tensor) and a.requires_grad for a in args):
            return outputs
        res = delayed_error(outputs if isinstance(outputs, tuple) else (outputs,), _TWICE)
        return res if isinstance(outputs, tuple) else res[0]
    return wrapper


def _traced_once(outputs):
    single = not isinstance(outputs, tuple)
    outs = []
    for o in ((outputs,) if single else outputs):
        if isinstance(o, dispatch.Tensor) and o._node is not None and o._dtype.is_floating_point:
            o = dispatch.Tensor._from_node(_custom_node(o._node, (), _TracedError()))
        outs.append(o)
    return outs[0] if single else tuple(outs)
