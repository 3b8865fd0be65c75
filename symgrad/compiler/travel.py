"""What a pickled compiled function carries, per compiled signature, and how a copy
takes it back (:meth:`symgrad.compiler.dispatcher.Compiled.__reduce__`).

Each signature travels as an :class:`Item`: its cache key, output layout, placeholder
inputs, the native code with what loading it needs (``codegen.backend.portable``) and
the optimised program.  A copy on a machine with the same target and versions loads the
code (a hybrid executable's numpy steps are scheduled from the program); on another
CPU it compiles the program -- no tracing either way.  The program is left out when its
constants (arrays the function closed over, already inside the native code) exceed
:data:`CARRIED_CONSTANT_BYTES` (another CPU then traces again), and so is a signature
whose parts do not pickle.
"""
from __future__ import annotations

import functools
import pickle
from typing import Callable, NamedTuple

import numpy as np

from ..graph.primitives import resolve
from .backends import get_backend
from .stages import Lowered, schedule_of

__all__ = ["Item", "CARRIED_CONSTANT_BYTES", "items_of", "adopt"]

CARRIED_CONSTANT_BYTES = 1 << 20


class Item(NamedTuple):
    key: tuple
    numpy_out: object
    aux: list                 # (shape, dtype) of each placeholder input
    out_structure: object
    payload: dict | None      # codegen.backend.portable(exe)
    program: object           # the optimised Program, or None


def _constant_bytes(program) -> int:
    return sum(n.attr("value").value.nbytes for n in program.nodes() if n.op == "const"
               and isinstance(n.attr("value").value, np.ndarray))


def _pickles(item: Item) -> bool:
    try:
        pickle.dumps(tuple(item))
    except Exception:           # static arguments or classes that do not pickle
        return False
    return True


def items_of(cache) -> list:
    """(entry, item) for each entry of a compiled function's cache that can travel:
    not one with effects (guards and state of this process), a shape-generic one, nor
    one whose program was never compiled (its calls joined autograd)."""
    backend = get_backend("llvm")
    out = []
    for key, entry in cache.items():
        if entry.effects is not None or entry.dynamic is not None or entry.exe is None:
            continue                 # (nor one whose own program never ran: not compiled)
        payload = backend.portable(entry.exe)
        needed = payload is None or entry.exe.interface.hybrid
        try:     # runs the stages once for an entry the disk cache answered
            program = entry.lowered.optimized
        except RuntimeError:         # an entry that came in a pickle without it
            program = None
        if program is not None and not needed and \
                _constant_bytes(program) > CARRIED_CONSTANT_BYTES:
            program = None           # the code holds them already: not twice
        item = Item(key, entry.numpy_out, [(a.shape, a.dtype) for a in entry.aux_avals],
                    entry.lowered.signature[2], payload, program)
        if item.program is None and needed:
            continue
        ok = _pickles(item)
        if not ok and item.program is not None and not needed:
            item = item._replace(program=None)       # the code alone, then
            ok = _pickles(item)
        if not ok:
            continue
        out.append((entry, tuple(item)))
    return out


def adopt(item: tuple, backend_name: str, target) -> tuple[Lowered, object] | None:
    """(lowered, executable) of a carried signature: its code if it loads here, else
    compiled from its program; None when neither is possible (the signature traces
    and compiles again when first called)."""
    item = Item(*item)
    if item.program is not None and not _known_ops(item.program):
        item = item._replace(program=None)      # (a primitive this process lacks)
    signature = (item.key[0], item.key[1], item.out_structure)
    if item.program is None:
        lowered = Lowered(_from_pickle, backend_name, signature=signature, target=target)
        plan: Callable | None = None
    else:
        lowered = Lowered.from_program(item.program, backend_name, signature,
                                       len(item.aux), target)
        plan = functools.partial(schedule_of, lowered)
    exe = get_backend("llvm").from_portable(item.payload, target, plan) \
        if item.payload else None
    if exe is not None and exe.interface.hybrid:
        try:
            exe.plan        # the program's schedule must describe the carried code
        except RuntimeError:
            exe = None
    if exe is None:
        if item.program is None:
            return None
        try:
            exe = lowered.compile()
        except Exception:   # noqa: BLE001 -- then as a signature never compiled
            return None
    return lowered, exe


def _known_ops(program) -> bool:
    """Whether every primitive the program applies exists in this process (derived
    partials such as ``tanh.d0`` are derived; a user's primitive must be defined)."""
    return all(n.op in ("input", "const") or resolve(n.op) is not None
               for n in program.nodes())


def _from_pickle():
    raise RuntimeError("this signature's native code came with the pickle, without its "
                       "program; call f.lower(*args) to trace and inspect it")
