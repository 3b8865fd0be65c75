"""Named composite operations: a function built from primitives that is recorded as ONE
backward Function with PyTorch's name (``SoftmaxBackward0``, ``MseLossBackward0``, ...).

The forward runs the primitives on detached stand-ins of the inputs; backward runs the
engine through that inner graph. For ``create_graph=True`` the forward is re-run on the
real inputs so second derivatives see the true dependencies. In traced mode the
primitives are simply inlined (names do not matter to the compiler).
"""
from __future__ import annotations

import numpy as np

from ..autograd import engine, grad_mode, saved_hooks
from ..autograd.anomaly_mode import _state as _anomaly
from ..autograd.grad_mode import _state as _grad_state
from ..autograd.nodes import FREED_MESSAGE, SavedTensor, accumulator, new_function, save_order
from ..dispatch import _lifter, bind
from ..graph.fpstate import enter as fp_enter, leave as fp_leave
from ..graph.primitives import PRIMITIVES as P
from ..tensor import Tensor

__all__ = ["named", "record_kernel", "kernel_ok"]


def named(name: str, fn, *inputs, saves: tuple = (), saves_output: bool = False,
          kernel=None, keeps: tuple = ()):
    """Apply `fn(*inputs)` (primitives only) recorded as a single Function `name`.

    `saves` (input positions) and `saves_output` say what PyTorch's backward for `name`
    saves: those tensors are version-checked when the backward runs (an in-place update
    in between raises PyTorch's error) and read back as ``grad_fn._saved_self`` etc.
    `keeps`: tensors `fn` reads that are not inputs (the indices max(dim) returns), saved
    after the inputs and version-checked the same way.
    `kernel` (a :class:`~symgrad.functions.kernels.Kernel`) computes the same function on
    eager arrays in one pass, with a closed-form backward (see there)."""
    if kernel is not None and kernel_ok():
        out = _run_kernel(name, kernel, fn, inputs, saves, saves_output, keeps)
        if out is not None:
            return out
    needs = tuple(isinstance(x, Tensor) and x.requires_grad for x in inputs)
    # traced: an input is a node, or a tracer is active (it lifts a closed-over eager
    # tensor, e.g. a module's parameter, when a primitive reads it: `fn` must read the
    # real tensor, never a detached stand-in, or its gradient goes to the stand-in)
    traced = _lifter[0] is not None or any(isinstance(x, Tensor) and x._node is not None
                                           for x in inputs)
    if traced or not any(needs) or not grad_mode.is_grad_enabled():
        return fn(*inputs)
    stand_ins = tuple(x.detach().requires_grad_() if n else x for x, n in zip(inputs, needs))
    if saved_hooks.used:                # only what the named node saves meets the hooks
        with saved_hooks.paused():
            inner_out = fn(*stand_ins)
    else:
        inner_out = fn(*stand_ins)
    out = inner_out.detach()
    nexts = tuple(((x.grad_fn, x._output_nr) if x.grad_fn is not None else (accumulator(x), 0))
                  if n else (None, 0) for x, n in zip(inputs, needs))
    in_avals = tuple((x.shape, x.dtype) if isinstance(x, Tensor) else ((), None) for x in inputs)
    f = new_function(name, None, (), in_avals, (out.shape, out.dtype), nexts, needs,
                     _save(name, inputs, saves, keeps), None)
    f._inner = _Inner(fn, inputs, stand_ins, inner_out, needs)
    out.grad_fn = f
    if saves_output:
        f._saved_out = SavedTensor(out, is_output=True)
    return out


def kernel_ok() -> bool:
    """Whether an eager kernel may run now: nothing is traced, anomaly mode is off and
    no saved-tensor hooks are in force (those take the primitives' path)."""
    return _lifter[0] is None and not _anomaly["enabled"] and \
        not (saved_hooks.used and saved_hooks.active())


def _save(name, inputs, saves, keeps) -> tuple:
    """The saved tensors of a named composite: inputs at positions `saves`, then `keeps`."""
    if not (saves or keeps):
        return ()
    saved = [None] * len(inputs)
    present = [i for i in saves if i < len(inputs) and isinstance(inputs[i], Tensor)]
    # the order of saving matters only to pack hooks
    for i in save_order(name, present) if saved_hooks.used else present:
        saved[i] = SavedTensor(inputs[i])
    return tuple(saved) + tuple(SavedTensor(k) for k in keeps)


def _run_kernel(name, kernel, fn, inputs, saves, saves_output, keeps):
    """`named` on eager inputs through `kernel` (None when an input is not an eager
    floating-point tensor: the generic path then runs)."""
    dt = None
    for x in inputs:
        if not isinstance(x, Tensor) or x._data is None or x._dtype.category != "float":
            return None     # (integer inputs: the primitives' promotions decide the dtype)
        if dt is None:
            dt = x._dtype
    token = fp_enter()          # exp(inf - inf): no warnings, as in PyTorch
    try:
        res = kernel.forward(*[x._data for x in inputs])
    finally:
        fp_leave(token)
    if type(res) is not np.ndarray or res.dtype != dt.np:
        res = np.asarray(res, dtype=dt.np)
    out = Tensor._from_array(res, dt)
    if _grad_state.enabled:
        record_kernel(name, kernel, fn, inputs, out, saves, saves_output, keeps)
    return out


