"""Whether ``symgrad.compile`` is tracing, and the active tracer: the one piece of global
state tracing shares with the eager core. ``symgrad.dispatch`` re-exports these names
(``dispatch.tracing()``, ``dispatch.set_lifter``, ``dispatch._lifter``); this module sits
below the Tensor so that the tape and hooks can ask without importing ``dispatch``."""
from __future__ import annotations

__all__ = ["set_lifter", "tracing"]

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
