"""Registry of benchmarked systems, in table order (symgrad first, then peers).

Each module defines ``SYSTEMS``: instances of :class:`bench.systems.base.System`.
Modules are imported lazily-safe: they import their library only inside
``available()``/``build()``, so listing systems never fails.
"""

from __future__ import annotations

from bench.systems import (casadi_fn, jax_jit, numpy_hand, symgrad_compiled,
                           symgrad_eager, torch_compile, torch_eager)
from bench.systems.base import System, Unsupported

MODULES = [symgrad_eager, symgrad_compiled, numpy_hand, torch_eager, torch_compile,
           jax_jit, casadi_fn]


def all_systems() -> list[System]:
    """Every system adapter, symgrad first."""
    return [s for m in MODULES for s in m.SYSTEMS]


def select(systems: list[System], wanted: list[str]) -> list[System]:
    """Systems named in ``wanted`` (exact name or name prefix); all if empty."""
    if not wanted:
        return systems
    return [s for s in systems if any(s.name == w or s.name.startswith(w) for w in wanted)]


__all__ = ["System", "Unsupported", "all_systems", "select"]
