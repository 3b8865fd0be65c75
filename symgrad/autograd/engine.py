"""The backward engine: walks recorded nodes from the outputs in dependency order,
runs each primitive's VJP rule (or a custom Function's backward), accumulates into
leaves' ``.grad`` (backward) or returns gradients for chosen inputs (autograd.grad).
PyTorch's errors and semantics: retain_graph, create_graph, retain_grad, hooks (run by
:mod:`symgrad.autograd.hooks` for nodes that have them), accumulation, unused inputs.

A node has one output, except a custom Function's (one per output it returned): the
gradient of output 0 of a node waits in ``buffers`` under the node's id, that of output
k > 0 in ``extra`` (``{id: {k: gradient}}``), and a captured output k > 0 is keyed
``(id, k)``.
"""
from __future__ import annotations

import operator
import sys
import warnings

import numpy as np

from .. import dispatch

from ..graph import dtypes
from ..graph.fpstate import enter as fp_enter, leave as fp_leave
from ..ops import lax
from ..graph.primitives import PRIMITIVES
from ..ops.vjp import ARRAY_RULES, rule as vjp_rule
from . import anomaly_mode, grad_mode, hooks, saved_hooks
from .anomaly_mode import _state as _anomaly
from .nodes import AccumulateGrad, accumulator
from .validate import valid_gradient
from ..utils.thread_flag import ThreadFlag

__all__ = ["backward", "grad"]

_CREATE_GRAPH_WARNING = (
    "Using backward() with create_graph=True will create a reference cycle between the "
    "parameter and its gradient which can cause a memory leak. We recommend using "
    "autograd.grad when creating the graph to avoid this. If you have to use this "
    "function, make sure to reset the .grad fields of your parameters to None after use "
    "to break the cycle and avoid the leak. (Triggered internally at "
    "/__w/pytorch/pytorch/torch/csrc/autograd/engine.cpp:1307.)")


_WARNED: list = []


def _as_tuple(x):
    if x is None:
        return None
    if isinstance(x, (list, tuple)):
        return tuple(x)
    return (x,)


def _seeds(outputs, grad_outputs, arrays=False):
    """The initial cotangent of each output (arrays when `arrays`)."""
    Tensor = dispatch.Tensor
    seeds = []
    for i, out in enumerate(outputs):
        g = None if grad_outputs is None else grad_outputs[i]
        if not out.requires_grad or _root_edge(out)[0] is None:   # (no AccumulateGrad)
            raise RuntimeError(f"element {i} of tensors does not require grad and does not "
                               "have a grad_fn")
        if g is None:
            if out.numel() != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            seeds.append(np.ones(out.shape, out.dtype.np) if arrays
                         else lax.full(out.shape, 1, out.dtype))
            continue
        if not isinstance(g, Tensor):
            raise TypeError(f"'{type(g).__name__}' object is not iterable")
        if (g._data.shape != out._data.shape if arrays else
                tuple(g.shape) != tuple(out.shape)):
            raise RuntimeError(
                f"Mismatch in shape: grad_output[{i}] has a shape of {g.shape} and "
                f"output[{i}] has a shape of {out.shape}.")
        if g.dtype is not out.dtype:
            g = lax.cast(g, out.dtype)
        seeds.append(g._data if arrays else g)
    return seeds


def _array_mode(outputs, grad_outputs, create_graph) -> bool:
    """Whether backward can run on bare numpy arrays: no graph of the backward is built
    (no create_graph, no tracing), anomaly checks are off and every value is eager."""
    if create_graph or dispatch._lifter[0] is not None or _anomaly["enabled"]:
        return False
    if any(t._data is None for t in outputs):
        return False
    return grad_outputs is None or all(g is None or getattr(g, "_data", 0) is not None
                                       for g in grad_outputs)


def _root_edge(t):
    """(node, output number) where t's gradient enters the graph."""
    fn = t.grad_fn
    return (fn, t._output_nr) if fn is not None else (accumulator(t), 0)


def _edge_key(edge):
    fn, nr = edge
    return id(fn) if not nr else (id(fn), nr)


def _order(roots):
    """Every function reachable from roots, in execution order: decreasing sequence
    number. A function is always created after the functions its gradient flows to (its
    inputs' grad_fns and accumulators exist before it), so this order runs each function
    after all that feed it — the order PyTorch's engine follows on one thread."""
    seen = {id(r): r for r in roots}
    stack = list(roots)
    while stack:
        for nxt, _ in stack.pop().next_functions:
            if nxt is not None and id(nxt) not in seen:
                seen[id(nxt)] = nxt
                stack.append(nxt)
    return sorted(seen.values(), key=_SEQ, reverse=True)


