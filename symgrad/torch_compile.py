"""``symgrad.compile`` as PyTorch users call it: ``torch.compile``'s signature on top of
:func:`symgrad.compiler.api.compile` (JAX-style functions keep that one: ``symgrad.jit``).

A Module becomes an :class:`~symgrad.nn.modules.optimized.OptimizedModule`; torch's
keywords are accepted: ``backend="inductor"`` (or ``"eager"``, ``"aot_eager"``) is the
default backend (symgrad's own are ``"llvm"`` and ``"numpy"``), ``mode`` (checked against
PyTorch's list) and ``options`` change nothing -- there is one way to compile here,
``fullgraph=True`` makes a function that cannot be compiled whole raise (by default it
runs uncompiled for that signature and the reason is logged once, as torch.compile's
graph breaks: :mod:`symgrad.compiler.breaks`), ``dynamic=False`` turns automatic dynamic
shapes off for this function (``True``/``None``: sizes that change become runtime sizes
from the second size on), ``disable=True`` returns the function itself.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

from .compiler import api

if TYPE_CHECKING:
    from .types import TargetSpec

__all__ = ["compile"]

_MODES = ("default", "lite", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune")
_TORCH_BACKENDS = {"inductor": None, "eager": None, "aot_eager": None}   # (one compiler here)


def compile(model: Callable[..., Any] | None = None, static_argnums: int | Sequence[int] = (),
            backend: str | None = None, *, target: TargetSpec | None = None,
            fullgraph: bool = False, dynamic: bool | None = None, mode: str | None = None,
            options: dict | None = None, disable: bool = False) -> Any:
    """Compile ``model`` (a function or a Module): trace once per input signature,
    optimise, run natively, cache. Usable as a decorator. ``static_argnums``, ``backend``
    and ``target`` as :func:`symgrad.compiler.api.compile`; torch.compile's keywords as
    the module docstring says.

    >>> import symgrad as torch
    >>> model = torch.compile(torch.nn.Linear(3, 1))
    >>> type(model).__name__, list(model.state_dict())
    ('OptimizedModule', ['_orig_mod.weight', '_orig_mod.bias'])
    """
    if mode is not None and options is not None:
        raise RuntimeError("Either mode or options can be specified, but both can't be "
                           "specified at the same time.")
    if mode is not None and mode not in _MODES:
        raise RuntimeError(f"Unrecognized mode={mode}, should be one of: {', '.join(_MODES)}")
    if callable(backend):
        raise TypeError("symgrad.compile: a custom torch.compile backend (a callable) cannot "
                        "be used; backends are 'llvm' (default, alias 'inductor') and 'numpy'")
    backend = _TORCH_BACKENDS.get(backend, backend)

    def build(fn):
        if disable:
            return fn
        # late: nn loads on first use (``import symgrad`` stays cheap)
        from .nn.modules.module import Module
        from .nn.modules.optimized import OptimizedModule
        compiled = api.compile(fn, static_argnums, backend, target=target)
        compiled.graph_breaks = True      # (torch.compile's semantics: see compiler.breaks)
        compiled.fullgraph = fullgraph
        if dynamic is False:
            compiled.dynamic_shapes = False
        if isinstance(fn, Module):
            return OptimizedModule(fn, compiled)
        return compiled
    return build if model is None else build(model)
