"""The backward engine: walks recorded Functions from the outputs in dependency order,
runs each primitive's VJP rule, accumulates into leaves' ``.grad`` (backward) or returns
gradients for chosen inputs (autograd.grad). PyTorch's errors and semantics:
retain_graph, create_graph, retain_grad, accumulation, unused inputs.
"""
from __future__ import annotations

import heapq
import sys
import warnings

import numpy as np

from .. import dispatch
from ..ops import lax
from ..ops.registry import PRIMITIVES, VJP_RULES
from . import anomaly_mode, grad_mode
from .anomaly_mode import _state as _anomaly
from .function import AccumulateGrad, Function, accumulator

__all__ = ["backward", "grad"]

_CREATE_GRAPH_WARNING = (
    "Using backward() with create_graph=True will create a reference cycle between the "
    "parameter and its gradient which can cause a memory leak. We recommend using "
    "autograd.grad when creating the graph to avoid this. If you have to use this "
    "function, make sure to reset the .grad fields of your parameters to None after use "
    "to break the cycle and avoid the leak. (Triggered internally at "
    "/__w/pytorch/pytorch/torch/csrc/autograd/engine.cpp:1307.)")


def _Tensor():
    from ..tensor import Tensor
    return Tensor


def _as_tuple(x):
    if x is None:
        return None
    if isinstance(x, (list, tuple)):
        return tuple(x)
    return (x,)


def _seeds(outputs, grad_outputs):
    Tensor = _Tensor()
    seeds = []
    for i, out in enumerate(outputs):
        g = None if grad_outputs is None else grad_outputs[i]
        if not out.requires_grad:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not "
                               "have a grad_fn")
        if g is None:
            if out.numel() != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            g = lax.full(out.shape, 1, out.dtype)
        elif not isinstance(g, Tensor):
            raise TypeError(f"'{type(g).__name__}' object is not iterable")
        else:
            if tuple(g.shape) != tuple(out.shape):
                raise RuntimeError(
                    f"Mismatch in shape: grad_output[{i}] has a shape of {g.shape} and "
                    f"output[{i}] has a shape of {out.shape}.")
            if g.dtype is not out.dtype:
                g = lax.cast(g, out.dtype)
        seeds.append(g)
    return seeds


def _root_fn(t):
    return t.grad_fn if t.grad_fn is not None else accumulator(t)


def _graph(roots):
    """Dependency counts of every node reachable from roots (iterative)."""
    deps: dict[int, int] = {}
    nodes: dict[int, object] = {}
    stack = list(roots)
    for r in roots:
        nodes[id(r)] = r
    seen = {id(r) for r in roots}
    while stack:
        fn = stack.pop()
        for nxt, _ in fn.next_functions:
            if nxt is None:
                continue
            deps[id(nxt)] = deps.get(id(nxt), 0) + 1
            if id(nxt) not in seen:
                seen.add(id(nxt))
                nodes[id(nxt)] = nxt
                stack.append(nxt)
    return deps, nodes


def _needed(nodes, targets):
    """Ids of functions from which some target function is reachable."""
    order, seen = [], set()
    for fn in nodes.values():
        if id(fn) in seen:
            continue
        stack = [(fn, False)]
        while stack:
            f, done = stack.pop()
            if done:
                order.append(f)
                continue
            if id(f) in seen:
                continue
            seen.add(id(f))
            stack.append((f, True))
            stack.extend((n, False) for n, _ in f.next_functions if n is not None
                         and id(n) not in seen)
    need = set(targets)
    for f in order:   # post-order: children first
        if any(n is not None and id(n) in need for n, _ in f.next_functions):
            need.add(id(f))
    return need


def _accumulate(buffers, fn, g):
    key = id(fn)
    prev = buffers.get(key)
    if prev is None:
        buffers[key] = g
    else:
        buffers[key] = lax.add(prev, g)


def _run(roots_fns, seeds, *, retain_graph, create_graph, capture=None, accumulate=True):
    """Core loop. `capture`: {id(fn): slot} — gradients flowing into these nodes are
    returned instead of (AccumulateGrad) or as well as (Functions) being propagated."""
    deps, nodes = _graph(roots_fns)
    need = _needed(nodes, capture.keys()) if capture is not None else None
    buffers: dict[int, object] = {}
    for fn, g in zip(roots_fns, seeds):
        _accumulate(buffers, fn, g)
    captured = {}
    ready = [(-fn._seq, id(fn), fn) for fn in {id(f): f for f in roots_fns}.values()
             if deps.get(id(fn), 0) == 0]
    heapq.heapify(ready)
    with grad_mode.set_grad_enabled(create_graph):
        while ready:
            _, key, fn = heapq.heappop(ready)
            g = buffers.pop(key, None)
            if capture is not None and key in capture:
                captured[key] = g
            if isinstance(fn, AccumulateGrad):
                if accumulate and g is not None:
                    _accumulate_leaf(fn.variable, g, create_graph)
                continue
            if g is not None and (need is None or key in need):
                _retain(fn, g)
                grads = _call_rule(fn, g)
                if not retain_graph:
                    fn.release()
                for (nxt, _), gi in zip(fn.next_functions, grads):
                    if nxt is not None and gi is not None:
                        _accumulate(buffers, nxt, gi)
            for nxt, _ in fn.next_functions:
                if nxt is None:
                    continue
                k = id(nxt)
                deps[k] -= 1
                if deps[k] == 0:
                    heapq.heappush(ready, (-nxt._seq, k, nxt))
    return captured