_SEQ = operator.attrgetter("_seq")


def _needed(order, capture):
    """Ids of the nodes to execute: those from which some captured node is reachable
    through at least one edge (a captured node itself is only read, as PyTorch does)."""
    need = {k if type(k) is int else k[0] for k in capture}
    run = set()
    for f in reversed(order):   # inputs first
        if any(n is not None and id(n) in need for n, _ in f.next_functions):
            need.add(id(f))
            run.add(id(f))
    return run


def _accumulate(buffers, fn, g):
    key = id(fn)
    prev = buffers.get(key)
    if prev is None:
        buffers[key] = g
    else:
        buffers[key] = lax.add(prev, g)


_leaf_hooks = ThreadFlag()


def without_leaf_hooks():
    """Inside (a context manager), the engine runs no hook of a leaf's AccumulateGrad
    (the leaf's tensor hooks, the node's hooks): a compiled call differentiating its
    outputs in a trace (:mod:`symgrad.autograd.compiled_split`) leaves them to the eager
    engine, which runs them once when the call's gradient reaches the leaf, as
    torch.compile does."""
    return _leaf_hooks.set()


def _accumulate_extra(extra, fn, nr, g):
    per = extra.setdefault(id(fn), {})
    prev = per.get(nr)
    per[nr] = g if prev is None else lax.add(prev, g)


def _run(roots, seeds, *, retain_graph, create_graph, capture=None, accumulate=True,
         arrays=False):
    """Core loop from `roots` ((node, output number) pairs). `capture`: {edge key: slot}
    (see _edge_key) -- the gradients flowing into these edges are returned; the nodes
    are executed only if another captured node lies beyond them, and AccumulateGrads
    only when `accumulate` (then into captured leaves only). With `arrays`, cotangents
    (captured ones included) are numpy arrays (see _array_mode)."""
    order = _order([fn for fn, _ in roots])
    run = _needed(order, capture) if capture is not None else None
    buffers: dict[int, object] = {}
    extra: dict[int, dict] = {}
    for (fn, nr), g in zip(roots, seeds):
        if nr:
            _accumulate_extra(extra, fn, nr, g)
        else:
            _accumulate(buffers, fn, g)
    captured = {}
    call = _call_rule_arrays if arrays else _call_rule
    leaf = _accumulate_leaf_array if arrays else _accumulate_leaf
    token = fp_enter()
    grad_was = grad_mode._state.grad
    grad_mode.set_grad_mode(create_graph)
    try:
        if arrays and capture is None and not extra:
            _run_arrays(order, buffers, retain_graph)
            return captured
        for fn in order:
            key = id(fn)
            g = buffers.pop(key, None)
            if g is None and (not extra or key not in extra):
                continue
            if type(fn) is AccumulateGrad:
                if capture is not None and key not in capture:
                    continue     # (reached through a node computing every input's
                                 # gradient: not needed, so not executed, hooks included)
                if fn._hooks is not None and not _leaf_hooks.on:
                    _leaf_hooked(fn, g, arrays, create_graph, capture, captured, accumulate)
                    continue
                if capture is not None and key in capture:
                    captured[key] = g
                if accumulate and (capture is None or key in capture):
                    leaf(fn.variable, g, create_graph)
            elif run is None or key in run:
                if capture is not None and key in capture and g is not None:
                    captured[key] = g
                if fn._hooks is None:
                    grads = call(fn, g)
                else:
                    grads = _call_hooked(fn, g, extra.pop(key, None), arrays, capture, captured)
                _push(buffers, extra, fn, grads)
                if not retain_graph:
                    fn.release()
            elif capture is not None:
                _capture_unexecuted(fn, g, extra.pop(key, None), arrays, capture, captured)
            del g
    finally:
        grad_mode.set_grad_mode(grad_was)
        fp_leave(token)
    return captured


