"""When ``symgrad.compile`` runs a function as written instead of compiling it: the
function changed Python state while it was traced, or read a traced value in Python.

A compiled program replays a call's tensor work only; the Python code around it ran once,
while tracing. ``torch.compile`` re-runs (or graph-breaks around) every Python-level effect,
so code whose Python effects matter -- ``sched.step()``, ``self.num_updates += 1``, a module
forward hook, ``self.h = h.detach()``, ``if loss.item() > 1:`` -- is detected while tracing
(:func:`symgrad.tracing.python_effect`, called by the objects symgrad owns, and :class:`Snapshot`, taken
around a trace) and the signature then runs uncompiled, the way torch.compile breaks its
graph at function granularity; the reason is logged once at WARNING on ``symgrad.compile``.
With ``fullgraph=True`` it raises instead (torch.compile's ``fullgraph``).
"""
from __future__ import annotations

import builtins
import functools
import operator
import random as _random
import sys
import types
import warnings

import numpy as np

from ..tensor import Tensor
from ..tracing import python_effect
from .sources import _LIBRARIES

__all__ = ["Snapshot", "OutputEffects"]


_NONE = object()


def _traced(v) -> bool:
    return isinstance(v, Tensor) and v._data is None


class Snapshot:
    """What a trace may change in Python state that symgrad does not own, taken before
    the trace: Python's ``random`` and ``numpy.random``'s global streams; the globals and
    closure cells the traced function names (rebound: ``TOTAL = TOTAL + loss``,
    ``nonlocal n; n += 1``) and the lists / dicts / sets they hold (changed:
    ``history.append(loss)``, ``state['it'] += 1``, one level deep); a global of its module
    rebound to a traced tensor. :meth:`changed` (after the trace) restores them all and
    says what changed, or None. Code the function calls is not searched."""

    __slots__ = ("_random", "_np", "_globals", "_cells", "_containers")

    def __init__(self, fn):
        self._random = _random.getstate()
        self._np = np.random.get_state(legacy=False)
        code, g, cells = _code_of(fn)
        names = _names(code) if code is not None else ()
        self._globals = (g, dict(g), [k for k in names if k in g]) if g is not None else None
        self._cells = [(c, c.cell_contents) for c in cells if _filled(c)]
        held = [g[k] for k in self._globals[2]] if g is not None else []
        held += [v for _, v in self._cells]
        self._containers = [(c, _copy(c)) for c in {id(c): c for c in held
                                                      if type(c) in _COPIES}.values()]

    def changed(self) -> str | None:
        why = None
        if self._globals is not None:
            g, before, named = self._globals
            for k, v in list(g.items()):
                if _traced(v) or (k in named and before.get(k, _NONE) is not v):
                    why = why or (f"global {k!r} rebound to a traced tensor" if _traced(v)
                                  else f"global {k!r} assigned")
                    if k in before:
                        g[k] = before[k]
                    else:
                        del g[k]
            for k in named:
                if k not in g and k in before:
                    why = why or f"global {k!r} deleted"
                    g[k] = before[k]
        for cell, value in self._cells:
            if not _filled(cell) or cell.cell_contents is not value:
                why = why or "a variable of an enclosing function assigned"
                cell.cell_contents = value
        for c, copy in self._containers:
            if not _same_items(c, copy):
                why = why or f"a {type(c).__name__} the function reads changed"
                _restore(c, copy)
        if _random.getstate() != self._random:
            _random.setstate(self._random)
            why = why or "Python's random module drawn"
        if not _same_np_state(np.random.get_state(legacy=False), self._np):
            np.random.set_state(self._np)
            why = why or "numpy.random drawn"
        return why


_COPIES = (list, dict, set)


def _copy(c):
    return list(c.items()) if type(c) is dict else list(c)


def _same_items(c, copy) -> bool:
    now = list(c.items()) if type(c) is dict else list(c)
    if len(now) != len(copy):
        return False
    if type(c) is dict:
        return all(a[0] == b[0] and a[1] is b[1] for a, b in zip(now, copy))
    if type(c) is set:
        return set(map(id, now)) == set(map(id, copy))
    return all(map(operator.is_, now, copy))


def _restore(c, copy) -> None:
    if type(c) is dict:
        c.clear()
        c.update(copy)
    elif type(c) is set:
        c.clear()
        c.update(copy)
    else:
        c[:] = copy


def _filled(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def _code_of(fn):
    """(code, globals, closure cells) of the user's function under wrappers, bound
    methods, partials, or a module's ``forward``."""
    while True:
        inner = getattr(fn, "__wrapped__", None) or getattr(fn, "__func__", None) \
            or (fn.func if isinstance(fn, functools.partial) else None)
        if inner is None:
            break
        fn = inner
    if not isinstance(fn, types.FunctionType):
        fn = getattr(type(fn), "forward", None)
        fn = getattr(fn, "__func__", fn)
        if not isinstance(fn, types.FunctionType):
            return None, None, ()
    return fn.__code__, fn.__globals__, fn.__closure__ or ()


def _names(code) -> set:
    names, stack = set(), [code]
    while stack:
        c = stack.pop()
        names.update(c.co_names)
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return names


def _same_np_state(a: dict, b: dict) -> bool:
    sa, sb = a["state"], b["state"]
    return (sa["pos"] == sb["pos"] and np.array_equal(sa["key"], sb["key"])
            and a["has_gauss"] == b["has_gauss"])


class OutputEffects:
    """While a trace runs, ``print`` and ``warnings.warn`` called by the user's code are
    Python effects (torch.compile graph-breaks on them and prints / warns at every call
    with the real values): the call runs uncompiled. Library code warning while it is
    traced is left alone. :meth:`close` puts the originals back."""

    __slots__ = ("_print", "_warn")

    def __init__(self):
        self._print, self._warn = builtins.print, warnings.warn
        builtins.print = _watched(self._print, "print()")
        warnings.warn = _watched(self._warn, "warnings.warn()")

    def close(self) -> None:
        builtins.print, warnings.warn = self._print, self._warn


def _watched(original, what):
    def call(*args, **kwargs):
        caller = sys._getframe(1).f_globals.get("__name__", "") or ""
        if caller.split(".", 1)[0] not in _LIBRARIES:
            python_effect(what)
        return original(*args, **kwargs)
    call.__wrapped__ = original
    return call
