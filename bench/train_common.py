"""What the training workloads of ``python -m bench train`` share: the training step as a
PyTorch user writes it, and the PyTorch-style systems that run it (symgrad eager under
``import symgrad as torch``, the same step under ``symgrad.compile``, the eager step over
``model = symgrad.compile(model)`` as PyTorch 2 tutorials write it, torch eager on one
thread or all)."""
from __future__ import annotations

from typing import Callable

__all__ = ["torch_step", "torch_style_systems"]


def torch_step(model, opt, loss_fn, x, y) -> Callable[[], object]:
    """``zero_grad``, forward, loss, ``backward``, ``step``: one call per training step."""
    def step():
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def torch_style_systems(torch_like: Callable) -> dict[str, Callable]:
    """The systems running ``torch_like(T, wrap)`` (a step over the module ``T``, the
    model passed through ``wrap``)."""
    def symgrad_eager():
        import symgrad
        return torch_like(symgrad)

    def symgrad_compiled():          # the same step under symgrad.compile: one native call
        import symgrad
        return symgrad.compile(torch_like(symgrad))

    def symgrad_compiled_model():    # model = torch.compile(model); eager backward and step
        import symgrad
        return torch_like(symgrad, symgrad.compile)

    def torch_eager(threads: int | None):
        def make():
            import torch
            if threads is not None:
                torch.set_num_threads(threads)
            return torch_like(torch)
        return make
    return {"symgrad-eager": symgrad_eager, "symgrad-compiled": symgrad_compiled,
            "symgrad-compile-model": symgrad_compiled_model,
            "torch-eager-1t": torch_eager(1),
            "torch-eager-all": torch_eager(None)}