def _run_arrays(order, buffers, retain_graph):
    """The loop of :func:`_run` for its most common call, ``loss.backward()`` in eager
    mode: array cotangents, every node run, leaves accumulated; the buffers' updates
    inline (the same steps, in the same order, as the general loop)."""
    extra: dict[int, dict] = {}      # (outputs k > 0 of custom Functions)
    pop = buffers.pop
    for fn in order:
        key = id(fn)
        g = pop(key, None)
        if g is None and key not in extra:
            continue
        if type(fn) is AccumulateGrad:
            if fn._hooks is None or _leaf_hooks.on:
                _accumulate_leaf_array(fn.variable, g)
            else:
                _leaf_hooked(fn, g, True, False, None, None, True)
            del g
            continue
        if fn._hooks is None:
            grads = _call_rule_arrays(fn, g)
        else:
            grads = _call_hooked(fn, g, extra.pop(key, None), True, None, None)
        del g
        for (nxt, nr), gi in zip(fn.next_functions, grads):
            if nxt is not None and gi is not None:
                if nr:
                    _accumulate_extra(extra, nxt, nr, gi)
                else:
                    k = id(nxt)
                    prev = buffers.get(k)
                    buffers[k] = gi if prev is None else lax.add(prev, gi)
        del grads
        if not retain_graph:
            fn.release()


def _push(buffers, extra, fn, grads):
    """Add a node's input cotangents to the buffers of the nodes they flow to."""
    for (nxt, nr), gi in zip(fn.next_functions, grads):
        if nxt is not None and gi is not None:
            if nr:
                _accumulate_extra(extra, nxt, nr, gi)
            else:
                _accumulate(buffers, nxt, gi)


def _output_grads(fn, g, more, arrays) -> list:
    """The gradient of each output of fn, as Tensors (None where none arrived)."""
    gs = [g] + [None] * (fn._nout - 1)
    if more:
        for nr, gk in more.items():
            gs[nr] = gk
    if arrays:
        gs = [None if x is None else _as_tensor(x) for x in gs]
    return gs


def _capture_outputs(fn, gs, arrays, capture, captured, first=0):
    key = id(fn)
    for nr in range(first, len(gs)):
        k = key if not nr else (key, nr)
        if k in capture and gs[nr] is not None:
            captured[k] = gs[nr]._data if arrays else gs[nr]


def _call_hooked(fn, g, more, arrays, capture, captured):
    """A node with hooks (and every custom Function's node): its outputs' gradients
    gathered, the hooks run around its backward (see symgrad.autograd.hooks)."""
    gs = _output_grads(fn, g, more, arrays)
    if capture is not None and len(gs) > 1:
        _capture_outputs(fn, gs, arrays, capture, captured, first=1)
    gs = hooks.run_tensor_pre_hooks(fn, gs, retain)
    h = fn._hooks
    if h.pre:
        gs = hooks.run_pre_hooks(fn, gs)
    grads = _call_rule(fn, gs[0] if fn._nout == 1 else gs)
    if h.post:
        grads = hooks.run_post_hooks(fn, grads, gs)
    if arrays:
        grads = [gi if gi is None or type(gi) is np.ndarray else gi._data for gi in grads]
    return grads


def _capture_unexecuted(fn, g, more, arrays, capture, captured):
    """A captured node nothing beyond needs: its gradient is read after the tensor
    hooks (and retain_grad) ran on it, and it is not executed."""
    if fn._hooks is None:
        if id(fn) in capture and g is not None:
            captured[id(fn)] = g
        if not more:
            return
    gs = _output_grads(fn, g, more, arrays)
    if fn._hooks is not None:
        gs = hooks.run_tensor_pre_hooks(fn, gs, retain)
    _capture_outputs(fn, gs, arrays, capture, captured)


def _leaf_hooked(fn, g, arrays, create_graph, capture, captured, accumulate):
    """AccumulateGrad with hooks: the leaf's tensor hooks, the node's pre-hooks, the
    accumulation, post-accumulate-grad hooks, the node's post-hooks."""
    leaf_t = fn.variable
    gs = hooks.run_tensor_pre_hooks(fn, [_as_tensor(g) if arrays else g], retain, leaf=leaf_t)
    key = id(fn)
    if capture is not None and key in capture:
        captured[key] = gs[0]._data if arrays else gs[0]
    if not accumulate or (capture is not None and key not in capture):
        return
    h = fn._hooks
    if h.pre:
        gs = hooks.run_pre_hooks(fn, gs)
    if gs[0] is not None:
        _accumulate_leaf(leaf_t, gs[0], create_graph)
    hooks.run_post_accumulate_hooks(leaf_t)
    if h.post:
        hooks.run_post_hooks(fn, (), gs)


def _call_rule(fn, g):
    if _anomaly["enabled"]:
        return anomaly_mode.checked_call(fn, _apply_rule, g)
    return _apply_rule(fn, g)


