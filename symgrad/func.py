"""``symgrad.func``: functional use of modules, as ``torch.func``.

``functional_call(module, params, args)`` runs ``module`` with some of its parameters and
buffers replaced by the given tensors (or arrays), leaving the module unchanged -- so a
module's loss becomes a function of a dict of parameters that ``symgrad.grad`` /
``symgrad.compile`` can differentiate and compile. ``grad``, ``grad_and_value``, ``vjp``,
``jvp``, ``jacrev``, ``jacfwd``, ``hessian`` and ``vmap`` are torch.func's, compiled
(:mod:`symgrad.compiler.torch_func`).

>>> import numpy as np, symgrad as torch
>>> model = torch.nn.Linear(2, 1)
>>> params = {k: v.detach().numpy() for k, v in model.named_parameters()}
>>> def loss(p, x):
...     return torch.func.functional_call(model, p, (x,)).pow(2).sum()
>>> grads = torch.grad(loss)(params, np.ones((3, 2), np.float32))
>>> sorted(grads), grads["weight"].shape
(['bias', 'weight'], (1, 2))
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from .functions.common import to_tensor
from .tensor import Tensor

from .compiler.vmap import mapped_function
from .compiler.torch_func import grad, grad_and_value, hessian, jacfwd, jacrev, jvp, vjp

__all__ = ["functional_call", "vmap", "grad", "grad_and_value", "vjp", "jvp", "jacrev",
           "jacfwd", "hessian"]


def vmap(func, in_dims=0, out_dims=0, randomness: str = "error", *, chunk_size=None):
    """``torch.func.vmap``: :func:`symgrad.vmap` under PyTorch's argument names
    (``in_dims`` / ``out_dims``; ``chunk_size`` is accepted and has no effect: the
    batched graph runs as one); ``randomness`` as torch's, default ``"error"``."""
    return mapped_function(func, in_dims, out_dims, randomness, "torch")


def _owner(module, name: str):
    path, _, leaf = name.rpartition(".")
    return (module.get_submodule(path) if path else module), leaf


def functional_call(module, parameter_and_buffer_dicts: Mapping[str, Any] | Sequence[Mapping],
                    args: Any = (), kwargs: Mapping[str, Any] | None = None, *,
                    tie_weights: bool = True, strict: bool = False):
    """``module(*args, **kwargs)`` with the named parameters / buffers replaced.

    ``tie_weights``: a parameter registered under several names is replaced everywhere
    it appears when one of its names is given. ``strict``: every parameter and buffer must
    be given, and nothing else (PyTorch's error texts)."""
    dicts = ([parameter_and_buffer_dicts] if isinstance(parameter_and_buffer_dicts, Mapping)
             else list(parameter_and_buffer_dicts))
    given: dict[str, Any] = {}
    for d in dicts:
        for k, v in d.items():
            if k in given:
                raise ValueError(f"{k} appeared in multiple dictionaries; behavior of "
                                 "functional call is ambiguous")
            given[k] = v
    names = dict(module.named_parameters(remove_duplicate=False))
    names.update(dict(module.named_buffers(remove_duplicate=False)))
    if strict:
        missing = [k for k in names if k not in given]
        unexpected = [k for k in given if k not in names]
        if missing or unexpected:
            parts = []
            if unexpected:
                parts.append("Unexpected key(s): " + ", ".join(repr(k) for k in unexpected)
                             + ".")
            if missing:
                parts.append("Missing key(s): " + ", ".join(repr(k) for k in missing) + ".")
            raise RuntimeError("Error(s) in reparametrizing for "
                               f"{type(module).__name__}:\n\t" + "\n\t".join(parts))
    if tie_weights:                          # every name of a tied tensor follows
        by_id: dict[int, list[str]] = {}
        for k, v in names.items():
            if v is not None:
                by_id.setdefault(id(v), []).append(k)
        for k in list(given):
            if k in names and names[k] is not None:
                for alias in by_id[id(names[k])]:
                    given.setdefault(alias, given[k])
    saved = []
    try:
        for name, value in given.items():
            owner, leaf = _owner(module, name)
            table = owner._parameters if leaf in owner._parameters else (
                owner._buffers if leaf in owner._buffers else None)
            if table is None:
                raise AttributeError(f"{type(module).__name__} has no parameter or buffer "
                                     f"{name!r}")
            saved.append((table, leaf, table[leaf]))
            table[leaf] = value if isinstance(value, Tensor) or value is None \
                else to_tensor(value)
        return module(*(args if isinstance(args, tuple) else (args,)), **(kwargs or {}))
    finally:
        for table, leaf, old in reversed(saved):
            table[leaf] = old
