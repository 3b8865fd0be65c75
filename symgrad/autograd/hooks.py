"""Autograd hooks, as PyTorch's: registering them (``Tensor.register_hook``,
``register_post_accumulate_grad_hook``, ``retain_grad``, a graph node's
``register_hook`` / ``register_prehook``) and running them for the backward engine, with
PyTorch's checks of what a hook returns and its order:

tensor hooks (registration order), then ``retain_grad``, then the node's pre-hooks, the
node's backward, its post-hooks; for a leaf's AccumulateGrad: the leaf's tensor hooks,
the node's pre-hooks, the accumulation into ``.grad``, the post-accumulate-grad hooks,
the node's post-hooks.

A node without hooks has ``_hooks is None`` and costs the engine nothing.

>>> import symgrad as torch
>>> x = torch.tensor([1., 2.], requires_grad=True)
>>> y = x * 2
>>> h = y.register_hook(lambda g: g * 10)
>>> y.sum().backward(); x.grad
tensor([20., 20.])
"""
from __future__ import annotations

import weakref
from collections import OrderedDict

from ..tensor import Tensor
from ..tracing import _lifter, grad_access, python_effect
from ..utils.hooks import RemovableHandle

__all__ = ["NodeHooks", "HookMixin", "register_tensor_hook", "register_post_accumulate_hook",
           "retain_grad", "run_tensor_pre_hooks", "run_pre_hooks", "run_post_hooks",
           "run_post_accumulate_hooks"]


class NodeHooks:
    """The hooks of one graph node: ``tensor_pre`` -- (hook dict, output number) of each
    tensor whose hooks run on this node's incoming gradient; ``retains`` -- output number
    -> weak reference to the tensor that ``retain_grad()``-ed it; ``pre`` / ``post`` --
    the node's own hooks by handle id."""

    __slots__ = ("tensor_pre", "retains", "pre", "post")

    def __init__(self) -> None:
        self.tensor_pre: list = []
        self.retains: dict = {}
        self.pre: OrderedDict = OrderedDict()
        self.post: OrderedDict = OrderedDict()


def node_hooks(fn) -> NodeHooks:
    """fn's hooks, created on first use."""
    h = fn._hooks
    if h is None:
        h = fn._hooks = NodeHooks()
    return h


def _add(hooks: OrderedDict, hook) -> RemovableHandle:
    handle = RemovableHandle(hooks)
    hooks[handle.id] = hook
    return handle


class HookMixin:
    """``register_hook`` / ``register_prehook`` of every graph node (``grad_fn``)."""

    __slots__ = ()

    def register_hook(self, fn) -> RemovableHandle:
        """``fn(grad_inputs, grad_outputs)`` after the node's backward; a non-None
        result (a tuple) replaces ``grad_inputs``."""
        return _add(node_hooks(self).post, fn)

    def register_prehook(self, fn) -> RemovableHandle:
        """``fn(grad_outputs)`` before the node's backward; a non-None result (a tuple)
        replaces ``grad_outputs``."""
        return _add(node_hooks(self).pre, fn)

    def _register_hook_dict(self, tensor) -> None:
        node_hooks(self).tensor_pre.append((tensor._backward_hooks, tensor._output_nr))


def _live_accumulator(leaf):
    ref = leaf._acc
    return ref() if ref is not None else None


def register_tensor_hook(t, hook) -> RemovableHandle:
    """``Tensor.register_hook``: ``hook(grad)`` when t's gradient is computed; a non-None
    result replaces it."""
    if not t.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if t._data is None:        # traced: symbolic gradients (symgrad.grad) cannot run it
        tracer = _lifter[0]
        if tracer is not None:
            python_effect("a tensor hook registered on a traced tensor")   # (torch.compile
            tracer.hooked = True                  # runs it at every backward: uncompiled)
    hooks = t._backward_hooks
    if hooks is None:
        hooks = t._backward_hooks = OrderedDict()
        if t.grad_fn is not None:
            t.grad_fn._register_hook_dict(t)
        else:
            acc = _live_accumulator(t)
            if acc is not None:
                node_hooks(acc)
    return _add(hooks, hook)


