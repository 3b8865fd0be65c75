"""Whether ``symgrad.compile`` is tracing, and the active tracer: the one piece of global
state tracing shares with the eager core. ``symgrad.dispatch`` re-exports these names
(``dispatch.tracing()``, ``dispatch.set_lifter``, ``dispatch._lifter``); this module sits
below the Tensor so that the tape and hooks can ask without importing ``dispatch``."""
from __future__ import annotations

__all__ = ["set_lifter", "tracing", "GraphBreak", "ValueSized", "python_effect", "value_sized",
           "grad_access", "numpy_read"]

_lifter = [None]         # the active tracer's hook turning eager tensors into nodes


def set_lifter(fn):
    """Install the active tracer: ``fn(tensor) -> Node`` turns an eager tensor into a
    node, and ``fn.is_outer(tensor)`` says whether it existed before tracing began (such
    tensors become inputs of the traced program). Returns the previous one."""
    prev = _lifter[0]
    _lifter[0] = fn
    return prev


def tracing() -> bool:
    """Whether ``symgrad.compile`` is tracing (operations then build nodes, and tensors
    that existed before are the program's inputs)."""
    return _lifter[0] is not None


class GraphBreak(RuntimeError):
    """A ``symgrad.compile`` trace met a change of Python state the compiled program would
    not make again (or a traced value read in Python): the signature runs uncompiled, as
    torch.compile breaks its graph (with ``fullgraph=True`` this is the error). See
    :mod:`symgrad.compiler.breaks`."""


def python_effect(what: str) -> None:
    """Called *before* a change of Python state symgrad can see (a module attribute
    assigned, a scheduler stepped, a hook run): inside a ``symgrad.compile`` trace (a
    tracer whose ``breaks`` is set) the trace stops here -- the change is not made -- and
    the call runs uncompiled."""
    if getattr(_lifter[0], "breaks", False):
        raise GraphBreak(what)


def grad_access(t) -> None:
    """Called when a traced tensor's ``.grad`` is read, assigned or retained: the
    stand-in of a compiled function's argument has no ``.grad`` of its own -- the
    argument's lives
    outside the call, and what a call reads there depends on earlier calls (None, or
    the gradients accumulated so far) -- so the trace stops and the call runs as written
    (torch.compile breaks its graph at ``.grad`` of an input alike)."""
    if id(t) in getattr(_lifter[0], "arg_stand_ins", ()):
        raise GraphBreak("reads or assigns the .grad of an argument")


def numpy_read(arr):
    """A numpy array turned into a tensor (``torch.tensor(A)``, ``x * A``) while a
    compiled function is traced: when the function reaches ``arr`` by a path the trace
    follows (a global, a closure cell, an attribute), the traced tensor reading that
    path's array at each call (see :meth:`symgrad.compiler.trace.Tracer.numpy_input`),
    else None (the array is a constant of the program)."""
    hook = getattr(_lifter[0], "numpy_input", None)
    return None if hook is None else hook(arr)
class ValueSized(GraphBreak):
    """A ``symgrad.compile`` trace met a result whose size depends on traced values
    (``x[x > 0]``, ``nonzero``, ``unique``, ``bincount``): the program cannot be traced
    further and the signature runs uncompiled (torch.compile's graph break there)."""


def value_sized(what: str) -> None:
    """Called before refusing a value-sized result of ``what`` on a traced input: inside a
    ``symgrad.compile`` trace it raises :class:`ValueSized` (the call runs as written);
    elsewhere (gradient transforms, vmap) it returns and the caller raises its error."""
    if getattr(_lifter[0], "breaks", False):
        raise ValueSized(f"{what}'s result size depends on traced values")
