"""``OptimizedModule``: what ``symgrad.compile(module)`` returns, as torch.compile does.

It is a Module holding the original as ``_orig_mod`` -- so ``parameters()`` are the
original's, ``state_dict()`` keys read ``_orig_mod.weight``, ``train()``/``eval()``
reach it, and its repr is PyTorch's -- whose calls run the compiled module (a
:class:`~symgrad.compiler.dispatcher.Compiled`; its outputs join autograd, see
:mod:`symgrad.autograd.compiled_function`). Any other attribute is the original
module's, then the compiled function's (``cache_info()``, ``lower(...)``,
``last_miss_reason``).
"""
from __future__ import annotations

from typing import Any

from .module import Module

__all__ = ["OptimizedModule"]


class OptimizedModule(Module):
    def __init__(self, mod: Module, compiled) -> None:
        super().__init__()
        self._orig_mod = mod
        self.__dict__["_compiled"] = compiled

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.__dict__["_compiled"](*args, **kwargs)

    def __reduce_ex__(self, protocol):
        """Copied (``copy.deepcopy``, pickle) as the original module compiled again with
        the same options: the copy's calls run the copy's own parameters (an EMA or
        teacher model made by deepcopy), never a hidden duplicate."""
        c = self.__dict__["_compiled"]
        return (_recompiled, (self._modules["_orig_mod"], c.static_argnums, c.backend,
                              c.dynamic_shapes, self.training))

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            pass
        d = self.__dict__
        if "_modules" in d and "_orig_mod" in d["_modules"]:
            try:
                return getattr(d["_modules"]["_orig_mod"], name)
            except AttributeError:
                pass
            if "_compiled" in d and not name.startswith("__"):
                try:
                    return getattr(d["_compiled"], name)
                except AttributeError:
                    pass
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")


def _recompiled(mod, static_argnums, backend, dynamic_shapes, training):
    from ...compiler.api import compile as compile_fn    # late: the compiler is below nn
    compiled = compile_fn(mod, static_argnums, backend)
    if not dynamic_shapes:
        compiled.dynamic_shapes = False
    module = OptimizedModule(mod, compiled)
    module.training = training
    return module