def record_kernel(name, kernel, fn, inputs, out, saves=(), saves_output=False, keeps=()):
    """Record eager `out` = `fn(*inputs)` (computed by `kernel`) as the one Function
    `name`, when some input requires grad (the caller checked grad mode, that every
    input is an eager floating-point tensor and that no trace, saved-tensor hooks or
    anomaly mode are active, as `named` does)."""
    needs, nexts = [], []
    req = False
    for x in inputs:
        gf = x.grad_fn
        if gf is not None:
            needs.append(True)
            nexts.append((gf, x._output_nr))
            req = True
        elif x._requires_grad:
            needs.append(True)
            acc = x._acc            # (a live AccumulateGrad: no call to make one)
            acc = acc() if acc is not None else None
            nexts.append((acc if acc is not None else accumulator(x), 0))
            req = True
        else:
            needs.append(False)
            nexts.append(_NO_EDGE)
    if not req:
        return
    needs = tuple(needs)
    f = new_function(name, None, (), tuple([(x._data.shape, x._dtype) for x in inputs]),
                     (out._data.shape, out._dtype), tuple(nexts), needs,
                     _save(name, inputs, saves, keeps) if saves or keeps else (), None)
    f._inner = _KernelInner(kernel, fn, inputs, needs)
    out.grad_fn = f
    if saves_output:
        f._saved_out = SavedTensor(out, is_output=True)


_NO_EDGE = (None, 0)


def _saved_arrays(owner):
    """The saved inputs' and output's arrays of `owner`, version-checked."""
    ins = tuple(None if s is None else s.unpack_data(owner) for s in owner._saved) \
        if owner._saved else ()
    out = owner._saved_out
    return ins, (None if out is None else out.unpack_data(owner))


def _graph_backward(owner, fn, inputs, needs, g, create_graph=True):
    """The backward of a named composite through its primitives: `fn` re-run on the
    real inputs through one identity node each, so that each input gets its own partial
    derivative (an input computed from another one must not pass its gradient on).
    `create_graph`: the backward is recorded (else: a traced cotangent, vmap's)."""
    with grad_mode.enable_grad():
        alias = [bind(P["reshape"], x, shape=tuple(x.shape)) if n else x
                 for x, n in zip(inputs, needs)]
        out = fn(*alias)
    if not out.requires_grad:       # no differentiable path from the inputs: no gradient
        return tuple(None for _ in needs)
    grads = engine.grad([out], [a for a, n in zip(alias, needs) if n], [g],
                        retain_graph=True, create_graph=create_graph, allow_unused=True)
    it = iter(grads)
    return tuple(next(it) if n else None for n in needs)


class _KernelInner:
    """The backward of a named composite run by its eager kernel: the kernel's
    closed-form backward on arrays (a Tensor cotangent without grad mode: wrapped back
    into Tensors); with grad mode on (create_graph), the composite's primitives."""

    __slots__ = ("kernel", "fn", "inputs", "needs")
    takes_arrays = True

    def __init__(self, kernel, fn, inputs, needs):
        self.kernel, self.fn, self.inputs, self.needs = kernel, fn, inputs, needs

    def __call__(self, owner, g):
        if self.inputs is None:
            raise RuntimeError(FREED_MESSAGE)
        ins, out = _saved_arrays(owner)
        if type(g) is np.ndarray:
            return self._arrays(g, ins, out)
        recorded = grad_mode.is_grad_enabled()
        if recorded or g._data is None:
            return _graph_backward(owner, self.fn, self.inputs, self.needs, g,
                                   create_graph=recorded)
        grads = self._arrays(g._data, ins, out)
        return tuple(None if gi is None else Tensor._from_array(gi, x._dtype)
                     for gi, x in zip(grads, self.inputs))

    def _arrays(self, g, ins, out):
        token = fp_enter()
        try:
            kernel = self.kernel
            grads = (kernel.backward(g, ins, out, self.needs) if kernel.takes_needs
                     else kernel.backward(g, ins, out))
        finally:
            fp_leave(token)
        res = []
        for gi, x, n in zip(grads, self.inputs, self.needs):
            if not n or gi is None:
                res.append(None)
                continue
            if type(gi) is not np.ndarray or gi.dtype != x._dtype.np:
                gi = np.asarray(gi, dtype=x._dtype.np)
            res.append(gi)
        return tuple(res)

    def release(self):
        self.inputs = self.kernel = None      # (what the kernel kept goes too)


class _Inner:
    """The backward of a named composite (what the engine calls as its VJP rule). It
    takes a Tensor cotangent, or an array one when no backward graph is built."""

    __slots__ = ("fn", "inputs", "stand_ins", "out", "needs")
    takes_arrays = True

    def __init__(self, fn, inputs, stand_ins, out, needs):
        self.fn, self.inputs, self.stand_ins, self.out, self.needs = fn, inputs, stand_ins, out, needs

    def __call__(self, owner, g):
        if self.out is None:
            raise RuntimeError(FREED_MESSAGE)
        if owner.unpack_saved() is None:    # (hooks: unpacked once each, in order)
            for s in owner._saved:          # PyTorch's version check of saved tensors
                if s is not None:
                    s.unpack(owner)
            if owner._saved_out is not None:
                owner._saved_out.unpack(owner)
        wrt = [s for s, n in zip(self.stand_ins, self.needs) if n]
        if not self.out.requires_grad:      # no differentiable path from the inputs
            return tuple(None for _ in self.needs)
        if type(g) is np.ndarray:
            grads = engine.vjp_arrays(self.out, wrt, g)
        elif grad_mode.is_grad_enabled():     # create_graph: differentiate the real inputs
            return _graph_backward(owner, self.fn, self.inputs, self.needs, g)
        else:
            grads = engine.grad([self.out], wrt, [g], retain_graph=True, allow_unused=True)
        it = iter(grads)
        return tuple(next(it) if n else None for n in self.needs)

    def release(self):
        # (the inputs and the sub-graph's stand-ins are saved tensors too: torch frees them)
        self.out = self.inputs = self.stand_ins = self.fn = None
