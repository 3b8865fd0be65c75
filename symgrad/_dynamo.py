"""``torch._dynamo``'s one public call tutorials make: :func:`reset` (the same as
``symgrad.compiler.reset``: every compiled function traces again)."""
from .compiler import reset

__all__ = ["reset"]