def register_post_accumulate_hook(t, hook) -> RemovableHandle:
    """``Tensor.register_post_accumulate_grad_hook``: ``hook(t)`` after a leaf's
    ``.grad`` was accumulated."""
    if t.grad_fn is not None:
        raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
    if not t._requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    hooks = t._post_accumulate_grad_hooks
    if hooks is None:
        hooks = t._post_accumulate_grad_hooks = OrderedDict()
        acc = _live_accumulator(t)
        if acc is not None:
            node_hooks(acc)
    return _add(hooks, hook)


def retain_grad(t) -> None:
    """``Tensor.retain_grad``: a non-leaf keeps its gradient in ``.grad`` (after its
    tensor hooks have run)."""
    if t._data is None:        # (a compiled function's argument: its .grad lives outside)
        grad_access(t)
    if t.grad_fn is None:
        if not t._requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        return
    if t._retains_grad:
        return
    t._retains_grad = True
    node_hooks(t.grad_fn).retains[t._output_nr] = weakref.ref(t)


# ---- running them ------------------------------------------------------------------------
def _name(hook) -> str:
    return getattr(hook, "__name__", "<unknown>")


def _checked(original, result, hook):
    """PyTorch's check of one value a hook returned in place of `original`."""
    if result is None:
        return original
    if original is None:
        raise RuntimeError("can't replace a None gradient with a non-None value")
    if not isinstance(result, Tensor):
        raise TypeError(f"expected Variable, but hook returned '{type(result).__name__}'")
    if result.dtype is not original.dtype:
        raise RuntimeError(f"hook '{_name(hook)}' has changed the type of value (was "
                           f"{original.dtype.tensor_type} got {result.dtype.tensor_type})")
    if tuple(result.shape) != tuple(original.shape):
        raise RuntimeError(f"hook '{_name(hook)}' has changed the size of value")
    return result


def _checked_tuple(original: tuple, result, hook) -> tuple:
    if result is None:
        return original
    if not isinstance(result, tuple):
        raise TypeError(f"expected tuple, but hook returned '{type(result).__name__}'")
    if len(result) != len(original):
        raise RuntimeError(f"hook '{_name(hook)}' has returned an incorrect number of values "
                           f"(got {len(result)}, but expected {len(original)})")
    return tuple(None if r is None else _checked(o, r, hook)      # None replaces too
                 for o, r in zip(original, result))


def run_tensor_pre_hooks(fn, grads: list, retain, leaf=None) -> list:
    """The tensor hooks, then ``retain(tensor, grad)`` for retain_grad, of the tensors
    whose gradients `grads` (one per output of fn) are; `leaf`: the variable of an
    AccumulateGrad."""
    if leaf is not None:
        pairs = [(leaf._backward_hooks, 0)] if leaf._backward_hooks else []
        retains = {}
    else:
        h = fn._hooks
        pairs, retains = h.tensor_pre, h.retains
    for hooks, nr in pairs:
        for hook in list(hooks.values()):
            grads[nr] = _checked(grads[nr], hook(grads[nr]), hook)
    for nr, ref in list(retains.items()):
        t = ref()
        if t is not None and t.grad_fn is fn and grads[nr] is not None:
            retain(t, grads[nr])
    return grads


def run_pre_hooks(fn, grads: list) -> list:
    for hook in list(fn._hooks.pre.values()):
        grads = list(_checked_tuple(tuple(grads), hook(tuple(grads)), hook))
    return grads


def run_post_hooks(fn, grad_inputs, grad_outputs: list):
    for hook in list(fn._hooks.post.values()):
        grad_inputs = _checked_tuple(tuple(grad_inputs), hook(tuple(grad_inputs),
                                                              tuple(grad_outputs)), hook)
    return grad_inputs


def run_post_accumulate_hooks(leaf) -> None:
    hooks = leaf._post_accumulate_grad_hooks
    if not hooks:
        return
    for hook in list(hooks.values()):
        r = hook(leaf)
        if r is not None:
            if not isinstance(r, Tensor):
                raise TypeError(f"expected Variable, but hook returned '{type(r).__name__}'")
            raise RuntimeError("Tensor post accumulate grad hooks should return None.")
