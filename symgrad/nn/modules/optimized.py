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
