"""Outputs of ``symgrad.compile`` that join eager autograd, as torch.compile's do.

A compiled function called while grad mode is on, with tensors that require grad -- its
arguments, or tensors it closes over such as a module's parameters -- returns outputs
whose ``grad_fn`` is a ``CompiledFunctionBackward`` node (PyTorch's name), listing those
tensors in ``next_functions``: ``model = symgrad.compile(model)`` followed by
``loss.backward()`` and ``optimizer.step()`` trains as the eager model does.

In grad mode such a call runs a forward program that also returns the values its
backward needs, and the node's backward runs the matching backward program (both
compiled once per cache entry: :mod:`symgrad.autograd.compiled_split`). A function that
cannot be split is recomputed instead: the backward program is then the symbolic VJP of
the whole call, reading the random numbers the call drew
(:func:`symgrad.compiler.trace.replaying`) and leaving out its state updates (refused,
with a clear error, when its outputs read what it updated). With ``create_graph=True``
the backward is recorded eagerly, so higher derivatives go through it. The tensors a
backward needs are saved with their versions: one modified in place between the call and
``backward()`` raises PyTorch's error.

A function that runs ``backward()`` itself (a compiled training step) returns plain
outputs.
"""
from __future__ import annotations

import numpy as np

from . import grad_mode
from .custom_function import Function
from .nodes import SavedTensor
from .engine import grad as autograd_grad, without_leaf_hooks
from ..compiler.dispatcher import Compiled
from ..compiler.trace import replaying
from .compiled_split import NotSplit, Split, Unsupported
from ..functions.creation import zeros_like
from ..graph import pytree
from ..tensor import Tensor

__all__ = ["Bridge", "CompiledFunction"]


class CompiledFunction(Function):
    """What compiled outputs hang on: ``grad_fn`` is ``CompiledFunctionBackward``."""

    @staticmethod
    def forward(ctx, call, *inputs):
        ctx.call = call
        ctx.inputs = inputs
        checked = call.checked
        ctx.n_checked, ctx.n_reads = len(checked), len(call.reads)
        # the inputs the backward reads, the closed-over tensors it reads, the residuals:
        # version-checked, and freed after a backward without retain_graph (a residual
        # may be large). Every input, with its version, for a create_graph backward (it
        # runs the function again, reading them all: checked then)
        ctx.all_inputs = [SavedTensor(t) for t in inputs]
        ctx.save_for_backward(*checked, *call.reads, *(call.residuals or ()))
        call.residuals = () if call.residuals is not None else None
        if call.split is not None:
            ctx.mark_non_differentiable(*(o for o, d in zip(call.outputs,
                                                           call.facts.differentiable)
                                          if not d))
        return tuple(call.outputs)

    @staticmethod
    def backward(ctx, *grads):
        saved = ctx.saved_tensors          # (PyTorch's error if one changed in place)
        if grad_mode.is_grad_enabled():
            for s in ctx.all_inputs:
                s.unpack(ctx)
        return (None,) + ctx.call.bridge.backward(ctx.call, ctx.inputs, grads,
                                                  saved[ctx.n_checked + ctx.n_reads:])


# a call in which an argument is updated in place with a value requiring grad (x.mul_(y)):
# the argument must gain the autograd history of the update, which neither program gives
# it, so such calls run the function uncompiled (torch.compile's graph break)
_EAGER = "eager"


class _Call:
    __slots__ = ("bridge", "leaves", "outputs", "drawn", "residuals", "split", "reads",
                 "checked", "facts")

    def __init__(self, bridge, leaves, outputs, reads, checked, drawn=(), residuals=None,
                 split=None, facts=None):
        self.bridge, self.leaves, self.outputs = bridge, leaves, outputs
        self.drawn, self.residuals, self.split = drawn, residuals, split
        self.reads, self.checked, self.facts = reads, checked, facts


def _merge(static_argnums, static, dyn) -> tuple:
    """The call's arguments from its static and dynamic parts (positions as given)."""
    args, s, d = [], iter(static), iter(dyn)
    for i in range(len(static) + len(dyn)):
        args.append(next(s) if i in static_argnums else next(d))
    return tuple(args)


