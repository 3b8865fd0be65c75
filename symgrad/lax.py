"""``symgrad.lax``: JAX's control-flow names for code ported from JAX (``from symgrad
import lax``): ``scan``, ``fori_loop``, ``while_loop``, ``cond`` (JAX's argument order,
``cond(pred, true_fun, false_fun, *operands)``), ``switch`` and ``stop_gradient``."""
from __future__ import annotations

from .functions.branching import lax_cond as cond, switch
from .functions.control_flow import fori_loop, scan, while_loop
from .tensor import Tensor

__all__ = ["scan", "fori_loop", "while_loop", "cond", "switch", "stop_gradient"]


def stop_gradient(x: Tensor) -> Tensor:
    """``x`` with no gradient flowing through it (``x.detach()``)."""
    return x.detach()
