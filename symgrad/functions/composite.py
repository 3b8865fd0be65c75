"""Named composite operations: a function built from primitives that is recorded as ONE
backward Function with PyTorch's name (``SoftmaxBackward0``, ``MseLossBackward0``, ...).

The forward runs the primitives on detached stand-ins of the inputs; backward runs the
engine through that inner graph. For ``create_graph=True`` the forward is re-run on the
real inputs so second derivatives see the true dependencies. In traced mode the
primitives are simply inlined (names do not matter to the compiler).
"""
from __future__ import annotations

from ..autograd import engine, grad_mode
from ..autograd.function import FREED_MESSAGE, accumulator, new_function
from ..tensor import Tensor

__all__ = ["named"]


def named(name: str, fn, *inputs):
    """Apply `fn(*inputs)` (primitives only) recorded as a single Function `name`."""
    needs = tuple(isinstance(x, Tensor) and x.requires_grad for x in inputs)
    traced = any(isinstance(x, Tensor) and x._node is not None for x in inputs)
    if traced or not any(needs) or not grad_mode.is_grad_enabled():
        return fn(*inputs)
    stand_ins = tuple(x.detach().requires_grad_() if n else x for x, n in zip(inputs, needs))
    inner_out = fn(*stand_ins)
    out = inner_out.detach()
    nexts = tuple(((x.grad_fn or accumulator(x)) if n else None, 0)
                  for x, n in zip(inputs, needs))
    in_avals = tuple((x.shape, x.dtype) if isinstance(x, Tensor) else ((), None) for x in inputs)
    f = new_function(name, None, (), in_avals, (out.shape, out.dtype), nexts, needs,
                     (), None)
    f._inner = _Inner(fn, inputs, stand_ins, inner_out, needs)
    out.grad_fn = f
    return out


class _Inner:
    """The backward of a named composite (what the engine calls as its VJP rule)."""

    __slots__ = ("fn", "inputs", "stand_ins", "out", "needs")

    def __init__(self, fn, inputs, stand_ins, out, needs):
        self.fn, self.inputs, self.stand_ins, self.out, self.needs = fn, inputs, stand_ins, out, needs

    def __call__(self, owner, g):
        if self.out is None:
            raise RuntimeError(FREED_MESSAGE)
        wrt = [s for s, n in zip(self.stand_ins, self.needs) if n]
        if grad_mode.is_grad_enabled():     # create_graph: differentiate the real inputs
            real = [x for x, n in zip(self.inputs, self.needs) if n]
            out = self.fn(*self.inputs)
            grads = engine.grad([out], real, [g], retain_graph=True, create_graph=True,
                                allow_unused=True)
        else:
            grads = engine.grad([self.out], wrt, [g], retain_graph=True, allow_unused=True)
        it = iter(grads)
        return tuple(next(it) if n else None for n in self.needs)

    def release(self):
        self.out = None