def _pairs(outs, cotangents):
    """(output, cotangent) for the outputs that carry a gradient."""
    return [(o, c) for o, c in zip(outs, cotangents)
            if isinstance(o, Tensor) and o.requires_grad and o.is_floating_point()]


class Bridge:
    """One cache entry's link to autograd: the tensors its outputs are differentiable in
    (closed-over tensors that require grad, then every tensor argument), the split
    forward / backward programs (:mod:`~symgrad.autograd.compiled_split`) or, for a
    function that cannot be split, the compiled VJP that recomputes the forward."""

    __slots__ = ("fn", "static_argnums", "backend", "closure", "others", "structure",
                 "static", "runtime", "writes", "arg_writes", "out_structure", "_vjp",
                 "_split", "_unsplit", "effects")

    def __init__(self, compiled, closure, structure, static, effects, out_structure,
                 generic=False):
        # (what it needs of the compiled function, not the object: its cache holds this)
        self.fn, self.static_argnums = compiled.fn, compiled.static_argnums
        self.backend = compiled.backend
        self.closure = [t for t in closure if t._requires_grad]
        self.others = [t for t in closure if not t._requires_grad]   # (buffers, constants)
        self.structure, self.static = structure, static      # (of the arguments)
        # the values the call reads at run time (see Effects.scalars): (tensor, getter)
        self.runtime = list(effects.scalars) if effects is not None else []
        self.effects = effects
        self.writes = list(effects.writes) if effects is not None else []   # (state)
        self.arg_writes = list(effects.arg_writes) if effects is not None else []
        self.out_structure = out_structure
        self._vjp = None
        self._split = None             # the Split (every shape), or False (not splittable)
        if generic and any(hasattr(g, "at_shape") for _, g in self.runtime):
            # a shape-generic kernel draws at each call's size, the split programs at the
            # joint trace's: its calls recompute the forward with the call's draws instead
            self._split = False
        self._unsplit: set = set()     # argument shapes it cannot be split at (recomputed)

    def run(self, plain, leaves) -> tuple[list, object]:
        """The call's outputs (flat) recorded as one ``CompiledFunction`` application, and
        their structure; ``plain()`` runs the entry's own program."""
        inputs = self.closure + [v for v in leaves if isinstance(v, Tensor)]
        if not any(t.requires_grad for t in inputs):
            return plain()
        # one split serves every shape (its programs trace the joint function at theirs)
        shapes = tuple(tuple(np.shape(v)) for v in leaves)
        split = self._split
        if split is None:
            split = self._split = self._make_split(leaves)
        if split is _EAGER:       # an argument gains history from the call: run as written
            return pytree.flatten(self.fn(*self._args(leaves)))
        if split and shapes not in self._unsplit:
            try:
                facts = split.facts(shapes)
                outs, residuals = split.forward(leaves)
            except Unsupported:    # (at these shapes: run as written, as above)
                return pytree.flatten(self.fn(*self._args(leaves)))
            except (NotSplit, RuntimeError, TypeError, ValueError, IndexError):
                if shapes in split.proven:
                    if self.writes or self.arg_writes:
                        # the forward program stores its state only when it succeeds: run
                        # as written, leaving the updates made before the failing operation
                        # and raising its error, as PyTorch does (review2 #9)
                        return pytree.flatten(self.fn(*self._args(leaves)))
                    raise
                self._unsplit.add(shapes)      # (cannot be split after all: recompute)
                return self.run(plain, leaves)
            checked = [v for i, v in enumerate(leaves)
                       if i in facts.args_read and isinstance(v, Tensor)]
            call = _Call(self, leaves, outs, facts.reads, checked, residuals=residuals,
                         split=split, facts=facts)
            structure = self.out_structure
        else:
            outs, structure = plain()
            drawn = self.effects.drawn_now if self.runtime else {}   # (a generic kernel's)
            call = _Call(self, leaves, outs, self.others, inputs,  # (recomputed: reads all)
                         tuple(np.array(drawn.get(id(t), t._data), copy=True)
                               for t, _ in self.runtime))
        return list(CompiledFunction.apply(call, *inputs)), structure

    def _make_split(self, leaves):
        try:
            return Split(self.fn, self._args, self.closure, self.runtime, leaves, self.backend)
        except Unsupported:
            return _EAGER
        except (NotSplit, RuntimeError, TypeError, ValueError, KeyError):
            return False

    def _args(self, leaves) -> tuple:
        return _merge(self.static_argnums, self.static,
                      pytree.unflatten(self.structure, list(leaves)))

    def backward(self, call, inputs, grads, residuals=()) -> tuple:
        cts = tuple(g if g is not None else np.zeros(o.shape, o._dtype.np)
                    for g, o in zip(grads, call.outputs))
        if grad_mode.is_grad_enabled():      # create_graph: record the backward eagerly
            if self.arg_writes:
                raise RuntimeError(
                    "symgrad.compile: create_graph=True through a compiled function that "
                    "updates its arguments in place is not supported: call it uncompiled "
                    "to differentiate its gradient")
            if self.runtime:
                raise RuntimeError(
                    "symgrad.compile: create_graph=True through a compiled function that "
                    "reads values at run time (dropout, randn) is not supported: call it "
                    "uncompiled to differentiate its gradient")
            out = self._eager_again(call.leaves)
            pairs = _pairs(pytree.flatten(out)[0], cts)
            wrt = [t for t in inputs if t.requires_grad]
            with without_leaf_hooks():    # (the engine runs them when this returns)
                got = iter(autograd_grad([o for o, _ in pairs], wrt, [c for _, c in pairs],
                                         create_graph=True, allow_unused=True,
                                         materialize_grads=True) if pairs else
                           [None] * len(wrt))
        elif call.split is not None:
            got = iter(None if unused else g for g, unused in zip(
                call.split.backward(call.leaves, cts, tuple(residuals)), call.facts.unused))
            call.split.proven.add(tuple(tuple(np.shape(v)) for v in call.leaves))
        else:
            got = iter(self._compiled_vjp()(*call.leaves, call.drawn, cts))
        return tuple(next(got) if t.requires_grad else None for t in inputs)

    def _eager_again(self, leaves):
        """The function run eagerly again (recording, for create_graph), its in-place
        updates of state undone: the call made them once (BatchNorm's running
        statistics are not updated twice)."""
        kept = [(t, np.array(t._data, copy=True), t._vc[0]) for t in self.writes]
        try:
            return self.fn(*self._args(leaves))
        finally:
            for t, data, version in kept:
                np.copyto(t._data, data)
                t._vc[0] = version

    def _compiled_vjp(self):
        if self._vjp is None:
            fn, closure = self.fn, self.closure
            nums, static, structure = self.static_argnums, self.static, self.structure

            def args_of(leaves):        # (not self._args: no cycle through this bridge)
                return _merge(nums, static, pytree.unflatten(structure, list(leaves)))

            def backward(*a):
                leaves, drawn, cts = a[:-2], a[-2], a[-1]
                wrt = closure + [v for v in leaves if isinstance(v, Tensor) and v.requires_grad]
                with grad_mode.enable_grad(), replaying(drawn):
                    out = fn(*args_of(leaves))
                pairs = _pairs(pytree.flatten(out)[0], cts)
                if not pairs:
                    return tuple(zeros_like(w) for w in wrt)
                with without_leaf_hooks():    # (the eager engine runs them: once)
                    return tuple(autograd_grad([o for o, _ in pairs], wrt,
                                               [c for _, c in pairs], allow_unused=True,
                                               materialize_grads=True))
            backward.__name__ = f"{getattr(fn, '__name__', type(fn).__name__)}_backward"
            backward.__qualname__ = getattr(fn, "__qualname__", type(fn).__name__)
            vjp = Compiled(backward, (), self.backend)
            vjp.bridged = False                # (its own outputs need no node)
            vjp.performs_writes = False        # (the call made them)
            self._vjp = vjp
        return self._vjp