def _apply_rule(fn, g):
    if fn._inner is not None:
        return fn._inner(fn, g)
    if saved_hooks.used and fn.prim is not None:
        unpacked = fn.unpack_saved()
        if unpacked is not None:
            return _unpacked_rule(fn, unpacked, g)
    return vjp_rule(fn.prim.name)(fn, g)


def _unpacked_rule(fn, unpacked, g):
    """The VJP rule of a node whose saved tensors came back through unpack hooks: it
    reads them as unpacked (once each), and its gradients are checked as PyTorch checks
    them (an unpack hook may have returned another shape or dtype)."""
    name = fn.name()
    if fn.prim.name == "where":       # the one primitive that saves a bool tensor
        c = unpacked.get(0)
        if c is not None and c._dtype is not dtypes.bool_:
            raise RuntimeError("where expected condition to be a boolean tensor, but got a "
                               f"tensor with dtype {c._dtype.c_name}")
    fn._unpacked = unpacked
    try:
        grads = vjp_rule(fn.prim.name)(fn, g)
    except ValueError as e:          # a rule that reshapes: say what was wrong
        for i, t in unpacked.items():
            saved = (fn._saved_out if i == -1 else fn._saved[i]).packed
            if saved is not None and tuple(t.shape) != saved.shape:
                raise RuntimeError(
                    f"Function {name} cannot use what an unpack_hook returned: a tensor of "
                    f"shape {list(t.shape)} for a saved tensor of shape {list(saved.shape)}"
                    ) from e
        raise
    finally:
        fn._unpacked = None
    return [gi if gi is None else valid_gradient(name, i, gi, *fn.in_avals[i])
            for i, gi in enumerate(grads)]


def _call_rule_arrays(fn, g):
    """A Function's backward on an array cotangent, returning arrays (or None): array
    rules (and composites' inner backward) run on it directly, any other rule on a
    Tensor wrapping it."""
    inner = fn._inner
    rule = vjp_rule(fn.prim.name) if inner is None else None
    if rule is not None and saved_hooks.used and fn.has_packed():
        rule = None         # unpack hooks: the Tensor path checks what they return
    if rule in ARRAY_RULES:
        grads = rule(fn, g)
    elif inner is not None and getattr(inner, "takes_arrays", False):
        grads = inner(fn, g)
    else:
        grads = _apply_rule(fn, _as_tensor(g))
    return [gi if gi is None or type(gi) is np.ndarray else gi._data for gi in grads]


def vjp_arrays(out, wrt, g):
    """The cotangents (arrays, or None where unused) of tensors `wrt` given the array
    cotangent `g` of `out`, through the recorded graph between them, which is kept
    (retain_graph): the backward of a named composite when no backward graph is built."""
    if not out.requires_grad:       # (its value does not depend differentiably on wrt)
        return [None] * len(wrt)
    root = _root_edge(out)
    edges = [_root_edge(t) for t in wrt]    # held while running: their ids are the keys
    keys = [_edge_key(e) for e in edges]
    capture = {k: None for k in keys}
    got = _run([root], [g], retain_graph=True, create_graph=False, capture=capture,
               accumulate=False, arrays=True)
    grads = []
    for t, k in zip(wrt, keys):
        gi = got.get(k)
        if gi is not None and gi.dtype != t._dtype.np:
            gi = gi.astype(t._dtype.np)
        grads.append(gi)
    return grads


def _as_tensor(g):
    """An array cotangent as a Tensor (no copy)."""
    return dispatch.Tensor._from_array(g, dtypes.from_numpy_dtype(g.dtype))


def retain(t, g):
    """retain_grad's accumulation of gradient g into non-leaf t's ``.grad``."""
    t._grad = _fresh(g) if t._grad is None else _add_grads(t._grad, g, False)


def _fresh(g):
    """A new, detached gradient tensor of g's value that nothing else can alias."""
    t = g.detach()
    if t._data is not None:
        t._data = np.array(t._data, copy=True, order="C")   # a C-ordered .grad, as the
        t._vc = [0]                                          # parameter's (PyTorch's layout)
    return t


def _take(g):
    """Like _fresh, but steals g's buffer when nothing else can reach it (as PyTorch
    does): g is referenced only by the engine's locals (here, the caller's and
    _run's) and its array only by g, owns its memory and is writeable."""
    data = g._data
    if (data is not None and g.grad_fn is None and sys.getrefcount(g) <= 4
            and sys.getrefcount(data) == 2 and data.base is None and data.flags.writeable
            and data.flags.c_contiguous):
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
        tracer.backup_grad(leaf, True)    # symgrad.compile restores it after tracing
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