def _call_rule(fn, g):
    if _anomaly["enabled"]:
        return anomaly_mode.checked_call(fn, _apply_rule, g)
    return _apply_rule(fn, g)


def _apply_rule(fn, g):
    if fn._inner is not None:
        return fn._inner(fn, g)
    return VJP_RULES[fn.prim.name](fn, g)


def _retain(fn, g):
    ref = fn._retained
    t = ref() if ref is not None else None
    if t is not None and t.grad_fn is fn:
        t._grad = _fresh(g) if t._grad is None else _add_grads(t._grad, g, False)


def _fresh(g):
    """A new, detached gradient tensor of g's value that nothing else can alias."""
    t = g.detach()
    if t._data is not None:
        t._data = np.array(t._data, copy=True)
        t._vc = [0]
    return t


def _take(g):
    """Like _fresh, but steals g's buffer when nothing else can reach it (as PyTorch
    does): g is referenced only by the engine's locals (here, the caller's and
    _run's) and its array only by g, owns its memory and is writeable."""
    data = g._data
    if (data is not None and g.grad_fn is None and sys.getrefcount(g) <= 4
            and sys.getrefcount(data) == 2 and data.base is None and data.flags.writeable):
        t = g.detach()
        t._vc = [0]
        return t
    return _fresh(g)


def _add_grads(old, g, create_graph):
    if create_graph or old.requires_grad or old._data is None or g._data is None:
        return lax.add(old, g)
    np.add(old._data, g._data, out=old._data, casting="unsafe")
    old._vc[0] += 1
    return old


def _accumulate_leaf(leaf, g, create_graph):
    tracer = dispatch._lifter[0]
    if tracer is not None and leaf._data is not None:
        tracer.backup_grad(leaf)          # symgrad.compile restores it after tracing
    if g.dtype is not leaf.dtype:
        g = lax.cast(g, leaf.dtype)
    if leaf._grad is None:
        if create_graph:
            leaf._grad = dispatch.bind(PRIMITIVES["copy"], g, grad_name="CopyBackwards") \
                if g.requires_grad else _fresh(g)
        else:
            leaf._grad = _take(g)
    else:
        leaf._grad = _add_grads(leaf._grad, g, create_graph)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """``symgrad.autograd.backward``: accumulate gradients of `tensors` into leaves."""
    tensors = _as_tuple(tensors)
    grad_tensors = _as_tuple(grad_tensors)
    if retain_graph is None:
        retain_graph = create_graph
    if create_graph:
        warnings.warn(_CREATE_GRAPH_WARNING, UserWarning, stacklevel=3)
    seeds = _seeds(tensors, grad_tensors)
    roots = [_root_fn(t) for t in tensors]
    if inputs is not None:
        inputs = _as_tuple(inputs)
        capture = {id(_root_fn(t)): t for t in inputs}
        got = _run(roots, seeds, retain_graph=retain_graph, create_graph=create_graph,
                   capture=capture, accumulate=False)
        for key, t in capture.items():
            if got.get(key) is not None:
                _accumulate_leaf(t, got[key], create_graph) if t.is_leaf else _set_nonleaf(t, got[key])
        return
    _run(roots, seeds, retain_graph=retain_graph, create_graph=create_graph)


def _set_nonleaf(t, g):
    t._grad = _fresh(g) if t._grad is None else _add_grads(t._grad, g, False)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         allow_unused=None, materialize_grads=False):
    """``symgrad.autograd.grad``: gradients of `outputs` w.r.t. `inputs`, returned (leaves'
    ``.grad`` untouched)."""
    outputs = _as_tuple(outputs)
    inputs_t = _as_tuple(inputs)
    grad_outputs = _as_tuple(grad_outputs)
    if retain_graph is None:
        retain_graph = create_graph
    if allow_unused is None:
        allow_unused = materialize_grads
    for t in inputs_t:
        if not t.requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
    seeds = _seeds(outputs, grad_outputs)
    roots = [_root_fn(t) for t in outputs]
    targets = [_root_fn(t) for t in inputs_t]
    capture = {id(f): None for f in targets}
    got = _run(roots, seeds, retain_graph=retain_graph, create_graph=create_graph,
               capture=capture, accumulate=False)
    result = []
    for i, (t, f) in enumerate(zip(inputs_t, targets)):
        g = got.get(id(f))
        if g is None:
            if not allow_unused:
                raise RuntimeError(f"The differentiated Tensor at index {i} appears to not have "
                                   "been used in the graph. Set allow_unused=True if this is "
                                   "the desired behavior.")
            if materialize_grads:
                g = lax.zeros(t.shape, t.dtype)
        elif g.dtype is not t.dtype:
            g = lax.cast(g, t.dtype)
        if g is not None and not create_graph:
            g = g.detach()
        result.append(g)
    return tuple(result)