def _accumulate_leaf_array(leaf, g, create_graph=False):
    """_accumulate_leaf for an array cotangent (eager, no graph of the backward)."""
    dt = leaf._dtype.np
    if g.dtype != dt:
        g = g.astype(dt)
    old = leaf._grad
    if old is None:
        # steal g's buffer when nothing else can reach it (referenced only by _run's
        # local, this frame's argument and getrefcount's), as PyTorch steals it
        if (sys.getrefcount(g) <= 3 and g.base is None and g.flags.writeable
                and g.flags.owndata and g.flags.c_contiguous):
            leaf._grad = dispatch.Tensor._from_array(g, leaf._dtype)
        else:          # a C-ordered copy: .grad has the parameter's layout, as in PyTorch
            leaf._grad = dispatch.Tensor._from_array(np.array(g, copy=True, order="C"),
                                                     leaf._dtype)
    elif old.requires_grad or old._data is None:
        leaf._grad = lax.add(old, _as_tensor(g))
    else:
        np.add(old._data, g, out=old._data, casting="unsafe")
        old._vc[0] += 1


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """``symgrad.autograd.backward``: accumulate gradients of `tensors` into leaves."""
    tensors = _as_tuple(tensors)
    grad_tensors = _as_tuple(grad_tensors)
    if retain_graph is None:
        retain_graph = create_graph
    if create_graph and not _WARNED:
        _WARNED.append(True)           # once per process, as PyTorch's TORCH_WARN_ONCE
        warnings.warn(_CREATE_GRAPH_WARNING, UserWarning, stacklevel=3)
    arrays = _array_mode(tensors, grad_tensors, create_graph)
    seeds = _seeds(tensors, grad_tensors, arrays)
    roots = [_root_edge(t) for t in tensors]
    if inputs is not None:
        inputs = _as_tuple(inputs)
        for t in inputs:            # a non-leaf input gets .grad as PyTorch gives it one
            if t.grad_fn is not None:
                hooks.retain_grad(t)
        edges = [_root_edge(t) for t in inputs]     # held while running (ids are keys)
        capture = {_edge_key(e): t for e, t in zip(edges, inputs)}
        _run(roots, seeds, retain_graph=retain_graph, create_graph=create_graph,
             capture=capture, accumulate=True, arrays=arrays)
        return
    _run(roots, seeds, retain_graph=retain_graph, create_graph=create_graph, arrays=arrays)


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
    arrays = _array_mode(outputs, grad_outputs, create_graph)
    seeds = _seeds(outputs, grad_outputs, arrays)
    roots = [_root_edge(t) for t in outputs]
    edges = [_root_edge(t) for t in inputs_t]   # held while running: their ids are the keys
    keys = [_edge_key(e) for e in edges]
    capture = {k: None for k in keys}
    got = _run(roots, seeds, retain_graph=retain_graph, create_graph=create_graph,
               capture=capture, accumulate=False, arrays=arrays)
    if arrays:
        got = {k: _as_tensor(g) for k, g in got.items()}
    result = []
    for i, (t, k) in enumerate(zip(inputs_t, keys)):
        g = got.get(k)
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


def zero_grads(params, set_to_none: bool = True) -> None:
    """``zero_grad`` of modules and optimizers: each ``.grad`` set to None, or (with
    ``set_to_none=False``) detached and zeroed in place, as PyTorch does."""
    tracer = dispatch._lifter[0]
    guard = None if set_to_none else getattr(tracer, "guard", None)
    for p in params:
        g = p._grad
        if guard is not None and p._data is not None:   # a compiled call zeroes .grad if
            guard("whether a .grad is None", lambda p=p: p._grad is None, g is None)  # any
        if tracer is not None and p._data is not None:
            tracer.backup_grad(p)         # symgrad.compile: the call sets .grad, not the trace
        if g is None:
            continue
        if set_to_none:
            p._grad = None
            continue
        if g.grad_fn is not None:
            g = g.detach()
            p._grad = g
        g.requires_grad_(False)
        if g._data is not None and tracer is not None and hasattr(tracer, "write"):
            zeros = dispatch.traced(PRIMITIVES["full"], shape=tuple(g.shape), value=0,
                                    dtype=g.dtype)
            tracer.write(g, zeros._node)  # the compiled call zeroes it
        elif g._data is not None:
            g._data[...] = 0
            g._vc[0] += 1
        else:
            p._grad = lax.zeros(g.shape, g.dtype)
